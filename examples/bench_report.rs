//! A quick benchmark: prints a markdown table of xla_bcast against ndarray's operators and a
//! hand-written loop, as ratios measured in one run (best of N). For careful numbers use
//! `cargo bench`.
//!
//! `cargo run --release --example bench_report`

use std::hint::black_box;
use std::time::{Duration, Instant};

use ndarray::{Array2, Array3, Zip};
use xla_bcast::prelude::*;

fn best<R>(reps: usize, mut f: impl FnMut() -> R) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        black_box(f());
        best = best.min(t.elapsed());
    }
    best
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A serial slice loop into a preallocated output: the memory-speed yardstick.
fn hand_loop(a: &[f32], b: &[f32], out: &mut [f32]) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

fn main() {
    let n = 4096;
    let reps = 10;
    let a = Array2::from_shape_fn((n, n), |(i, j)| (i ^ j) as f32);
    let b = Array2::from_shape_fn((n, n), |(i, j)| (i + j) as f32);
    let row = Array2::from_shape_fn((1, n), |(_, j)| j as f32);
    let col = Array2::from_shape_fn((n, 1), |(i, _)| i as f32);
    let mut out = Array2::<f32>::zeros((n, n));

    let hand = best(reps, || {
        hand_loop(
            a.as_slice().unwrap(),
            b.as_slice().unwrap(),
            out.as_slice_mut().unwrap(),
        )
    });
    let hand_ms = ms(hand);
    println!("4096x4096 f32, best of {reps}; hand loop (serial, preallocated) = {hand_ms:.2} ms\n");
    println!("| case | xla_bcast | ndarray `&a + &b` | ndarray Zip::par_for_each | xla_bcast / hand loop | NumPy (issue figure, scaled) / hand loop | ndarray / xla_bcast |");
    println!("|---|---|---|---|---|---|---|");

    // NumPy figures from the issue, measured against a 7.0 ms hand loop on this kind of machine.
    let cases: [(&str, &Array2<f32>, &Array2<f32>, f64); 4] = [
        ("same shape", &a, &b, 12.4),
        ("(M,N) + (1,N)", &a, &row, 13.3),
        ("(M,N) + (M,1)", &a, &col, 13.2),
        ("(M,1) + (1,N) outer", &col, &row, 7.9),
    ];
    for (name, x, y, numpy_ms) in cases {
        let ours = ms(best(reps, || x.add_bcast(y, &[]).unwrap()));
        let nd = ms(best(reps, || x + y));
        let zip = ms(best(reps, || {
            let xv = x.broadcast((n, n)).unwrap();
            let yv = y.broadcast((n, n)).unwrap();
            let mut o = Array2::<f32>::uninit((n, n));
            Zip::from(&mut o)
                .and(&xv)
                .and(&yv)
                .par_for_each(|o, &x, &y| {
                    o.write(x + y);
                });
            unsafe { o.assume_init() }
        }));
        println!(
            "| {name} | {ours:.2} ms | {nd:.2} ms | {zip:.2} ms | {:.2} | {:.2} | {:.2}x |",
            ours / hand_ms,
            numpy_ms / 7.0,
            nd / ours
        );
    }

    let into = ms(best(reps, || a.add_bcast_into(&b, &[], &mut out).unwrap()));
    let mut acc = a.clone();
    let assign = ms(best(reps, || acc.add_assign_bcast(&row, &[]).unwrap()));
    let same = ms(best(reps, || a.add_bcast(&b, &[]).unwrap()));
    println!(
        "| same shape, `_into` | {into:.2} ms | | | {:.2} | | |",
        into / hand_ms
    );
    println!(
        "| `+= (1,N)` in place | {assign:.2} ms | | | {:.2} | | |",
        assign / hand_ms
    );
    // An lhs read across its rows: ours, ndarray's, and ours against the contiguous add.
    let across = |name: &str, x: ndarray::ArrayView2<f32>| {
        let ours = ms(best(reps, || x.add_bcast(&b, &[]).unwrap()));
        println!(
            "| {name} | {ours:.2} ms | {:.2} ms | | {:.2} (vs contiguous: {:.2}x) | | |",
            ms(best(reps, || &x + &b)),
            ours / hand_ms,
            ours / same
        );
    };
    let at = a.t();
    across("transposed lhs", at);
    // A rot90 view: transposed, then flipped down its rows (a step of -1).
    let mut rot = a.t();
    rot.invert_axis(ndarray::Axis(0));
    across("rot90 lhs", rot);
    // A transpose sliced with a step of 2 down its rows (gathered into the staging buffer).
    let wide = Array2::from_shape_fn((n, 2 * n), |(i, j)| (i + j) as f32);
    across(
        "stepped transposed lhs (`t()[..;2, ..]`)",
        wide.t().slice_move(ndarray::s![..;2, ..]),
    );
    drop(wide);
    // Both F-ordered: the result follows them, so nothing is read across its rows.
    let bt = b.t();
    let both = ms(best(reps, || at.add_bcast(&bt, &[]).unwrap()));
    let nd = ms(best(reps, || &at + &bt));
    println!(
        "| both transposed (F order) | {both:.2} ms | {nd:.2} ms | | {:.2} (vs contiguous: {:.2}x) | | {:.2}x |",
        both / hand_ms,
        both / same,
        nd / both
    );

    let c3 = Array3::from_shape_fn((64, 512, 512), |(i, j, k)| (i + j + k) as f32);
    let v = ndarray::Array1::from_shape_fn(512, |k| k as f32);
    let ours = ms(best(reps, || c3.add_bcast(&v, &[2]).unwrap()));
    let nd = ms(best(reps, || &c3 + &v));
    println!(
        "| (64,512,512) + (512) dims [2] | {ours:.2} ms | {nd:.2} ms | | {:.2} | | {:.2}x |",
        ours / hand_ms,
        nd / ours
    );

    // Small arrays: time batches of calls, so that the clock's resolution does not matter.
    let small_a = Array2::<f32>::ones((64, 64));
    let small_same = Array2::<f32>::ones((64, 64));
    let small_row = Array2::<f32>::ones((1, 64));
    let small_col = Array2::<f32>::ones((64, 1));
    let batch = |f: &mut dyn FnMut()| {
        best(50, || {
            for _ in 0..200 {
                f()
            }
        })
        .as_secs_f64()
            * 1e6
            / 200.0
    };
    let mut small_contiguous = 0.0;
    for (name, b) in [
        ("same", &small_same),
        ("(1,64)", &small_row),
        ("(64,1)", &small_col),
    ] {
        let ours = batch(&mut || {
            black_box(small_a.add_bcast(b, &[]).unwrap());
        });
        let nd = batch(&mut || {
            black_box(&small_a + b);
        });
        if name == "same" {
            small_contiguous = ours;
        }
        println!(
            "| 64x64 + {name} | {ours:.2} us | {nd:.2} us | | | | {:.2}x |",
            nd / ours
        );
    }
    // Tiny arrays: the fixed cost of an op.
    let tiny = Array2::<f32>::ones((8, 8));
    let tiny_f = tiny.t().as_standard_layout().into_owned().reversed_axes();
    for (name, x) in [("8x8 + same", &tiny), ("8x8 + same, F order", &tiny_f)] {
        let ours = batch(&mut || {
            black_box(x.add_bcast(x, &[]).unwrap());
        });
        let nd = batch(&mut || {
            black_box(x + x);
        });
        println!(
            "| {name} | {ours:.3} us | {nd:.3} us | | | | {:.2}x |",
            nd / ours
        );
    }
    let small_t = small_same.t();
    let ours = batch(&mut || {
        black_box(small_t.add_bcast(&small_a, &[]).unwrap());
    });
    let nd = batch(&mut || {
        black_box(&small_t + &small_a);
    });
    println!(
        "| 64x64 transposed lhs | {ours:.2} us | {nd:.2} us | | vs contiguous: {:.2}x | | {:.2}x |",
        ours / small_contiguous,
        nd / ours
    );

    let cols = ms(best(reps, || a.reduce_in_dim(&[1, n], &[0, 1]).unwrap()));
    let rows = ms(best(reps, || a.reduce_in_dim(&[n, 1], &[0, 1]).unwrap()));
    let hand_cols = ms(best(reps, || {
        let mut s = vec![0f32; n];
        for r in a.rows() {
            for (s, x) in s.iter_mut().zip(r.as_slice().unwrap()) {
                *s += x;
            }
        }
        s
    }));
    let hand_rows = ms(best(reps, || {
        a.rows()
            .into_iter()
            .map(|r| r.as_slice().unwrap().iter().sum::<f32>())
            .collect::<Vec<_>>()
    }));
    println!("| reduce to (1,N) | {cols:.2} ms | hand loop {hand_cols:.2} ms | | {:.2} vs its hand loop | | |", cols / hand_cols);
    println!("| reduce to (M,1) | {rows:.2} ms | hand loop {hand_rows:.2} ms | | {:.2} vs its hand loop | | |", rows / hand_rows);
}
