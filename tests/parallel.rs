//! Parallel splitting, whatever the machine's CPU count: each op here runs inside a private
//! Rayon pool of two threads on operands past `PARALLEL_THRESHOLD_BYTES` (768 KiB), and gives the serial
//! result bit for bit (elementwise ops, reductions, and compiled chains that fold rows or
//! leading dims, at rank 2 and at rank 33); a second thread is seen to take part. Without the
//! `rayon` feature every op runs on the calling thread, so there is nothing to test.
#![cfg(feature = "rayon")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use common::workloads::{layer_norm, norm_over, softmax};
use common::{bits, Rng};
use ndarray::{Array2, ArrayD, IxDyn};
use xla_bcast::prelude::*;
use xla_bcast::stablehlo::{Program, Tensor};
use xla_bcast::{with_parallelism, Parallelism};

/// A private pool of two threads: the split does not depend on the global pool's size.
fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("a pool of two threads")
}

fn serial<R>(f: impl FnOnce() -> R) -> R {
    with_parallelism(Parallelism::Serial, f)
}

fn matrix(rng: &mut Rng, m: usize, n: usize) -> Array2<f32> {
    Array2::from_shape_fn((m, n), |_| rng.f32())
}

fn tensor(rng: &mut Rng, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
    Tensor::from(ArrayD::from_shape_vec(IxDyn(shape), values).unwrap())
}

/// A 1 MiB elementwise op is split: both of the pool's threads run part of a closure's calls.
/// (A helper joins while work remains; a round where the caller finished first is retried.)
#[test]
fn both_threads_take_part() {
    let mut rng = Rng(2);
    let (x, b) = (matrix(&mut rng, 512, 512), matrix(&mut rng, 1, 512));
    let pool = pool();
    let want = serial(|| x.zip_bcast(&b, &[], |p, q| p * q).unwrap());
    let mut seen = [false; 2];
    for _ in 0..20 {
        let threads = [AtomicBool::new(false), AtomicBool::new(false)];
        let got = pool.install(|| {
            x.zip_bcast(&b, &[], |p, q| {
                if let Some(i) = rayon::current_thread_index() {
                    threads[i].store(true, Ordering::Relaxed);
                }
                p * q
            })
            .unwrap()
        });
        assert_eq!(got, want);
        seen = threads.map(AtomicBool::into_inner);
        if seen == [true; 2] {
            break;
        }
    }
    assert_eq!(
        seen, [true; 2],
        "one thread did all the work in every round"
    );
}

/// Binary ops (a row broadcast, a transposed operand, an outer product) and sums over each
/// dim: the same bits on two threads as on one.
#[test]
fn ops_and_sums_on_two_threads_match_serial() {
    let mut rng = Rng(3);
    let (x, y) = (matrix(&mut rng, 512, 640), matrix(&mut rng, 640, 512));
    let (row, col) = (matrix(&mut rng, 1, 640), matrix(&mut rng, 512, 1));
    let pool = pool();
    let cases = |x: &Array2<f32>| {
        (
            x.add_bcast(&row, &[]).unwrap(),
            x.sub_bcast(&y.t(), &[]).unwrap(),
            col.mul_bcast(&row, &[]).unwrap(),
            x.reduce_in_dim((1, 640), &[0, 1]).unwrap(),
            x.reduce_in_dim((512, 1), &[0, 1]).unwrap(),
            y.t().reduce_in_dim((512, 1), &[0, 1]).unwrap(),
        )
    };
    let want = serial(|| cases(&x));
    let got = pool.install(|| cases(&x));
    let bits = |a: &Array2<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got.0), bits(&want.0), "row broadcast");
    assert_eq!(bits(&got.1), bits(&want.1), "transposed operand");
    assert_eq!(bits(&got.2), bits(&want.2), "outer product");
    assert_eq!(bits(&got.3), bits(&want.3), "sum over rows");
    assert_eq!(bits(&got.4), bits(&want.4), "sum over columns");
    assert_eq!(bits(&got.5), bits(&want.5), "sum of a transposed operand");
}

/// `p` compiled and run on two threads gives `Program::run`'s results on one, bit for bit.
fn chain_matches(name: &str, p: &Program, inputs: &[Tensor]) {
    let want = serial(|| p.run(inputs).unwrap());
    let exe = p.compile().unwrap();
    assert!(
        format!("{exe:?}").contains("Rows("),
        "{name}: not one chain"
    );
    let got = pool().install(|| exe.run(inputs).unwrap());
    assert_eq!(got.len(), want.len(), "{name}");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.shape(), w.shape(), "{name}: output {k}");
        assert!(bits(g) == bits(w), "{name}: output {k} differs");
    }
}

/// Chains that fold each row (layer norm, softmax over the last dim) or the leading dims
/// (softmax over the first dim, a normalisation over the first two dims with its statistics as
/// outputs), split over two threads.
#[test]
fn chains_on_two_threads_match_serial_run() {
    let mut rng = Rng(4);
    let x = tensor(&mut rng, &[256, 1024]);
    let (g, b) = (tensor(&mut rng, &[1024]), tensor(&mut rng, &[1024]));
    chain_matches("layer norm", &layer_norm(256, 1024), &[x.clone(), g, b]);
    chain_matches(
        "softmax, last dim",
        &softmax(256, 1024, 1),
        std::slice::from_ref(&x),
    );
    chain_matches("softmax, first dim", &softmax(256, 1024, 0), &[x]);
    let shape = [8, 32, 1024];
    let p = norm_over(&shape, &[0, 1], true);
    let x = tensor(&mut rng, &shape);
    let (g, b) = (tensor(&mut rng, &[1024]), tensor(&mut rng, &[1024]));
    chain_matches("norm over leading dims", &p, &[x, g, b]);
}

/// A rank-33 chain with a reduction (past any fixed-size table of dims): normalised over its
/// last dim (a fold of each row) and over its first (a fold of leading dims), on two threads.
#[test]
fn rank_33_chains_with_a_reduction_match_run() {
    let mut rng = Rng(33);
    let mut shape = vec![1usize; 33];
    (shape[0], shape[16], shape[32]) = (64, 3, 1100);
    for (name, folded) in [("rows", 32), ("leading dims", 0)] {
        let p = norm_over(&shape, &[folded], true);
        let kept: Vec<usize> = (0..33).filter(|&d| d != folded).map(|d| shape[d]).collect();
        let inputs = [
            tensor(&mut rng, &shape),
            tensor(&mut rng, &kept),
            tensor(&mut rng, &kept),
        ];
        chain_matches(&format!("rank 33, folding {name}"), &p, &inputs);
    }
}
