//! Broadcasting binary ops against ndarray's operators, ndarray's `Zip::par_for_each` over
//! broadcast views, and a hand-written serial slice loop into a preallocated output, all in one
//! run so the ratios mean something on a noisy machine.
//!
//! `cargo bench --bench binary` (HTML report in `target/criterion`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndarray::{Array1, Array2, Array3, Zip};
use num_traits::Float;
use xla_bcast::prelude::*;

/// A broadcasting case: name, lhs shape, rhs shape.
type Case = (&'static str, (usize, usize), (usize, usize));

/// The four broadcasting cases of the issue.
fn cases(n: usize) -> [Case; 4] {
    [
        ("same", (n, n), (n, n)),
        ("row", (n, n), (1, n)),
        ("col", (n, n), (n, 1)),
        ("outer", (n, 1), (1, n)),
    ]
}

fn filled<T: Float>(shape: (usize, usize)) -> Array2<T> {
    Array2::from_shape_fn(shape, |(i, j)| T::from((i * 7 + j) % 13).unwrap())
}

fn bench_type<T>(c: &mut Criterion, type_name: &str)
where
    T: Float + XlaElement + Send + Sync + ndarray::ScalarOperand,
{
    for n in [64usize, 512, 4096] {
        let mut group = c.benchmark_group(format!("add/{type_name}/{n}x{n}"));
        group.throughput(Throughput::Bytes(
            (3 * n * n * std::mem::size_of::<T>()) as u64,
        ));
        if n == 4096 {
            group
                .sample_size(10)
                .measurement_time(Duration::from_secs(3));
        }
        let out_shape = (n, n);
        let a_full: Array2<T> = filled(out_shape);
        let b_full: Array2<T> = filled(out_shape);
        let mut out = Array2::<T>::zeros(out_shape);
        group.bench_function("hand_loop_into", |bench| {
            bench.iter(|| {
                let (a, b) = (a_full.as_slice().unwrap(), b_full.as_slice().unwrap());
                for ((o, x), y) in out.as_slice_mut().unwrap().iter_mut().zip(a).zip(b) {
                    *o = *x + *y;
                }
                black_box(&out);
            })
        });
        for (case, ls, rs) in cases(n) {
            let (a, b): (Array2<T>, Array2<T>) = (filled(ls), filled(rs));
            group.bench_function(BenchmarkId::new("xla_bcast", case), |bench| {
                bench.iter(|| black_box(a.add_bcast(&b, &[]).unwrap()))
            });
            group.bench_function(BenchmarkId::new("ndarray_ops", case), |bench| {
                bench.iter(|| black_box(&a + &b))
            });
            group.bench_function(BenchmarkId::new("ndarray_zip_par", case), |bench| {
                bench.iter(|| {
                    let (av, bv) = (
                        a.broadcast(out_shape).unwrap(),
                        b.broadcast(out_shape).unwrap(),
                    );
                    let mut o = Array2::<T>::uninit(out_shape);
                    Zip::from(&mut o)
                        .and(&av)
                        .and(&bv)
                        .par_for_each(|o, &x, &y| {
                            o.write(x + y);
                        });
                    // SAFETY: Zip wrote every element.
                    black_box(unsafe { o.assume_init() })
                })
            });
            group.bench_function(BenchmarkId::new("xla_bcast_into", case), |bench| {
                bench.iter(|| {
                    a.add_bcast_into(&b, &[], &mut out).unwrap();
                    black_box(&out);
                })
            });
        }
        let mut acc = a_full.clone();
        let row: Array2<T> = filled((1, n));
        group.bench_function("xla_bcast_assign/row", |bench| {
            bench.iter(|| {
                acc.add_assign_bcast(&row, &[]).unwrap();
                black_box(&acc);
            })
        });
        let at = a_full.t();
        group.bench_function("xla_bcast/transposed_lhs", |bench| {
            bench.iter(|| black_box(at.add_bcast(&b_full, &[]).unwrap()))
        });
        group.bench_function("ndarray_ops/transposed_lhs", |bench| {
            bench.iter(|| black_box(&at + &b_full))
        });
        // A rot90 view (transposed, then flipped down its rows: a step of -1).
        let mut rot = a_full.t();
        rot.invert_axis(ndarray::Axis(0));
        group.bench_function("xla_bcast/rot90_lhs", |bench| {
            bench.iter(|| black_box(rot.add_bcast(&b_full, &[]).unwrap()))
        });
        group.bench_function("ndarray_ops/rot90_lhs", |bench| {
            bench.iter(|| black_box(&rot + &b_full))
        });
        // A transpose sliced with a step of 2 down its rows (gathered into the staging buffer).
        let wide: Array2<T> = filled((n, 2 * n));
        let stepped = wide.t();
        let stepped = stepped.slice(ndarray::s![..;2, ..]);
        group.bench_function("xla_bcast/stepped_transposed_lhs", |bench| {
            bench.iter(|| black_box(stepped.add_bcast(&b_full, &[]).unwrap()))
        });
        group.bench_function("ndarray_ops/stepped_transposed_lhs", |bench| {
            bench.iter(|| black_box(&stepped + &b_full))
        });
        // Both F-ordered: the result follows their memory order.
        let bt = b_full.t();
        group.bench_function("xla_bcast/both_transposed", |bench| {
            bench.iter(|| black_box(at.add_bcast(&bt, &[]).unwrap()))
        });
        group.bench_function("ndarray_ops/both_transposed", |bench| {
            bench.iter(|| black_box(&at + &bt))
        });
        // The strict operators go through the same engine as `add_bcast`.
        group.bench_function("xla_bcast/strict_operator", |bench| {
            bench.iter(|| black_box(a_full.strict() + &b_full))
        });
        // The scalar as a rank-0 array, made once like every other operand.
        let s = T::from(3).unwrap();
        let s0 = ndarray::arr0(s);
        group.bench_function("xla_bcast/scalar", |bench| {
            bench.iter(|| black_box(a_full.add_bcast(&s0, &[]).unwrap()))
        });
        group.bench_function("ndarray_ops/scalar", |bench| {
            bench.iter(|| black_box(&a_full + s))
        });
        group.finish();
    }
}

fn three_d(c: &mut Criterion) {
    let mut group = c.benchmark_group("add/f32/3d");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    let x = Array3::<f32>::from_shape_fn((64, 512, 512), |(i, j, k)| ((i + j + k) % 7) as f32);
    group.throughput(Throughput::Bytes((2 * x.len() * 4) as u64));
    let v = Array1::<f32>::from_shape_fn(512, |k| k as f32);
    let m = Array3::<f32>::from_shape_fn((64, 1, 512), |(i, _, k)| (i + k) as f32);
    group.bench_function("xla_bcast/(64,512,512)+(512)", |b| {
        b.iter(|| black_box(x.add_bcast(&v, &[2]).unwrap()))
    });
    group.bench_function("ndarray_ops/(64,512,512)+(512)", |b| {
        b.iter(|| black_box(&x + &v))
    });
    group.bench_function("xla_bcast/(64,512,512)+(64,1,512)", |b| {
        b.iter(|| black_box(x.add_bcast(&m, &[]).unwrap()))
    });
    group.bench_function("ndarray_ops/(64,512,512)+(64,1,512)", |b| {
        b.iter(|| black_box(&x + &m))
    });
    group.finish();
}

/// Tiny arrays, where the fixed cost of an op is its cost: same-shaped operands in C and F
/// order and a scalar, against ndarray's operators.
fn tiny(c: &mut Criterion) {
    for n in [4, 16] {
        let mut group = c.benchmark_group(format!("add/f32/{n}x{n}"));
        let a = filled::<f32>((n, n));
        let f = a.t().as_standard_layout().into_owned().reversed_axes();
        group.bench_function("xla_bcast/same", |b| {
            b.iter(|| black_box(a.add_bcast(&a, &[]).unwrap()))
        });
        group.bench_function("ndarray_ops/same", |b| b.iter(|| black_box(&a + &a)));
        group.bench_function("xla_bcast/same_f_order", |b| {
            b.iter(|| black_box(f.add_bcast(&f, &[]).unwrap()))
        });
        group.bench_function("ndarray_ops/same_f_order", |b| {
            b.iter(|| black_box(&f + &f))
        });
        group.bench_function("xla_bcast/scalar", |b| {
            b.iter(|| black_box(a.strict() + 1.0))
        });
        group.bench_function("ndarray_ops/scalar", |b| b.iter(|| black_box(&a + 1.0)));
        group.finish();
    }
}

fn all(c: &mut Criterion) {
    bench_type::<f32>(c, "f32");
    bench_type::<f64>(c, "f64");
    three_d(c);
    tiny(c);
}

criterion_group!(benches, all);
criterion_main!(benches);
