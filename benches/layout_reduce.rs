//! Relayout copies (transposing vs same layout) and reductions back to an operand's shape,
//! each against a baseline measured in the same run.
//!
//! `cargo bench --bench layout_reduce`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndarray::Array2;
use xla_bcast::layout::{to_buffer, Layout};
use xla_bcast::prelude::*;

const N: usize = 4096;

fn relayout(c: &mut Criterion) {
    let mut group = c.benchmark_group("relayout/f32/4096x4096");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes((2 * N * N * 4) as u64));
    let a = Array2::<f32>::from_shape_fn((N, N), |(i, j)| (i * 3 + j) as f32);
    group.bench_function("same_layout_to_buffer", |b| {
        b.iter(|| black_box(to_buffer(&a, &Layout::row_major(2)).unwrap()))
    });
    group.bench_function("slice_to_vec", |b| {
        b.iter(|| black_box(a.as_slice().unwrap().to_vec()))
    });
    group.bench_function("row_to_col_major", |b| {
        b.iter(|| black_box(to_buffer(&a, &Layout::col_major(2)).unwrap()))
    });
    group.finish();
}

fn reduce(c: &mut Criterion) {
    let mut group = c.benchmark_group("reduce_in_dim/f32/4096x4096");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes((N * N * 4) as u64));
    let a = Array2::<f32>::from_shape_fn((N, N), |(i, j)| ((i + j) % 5) as f32);
    group.bench_function("xla_bcast/to_(1,N)", |b| {
        b.iter(|| black_box(a.reduce_in_dim(&[1, N], &[0, 1]).unwrap()))
    });
    group.bench_function("hand_loop/to_(1,N)", |b| {
        b.iter(|| {
            let mut s = vec![0f32; N];
            for r in a.rows() {
                for (s, x) in s.iter_mut().zip(r.as_slice().unwrap()) {
                    *s += x;
                }
            }
            black_box(s)
        })
    });
    group.bench_function("xla_bcast/to_(N,1)", |b| {
        b.iter(|| black_box(a.reduce_in_dim(&[N, 1], &[0, 1]).unwrap()))
    });
    group.bench_function("hand_loop/to_(N,1)", |b| {
        b.iter(|| {
            black_box(
                a.rows()
                    .into_iter()
                    .map(|r| r.as_slice().unwrap().iter().sum::<f32>())
                    .collect::<Vec<_>>(),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, relayout, reduce);
criterion_main!(benches);
