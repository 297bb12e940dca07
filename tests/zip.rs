//! `StrictZip`: n-ary zips under XLA's rule against plain loops, the written operands, the
//! errors (one test per message), panics, and the parallel split.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use ndarray::{arr0, s, Array, Array1, Array2, Array3, Axis};
use xla_bcast::prelude::*;
use xla_bcast::BroadcastError;

fn grid(shape: (usize, usize), seed: u32) -> Array2<f32> {
    Array2::from_shape_fn(shape, |(i, j)| {
        ((i as u32 * 31 + j as u32 * 17 + seed * 7) % 97) as f32 / 8.0 - 6.0
    })
}

/// Six operands of every kind (same shape, transposed view, degenerate row, degenerate column,
/// scalar, lower-rank vector in dims) at sizes that take each inner loop (unit, chunked,
/// strided) and the parallel split, against a plain loop.
#[test]
fn six_operands_of_every_kind_match_a_plain_loop() {
    for (m, n) in [(3, 5), (70, 130), (600, 700)] {
        let a = grid((m, n), 1);
        let bt = grid((n, m), 2);
        let b = bt.t();
        let row = grid((1, n), 3);
        let col = grid((m, 1), 4);
        let k = arr0(0.5f32);
        let v = Array1::from_shape_fn(m, |i| i as f32 * 0.25);
        let k_in = k.view().into_shape_with_order(Vec::<usize>::new()).unwrap();
        let f = |a: f32, b: f32, r: f32, c: f32, k: f32, v: f32| a * b + r - c * k + v;
        let got = StrictZip::from(&a)
            .and(&b)
            .and(&row)
            .and(&col)
            .and_in_dims(&k_in, &[])
            .and_in_dims(&v, &[0])
            .map_collect(f)
            .unwrap();
        let want = Array2::from_shape_fn((m, n), |(i, j)| {
            f(a[[i, j]], b[[i, j]], row[[0, j]], col[[i, 0]], 0.5, v[i])
        });
        assert_eq!(got, want, "{m}x{n}");
        // The same into a caller's transposed (column-major) array.
        let mut out = Array2::<f32>::zeros((n, m));
        let mut out_t = out.view_mut().reversed_axes();
        StrictZip::from(&a)
            .and(&b)
            .and(&row)
            .and(&col)
            .and(&k_in.into_shape_with_order((1, 1)).unwrap())
            .and_in_dims(&v, &[0])
            .map_assign_into(&mut out_t, f)
            .unwrap();
        assert_eq!(out.t(), want, "{m}x{n} into");
    }
}

/// The result's shape is the equal-rank operands' broadcast together: a `(1, n)` first operand
/// grows to `(m, n)`, and the result has the first operand's dimension type.
#[test]
fn degenerate_dims_broadcast_both_ways() {
    let row = Array2::from_shape_fn((1, 3), |(_, j)| j as i64);
    let col = Array2::from_shape_fn((2, 1), |(i, _)| 10 * i as i64);
    let r: Array2<i64> = StrictZip::from(&row)
        .and(&col)
        .map_collect(|a, b| a + b)
        .unwrap();
    assert_eq!(r, ndarray::array![[0, 1, 2], [10, 11, 12]]);
    let x = Array3::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as i32);
    let w = ndarray::array![[1, 2, 3, 4], [5, 6, 7, 8]];
    let r = StrictZip::from(&x)
        .and_in_dims(&w, &[0, 2])
        .map_collect(|x, w| x * w)
        .unwrap();
    assert_eq!(r[[1, 2, 3]], 123 * 8);
    assert_eq!(r[[0, 1, 0]], 10);
}

/// Written operands: `&mut` to each element, several of them, any element type; a
/// written operand beside strided and broadcast reads.
#[test]
fn written_operands_get_each_element_once() {
    let x = grid((300, 200), 5);
    let mut lo = Array2::<f32>::zeros((300, 200));
    let mut hi = Array2::<f32>::zeros((300, 200));
    let bias = Array1::from_shape_fn(200, |j| j as f32 / 100.0);
    let mut hi_t = Array2::<f32>::zeros((200, 300));
    let mut hi_view = hi_t.view_mut().reversed_axes();
    StrictZip::from(&mut lo)
        .and(&mut hi_view)
        .and(&x.t().t())
        .and_in_dims(&bias, &[1])
        .for_each(|lo, hi, x, b| {
            *lo = (x + b).min(0.0);
            *hi += (x + b).max(0.0);
        })
        .unwrap();
    hi.assign(&hi_t.t());
    for ((i, j), &v) in x.indexed_iter() {
        let y = v + bias[j];
        assert_eq!((lo[[i, j]], hi[[i, j]]), (y.min(0.0), y.max(0.0)));
    }
    // Strings: clones by value, written through `&mut`.
    let names = ndarray::array![["a", "b"], ["c", "d"]].mapv(String::from);
    let mut joined = Array2::<String>::default((2, 2));
    StrictZip::from(&mut joined)
        .and(&names)
        .and_in_dims(&ndarray::array![1usize, 3], &[1])
        .for_each(|o, s, n| *o = s.repeat(n))
        .unwrap();
    assert_eq!(
        joined,
        ndarray::array![["a", "bbb"], ["c", "ddd"]].mapv(String::from)
    );
}

/// Each misfit is a `ZipOperand` error that names the operand's position, with the rule's
/// message and, where a lower-rank operand is the likely fix, `and_in_dims`.
#[test]
fn each_misfit_names_its_operand() {
    let x = Array2::<f32>::zeros((2, 3));
    let v = Array1::<f32>::zeros(3);
    let msg = |e: BroadcastError| {
        assert!(matches!(e, BroadcastError::ZipOperand { .. }), "{e:?}");
        e.to_string()
    };
    // A lower-rank operand through `and`.
    let e = StrictZip::from(&x)
        .and(&v)
        .map_collect(|a, b| a + b)
        .unwrap_err();
    assert_eq!(
        msg(e),
        "StrictZip operand 1: StrictZip: lhs [2, 3] and rhs [3] have different ranks; give \
         broadcast_dimensions, e.g. [1] maps rhs dim 0 onto lhs dim 1 (a lower-rank operand \
         goes in with and_in_dims(&v, &dims))"
    );
    // Sizes that differ and neither is 1.
    let y = Array2::<f32>::zeros((2, 4));
    let e = StrictZip::from(&x)
        .and(&x)
        .and(&y)
        .for_each(|_, _, _| ())
        .unwrap_err();
    let m = msg(e);
    assert!(
        m.starts_with("StrictZip operand 2: StrictZip: lhs [2, 3] and rhs [2, 4]"),
        "{m}"
    );
    assert!(
        m.ends_with("(a lower-rank operand goes in with and_in_dims(&v, &dims))"),
        "{m}"
    );
    // A lower-rank operand on the wrong dim.
    let e = StrictZip::from(&x)
        .and_in_dims(&v, &[0])
        .map_collect(|a, b| a + b)
        .unwrap_err();
    let m = msg(e);
    assert!(
        m.starts_with("StrictZip operand 1: StrictZip: operand [3] to shape [2, 3]"),
        "{m}"
    );
    assert!(
        m.contains("operand dim 0 has size 3 but output dim 0 has size 2"),
        "{m}"
    );
    // Dims that are not a placement.
    let e = StrictZip::from(&x)
        .and_in_dims(&v, &[0, 1])
        .map_collect(|a, b| a + b)
        .unwrap_err();
    assert!(msg(e).starts_with("StrictZip operand 1: StrictZip: operand [3] to shape [2, 3] with broadcast_dimensions [0, 1]"));
    // A written operand that is not the result's shape (it would broadcast).
    let mut small = Array2::<f32>::zeros((1, 3));
    let e = StrictZip::from(&x)
        .and(&mut small)
        .for_each(|_, o| *o = 1.0)
        .unwrap_err();
    assert_eq!(
        msg(e),
        "StrictZip operand 1: StrictZip: the output has shape [1, 3] but the result has shape \
         [2, 3]; pass an output of the result's shape"
    );
    assert_eq!(small, Array2::<f32>::zeros((1, 3)), "nothing ran");
    // The first operand with broadcast_dimensions.
    let e = StrictZip::from(v.in_dims(&[1]))
        .map_collect(|a| a)
        .unwrap_err();
    assert!(msg(e).contains("the first operand sets the result's shape"));
    // An output of the wrong shape: not an operand's fault.
    let mut out = Array2::<f32>::zeros((3, 2));
    let e = StrictZip::from(&x)
        .map_assign_into(&mut out, |a| a)
        .unwrap_err();
    assert!(matches!(e, BroadcastError::OutputShape { .. }), "{e:?}");
}

/// A panicking closure propagates; the fresh result's elements written so far are dropped,
/// once each (none leak, none twice).
#[test]
fn a_panic_drops_what_was_written() {
    static LIVE: AtomicUsize = AtomicUsize::new(0);
    struct Counted;
    impl Counted {
        fn new() -> Self {
            LIVE.fetch_add(1, Ordering::SeqCst);
            Counted
        }
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            LIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }
    for n in [10, 3000] {
        let x = Array2::from_shape_fn((n, 50), |(i, j)| i * 50 + j);
        let calls = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            StrictZip::from(&x).map_collect(|i| {
                if calls.fetch_add(1, Ordering::SeqCst) == n * 25 {
                    panic!("stop");
                }
                let _ = i;
                Counted::new()
            })
        }));
        assert!(r.is_err());
        assert_eq!(LIVE.load(Ordering::SeqCst), 0, "n = {n}");
    }
}

/// A zip large enough to split runs on both threads of a private pool and gives the serial
/// result bit for bit.
#[test]
#[cfg(feature = "rayon")]
fn the_parallel_split_gives_the_serial_bits() {
    let x = grid((1024, 1024), 6);
    let g = grid((1, 1024), 7);
    let m = Array1::from_shape_fn(1024, |i| i as f32 / 1000.0);
    let run = || {
        StrictZip::from(&x)
            .and(&g)
            .and_in_dims(&m, &[0])
            .map_collect(|x, g, m| (x - m) * g + x * x)
            .unwrap()
    };
    let serial = with_parallelism(Parallelism::Serial, run);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build();
    let (threads, parallel) = pool
        .unwrap()
        .install(|| (rayon::current_num_threads(), run()));
    assert_eq!(threads, 2);
    assert_eq!(serial.mapv(f32::to_bits), parallel.mapv(f32::to_bits));
    assert_eq!(serial.sum_axis(Axis(0)).len(), 1024);
}

/// Zero-size and rank-0 zips.
#[test]
fn empty_and_rank_0_zips() {
    let e = Array::<f32, _>::zeros((0, 4));
    let r = StrictZip::from(&e)
        .and_in_dims(&Array1::<f32>::zeros(4), &[1])
        .map_collect(|a, b| a + b);
    assert_eq!(r.unwrap().shape(), &[0, 4]);
    let r = StrictZip::from(&arr0(2))
        .and(&arr0(3))
        .map_collect(|a, b| a * b)
        .unwrap();
    assert_eq!(r, arr0(6));
    let x = Array2::from_shape_fn((4, 6), |(i, j)| (i * 6 + j) as u8);
    let r = StrictZip::from(&x.slice(s![..;2, ..;3]))
        .map_collect(|a| a)
        .unwrap();
    assert_eq!(r, x.slice(s![..;2, ..;3]));
}

/// Folds into kept dims against plain loops: exact for integers, over every kept choice of a
/// rank-3 zip with a broadcast operand; a tuple of accumulators; a transposed input.
#[test]
fn folds_into_kept_dims_match_plain_loops() {
    let (a, b, c) = (5, 70, 33);
    let x = Array3::from_shape_fn((a, b, c), |(i, j, k)| (i * 7 + j * 3 + k) as i64 % 11 - 5);
    let w = Array1::from_shape_fn(c, |k| k as i64 - 16);
    let kept_sets: [&[usize]; 8] = [&[], &[0], &[1], &[2], &[0, 1], &[0, 2], &[1, 2], &[2, 0]];
    for kept in kept_sets {
        let got = StrictZip::from(&x)
            .and_in_dims(&w, &[2])
            .fold_in_dims(
                kept,
                (0i64, 0i64),
                |(s, m), x, w| (s + x * w, m.max(x)),
                |p, q| (p.0 + q.0, p.1.max(q.1)),
            )
            .unwrap();
        let shape: Vec<usize> = kept.iter().map(|&d| x.shape()[d]).collect();
        assert_eq!(got.shape(), &shape[..]);
        let mut want = ndarray::ArrayD::from_elem(shape, (0i64, 0i64));
        for ((i, j, k), &v) in x.indexed_iter() {
            let idx: Vec<usize> = kept.iter().map(|&d| [i, j, k][d]).collect();
            let e = &mut want[&idx[..]];
            *e = (e.0 + v * w[k], e.1.max(v));
        }
        assert_eq!(got, want, "kept {kept:?}");
    }
    // A fixed-rank result, and a transposed operand.
    let y = Array2::from_shape_fn((40, 90), |(i, j)| (i * 90 + j) as u64);
    let rows = StrictZip::from(&y.t())
        .fold_in_dims([1], 0u64, |s, v| s + v, |a, b| a + b)
        .unwrap();
    assert_eq!(rows, y.sum_axis(Axis(1)));
    // Reversed dims (negative strides) fold as their copy does, order-sensitive fold included.
    let r = x.slice(s![..;-1, .., ..;-1]);
    for kept in [&[0usize][..], &[1], &[2], &[2, 0]] {
        let fold = |v: ndarray::ArrayView3<i64>| {
            StrictZip::from(&v)
                .fold_in_dims(kept, 1i64, |s, x| s.wrapping_mul(3) + x, i64::wrapping_mul)
                .unwrap()
        };
        assert_eq!(fold(r), fold(r.to_owned().view()), "kept {kept:?}");
    }
}

/// A float fold's bits depend on the shapes only: one thread and two give the same, for
/// rows long enough for lanes and blocks and for a full reduction.
#[test]
#[cfg(feature = "rayon")]
fn float_folds_are_the_same_on_one_thread_and_two() {
    let x = grid((1200, 700), 9);
    let m = Array1::from_shape_fn(1200, |i| (i % 13) as f32 * 0.1);
    let run = |kept: &[usize]| {
        StrictZip::from(&x)
            .and_in_dims(&m, &[0])
            .fold_in_dims(
                kept,
                (0f32, 0f32),
                |(s, q), x, m| (s + (x - m), q + (x - m) * (x - m)),
                |a, b| (a.0 + b.0, a.1 + b.1),
            )
            .unwrap()
            .mapv(|(s, q)| (s.to_bits(), q.to_bits()))
    };
    for kept in [&[0][..], &[1], &[]] {
        let serial = with_parallelism(Parallelism::Serial, || run(kept));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let parallel = pool.install(|| run(kept));
        assert_eq!(serial, parallel, "kept {kept:?}");
    }
    // And the sums are close to f64's.
    let sums = StrictZip::from(&x)
        .fold_in_dims([0], 0f32, |s, x| s + x, |a, b| a + b)
        .unwrap();
    for (i, &s) in sums.iter().enumerate() {
        let want: f64 = x.row(i).iter().map(|&v| v as f64).sum();
        assert!((s as f64 - want).abs() < 1e-3, "row {i}: {s} vs {want}");
    }
}

/// Kept dims that repeat or are out of range are refused; an empty zip folds to `init`.
#[test]
fn fold_errors_and_empty_folds() {
    let x = Array2::<f32>::ones((2, 3));
    let e = StrictZip::from(&x)
        .fold_in_dims([0, 0], 0.0, |a, x| a + x, |a, b| a + b)
        .unwrap_err();
    assert!(e.to_string().contains("kept dim 0 repeats"), "{e}");
    let e = StrictZip::from(&x)
        .fold_in_dims([2], 0.0, |a, x| a + x, |a, b| a + b)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("kept dim 2 is out of range for rank 2"),
        "{e}"
    );
    let empty = Array2::<f32>::zeros((4, 0));
    let r = StrictZip::from(&empty).fold_in_dims([0], 7.0, |a, x| a + x, |a, b| a + b - 7.0);
    assert_eq!(r.unwrap(), Array1::from_elem(4, 7.0));
    let r = StrictZip::from(&empty).fold_in_dims([1], 7.0, |a, x| a + x, |a, b| a + b);
    assert_eq!(r.unwrap().len(), 0);
}

/// A zip's arithmetic is the program's, bit for bit: `exp(x) * y - x` through `StrictZip` with
/// `xla_bcast::math`, and through `Program::run` op by op (`y` a row broadcast in both).
#[test]
fn a_zip_gives_the_program_ops_bits() {
    use xla_bcast::math;
    use xla_bcast::stablehlo::{Program, Tensor};
    let x = grid((300, 257), 11).mapv(|v| v * 3.0);
    let y = Array1::from_shape_fn(257, |j| j as f32 * 0.37 - 40.0);
    let got = StrictZip::from(&x)
        .and_in_dims(&y, &[1])
        .map_collect(|x, y| math::exp(x) * y - x)
        .unwrap();
    let mut p = Program::new("z");
    let (px, py) = (p.parameter::<f32>(&[300, 257]), p.parameter::<f32>(&[257]));
    let e = p.exp(px).unwrap();
    let m = p.mul(e, py, &[1]).unwrap();
    let r = p.sub(m, px, &[]).unwrap();
    p.output(r).unwrap();
    let inputs = [
        Tensor::from(x.clone().into_dyn()),
        Tensor::from(y.into_dyn()),
    ];
    let Tensor::F32(want) = p.run(&inputs).unwrap().remove(0) else {
        panic!("f32")
    };
    assert_eq!(got.mapv(f32::to_bits).into_dyn(), want.mapv(f32::to_bits));
}

/// Indexed zips: each element's index, in every layout the walk takes (C order, a transposed
/// view, a degenerate and a lower-rank operand, a dynamic rank), large enough to split over two
/// threads, against `indexed_iter`.
#[test]
fn indexed_zips_give_each_elements_index() {
    let x = grid((300, 200), 1);
    let t = grid((200, 300), 2);
    let col = grid((300, 1), 3);
    let v = Array1::from_shape_fn(200, |j| j as f32);
    let want = Array2::from_shape_fn((300, 200), |(i, j)| {
        x[[i, j]] + t[[j, i]] * col[[i, 0]] + v[j] + (i * 1000 + j) as f32
    });
    let run = || {
        StrictZip::indexed(&x)
            .and(&t.t())
            .and(&col)
            .and_in_dims(&v, &[1])
            .map_collect(|(i, j), x, t, c, v| x + t * c + v + (i * 1000 + j) as f32)
            .unwrap()
    };
    assert_eq!(with_parallelism(Parallelism::Serial, run), want);
    #[cfg(feature = "rayon")]
    {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        assert_eq!(pool.install(run), want);
    }
    // Into a transposed (F-order) output, and for effect on a written operand.
    let mut out = Array2::<usize>::zeros((200, 300));
    let mut f_order = out.view_mut().reversed_axes();
    StrictZip::indexed(&x)
        .map_assign_into(&mut f_order, |(i, j), _| i * 1000 + j)
        .unwrap();
    assert!(out.indexed_iter().all(|((j, i), &k)| k == i * 1000 + j));
    let mut seen = Array3::<usize>::zeros((3, 4, 5));
    StrictZip::indexed(&mut seen)
        .for_each(|(i, j, k), s| *s = 100 * i + 10 * j + k)
        .unwrap();
    assert!(seen
        .indexed_iter()
        .all(|((i, j, k), &s)| s == 100 * i + 10 * j + k));
    // A dynamic rank gets an `IxDyn` index; an empty zip calls nothing.
    let d = x.clone().into_dyn();
    let r = StrictZip::indexed(&d)
        .map_collect(|ix, _| ix[0] * 1000 + ix[1])
        .unwrap();
    assert!(r.indexed_iter().all(|(ix, &k)| k == ix[0] * 1000 + ix[1]));
    let empty = Array2::<f32>::zeros((0, 4));
    let r = StrictZip::indexed(&empty).map_collect(|_, _| -> u8 { panic!("no element") });
    assert_eq!(r.unwrap().shape(), &[0, 4]);
    // A misfit operand is the zip's error, naming its position.
    let err = StrictZip::indexed(&x)
        .and(&t)
        .map_collect(|_, a, b| a + b)
        .unwrap_err();
    assert!(err.to_string().starts_with("StrictZip operand 1:"), "{err}");
}

/// An indexed fold: the first index of each row's maximum (ties and lanes combined by the
/// lower index), the same on one thread and two, against a plain scan.
#[test]
fn indexed_folds_find_first_indices() {
    let x = Array2::from_shape_fn((512, 300), |(i, j)| ((i * 7 + j * 13) % 50) as i32);
    let first = |(m, at): (i32, usize), (v, j): (i32, usize)| {
        if v > m || (v == m && j < at) {
            (v, j)
        } else {
            (m, at)
        }
    };
    let run = || {
        StrictZip::indexed(&x)
            .fold_in_dims(
                [0],
                (i32::MIN, usize::MAX),
                |acc, (_, j), v| first(acc, (v, j)),
                first,
            )
            .unwrap()
    };
    let want: Vec<(i32, usize)> = x
        .rows()
        .into_iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .fold((i32::MIN, usize::MAX), |a, (j, &v)| first(a, (v, j)))
        })
        .collect();
    assert_eq!(with_parallelism(Parallelism::Serial, run).to_vec(), want);
    #[cfg(feature = "rayon")]
    {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        assert_eq!(pool.install(run).to_vec(), want);
    }
    // A masked count into the columns, over a lower-rank mask.
    let mask = Array1::from_shape_fn(512, |i| i % 3 == 0);
    let counts = StrictZip::indexed(&x)
        .and_in_dims(&mask, &[0])
        .fold_in_dims(
            [1],
            0usize,
            |n, (i, _), v, m| n + usize::from(m && v > 25 && i < 400),
            |a, b| a + b,
        )
        .unwrap();
    for (j, &n) in counts.iter().enumerate() {
        let want = (0..400).filter(|&i| i % 3 == 0 && x[[i, j]] > 25).count();
        assert_eq!(n, want, "column {j}");
    }
}

/// A zip whose shape has more elements than an `isize` holds (two zero-copy broadcast views)
/// is refused by every method, indexed or not, without a panic.
#[test]
fn zips_of_overflowing_shapes_are_refused() {
    // Each side fits; their product (2^80 elements, 2^48 on a 32-bit target) does not.
    let n = 1usize << (usize::BITS / 2 + 8);
    let one = arr0(1.0f32);
    let tall = one.broadcast_in_dim(&[n, 1], &[]).unwrap();
    let wide = one.broadcast_in_dim(&[1, n], &[]).unwrap();
    let refused = |e: BroadcastError| {
        let text = e.to_string();
        assert!(text.contains("more elements than fit"), "{text}");
    };
    refused(
        StrictZip::from(&tall)
            .and(&wide)
            .map_collect(|a, b| a + b)
            .unwrap_err(),
    );
    refused(
        StrictZip::from(&tall)
            .and(&wide)
            .for_each(|_, _| ())
            .unwrap_err(),
    );
    let fold =
        StrictZip::from(&tall)
            .and(&wide)
            .fold_in_dims([0], 0.0, |s, a, b| s + a + b, |a, b| a + b);
    refused(fold.unwrap_err());
    let indexed = StrictZip::indexed(&tall).and(&wide);
    refused(indexed.map_collect(|_, a, b| a + b).unwrap_err());
    let fold = StrictZip::indexed(&tall).and(&wide).fold_in_dims(
        [0],
        0.0,
        |s, _, a, b| s + a + b,
        |a, b| a + b,
    );
    refused(fold.unwrap_err());
}

/// A fold's lanes hold any accumulator: one of up to four words (stored across the lanes),
/// one with padding, larger ones (stored lane by lane) and ones that own memory; on rows that
/// take whole groups of lanes and a partial group, contiguous, strided (a transposed array)
/// and of elements read one at a time (strings).
#[test]
fn fold_lanes_hold_accumulators_of_every_layout() {
    let x = Array2::from_shape_fn((5, 1000 + 7), |(i, j)| ((i * 13 + j * 7) % 23) as i64 - 11);
    let xt = x.t().to_owned();
    for view in [x.view(), xt.t()] {
        macro_rules! check {
            ($init:expr, $fold:expr, $combine:expr) => {{
                let got = StrictZip::from(&view)
                    .fold_in_dims([0], $init, $fold, $combine)
                    .unwrap();
                for (i, r) in view.rows().into_iter().enumerate() {
                    assert_eq!(got[i], r.iter().copied().fold($init, $fold), "row {i}");
                }
            }};
        }
        check!(0f32, |s, v| s + v as f32, |a, b| a + b);
        check!((), |(), _| (), |(), ()| ());
        check!(
            (0f64, 0f64),
            |(s, q), v| (s + v as f64, q + (v * v) as f64),
            |a: (f64, f64), b: (f64, f64)| (a.0 + b.0, a.1 + b.1)
        );
        check!(
            (0u8, 0i32),
            |(c, s), v| (c.wrapping_add(1), s + v as i32),
            |a: (u8, i32), b: (u8, i32)| (a.0.wrapping_add(b.0), a.1 + b.1)
        );
        check!(
            [0i64; 4],
            |[a, b, c, d], v| [a + v, b.max(v), c.min(v), d + 1],
            |p: [i64; 4], q: [i64; 4]| [p[0] + q[0], p[1].max(q[1]), p[2].min(q[2]), p[3] + q[3]]
        );
        check!(
            [0i64; 5],
            |mut a: [i64; 5], v| {
                a[(v + 11) as usize % 5] += v;
                a
            },
            |p: [i64; 5], q: [i64; 5]| std::array::from_fn(|k| p[k] + q[k])
        );
        check!(
            Box::new(0i64),
            |b: Box<i64>, v| Box::new(*b + v),
            |p: Box<i64>, q: Box<i64>| { Box::new(*p + *q) }
        );
        check!(
            vec![0i64; 3],
            |mut a: Vec<i64>, v| {
                a[(v + 11) as usize % 3] += 1;
                a
            },
            |p: Vec<i64>, q: Vec<i64>| vec![p[0] + q[0], p[1] + q[1], p[2] + q[2]]
        );
    }
    let words = xt.mapv(|v| v.to_string());
    let lens = StrictZip::from(&words.t())
        .fold_in_dims(
            [0],
            (0usize, 0usize),
            |(n, l), w| (n + 1, l + w.len()),
            |a, b| (a.0 + b.0, a.1 + b.1),
        )
        .unwrap();
    for (i, r) in x.rows().into_iter().enumerate() {
        let want = r.iter().map(|v| v.to_string().len()).sum::<usize>();
        assert_eq!(lens[i], (1007, want), "row {i}");
    }
}

/// A fold whose closure panics with accumulators that own memory: the panic propagates and
/// every accumulator made is dropped once (none leak, none twice).
#[test]
fn a_panicking_fold_drops_its_accumulators() {
    static LIVE: AtomicUsize = AtomicUsize::new(0);
    struct Counted(i64);
    impl Clone for Counted {
        fn clone(&self) -> Self {
            LIVE.fetch_add(1, Ordering::SeqCst);
            Counted(self.0)
        }
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            LIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let x = Array2::from_shape_fn((40, 300), |(i, j)| (i * 300 + j) as i64);
    for stop in [5, 250, 299, 3000] {
        let seen = AtomicUsize::new(0);
        LIVE.fetch_add(1, Ordering::SeqCst);
        let init = Counted(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            StrictZip::from(&x).fold_in_dims(
                [0],
                init.clone(),
                |a, v| {
                    if seen.fetch_add(1, Ordering::SeqCst) == stop {
                        panic!("stop");
                    }
                    LIVE.fetch_add(1, Ordering::SeqCst);
                    Counted(a.0 + v)
                },
                |a, b| {
                    LIVE.fetch_add(1, Ordering::SeqCst);
                    Counted(a.0 + b.0)
                },
            )
        }));
        assert!(r.is_err());
        drop(init);
        assert_eq!(LIVE.load(Ordering::SeqCst), 0, "stop at {stop}");
    }
}

/// A softmax and a layer norm over rows as groups (a fold, a fold writing the output, a map
/// of the output), and a group over columns of a rank-3 zip, against plain loops; a group's
/// fold gives `fold_in_dims`'s bits, and `fold_map_assign_into` the same as a group.
#[test]
fn groups_fold_and_write_their_elements() {
    use xla_bcast::math;
    let x = grid((300, 1003), 4);
    let mut out = Array2::<f32>::zeros(x.raw_dim());
    StrictZip::from(&x)
        .for_each_group_into(&mut out, [0], |g| {
            let max = g.fold(f32::MIN, |m, _, x| m.max(x), f32::max);
            let sum = g.fold(
                0.0,
                move |s, o, x| {
                    *o = math::exp(x - max);
                    s + *o
                },
                |a, b| a + b,
            );
            g.for_each(move |o, _| *o /= sum);
        })
        .unwrap();
    for (i, r) in x.rows().into_iter().enumerate() {
        let max = r.fold(f32::MIN, |m, &v| m.max(v));
        let e: Vec<f64> = r.iter().map(|&v| ((v - max) as f64).exp()).collect();
        let s: f64 = e.iter().sum();
        for (j, e) in e.iter().enumerate() {
            assert!((out[[i, j]] as f64 - e / s).abs() < 1e-6, "({i}, {j})");
        }
    }
    // The sum a group folds is `fold_in_dims`'s, bit for bit; and `fold_map_assign_into`.
    let w = Array1::from_shape_fn(1003, |j| 1.0 + j as f32 * 1e-3);
    let sums = StrictZip::from(&x)
        .and_in_dims(&w, &[1])
        .fold_in_dims(
            [0],
            (0f32, 0f32),
            |(s, q), x, w| (s + x * w, q + x * x),
            |a, b| (a.0 + b.0, a.1 + b.1),
        )
        .unwrap();
    let (mut by_group, mut by_map) = (out.clone(), out.clone());
    StrictZip::from(&x)
        .and_in_dims(&w, &[1])
        .for_each_group_into(&mut by_group, [0], |g| {
            let (s, q) = g.fold(
                (0f32, 0f32),
                |(s, q), _, x, w| (s + x * w, q + x * x),
                |a, b| (a.0 + b.0, a.1 + b.1),
            );
            g.for_each(move |o, x, _| *o = x * s - q);
        })
        .unwrap();
    StrictZip::from(&x)
        .and_in_dims(&w, &[1])
        .fold_map_assign_into(
            &mut by_map,
            [0],
            (0f32, 0f32),
            |(s, q), x, w| (s + x * w, q + x * x),
            |a, b| (a.0 + b.0, a.1 + b.1),
            |sq| sq,
            |&(s, q), x, _| x * s - q,
        )
        .unwrap();
    for i in 0..300 {
        let (s, q) = sums[i];
        for j in 0..1003 {
            assert_eq!(
                by_group[[i, j]].to_bits(),
                (x[[i, j]] * s - q).to_bits(),
                "({i}, {j})"
            );
        }
    }
    assert_eq!(by_group.mapv(f32::to_bits), by_map.mapv(f32::to_bits));
    // Groups over dims 0 and 2 of a rank-3 zip (runs along dim 1, strided in the output), a
    // column vector broadcast: each element minus its group's minimum, plus the column's.
    let y = Array3::from_shape_fn((4, 37, 6), |(i, j, k)| {
        ((i * 5 + j * 3 + k * 11) % 17) as i32
    });
    let c = Array1::from_shape_fn(37, |j| j as i32);
    let mut o = Array3::<i32>::zeros(y.raw_dim());
    StrictZip::from(&y)
        .and_in_dims(&c, &[1])
        .for_each_group_into(&mut o, [2, 0], |g| {
            let min = g.fold(i32::MAX, |m, _, y, _| m.min(y), i32::min);
            g.for_each(move |o, y, c| *o = y - min + c);
        })
        .unwrap();
    for ((i, j, k), &v) in y.indexed_iter() {
        let min = y.slice(s![i, .., k]).iter().copied().min().unwrap();
        assert_eq!(o[[i, j, k]], v - min + j as i32);
    }
    // A reversed input and a reversed output (negative strides): the copies' results.
    let rev = y.slice(s![..;-1, .., ..;-1]);
    let (mut o1, mut o2) = (
        Array3::<i32>::zeros(y.raw_dim()),
        Array3::<i32>::zeros(y.raw_dim()),
    );
    let group = |x: ndarray::ArrayView3<i32>, o: &mut ndarray::ArrayViewMut3<i32>| {
        StrictZip::from(&x)
            .for_each_group_into(o, [0, 2], |g| {
                let sum = g.fold(0, |s, _, y| s * 3 + y, |a, b| a * 3 + b);
                g.for_each(move |o, y| *o = y * 2 + sum);
            })
            .unwrap()
    };
    group(rev, &mut o1.slice_mut(s![.., ..;-1, ..]));
    let mut o2r = o2.slice_mut(s![.., ..;-1, ..]).to_owned();
    group(rev.to_owned().view(), &mut o2r.view_mut());
    o2.slice_mut(s![.., ..;-1, ..]).assign(&o2r);
    assert_eq!(o1, o2);
}

/// A group's folds depend on the shapes only: one thread and two give the same bits.
#[test]
#[cfg(feature = "rayon")]
fn groups_are_the_same_on_one_thread_and_two() {
    let x = grid((800, 500), 3);
    let run = || {
        let mut out = Array2::<f32>::zeros(x.raw_dim());
        StrictZip::from(&x)
            .for_each_group_into(&mut out, [0], |g| {
                let (s, q) = g.fold(
                    (0f32, 0f32),
                    |(s, q), _, x| (s + x, q + x * x),
                    |a, b| (a.0 + b.0, a.1 + b.1),
                );
                let t = g.fold(
                    0f32,
                    move |t, o, x| {
                        *o = x * s;
                        t + *o * q
                    },
                    |a, b| a + b,
                );
                g.for_each(move |o, _| *o -= t);
            })
            .unwrap();
        out.mapv(f32::to_bits)
    };
    let serial = with_parallelism(Parallelism::Serial, run);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    assert_eq!(serial, pool.install(run));
}

/// A group zip's errors name what is wrong, and nothing runs; a panic in a group propagates.
#[test]
fn group_errors_and_panics() {
    let x = Array2::<f32>::ones((3, 4));
    let ran = AtomicUsize::new(0);
    let mut wrong = Array2::<f32>::zeros((4, 3));
    let e = StrictZip::from(&x)
        .for_each_group_into(&mut wrong, [0], |_| {
            ran.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap_err();
    assert!(matches!(e, BroadcastError::OutputShape { .. }), "{e}");
    assert!(e.to_string().contains("[4, 3]"), "{e}");
    let mut out = Array2::<f32>::zeros((3, 4));
    let e = StrictZip::from(&x)
        .for_each_group_into(&mut out, [1, 1], |_| {
            ran.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap_err();
    assert!(e.to_string().contains("kept dim 1 repeats"), "{e}");
    let e = StrictZip::from(&x)
        .and_in_dims(&Array1::<f32>::ones(3), &[1])
        .for_each_group_into(&mut out, [0], |_| {
            ran.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap_err();
    assert!(e.to_string().starts_with("StrictZip operand 1:"), "{e}");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        StrictZip::from(&x).for_each_group_into(&mut out, [0], |g| {
            g.for_each(|o, x| {
                if x > 0.0 {
                    panic!("stop");
                }
                *o = x;
            })
        })
    }));
    assert!(r.is_err());
}

/// Folds keeping the last dim run its kept indices side by side; each gives the bits of the
/// same fold one index at a time (the transposed view keeps its first dim): sums of `f32`,
/// tuples, an operand broadcast along the kept dim, widths of a whole and a partial block.
#[test]
fn folds_side_by_side_give_each_index_bits() {
    for (m, n) in [(1000, 700), (37, 64), (5, 3), (1, 130)] {
        let x = grid((m, n), 2);
        let r = Array1::from_shape_fn(m, |i| (i % 7) as f32 * 0.25);
        let side = StrictZip::from(&x)
            .and_in_dims(&r, &[0])
            .fold_in_dims(
                [1],
                (0f32, 0f32),
                |(s, q), x, r| (s + x * r, q + x * x),
                |a, b| (a.0 + b.0, a.1 + b.1),
            )
            .unwrap();
        let one = StrictZip::from(&x.t())
            .and_in_dims(&r, &[1])
            .fold_in_dims(
                [0],
                (0f32, 0f32),
                |(s, q), x, r| (s + x * r, q + x * x),
                |a, b| (a.0 + b.0, a.1 + b.1),
            )
            .unwrap();
        let bits = |a: &Array1<(f32, f32)>| a.mapv(|(s, q)| (s.to_bits(), q.to_bits()));
        assert_eq!(bits(&side), bits(&one), "({m}, {n})");
    }
    let y = Array3::from_shape_fn((6, 50, 70), |(i, j, k)| {
        ((i * 3 + j * 5 + k) % 19) as f32 - 9.0
    });
    let side = StrictZip::from(&y)
        .fold_in_dims([0, 2], 0f32, |s, v| s + v, |a, b| a + b)
        .unwrap();
    let yt = y.view().permuted_axes([0, 2, 1]);
    let one = StrictZip::from(&yt)
        .fold_in_dims([0, 1], 0f32, |s, v| s + v, |a, b| a + b)
        .unwrap();
    assert_eq!(side.mapv(f32::to_bits), one.mapv(f32::to_bits));
}
