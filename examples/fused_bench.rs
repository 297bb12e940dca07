//! The workloads of `tests/common/workloads.rs` (bias + relu; add + relu of a transposed input; layer
//! norm, softmax over either dim, GELU, attention scores, a dense layer's backward), `f32`: the
//! compiled executable
//! (allocating, and into the caller's arrays), the same program op by op (`Program::run`),
//! ndarray's operators and ndarray's hand-fused `Zip` where they can say it, and the one-pass
//! floor (the inputs and outputs moved once at a parallel copy's rate), and a one-op program
//! beside the same op called directly. Prints one line
//! per workload and system: `workload size system ms`, the median of a few calls.
//! `tools/fused_bench.py` runs it beside NumPy, numexpr and XLA in interleaved rounds.
//!
//! `cargo run --release --example fused_bench [modules.json]`: with a path, also writes each
//! program's StableHLO text and input shapes there, for XLA.

use std::hint::black_box;
use std::time::Instant;

use ndarray::{Array1, Array2, ArrayD, Axis, IxDyn, Zip};
use xla_bcast::math;
use xla_bcast::prelude::*;
use xla_bcast::stablehlo::{Program, Tensor};

#[path = "../tests/common/workloads.rs"]
mod workloads;

/// The median time of `f` in ms over `calls` calls, after one warm-up call.
fn median(calls: usize, f: &mut dyn FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..calls)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[calls / 2]
}

/// The median times of `f` and `g` in ms over `calls` calls each, interleaved (the first of
/// each pair alternating) so that both see the same state of the machine and of its caches;
/// after one warm-up call each.
fn median_pair(calls: usize, f: &mut dyn FnMut(), g: &mut dyn FnMut()) -> (f64, f64) {
    f();
    g();
    let time = |h: &mut dyn FnMut()| {
        let s = Instant::now();
        h();
        s.elapsed().as_secs_f64() * 1e3
    };
    let (mut tf, mut tg) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for c in 0..calls {
        if c % 2 == 0 {
            tf.push(time(f));
            tg.push(time(g));
        } else {
            tg.push(time(g));
            tf.push(time(f));
        }
    }
    tf.sort_by(|a, b| a.total_cmp(b));
    tg.sort_by(|a, b| a.total_cmp(b));
    (tf[calls / 2], tg[calls / 2])
}

/// The median time of `f` in ms over `calls` calls on a fresh value of `make` each (made
/// outside the timing), after one warm-up call.
fn median_on<T>(calls: usize, make: &mut dyn FnMut() -> T, f: &mut dyn FnMut(T)) -> f64 {
    f(make());
    let mut t: Vec<f64> = (0..calls)
        .map(|_| {
            let v = make();
            let s = Instant::now();
            f(v);
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[calls / 2]
}

/// The layer norm of `workloads::layer_norm_of` written eagerly, as a user would with
/// `in_dims` on an owned `x`: the crate's row sums for the statistics (the squares in one
/// temporary), and one strict chain that writes into `x`'s buffer.
fn layer_norm_eager(x: ArrayD<f32>, g: &Array1<f32>, b: &Array1<f32>) -> ArrayD<f32> {
    let last = x.ndim() - 1;
    let outer: Vec<usize> = (0..last).collect();
    let rows = x.shape()[..last].to_vec();
    let n = x.shape()[last] as f32;
    let mean = x.reduce_in_dim(&rows[..], &outer).expect("rows") / n;
    let xc = x.into_strict() - mean.in_dims(&outer);
    let var = (&xc * &xc).reduce_in_dim(&rows[..], &outer).expect("rows") / n;
    let rstd = var.mapv_into(|v| 1.0 / (v + 1e-5).sqrt());
    (xc * rstd.in_dims(&outer) * g.in_dims(&[last]) + b.in_dims(&[last])).into_inner()
}

/// `x` (`f32`, contiguous) seen as rows of its last dim.
fn rows_of(t: &Tensor) -> ndarray::ArrayView2<'_, f32> {
    let x = t.view::<f32>().expect("f32");
    let (n, len) = (*x.shape().last().expect("rank 1 or more"), x.len());
    x.into_shape_with_order((len / n, n)).expect("contiguous")
}

/// Layer norm over rows with `StrictZip`: the statistics (sum and sum of squares) folded and
/// the result mapped in one call, each row while it is in cache.
fn layer_norm_zip(
    x: &ndarray::ArrayView2<'_, f32>,
    g: &Array1<f32>,
    b: &Array1<f32>,
    out: &mut Array2<f32>,
) {
    let n = x.ncols() as f32;
    StrictZip::from(x)
        .and_in_dims(g, &[1])
        .and_in_dims(b, &[1])
        .fold_map_assign_into(
            out,
            [0],
            (0f32, 0f32),
            |(s, q), x, _, _| (s + x, q + x * x),
            |a, b| (a.0 + b.0, a.1 + b.1),
            |(s, q)| (s / n, 1.0 / (q / n - (s / n) * (s / n) + 1e-5).sqrt()),
            |&(mean, rstd), x, g, b| (x - mean) * rstd * g + b,
        )
        .expect("shapes");
}

/// One row of [`layer_norm_rows`]: the sums in 16 lanes, then one loop writing the result.
#[inline(always)]
fn layer_norm_row(o: &mut [f32], r: &[f32], g: &[f32], b: &[f32]) {
    let (mut s, mut q) = ([0f32; 16], [0f32; 16]);
    let chunks = r.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for j in 0..16 {
            s[j] += c[j];
            q[j] += c[j] * c[j];
        }
    }
    for (j, &v) in tail.iter().enumerate() {
        s[j] += v;
        q[j] += v * v;
    }
    let n = r.len() as f32;
    let mean = s.iter().sum::<f32>() / n;
    let rstd = 1.0 / (q.iter().sum::<f32>() / n - mean * mean + 1e-5).sqrt();
    for (((o, &x), &g), &b) in o.iter_mut().zip(r).zip(g).zip(b) {
        *o = (x - mean) * rstd * g + b;
    }
}

/// [`layer_norm_row`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn layer_norm_row_avx2(o: &mut [f32], r: &[f32], g: &[f32], b: &[f32]) {
    layer_norm_row(o, r, g, b)
}

/// Whether this CPU runs the AVX2 and FMA copies of the hand-written rows.
fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// Layer norm as a user writes it by hand with ndarray and Rayon: per row, the sums in 16
/// lanes, then one loop writing the result, while the row is in L1; an AVX2 and FMA copy of
/// the row's loops where the CPU has them.
fn layer_norm_rows(
    x: &ndarray::ArrayView2<'_, f32>,
    g: &Array1<f32>,
    b: &Array1<f32>,
    out: &mut Array2<f32>,
) {
    let (g, b) = (g.as_slice().expect("dense"), b.as_slice().expect("dense"));
    let wide = avx2();
    Zip::from(out.rows_mut())
        .and(x.rows())
        .par_for_each(|mut o, r| {
            let (r, o) = (
                r.to_slice().expect("dense"),
                o.as_slice_mut().expect("dense"),
            );
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: `avx2` checked the CPU.
                return unsafe { layer_norm_row_avx2(o, r, g, b) };
            }
            layer_norm_row(o, r, g, b)
        });
}

/// Softmax over rows with `StrictZip`, a group per row while it is in cache, as the hand
/// loop runs: the maximum, `exp` written into the output with its sum, then the scale.
fn softmax_zip(x: &ndarray::ArrayView2<'_, f32>, out: &mut Array2<f32>) {
    StrictZip::from(x)
        .for_each_group_into(out, [0], |g| {
            let max = g.fold(f32::MIN, |m, _, x| m.max(x), f32::max);
            let sum = g.fold(
                0.0,
                move |s, o, x| {
                    *o = math::exp(x - max);
                    s + *o
                },
                |a, b| a + b,
            );
            let inv = 1.0 / sum;
            g.for_each(move |o, _| *o *= inv);
        })
        .expect("shapes");
}

/// Batch norm over the rows of `x` (`NHWC` seen as `(N*H*W, C)`) with `StrictZip`: the mean
/// and the variance folded into the channels, then one map.
fn batch_norm_zip(x: &ndarray::ArrayView2<'_, f32>, inputs: &[Tensor], out: &mut Array2<f32>) {
    let (g, b) = (rows_of(&inputs[1]), rows_of(&inputs[2]));
    let (g, b) = (g.row(0), b.row(0));
    let n = x.nrows() as f32;
    let sum = StrictZip::from(x)
        .fold_in_dims([1], 0f32, |s, x| s + x, |a, b| a + b)
        .expect("channels");
    let mean = sum.mapv(|s| s / n);
    let ss = StrictZip::from(x)
        .and_in_dims(&mean, &[1])
        .fold_in_dims([1], 0f32, |s, x, m| s + (x - m) * (x - m), |a, b| a + b)
        .expect("channels");
    let scale = StrictZip::from(&ss)
        .and(&g)
        .map_collect(|ss, g| g / (ss / n + 1e-5).sqrt())
        .expect("channels");
    StrictZip::from(x)
        .and_in_dims(&mean, &[1])
        .and_in_dims(&scale, &[1])
        .and_in_dims(&b, &[1])
        .map_assign_into(out, |x, m, s, b| (x - m) * s + b)
        .expect("shapes");
}

/// Attention scores with `StrictZip`: `(B*H, S, S)`, the mask in dims 1 and 2; a softmax
/// over each row of the scaled, masked scores, a group per row.
fn attention_zip(inputs: &[Tensor], out: &mut Array2<f32>) {
    let s = *inputs[1].shape().last().expect("a mask");
    let x = rows_of(&inputs[0]);
    let x = x
        .into_shape_with_order((x.nrows() / s, s, s))
        .expect("contiguous");
    let mask = rows_of(&inputs[1]);
    let mut o = out
        .view_mut()
        .into_shape_with_order(x.raw_dim())
        .expect("contiguous");
    StrictZip::from(&x)
        .and_in_dims(&mask, &[1, 2])
        .for_each_group_into(&mut o, [0, 1], |g| {
            let max = g.fold(f32::MIN, |m, _, x, k| m.max(x * 0.125 + k), f32::max);
            let sum = g.fold(
                0.0,
                move |t, o, x, k| {
                    *o = math::exp(x * 0.125 + k - max);
                    t + *o
                },
                |a, b| a + b,
            );
            let inv = 1.0 / sum;
            g.for_each(move |o, _, _| *o *= inv);
        })
        .expect("shapes");
}

/// One row of [`softmax_rows`]: the maximum, `exp` into the output with its sum, the scale.
#[inline(always)]
fn softmax_row(o: &mut [f32], r: &[f32]) {
    let mut m = [f32::MIN; 16];
    for c in r.chunks(16) {
        for (m, &v) in m.iter_mut().zip(c) {
            *m = m.max(v);
        }
    }
    let max = m.iter().fold(f32::MIN, |a, &b| a.max(b));
    let mut s = [0f32; 16];
    for (oc, rc) in o.chunks_mut(16).zip(r.chunks(16)) {
        for ((o, &v), s) in oc.iter_mut().zip(rc).zip(s.iter_mut()) {
            *o = math::exp(v - max);
            *s += *o;
        }
    }
    let inv = 1.0 / s.iter().sum::<f32>();
    for o in o.iter_mut() {
        *o *= inv;
    }
}

/// [`softmax_row`] compiled for AVX2 and FMA (`math::exp`'s `mul_add`s one instruction each).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn softmax_row_avx2(o: &mut [f32], r: &[f32]) {
    softmax_row(o, r)
}

/// Softmax by hand, per row while it is in L1 (an AVX2 and FMA copy where the CPU has them).
fn softmax_rows(x: &ndarray::ArrayView2<'_, f32>, out: &mut Array2<f32>) {
    let wide = avx2();
    Zip::from(out.rows_mut())
        .and(x.rows())
        .par_for_each(|mut o, r| {
            let (r, o) = (
                r.to_slice().expect("dense"),
                o.as_slice_mut().expect("dense"),
            );
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: `avx2` checked the CPU.
                return unsafe { softmax_row_avx2(o, r) };
            }
            softmax_row(o, r)
        });
}

/// The `zip` and `rows` columns of the workloads that have them, checked against the
/// executable's output.
fn zip_and_rows(name: &str, size: &str, inputs: &[Tensor], outs: &[Tensor], calls: usize) {
    let x = rows_of(&inputs[0]);
    let want = rows_of(&outs[0]);
    let check = |label: &str, f: &mut dyn FnMut(&mut Array2<f32>)| {
        let mut out = Array2::<f32>::zeros(want.raw_dim());
        f(&mut out);
        let worst = (&out - &want).fold(0f32, |m, d| m.max(d.abs()));
        assert!(worst < 1e-3, "{name} {label} is off by {worst}");
        out
    };
    let time = |label: &str, f: &mut dyn FnMut(&mut Array2<f32>)| {
        let mut out = check(label, f);
        let t = median(calls, &mut || f(&mut out));
        println!("{name} {size} {label} {t:.4}");
    };
    // The `zip` and `rows` columns timed in alternation, as `median_pair` times them.
    let pair = |zip: &mut dyn FnMut(&mut Array2<f32>), rows: &mut dyn FnMut(&mut Array2<f32>)| {
        let (mut a, mut b) = (check("zip_into", zip), check("rows_into", rows));
        let (z, r) = median_pair(calls, &mut || zip(&mut a), &mut || rows(&mut b));
        println!("{name} {size} zip_into {z:.4}");
        println!("{name} {size} rows_into {r:.4}");
    };
    match name {
        "layer_norm" => {
            let row = |t: &Tensor| {
                t.view::<f32>()
                    .expect("f32")
                    .to_owned()
                    .into_dimensionality()
                    .expect("a row")
            };
            let (g, b) = (row(&inputs[1]), row(&inputs[2]));
            pair(&mut |o| layer_norm_zip(&x, &g, &b, o), &mut |o| {
                layer_norm_rows(&x, &g, &b, o)
            });
        }
        "softmax_last" => {
            pair(&mut |o| softmax_zip(&x, o), &mut |o| softmax_rows(&x, o));
        }
        "bias_relu" => {
            let b = inputs[1].view::<f32>().expect("f32").to_owned();
            let b: Array1<f32> = b.into_dimensionality().expect("a row");
            time("zip_into", &mut |o| {
                StrictZip::from(&x)
                    .and_in_dims(&b, &[1])
                    .map_assign_into(o, |x, b| (x + b).max(0.0))
                    .expect("shapes")
            });
        }
        "transposed_add_relu" => {
            let (xt, r) = (x.t(), rows_of(&inputs[1]));
            time("zip_into", &mut |o| {
                StrictZip::from(&xt)
                    .and(&r)
                    .map_assign_into(o, |x, r| (x + r).max(0.0))
                    .expect("shapes")
            });
        }
        "gelu" => {
            let k = (2.0f32 / std::f32::consts::PI).sqrt();
            time("zip_into", &mut |o| {
                StrictZip::from(&x)
                    // `move`: `k` by value (by reference, the loop does not vectorise).
                    .map_assign_into(o, move |x| {
                        0.5 * x * (1.0 + math::tanh(k * (x + 0.044715 * x * x * x)))
                    })
                    .expect("shapes")
            });
        }
        "dense_backward" => {
            let z = rows_of(&inputs[1]);
            time("zip_into", &mut |o| {
                StrictZip::from(&x)
                    .and(&z)
                    .map_assign_into(o, |dy, z| if z > 0.0 { dy } else { 0.0 })
                    .expect("shapes");
                let db = StrictZip::from(&*o).fold_in_dims([1], 0f32, |s, v| s + v, |a, b| a + b);
                black_box(db.expect("columns"));
            });
        }
        "batch_norm" => time("zip_into", &mut |o| batch_norm_zip(&x, inputs, o)),
        "attention" => time("zip_into", &mut |o| attention_zip(inputs, o)),
        _ => {}
    }
}

fn input(shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n as u32)
        .map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 2000) as f32 * 0.004 - 4.0)
        .collect();
    Tensor::from(ArrayD::from_shape_vec(IxDyn(shape), v).expect("the shape's length"))
}

/// Times `p` compiled on inputs of `shapes`, allocating and into arrays it allocated once, and
/// prints both lines; gives the inputs and outputs.
fn executable(
    name: &str,
    size: &str,
    p: &Program,
    shapes: &[Vec<usize>],
    calls: usize,
) -> (Vec<Tensor>, Vec<Tensor>) {
    let inputs: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| input(s, k as u32))
        .collect();
    let exe = p.compile().expect("compiles");
    let mut outs = exe.run(&inputs).expect("runs");
    // The output views made once, outside the timing.
    let mut views: Vec<_> = outs.iter_mut().map(Tensor::view_mut).collect();
    let (fused, into) = median_pair(
        calls,
        &mut || drop(black_box(exe.run(&inputs).expect("runs"))),
        &mut || exe.run_into(&inputs, &mut views).expect("runs"),
    );
    println!("{name} {size} executable {fused:.4}");
    println!("{name} {size} executable_into {into:.4}");
    (inputs, outs)
}

fn main() {
    let modules = std::env::args().nth(1);
    let mut texts = Vec::new();
    for (m, n, calls) in [(512usize, 512usize, 41), (4096, 4096, 7)] {
        let size = format!("{m}x{n}");
        let s = ((m * n / 64) as f64).sqrt() as usize;
        let cases: Vec<(&str, Program, Vec<Vec<usize>>)> = vec![
            (
                "bias_relu",
                workloads::bias_relu(m, n),
                vec![vec![m, n], vec![n]],
            ),
            (
                "transposed_add_relu",
                workloads::transposed_add_relu(m, n),
                vec![vec![n, m], vec![m, n]],
            ),
            (
                "layer_norm",
                workloads::layer_norm(m, n),
                vec![vec![m, n], vec![n], vec![n]],
            ),
            (
                "softmax_last",
                workloads::softmax(m, n, 1),
                vec![vec![m, n]],
            ),
            (
                "softmax_first",
                workloads::softmax(m, n, 0),
                vec![vec![m, n]],
            ),
            ("gelu", workloads::gelu(m, n), vec![vec![m, n]]),
            (
                "attention",
                workloads::attention(4, 16, s),
                vec![vec![4, 16, s, s], vec![s, s]],
            ),
            (
                "dense_backward",
                workloads::dense_backward(m, n),
                vec![vec![m, n], vec![m, n]],
            ),
        ];
        let mut floors: Vec<(&str, f64)> = Vec::new();
        for (name, p, shapes) in cases {
            let (inputs, outs) = executable(name, &size, &p, &shapes, calls);
            zip_and_rows(name, &size, &inputs, &outs, calls);
            let op_by_op = median(calls, &mut || {
                drop(black_box(p.run(&inputs).expect("runs")))
            });
            let bytes = |t: &Tensor| t.shape().iter().product::<usize>() * 4;
            floors.push((
                name,
                (inputs.iter().chain(&outs).map(bytes).sum::<usize>()) as f64,
            ));
            println!("{name} {size} op_by_op {op_by_op:.4}");
            texts.push(serde_json::json!({
                "name": name, "size": size, "module": p.to_stablehlo(), "shapes": shapes,
            }));
        }
        // The one-pass floor: a parallel copy of an m x n array (read once, written once),
        // scaled for each workload to its inputs and outputs moved once.
        let x = Array2::from_shape_fn((m, n), |(i, j)| ((i * n + j) % 2000) as f32 * 0.004 - 4.0);
        let mut copy = Array2::<f32>::zeros((m, n));
        let pass = median(calls, &mut || {
            Zip::from(&mut copy).and(&x).par_for_each(|o, &v| *o = v);
        });
        for (name, moved) in &floors {
            // `moved`: the bytes of every input and output, over a copy's (one read, one write).
            println!(
                "{name} {size} floor {:.4}",
                pass * moved / (2 * m * n * 4) as f64
            );
        }
        // ndarray, where its operators and `Zip` say the workload directly.
        let b = Array1::from_shape_fn(n, |j| (j % 7) as f32 * 0.1);
        let ops = median(calls, &mut || {
            drop(black_box((&x + &b).mapv(|v| v.max(0.0))))
        });
        let mut out = Array2::<f32>::zeros((m, n));
        let zip = median(calls, &mut || {
            Zip::from(out.rows_mut())
                .and(x.rows())
                .par_for_each(|mut o, r| {
                    Zip::from(&mut o)
                        .and(&r)
                        .and(&b)
                        .for_each(|o, &v, &c| *o = (v + c).max(0.0));
                })
        });
        println!("bias_relu {size} ndarray_ops {ops:.4}");
        println!("bias_relu {size} ndarray_zip_into {zip:.4}");
        let ops = median(calls, &mut || {
            let mx = x.map_axis(Axis(1), |r| r.fold(f32::NEG_INFINITY, |a, &v| a.max(v)));
            let e = (&x - &mx.insert_axis(Axis(1))).mapv(f32::exp);
            let s = e.sum_axis(Axis(1));
            drop(black_box(&e / &s.insert_axis(Axis(1))));
        });
        println!("softmax_last {size} ndarray_ops {ops:.4}");
        // A one-op program (`x + b`, `b` a row) against the same op called directly.
        let mut p = Program::new("one_op");
        let (px, pb) = (p.parameter::<f32>(&[m, n]), p.parameter::<f32>(&[n]));
        let sum = p.add(px, pb, &[1]).expect("a row broadcast");
        p.output(sum).expect("its own value");
        let exe = p.compile().expect("compiles");
        let inputs = [
            Tensor::from(x.clone().into_dyn()),
            Tensor::from(b.clone().into_dyn()),
        ];
        let mut outs = exe.run(&inputs).expect("runs");
        let mut views: Vec<_> = outs.iter_mut().map(Tensor::view_mut).collect();
        let (program, program_into) = median_pair(
            calls,
            &mut || drop(black_box(exe.run(&inputs).expect("runs"))),
            &mut || exe.run_into(&inputs, &mut views).expect("runs"),
        );
        let direct = median(calls, &mut || {
            drop(black_box(x.add_bcast(&b, &[1]).expect("a row")))
        });
        let direct_into = median(calls, &mut || {
            x.add_bcast_into(&b, &[1], &mut out).expect("a row")
        });
        println!("one_op {size} executable {program:.4}");
        println!("one_op {size} executable_into {program_into:.4}");
        println!("one_op {size} direct {direct:.4}");
        println!("one_op {size} direct_into {direct_into:.4}");
    }
    // Real models' shapes: normalisation and softmax over the last dim of 3-D and 2-D
    // activations.
    for shape in [vec![8usize, 512, 1024], vec![4096, 1024]] {
        let size = shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("x");
        let n = *shape.last().expect("rank 1 or more");
        let elements: usize = shape.iter().product();
        let calls = 11;
        let cases = [
            (
                "layer_norm",
                workloads::layer_norm_of(&shape),
                vec![shape.clone(), vec![n], vec![n]],
            ),
            (
                "softmax_last",
                workloads::softmax_last_of(&shape),
                vec![shape.clone()],
            ),
        ];
        for (name, p, shapes) in cases {
            let (inputs, outs) = executable(name, &size, &p, &shapes, calls);
            zip_and_rows(name, &size, &inputs, &outs, calls);
            texts.push(serde_json::json!({
                "name": name, "size": size, "module": p.to_stablehlo(), "shapes": shapes,
            }));
            if name == "layer_norm" {
                let array = |t: &Tensor| t.view::<f32>().expect("f32").to_owned();
                let (x, g, b) = (array(&inputs[0]), array(&inputs[1]), array(&inputs[2]));
                let (g, b) = (
                    g.into_dimensionality().expect("a row"),
                    b.into_dimensionality().expect("a row"),
                );
                let y = layer_norm_eager(x.clone(), &g, &b);
                let compiled = outs[0].view::<f32>().expect("f32");
                let worst = (&y - &compiled).fold(0f32, |m, d| m.max(d.abs()));
                assert!(worst < 1e-4, "the eager layer norm is off by {worst}");
                let eager = median_on(calls, &mut || x.clone(), &mut |x| {
                    drop(black_box(layer_norm_eager(x, &g, &b)))
                });
                println!("layer_norm {size} eager_in_dims {eager:.4}");
            }
        }
        let x = ndarray::Array1::from_shape_fn(elements, |i| (i % 2000) as f32 * 0.004 - 4.0);
        let mut copy = ndarray::Array1::<f32>::zeros(elements);
        let pass = median(calls, &mut || {
            Zip::from(&mut copy).and(&x).par_for_each(|o, &v| *o = v);
        });
        println!("layer_norm {size} floor {pass:.4}");
        println!("softmax_last {size} floor {pass:.4}");
    }
    // A real model's batch norm: the statistics of an `NHWC` activation over `(N, H, W)`.
    let shape = vec![32usize, 56, 56, 64];
    let (name, size, calls) = ("batch_norm", "32x56x56x64", 11);
    let p = workloads::batch_norm_of(&shape);
    let shapes = vec![shape.clone(), vec![64], vec![64]];
    let (inputs, outs) = executable(name, size, &p, &shapes, calls);
    let op_by_op = median(calls, &mut || {
        drop(black_box(p.run(&inputs).expect("runs")))
    });
    println!("{name} {size} op_by_op {op_by_op:.4}");
    zip_and_rows(name, size, &inputs, &outs, calls);
    texts.push(serde_json::json!({
        "name": name, "size": size, "module": p.to_stablehlo(), "shapes": shapes,
    }));
    let elements: usize = shape.iter().product();
    let x = ndarray::Array1::from_shape_fn(elements, |i| (i % 2000) as f32 * 0.004 - 4.0);
    let mut copy = ndarray::Array1::<f32>::zeros(elements);
    let pass = median(calls, &mut || {
        Zip::from(&mut copy).and(&x).par_for_each(|o, &v| *o = v);
    });
    println!("{name} {size} floor {pass:.4}");
    drop((inputs, outs));
    if let Some(path) = modules {
        std::fs::write(&path, serde_json::to_string(&texts).expect("json")).expect("writable");
    }
}
