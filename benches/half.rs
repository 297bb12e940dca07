//! `f16` and `bf16` adds (feature `half`) against a hand loop over slices with `half`'s own
//! conversions, and the same add in `f32`, measured in the same run.
//!
//! `cargo bench --features half --bench half`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use half::{bf16, f16};
use ndarray::Array2;
use xla_bcast::prelude::*;
use xla_bcast::{with_parallelism, Parallelism};

const N: usize = 1024;

macro_rules! half_add {
    ($c:expr, $t:ty, $name:literal) => {{
        let mut group = $c.benchmark_group(concat!("add_into/", $name, "/1024x1024/serial"));
        group
            .sample_size(20)
            .measurement_time(Duration::from_secs(2));
        group.throughput(Throughput::Bytes((3 * N * N * 2) as u64));
        let make = |k: usize| {
            Array2::from_shape_fn((N, N), |(i, j)| {
                <$t>::from_f32(((i * k + j) % 97) as f32 * 0.25)
            })
        };
        let (a, b) = (make(7), make(3));
        let mut out = Array2::from_elem((N, N), <$t>::ZERO);
        group.bench_function("xla_bcast", |bench| {
            bench.iter(|| {
                with_parallelism(Parallelism::Serial, || a.add_bcast_into(&b, &[], &mut out))
                    .unwrap();
                black_box(&out);
            })
        });
        group.bench_function("hand_loop", |bench| {
            bench.iter(|| {
                let (x, y) = (a.as_slice().unwrap(), b.as_slice().unwrap());
                for ((o, x), y) in out.as_slice_mut().unwrap().iter_mut().zip(x).zip(y) {
                    *o = <$t>::from_f32(x.to_f32() + y.to_f32());
                }
                black_box(&out);
            })
        });
        let (af, bf) = (a.mapv(|v| v.to_f32()), b.mapv(|v| v.to_f32()));
        let mut of = Array2::<f32>::zeros((N, N));
        group.bench_function("xla_bcast_f32", |bench| {
            bench.iter(|| {
                with_parallelism(Parallelism::Serial, || af.add_bcast_into(&bf, &[], &mut of))
                    .unwrap();
                black_box(&of);
            })
        });
        group.finish();
    }};
}

fn halves(c: &mut Criterion) {
    half_add!(c, f16, "f16");
    half_add!(c, bf16, "bf16");
}

criterion_group!(benches, halves);
criterion_main!(benches);
