//! The workloads of real models as programs, for the tests and `examples/fused_bench.rs`.

use xla_bcast::stablehlo::Program;

/// `relu(x + b)`, `b` of `(N,)`.
pub fn bias_relu(m: usize, n: usize) -> Program {
    let mut p = Program::new("bias_relu");
    let x = p.parameter::<f32>(&[m, n]);
    let b = p.parameter::<f32>(&[n]);
    let s = p.add(x, b, &[1]).unwrap();
    let zero = p.constant(0.0f32);
    let y = p.max(s, zero, &[]).unwrap();
    p.output(y).unwrap();
    p
}

/// `relu(x^T + r)`: `x` of `(N, M)` (an activation laid out feature-major, as a column-major
/// producer leaves it) read transposed, `r` of `(M, N)` (a residual in the standard layout).
pub fn transposed_add_relu(m: usize, n: usize) -> Program {
    let mut p = Program::new("transposed_add_relu");
    let x = p.parameter::<f32>(&[n, m]);
    let r = p.parameter::<f32>(&[m, n]);
    let t = p.broadcast_in_dim(x, &[m, n], &[1, 0]).unwrap();
    let s = p.add(t, r, &[]).unwrap();
    let zero = p.constant(0.0f32);
    let y = p.max(s, zero, &[]).unwrap();
    p.output(y).unwrap();
    p
}

/// Layer norm over the last dim, statistics in the program, `(C,)` gamma and beta.
pub fn layer_norm(m: usize, n: usize) -> Program {
    layer_norm_of(&[m, n])
}

/// Layer norm over the last dim of `shape` (rank 1 or more), gamma and beta of that dim.
pub fn layer_norm_of(shape: &[usize]) -> Program {
    let last = shape.len() - 1;
    let (outer, n): (Vec<usize>, usize) = ((0..last).collect(), shape[last]);
    let mut p = Program::new("layer_norm");
    let x = p.parameter::<f32>(shape);
    let g = p.parameter::<f32>(&[n]);
    let b = p.parameter::<f32>(&[n]);
    let count = p.constant(n as f32);
    let sum = p.reduce_sum(x, &[last]).unwrap();
    let mean = p.div(sum, count, &[]).unwrap();
    let xc = p.sub(x, mean, &outer).unwrap();
    let sq = p.mul(xc, xc, &[]).unwrap();
    let ss = p.reduce_sum(sq, &[last]).unwrap();
    let var = p.div(ss, count, &[]).unwrap();
    let eps = p.constant(1e-5f32);
    let ve = p.add(var, eps, &[]).unwrap();
    let rstd = p.rsqrt(ve).unwrap();
    let xn = p.mul(xc, rstd, &outer).unwrap();
    let xg = p.mul(xn, g, &[last]).unwrap();
    let y = p.add(xg, b, &[last]).unwrap();
    p.output(y).unwrap();
    p
}

/// Normalisation over dims `folded` of `shape` (sorted): `(x - mean) * rsqrt(var + eps)`,
/// scaled by gamma and shifted by beta, both at the kept dims; with `stats`, the mean and the
/// reciprocal deviation are outputs too.
pub fn norm_over(shape: &[usize], folded: &[usize], stats: bool) -> Program {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !folded.contains(d)).collect();
    let at_kept: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    let count: usize = folded.iter().map(|&d| shape[d]).product();
    let mut p = Program::new("norm");
    let x = p.parameter::<f32>(shape);
    let g = p.parameter::<f32>(&at_kept);
    let b = p.parameter::<f32>(&at_kept);
    let count = p.constant(count as f32);
    let sum = p.reduce_sum(x, folded).unwrap();
    let mean = p.div(sum, count, &[]).unwrap();
    let xc = p.sub(x, mean, &kept).unwrap();
    let sq = p.mul(xc, xc, &[]).unwrap();
    let ss = p.reduce_sum(sq, folded).unwrap();
    let var = p.div(ss, count, &[]).unwrap();
    let eps = p.constant(1e-5f32);
    let ve = p.add(var, eps, &[]).unwrap();
    let rstd = p.rsqrt(ve).unwrap();
    let scale = p.mul(rstd, g, &[]).unwrap();
    let xs = p.mul(xc, scale, &kept).unwrap();
    let y = p.add(xs, b, &kept).unwrap();
    p.output(y).unwrap();
    if stats {
        p.output(mean).unwrap();
        p.output(rstd).unwrap();
    }
    p
}

/// Batch norm in training (the batch's statistics) over every dim of `shape` but the last, the
/// channels of an `NHWC` activation; gamma and beta per channel.
pub fn batch_norm_of(shape: &[usize]) -> Program {
    let folded: Vec<usize> = (0..shape.len() - 1).collect();
    norm_over(shape, &folded, false)
}

/// Softmax over `axis` of a 2-D array.
pub fn softmax(m: usize, n: usize, axis: usize) -> Program {
    let mut p = Program::new("softmax");
    let x = p.parameter::<f32>(&[m, n]);
    let keep = 1 - axis;
    let mx = p.reduce_max(x, &[axis]).unwrap();
    let d = p.sub(x, mx, &[keep]).unwrap();
    let e = p.exp(d).unwrap();
    let s = p.reduce_sum(e, &[axis]).unwrap();
    let y = p.div(e, s, &[keep]).unwrap();
    p.output(y).unwrap();
    p
}

/// Softmax over the last dim of `shape` (rank 1 or more).
pub fn softmax_last_of(shape: &[usize]) -> Program {
    let last = shape.len() - 1;
    let outer: Vec<usize> = (0..last).collect();
    let mut p = Program::new("softmax");
    let x = p.parameter::<f32>(shape);
    let mx = p.reduce_max(x, &[last]).unwrap();
    let d = p.sub(x, mx, &outer).unwrap();
    let e = p.exp(d).unwrap();
    let s = p.reduce_sum(e, &[last]).unwrap();
    let y = p.div(e, s, &outer).unwrap();
    p.output(y).unwrap();
    p
}

/// GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu(m: usize, n: usize) -> Program {
    let mut p = Program::new("gelu");
    let x = p.parameter::<f32>(&[m, n]);
    let c = p.constant(0.044715f32);
    let k = p.constant((2.0f32 / std::f32::consts::PI).sqrt());
    let half = p.constant(0.5f32);
    let one = p.constant(1.0f32);
    let x2 = p.mul(x, x, &[]).unwrap();
    let x3 = p.mul(x2, x, &[]).unwrap();
    let cx3 = p.mul(c, x3, &[]).unwrap();
    let inner = p.add(x, cx3, &[]).unwrap();
    let kin = p.mul(k, inner, &[]).unwrap();
    let t = p.tanh(kin).unwrap();
    let onet = p.add(one, t, &[]).unwrap();
    let hx = p.mul(half, x, &[]).unwrap();
    let y = p.mul(hx, onet, &[]).unwrap();
    p.output(y).unwrap();
    p
}

/// Attention scores `(B, H, S, S)`: scale, a `(S, S)` mask added, softmax over the last dim.
pub fn attention(b: usize, h: usize, s: usize) -> Program {
    let mut p = Program::new("attention");
    let x = p.parameter::<f32>(&[b, h, s, s]);
    let mask = p.parameter::<f32>(&[s, s]);
    let scale = p.constant(0.125f32);
    let xs = p.mul(x, scale, &[]).unwrap();
    let xm = p.add(xs, mask, &[2, 3]).unwrap();
    let mx = p.reduce_max(xm, &[3]).unwrap();
    let d = p.sub(xm, mx, &[0, 1, 2]).unwrap();
    let e = p.exp(d).unwrap();
    let sum = p.reduce_sum(e, &[3]).unwrap();
    let y = p.div(e, sum, &[0, 1, 2]).unwrap();
    p.output(y).unwrap();
    p
}

/// A dense layer's backward through relu: the upstream gradient masked where the
/// pre-activation was not positive, and the bias gradient summed over the batch.
pub fn dense_backward(m: usize, n: usize) -> Program {
    let mut p = Program::new("dense_backward");
    let dy = p.parameter::<f32>(&[m, n]);
    let z = p.parameter::<f32>(&[m, n]);
    let zero = p.constant(0.0f32);
    let pos = p.gt(z, zero, &[]).unwrap();
    let zeros = p.broadcast_in_dim(zero, &[m, n], &[]).unwrap();
    let dz = p.select(pos, dy, zeros).unwrap();
    let db = p.reduce_sum(dz, &[0]).unwrap();
    p.output(dz).unwrap();
    p.output(db).unwrap();
    p
}
