//! The three tasks a newcomer wrote (issue "What a newcomer hit"), with the crate's API and no
//! workaround: a k-means assignment by `argmin_in_dims`, causal attention's mask from `iota` in a
//! program, and a batch norm whose program writes into the caller's `Array4`.

use ndarray::{Array1, Array2, Array4, Axis};
use xla_bcast::prelude::*;
use xla_bcast::stablehlo::{Program, Tensor, TensorView, TensorViewMut};

/// A k-means step: squared distances of points to centroids, each point's nearest centroid by
/// `argmin_in_dims`, the same as a loop's.
#[test]
fn kmeans_assignment_by_argmin() {
    let points = Array2::from_shape_fn((300, 8), |(i, j)| ((i * 7 + j * 3) % 11) as f32);
    let centroids = Array2::from_shape_fn((5, 8), |(c, j)| ((c * 5 + j) % 9) as f32);
    // |p|^2 - 2 p.c + |c|^2, each term placed by its broadcast_dimensions.
    let dot = points.dot(&centroids.t());
    let p2 = (&points * &points).sum_axis(Axis(1));
    let c2 = (&centroids * &centroids).sum_axis(Axis(1));
    let d = (dot.strict() * -2.0 + p2.in_dims(&[0])) + c2.in_dims(&[1]);
    let nearest: Array1<usize> = d.argmin_in_dims([0]).unwrap();
    for (i, &k) in nearest.iter().enumerate() {
        let row = d.row(i);
        let want = (0..5).fold(0, |b, c| if row[c] < row[b] { c } else { b });
        assert_eq!(k, want, "point {i}");
    }
}

/// Causal attention: the mask built in the program from two iotas (no runtime input), the
/// scores masked and soft-maxed over the keys, compiled and op by op alike; no weight on a
/// later key.
#[test]
fn causal_mask_by_iota() {
    let (b, t) = (2, 6);
    let mut p = Program::new("causal_softmax");
    let s = p.parameter::<f32>(&[b, t, t]);
    let (q, k) = (
        p.iota::<i32>(&[t, t], 0).unwrap(),
        p.iota::<i32>(&[t, t], 1).unwrap(),
    );
    let keep = p.le(k, q, &[]).unwrap();
    let keep = p.broadcast_in_dim(keep, &[b, t, t], &[1, 2]).unwrap();
    let low = p.constant(f32::NEG_INFINITY);
    let masked = p.select(keep, s, low).unwrap();
    let max = p.reduce_max(masked, &[2]).unwrap();
    let e = p.sub(masked, max, &[0, 1]).unwrap();
    let e = p.exp(e).unwrap();
    let sum = p.reduce_sum(e, &[2]).unwrap();
    let y = p.div(e, sum, &[0, 1]).unwrap();
    p.output(y).unwrap();
    let scores = ndarray::Array3::from_shape_fn((b, t, t), |(i, j, l)| ((i + j * l) % 5) as f32);
    let inputs = [Tensor::from(scores)];
    let want = p.run(&inputs).unwrap();
    let got = p.compile().unwrap().run(&inputs).unwrap();
    assert_eq!(got, want);
    let w: ndarray::Array3<f32> = got[0].clone().into_array().unwrap();
    for ((_, q, k), &v) in w.indexed_iter() {
        assert!(k <= q || v == 0.0, "a weight on a later key");
    }
    assert!(w.sum_axis(Axis(2)).iter().all(|s| (s - 1.0).abs() < 1e-6));
}

/// Batch norm over NHWC: the program writes its normalised output straight into the caller's
/// `Array4` and the per-channel mean into an `Array1`, the bits `Program::run` gives.
#[test]
fn batch_norm_into_the_callers_array4() {
    let (n, h, w, c) = (4, 5, 6, 8);
    let mut p = Program::new("batch_norm");
    let x = p.parameter::<f32>(&[n, h, w, c]);
    let count = p.constant((n * h * w) as f32);
    let sum = p.reduce_sum(x, &[0, 1, 2]).unwrap();
    let mean = p.div(sum, count, &[]).unwrap();
    let xc = p.sub(x, mean, &[3]).unwrap();
    let sq = p.mul(xc, xc, &[]).unwrap();
    let var = p.reduce_sum(sq, &[0, 1, 2]).unwrap();
    let var = p.div(var, count, &[]).unwrap();
    let eps = p.constant(1e-5f32);
    let var = p.add(var, eps, &[]).unwrap();
    let rstd = p.rsqrt(var).unwrap();
    let y = p.mul(xc, rstd, &[3]).unwrap();
    p.output(y).unwrap();
    p.output(mean).unwrap();
    let input = Array4::from_shape_fn((n, h, w, c), |(a, b, d, e)| {
        ((a + 2 * b + 3 * d + e) % 7) as f32
    });
    let want = p.run(&[Tensor::from(input.clone())]).unwrap();
    let exe = p.compile().unwrap();
    let (mut out, mut means) = (Array4::<f32>::zeros((n, h, w, c)), Array1::<f32>::zeros(c));
    let outputs = &mut [
        TensorViewMut::from(&mut out),
        TensorViewMut::from(&mut means),
    ];
    exe.run_views_into(&[TensorView::from(&input)], outputs)
        .unwrap();
    assert_eq!(Tensor::from(out), want[0]);
    assert_eq!(Tensor::from(means), want[1]);
}
