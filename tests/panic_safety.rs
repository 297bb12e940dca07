//! A panicking element function leaks nothing and drops nothing twice: every element written
//! into a fresh result before the panic is dropped exactly once, on every road through the
//! engine (the flat single run, small walks, planned and tiled walks, staged transposes,
//! parallel splits, `select`, the wrappers). CI runs this binary under valgrind with leaks as
//! errors.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::Arc;

use ndarray::{arr0, Array2, ArrayView2};
use xla_bcast::prelude::*;
use xla_bcast::{layout, numpy, paddle, with_parallelism, Parallelism};

/// A value that counts its live copies and checks that only whole values are dropped.
struct Counted {
    live: Arc<AtomicIsize>,
    /// Its own value: a drop of memory that was never written would not hold it.
    check: usize,
    /// Heap memory, so that a leak shows under valgrind too.
    _text: String,
}

static BAD_DROPS: AtomicUsize = AtomicUsize::new(0);

impl Counted {
    fn new(live: &Arc<AtomicIsize>, v: usize) -> Self {
        live.fetch_add(1, Ordering::SeqCst);
        Counted {
            live: Arc::clone(live),
            check: v ^ 0x5a5a_5a5a,
            _text: format!("value {v}"),
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if !self._text.starts_with("value ")
            || self._text[6..].parse::<usize>().ok() != Some(self.check ^ 0x5a5a_5a5a)
        {
            BAD_DROPS.fetch_add(1, Ordering::SeqCst);
        }
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs `op`, which must panic after writing part of a fresh result of `Counted`, and checks
/// that every value it made was dropped once.
fn leaks_nothing(what: &str, op: impl FnOnce(&Arc<AtomicIsize>)) {
    let live = Arc::new(AtomicIsize::new(0));
    let before = BAD_DROPS.load(Ordering::SeqCst);
    let result = catch_unwind(AssertUnwindSafe(|| op(&live)));
    assert!(
        result.is_err(),
        "{what}: the element function did not panic"
    );
    assert_eq!(
        live.load(Ordering::SeqCst),
        0,
        "{what}: values leaked (or dropped twice)"
    );
    assert_eq!(
        BAD_DROPS.load(Ordering::SeqCst),
        before,
        "{what}: a drop of an unwritten slot"
    );
}

/// An element function that makes a `Counted` from its inputs and panics on the `n`-th call.
fn panics_at(live: &Arc<AtomicIsize>, n: usize) -> impl Fn(f32, f32) -> Counted + Sync + Send {
    let (live, calls) = (Arc::clone(live), AtomicUsize::new(0));
    move |a, b| {
        if calls.fetch_add(1, Ordering::SeqCst) == n {
            panic!("element function panics");
        }
        Counted::new(&live, (a + b) as usize)
    }
}

fn grid(m: usize, n: usize) -> Array2<f32> {
    Array2::from_shape_fn((m, n), |(i, j)| (i * n + j) as f32)
}

#[test]
fn a_panic_drops_exactly_the_written_elements() {
    let small = grid(10, 12);
    let row = grid(1, 12);
    let col = grid(10, 1);
    let big = grid(700, 640); // 448,000 results of 40 bytes: split across threads
    let big_t = grid(640, 700);
    let mid_t = grid(300, 200);
    for threads in [Parallelism::Serial, Parallelism::Threads(2)] {
        with_parallelism(threads, || {
            leaks_nothing("flat run", |live| {
                let _ = small.zip_bcast(&small, &[], panics_at(live, 57));
            });
            leaks_nothing("scalar flat run", |live| {
                let _ = small.zip_bcast(&arr0(1.0), &[], panics_at(live, 3));
            });
            leaks_nothing("small walk, degenerate", |live| {
                let _ = col.zip_bcast(&row, &[], panics_at(live, 77));
            });
            leaks_nothing("planned walk, rank promotion", |live| {
                let v = ndarray::Array1::from_elem(12, 1.0f32);
                let _ = small.zip_bcast(&v, &[1], panics_at(live, 100));
            });
            leaks_nothing("staged transpose", |live| {
                let t: ArrayView2<f32> = mid_t.t();
                let _ = t.zip_bcast(&grid(200, 300), &[], panics_at(live, 20_000));
            });
            leaks_nothing("large, tiled and staged transpose", |live| {
                let _ = big_t.t().zip_bcast(&big, &[], panics_at(live, 300_000));
            });
            leaks_nothing("large broadcast", |live| {
                let r = grid(1, 640);
                let _ = big.zip_bcast(&r, &[], panics_at(live, 250_000));
            });
            leaks_nothing("first element", |live| {
                let _ = big.zip_bcast(&big, &[], panics_at(live, 0));
            });
        });
    }
}

#[test]
fn select_map_and_wrappers_drop_what_they_wrote() {
    let a = grid(40, 30);
    leaks_nothing("numpy zip_with", |live| {
        let r = grid(1, 30);
        let _ = numpy::zip_with(&a, &r.row(0), panics_at(live, 600));
    });
    leaks_nothing("paddle elementwise", |live| {
        let c = ndarray::Array1::from_elem(40, 2.0f32);
        let _ = paddle::elementwise(&a, &c, 0, panics_at(live, 33));
    });
    // Values that panic when cloned, read by `select` and by a buffer copy.
    leaks_nothing("select", |live| {
        let values = Array2::from_shape_fn((40, 30), |(i, j)| Counted::new(live, i * 30 + j));
        let pred = Array2::from_shape_fn((40, 30), |(i, _)| i % 2 == 0);
        let clones = AtomicUsize::new(0);
        let boom = values.map(|v| PanicsOnClone(Counted::new(live, v.check), &clones));
        let _ = pred.select_bcast(&boom, &boom);
    });
    leaks_nothing("from_buffer", |live| {
        let clones = AtomicUsize::new(0);
        let buffer: Vec<_> = (0..1200)
            .map(|v| PanicsOnClone(Counted::new(live, v), &clones))
            .collect();
        let _ = layout::from_buffer(&buffer, &[40, 30], &layout::Layout::col_major(2));
    });
}

/// A `Counted` whose clones panic after 500 of them.
struct PanicsOnClone<'c>(Counted, &'c AtomicUsize);

impl Clone for PanicsOnClone<'_> {
    fn clone(&self) -> Self {
        if self.1.fetch_add(1, Ordering::SeqCst) == 500 {
            panic!("clone panics");
        }
        PanicsOnClone(
            Counted::new(&self.0.live, self.0.check ^ 0x5a5a_5a5a),
            self.1,
        )
    }
}

/// Without a panic, every element is the caller's and each is dropped once, with the array.
#[test]
fn complete_results_own_every_element() {
    let live = Arc::new(AtomicIsize::new(0));
    let big = grid(700, 640);
    let r = big.zip_bcast(&big.t().t(), &[], |a, b| {
        Counted::new(&live, (a + b) as usize)
    });
    assert_eq!(live.load(Ordering::SeqCst), 700 * 640);
    drop(r.unwrap());
    assert_eq!(live.load(Ordering::SeqCst), 0);
}
