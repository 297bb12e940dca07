//! `Program::compile`: fused executables give `Program::run`'s results bit for bit, on the
//! workloads of real models and on random programs, allocating or into the caller's arrays;
//! bad inputs and outputs are errors.

mod common;

use common::workloads::{
    attention, batch_norm_of, bias_relu, dense_backward, gelu, layer_norm, layer_norm_of,
    norm_over, softmax, softmax_last_of, transposed_add_relu,
};
use common::{bits, Rng};
use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use xla_bcast::stablehlo::{Executable, Program, Tensor, Value};
use xla_bcast::BroadcastError;

/// An `f32` tensor of `shape`, in F order when `fortran` (the engine reads any layout).
fn tensor(rng: &mut Rng, shape: &[usize], fortran: bool) -> Tensor {
    let n = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
    let a = match fortran {
        false => ArrayD::from_shape_vec(IxDyn(shape), values).unwrap(),
        true => ArrayD::from_shape_vec(IxDyn(shape).f(), values).unwrap(),
    };
    Tensor::from(a)
}

/// `p` compiled gives `run`'s results, allocating and into fresh outputs of any layout.
fn check(name: &str, p: &Program, inputs: &[Tensor]) -> Executable {
    let want = p.run(inputs).unwrap();
    let exe = p.compile().unwrap();
    let got = exe.run(inputs).unwrap();
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.shape(), w.shape(), "{name}: output {k}");
        assert!(bits(g) == bits(w), "{name}: output {k} differs");
    }
    // Into the caller's arrays, in F order where they have two dims or more.
    let mut outs: Vec<Tensor> = want
        .iter()
        .map(|w| match w {
            Tensor::F32(a) => Tensor::from(ArrayD::<f32>::zeros(IxDyn(a.shape()).f())),
            Tensor::I32(a) => Tensor::from(ArrayD::<i32>::zeros(IxDyn(a.shape()).f())),
            Tensor::Pred(a) => Tensor::from(ArrayD::<bool>::from_elem(IxDyn(a.shape()).f(), false)),
            other => other.clone(),
        })
        .collect();
    exe.run_into(
        inputs,
        &mut outs.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
    )
    .unwrap();
    for (k, (g, w)) in outs.iter().zip(&want).enumerate() {
        assert!(
            bits(g) == bits(w),
            "{name}: output {k} into the caller's array differs"
        );
    }
    exe
}

#[test]
fn workloads_match_run_bit_for_bit() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (m, n) in [(3, 5), (64, 300), (129, 1000)] {
        for fortran in [false, true] {
            let x = tensor(&mut rng, &[m, n], fortran);
            let row = tensor(&mut rng, &[n], false);
            let row2 = tensor(&mut rng, &[n], false);
            check("bias_relu", &bias_relu(m, n), &[x.clone(), row.clone()]);
            let (xt, r) = (
                tensor(&mut rng, &[n, m], fortran),
                tensor(&mut rng, &[m, n], false),
            );
            check("transposed_add_relu", &transposed_add_relu(m, n), &[xt, r]);
            check("layer_norm", &layer_norm(m, n), &[x.clone(), row, row2]);
            check("softmax 1", &softmax(m, n, 1), std::slice::from_ref(&x));
            check("softmax 0", &softmax(m, n, 0), std::slice::from_ref(&x));
            check("gelu", &gelu(m, n), std::slice::from_ref(&x));
            let z = tensor(&mut rng, &[m, n], !fortran);
            check("dense_backward", &dense_backward(m, n), &[x, z]);
        }
    }
    let x = tensor(&mut rng, &[2, 3, 17, 17], false);
    let mask = tensor(&mut rng, &[17, 17], true);
    check("attention", &attention(2, 3, 17), &[x, mask]);
    let (g, b) = (tensor(&mut rng, &[8], false), tensor(&mut rng, &[8], false));
    let x = tensor(&mut rng, &[4, 5, 6, 8], false);
    check("batch_norm", &batch_norm_of(&[4, 5, 6, 8]), &[x, g, b]);
}

/// `convert` between every pair of the default element types, compiled (in loops with the
/// other conversions) gives `run`'s bits.
#[test]
fn converts_match_run() {
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let x = tensor(&mut rng, &[5, 7], false);
    let mut p = Program::new("converts");
    let px = p.parameter::<f32>(&[5, 7]);
    let scale = p.constant(3.0e4f32);
    let wide = p.mul(px, scale, &[]).unwrap(); // values that overflow the narrow integers
    macro_rules! chains {
        ($($t:ty),*) => {{
            let mut outs = Vec::new();
            $(
                let first = p.convert::<$t>(wide).unwrap();
                outs.push(p.convert::<f64>(first).unwrap());
                chains!(@ outs, first; bool, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
            )*
            outs
        }};
        (@ $outs:ident, $first:ident; $($u:ty),*) => {$(
            let second = p.convert::<$u>($first).unwrap();
            $outs.push(p.convert::<f64>(second).unwrap());
        )*};
    }
    let outs: Vec<Value> = chains!(bool, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
    for v in outs {
        p.output(v).unwrap();
    }
    check("converts", &p, &[x]);
}

/// An executable keeps its large intermediates between runs and writes over them: each run
/// gives `run`'s results for its own inputs, whatever the runs before it read, in either
/// layout, allocating or into the caller's arrays, and a clone gives the same.
#[test]
fn kept_intermediates_are_written_over() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (m, n) = (64, 600); // 150 KiB intermediates: kept
    for p in [softmax(m, n, 1), softmax(m, n, 0), layer_norm(m, n)] {
        let exe = p.compile().unwrap();
        let rows = [tensor(&mut rng, &[n], false), tensor(&mut rng, &[n], false)];
        for fortran in [false, true, true, false] {
            let x = tensor(&mut rng, &[m, n], fortran);
            let inputs: Vec<Tensor> = match p.parameters().len() {
                1 => vec![x],
                _ => vec![x, rows[0].clone(), rows[1].clone()],
            };
            let want = p.run(&inputs).unwrap();
            for exe in [&exe, &exe.clone()] {
                let got = exe.run(&inputs).unwrap();
                assert!(
                    bits(&got[0]) == bits(&want[0]),
                    "allocating, F order: {fortran}"
                );
                let mut out = [Tensor::from(ArrayD::<f32>::zeros(IxDyn(&[m, n])))];
                exe.run_into(
                    &inputs,
                    &mut out.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
                )
                .unwrap();
                assert!(bits(&out[0]) == bits(&want[0]), "into, F order: {fortran}");
            }
        }
        // Its debug form counts what it keeps, without printing the elements.
        let text = format!("{exe:?}");
        assert!(
            text.contains("arrays kept") && text.len() < 20_000,
            "{}",
            text.len()
        );
    }
}

/// A chain of elementwise ops over one shape is one fused loop: no intermediate of that shape
/// is materialised (checked through the results only: the same bits), and reductions split it.
#[test]
fn random_programs_match_run() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for round in 0..200 {
        let rank = 1 + rng.below(3);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(40)).collect();
        let mut p = Program::new("random");
        let x = p.parameter::<f32>(&shape);
        let fortran = rng.below(2) == 0;
        let mut inputs = vec![tensor(&mut rng, &shape, fortran)];
        // Values of the full shape, to pick operands from.
        let mut full: Vec<Value> = vec![x];
        for _ in 0..1 + rng.below(8) {
            let a = full[rng.below(full.len())];
            let v = match rng.below(10) {
                0 => p.exp(a).unwrap(),
                1 => p.tanh(a).unwrap(),
                2 => {
                    let b = full[rng.below(full.len())];
                    p.mul(a, b, &[]).unwrap()
                }
                3 => {
                    // A lower-rank parameter broadcast along the last dim.
                    let last = *shape.last().unwrap();
                    let b = p.parameter::<f32>(&[last]);
                    inputs.push(tensor(&mut rng, &[last], false));
                    p.sub(a, b, &[shape.len() - 1]).unwrap()
                }
                4 => {
                    // A reduction, broadcast back.
                    let axis = rng.below(shape.len());
                    let r = p.reduce_max(a, &[axis]).unwrap();
                    let dims: Vec<usize> = (0..shape.len()).filter(|&d| d != axis).collect();
                    p.add(a, r, &dims).unwrap()
                }
                5 => {
                    let c = p.constant(rng.f32());
                    p.div(a, c, &[]).unwrap()
                }
                6 => {
                    let b = full[rng.below(full.len())];
                    let pos = p.lt(a, b, &[]).unwrap();
                    p.select(pos, a, b).unwrap()
                }
                7 => {
                    let i = p.convert::<i32>(a).unwrap();
                    p.convert::<f32>(i).unwrap()
                }
                8 => {
                    // A lower-rank parameter or a scalar made full by `broadcast_in_dim`, which
                    // later ops may read too, and an output may be.
                    let last = *shape.last().unwrap();
                    let b = match rng.below(2) {
                        0 => {
                            let b = p.parameter::<f32>(&[last]);
                            inputs.push(tensor(&mut rng, &[last], false));
                            p.broadcast_in_dim(b, &shape, &[shape.len() - 1]).unwrap()
                        }
                        _ => {
                            let c = p.constant(rng.f32());
                            p.broadcast_in_dim(c, &shape, &[]).unwrap()
                        }
                    };
                    full.push(b);
                    p.mul(a, b, &[]).unwrap()
                }
                _ => {
                    let lo = p.constant(-1.0f32);
                    let hi = p.constant(1.0f32);
                    p.clamp(lo, a, hi).unwrap()
                }
            };
            full.push(v);
        }
        // One or two outputs, one of them possibly an intermediate.
        p.output(*full.last().unwrap()).unwrap();
        if rng.below(2) == 0 {
            p.output(full[rng.below(full.len())]).unwrap();
        }
        check(&format!("random {round}"), &p, &inputs);
    }
}

/// A `bool` intermediate whose buffer an `f32` intermediate had used before it: the chain
/// `y = x / c; m = max of y (over the rows, or along them); s = y + m; select(y < s, y, s)`,
/// where the compare writes its rows in one call and the select, reading an input or writing an
/// output whose rows are not one after another, goes row by row. Folded over the rows (node by
/// node) and along them (a row chain, over a view with padded rows); `run`'s bits.
#[test]
fn bool_intermediates_keep_their_rows() {
    let program = |(m, n): (usize, usize), along: usize, read_x: bool| {
        let mut p = Program::new("mask");
        let x = p.parameter::<f32>(&[m, n]);
        let c = p.constant(2.4715f32);
        let cb = p.broadcast_in_dim(c, &[m, n], &[]).unwrap();
        let y = p.div(x, cb, &[]).unwrap();
        let mx = p.reduce_max(y, &[along]).unwrap();
        let mb = p.broadcast_in_dim(mx, &[m, n], &[1 - along]).unwrap();
        let s = p.add(y, mb, &[]).unwrap();
        let pred = p.lt(y, s, &[]).unwrap();
        let out = match read_x {
            true => p.select(pred, x, s).unwrap(),
            false => p.select(pred, y, s).unwrap(),
        };
        p.output(out).unwrap();
        p
    };
    let values = |m: usize, n: usize| {
        let v: Vec<f32> = (0..m * n)
            .map(|i| ((i * 37) % 23) as f32 * 0.3 - 3.0)
            .collect();
        ArrayD::from_shape_vec(IxDyn(&[m, n]), v).unwrap()
    };
    // Over the rows.
    for shape in [(64, 64), (7, 29), (2, 29)] {
        let p = program(shape, 0, false);
        check(
            &format!("mask {shape:?}"),
            &p,
            &[Tensor::from(values(shape.0, shape.1))],
        );
    }
    // Along the rows, over a view whose rows are 3 elements apart from one another.
    let padded = values(40, 67);
    let x = padded.slice(ndarray::s![.., ..64]).into_dyn();
    let p = program((40, 64), 1, true);
    let inputs = [x.clone().into()];
    let want = p.run_views(&inputs).unwrap();
    let got = p.compile().unwrap().run_views(&inputs).unwrap();
    assert!(bits(&got[0]) == bits(&want[0]), "mask along padded rows");
}

/// `exe`, `p` compiled, run into `f32` outputs whose first is every other element of rows
/// twice as long (written along a stride) and the others fresh, gives `run`'s bits.
fn check_into_spaced(name: &str, p: &Program, exe: &Executable, inputs: &[Tensor]) {
    let want = p.run(inputs).unwrap();
    let (m, n) = (want[0].shape()[0], want[0].shape()[1]);
    let mut spaced = ArrayD::<f32>::zeros(IxDyn(&[m, 2 * n]));
    spaced.slice_collapse(ndarray::s![.., ..;2]);
    let mut outs = vec![Tensor::from(spaced)];
    for w in &want[1..] {
        outs.push(Tensor::from(ArrayD::<f32>::zeros(IxDyn(w.shape()))));
    }
    exe.run_into(
        inputs,
        &mut outs.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
    )
    .unwrap();
    for (k, (g, w)) in outs.iter().zip(&want).enumerate() {
        assert!(bits(g) == bits(w), "{name}, into spaced rows: output {k}");
    }
}

/// Chains without folds over rows longer than half a chunk run a chunk of one row at a time: a row
/// vector read in place, a column vector and a strided view gathered, outputs of either order.
#[test]
fn chains_over_long_rows_match_run() {
    let program = |m: usize, n: usize| {
        let mut p = Program::new("long_rows");
        let x = p.parameter::<f32>(&[m, n]);
        let b = p.parameter::<f32>(&[n]);
        let c = p.parameter::<f32>(&[m]);
        let s = p.add(x, b, &[1]).unwrap();
        let zero = p.constant(0.0f32);
        let r = p.max(s, zero, &[]).unwrap();
        let y = p.mul(r, c, &[0]).unwrap();
        p.output(y).unwrap();
        p.output(s).unwrap();
        p
    };
    let mut rng = Rng(0x1d3a_55e7);
    for (m, n) in [(3, 2500), (2, 1030), (5, 2055), (1, 4100)] {
        let p = program(m, n);
        for fortran in [false, true] {
            let inputs = [
                tensor(&mut rng, &[m, n], fortran),
                tensor(&mut rng, &[n], false),
                tensor(&mut rng, &[m], false),
            ];
            let name = format!("long rows {m}x{n}, F {fortran}");
            let exe = check(&name, &p, &inputs);
            check_into_spaced(&name, &p, &exe, &inputs);
        }
        // `x` every other column of a wider array.
        let wide = tensor(&mut rng, &[m, 2 * n], false);
        let (b, c) = (tensor(&mut rng, &[n], false), tensor(&mut rng, &[m], false));
        let Tensor::F32(wide) = wide else {
            unreachable!()
        };
        let x = wide.slice(ndarray::s![.., ..;2]).into_dyn();
        let (b, c) = (b.view::<f32>().unwrap(), c.view::<f32>().unwrap());
        let inputs = [x.into(), b.into(), c.into()];
        let want = p.run_views(&inputs).unwrap();
        let got = p.compile().unwrap().run_views(&inputs).unwrap();
        for k in 0..2 {
            assert!(
                bits(&got[k]) == bits(&want[k]),
                "long rows {m}x{n} over a strided view"
            );
        }
    }
}

/// Chains with folds over rows of more than half a chunk whose inputs come from memory (4 MiB
/// or more) run a row at a time: a normalisation with a scale and shift per row (gathered) and
/// its statistics as outputs (copied out), its input in either order (F order: gathered along
/// its stride); a layer norm of rank 3 (each row's place carried over two outer dims, a row
/// vector read in place); a softmax of the input shifted by a value per row; outputs into
/// arrays of either order and into spaced rows.
#[test]
fn fold_chains_over_long_rows_match_run() {
    let mut rng = Rng(0x5eed_f01d);
    let (m, n) = (520, 1030);
    let p = norm_over(&[m, n], &[1], true);
    for fortran in [false, true] {
        let inputs = [
            tensor(&mut rng, &[m, n], fortran),
            tensor(&mut rng, &[m], false),
            tensor(&mut rng, &[m], false),
        ];
        let name = format!("norm over rows {m}x{n}, F {fortran}");
        let exe = check(&name, &p, &inputs);
        check_into_spaced(&name, &p, &exe, &inputs);
    }
    let shape = [2, 260, n];
    let inputs = [
        tensor(&mut rng, &shape, false),
        tensor(&mut rng, &[n], false),
        tensor(&mut rng, &[n], false),
    ];
    check("layer norm of rank 3", &layer_norm_of(&shape), &inputs);
    let mut p = Program::new("shifted_softmax");
    let x = p.parameter::<f32>(&[m, n]);
    let c = p.parameter::<f32>(&[m]);
    let s = p.add(x, c, &[0]).unwrap();
    let top = p.reduce_max(s, &[1]).unwrap();
    let d = p.sub(s, top, &[0]).unwrap();
    let e = p.exp(d).unwrap();
    let sum = p.reduce_sum(e, &[1]).unwrap();
    let y = p.div(e, sum, &[0]).unwrap();
    p.output(y).unwrap();
    let inputs = [
        tensor(&mut rng, &[m, n], false),
        tensor(&mut rng, &[m], false),
    ];
    check("softmax shifted by a value per row", &p, &inputs);
}

#[test]
fn bad_inputs_and_outputs_are_errors() {
    let p = bias_relu(2, 3);
    let exe = p.compile().unwrap();
    let mut rng = Rng(7);
    let x = tensor(&mut rng, &[2, 3], false);
    let b = tensor(&mut rng, &[3], false);
    // Each error names the argument, what it must be and what was given.
    let message = |r: Result<(), BroadcastError>| r.unwrap_err().to_string();
    let err = exe.run(std::slice::from_ref(&x)).unwrap_err();
    assert!(
        matches!(err, BroadcastError::ArgumentCount { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "run: program \"bias_relu\" takes 2 inputs, but 1 were given"
    );
    assert_eq!(
        message(exe.run(&[x.clone(), x.clone()]).map(drop)),
        "run: input 1 of program \"bias_relu\" has shape [2, 3] but must have shape [3]"
    );
    let ints = Tensor::from(ArrayD::<i32>::zeros(IxDyn(&[3])));
    let err = exe.run(&[x.clone(), ints.clone()]).unwrap_err();
    assert!(matches!(err, BroadcastError::ElementType { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "run: element types i32: input 1 of program \"bias_relu\" is i32, but must be f32"
    );
    let mut none: Vec<Tensor> = vec![];
    assert_eq!(
        message(exe.run_into(
            &[x.clone(), b.clone()],
            &mut none.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>()
        )),
        "run_into: program \"bias_relu\" takes 1 outputs, but 0 were given"
    );
    let mut wrong_shape = [Tensor::from(ArrayD::<f32>::zeros(IxDyn(&[3, 2])))];
    let err = exe
        .run_into(
            &[x.clone(), b.clone()],
            &mut wrong_shape
                .iter_mut()
                .map(Tensor::view_mut)
                .collect::<Vec<_>>(),
        )
        .unwrap_err();
    assert!(
        matches!(err, BroadcastError::ArgumentShape { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "run_into: output 0 of program \"bias_relu\" has shape [3, 2] but must have shape [2, 3]"
    );
    let mut wrong_type = [Tensor::from(ArrayD::<i32>::zeros(IxDyn(&[2, 3])))];
    assert_eq!(
        message(
            exe.run_into(
                &[x.clone(), b.clone()],
                &mut wrong_type
                    .iter_mut()
                    .map(Tensor::view_mut)
                    .collect::<Vec<_>>()
            )
        ),
        "run_into: element types i32: output 0 of program \"bias_relu\" is i32, but must be f32"
    );
    // The program's own run says the same, by its own name.
    assert_eq!(
        message(p.run(std::slice::from_ref(&x)).map(drop)),
        "run: program \"bias_relu\" takes 2 inputs, but 1 were given"
    );
    let transposed = Tensor::from(ArrayD::<f32>::zeros(IxDyn(&[3, 2])));
    assert_eq!(
        message(p.run(&[transposed, b]).map(drop)),
        "run: input 0 of program \"bias_relu\" has shape [3, 2] but must have shape [2, 3]"
    );
    let empty = Program::new("empty");
    assert!(matches!(
        empty.compile(),
        Err(BroadcastError::ElementType { .. })
    ));
}

#[test]
fn programs_and_executables_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Program>();
    both::<Executable>();
}

/// A long chain whose ops each read new inputs (clamps between fresh constants, selects on
/// fresh parameters) spans more fused loops than one: each loop's operands stay bounded.
#[test]
fn long_chains_of_wide_ops_split_into_loops() {
    let mut rng = Rng(11);
    let mut p = Program::new("clamps");
    let x = p.parameter::<f32>(&[9, 70]);
    let mut inputs = vec![tensor(&mut rng, &[9, 70], false)];
    let mut v = x;
    for k in 0..24 {
        v = match k % 2 {
            0 => {
                let lo = p.constant(-3.0f32 + k as f32 * 0.01);
                let hi = p.constant(3.0f32 - k as f32 * 0.01);
                p.clamp(lo, v, hi).unwrap()
            }
            _ => {
                let c = p.parameter::<bool>(&[9, 70]);
                let values: Vec<bool> = (0..9 * 70).map(|_| rng.below(2) == 0).collect();
                inputs.push(Tensor::from(
                    ArrayD::from_shape_vec(IxDyn(&[9, 70]), values).unwrap(),
                ));
                let w = p.parameter::<f32>(&[9, 70]);
                inputs.push(tensor(&mut rng, &[9, 70], true));
                p.select(c, v, w).unwrap()
            }
        };
    }
    p.output(v).unwrap();
    check("long chain", &p, &inputs);
}

/// A compiled chain of rank 33 (past any fixed-size table of dims) gives `run`'s results.
#[test]
fn high_rank_chains_compile() {
    let mut rng = Rng(33);
    let mut shape = vec![1usize; 33];
    shape[0] = 3;
    shape[32] = 2;
    let mut p = Program::new("rank33");
    let x = p.parameter::<f32>(&shape);
    let y = p.parameter::<f32>(&shape);
    let e = p.exp(x).unwrap();
    let s = p.add(e, y, &[]).unwrap();
    let t = p.tanh(s).unwrap();
    p.output(t).unwrap();
    let inputs = [
        tensor(&mut rng, &shape, false),
        tensor(&mut rng, &shape, true),
    ];
    check("rank33", &p, &inputs);
}

/// Integers: the max over `axis` of an `(m, n)` array subtracted back, and the max plus one
/// kept; checked against `run`.
fn int_max_subtracted(rng: &mut Rng, (m, n): (usize, usize), axis: usize) -> Executable {
    let mut p = Program::new("int_max");
    let x = p.parameter::<i32>(&[m, n]);
    let mx = p.reduce_max(x, &[axis]).unwrap();
    let d = p.sub(x, mx, &[1 - axis]).unwrap();
    let one = p.constant(1i32);
    let mx1 = p.add(mx, one, &[]).unwrap();
    p.output(d).unwrap();
    p.output(mx1).unwrap();
    let values: Vec<i32> = (0..m * n).map(|_| rng.below(1000) as i32 - 500).collect();
    let xi = Tensor::from(ArrayD::from_shape_vec(IxDyn(&[m, n]), values).unwrap());
    check(&format!("int max over {axis}"), &p, &[xi])
}

/// Reductions over the last dim run with the nodes around them a tile of rows at a time, and
/// give `run`'s bits: rows shorter and longer than a fold's lanes, one row, rank 1 to 3, tiles
/// split over threads, per-row outputs, integers; in F order (a reduction that would read
/// strided rows) node by node.
#[test]
fn row_chains_match_run() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for shape in [
        &[1usize, 1][..],
        &[1, 7],
        &[5, 1],
        &[3, 5],
        &[4, 33],
        &[7],
        &[300],
        &[2, 3, 17],
        &[8, 16, 40],
        &[256, 1024],
    ] {
        let rank = shape.len();
        let p = norm_over(shape, &[rank - 1], true);
        let (g, b) = (
            tensor(&mut rng, &shape[..rank - 1], false),
            tensor(&mut rng, &shape[..rank - 1], false),
        );
        let x = tensor(&mut rng, shape, false);
        let exe = check(&format!("norm {shape:?}"), &p, &[x, g.clone(), b.clone()]);
        assert!(
            format!("{exe:?}").contains("Rows"),
            "{shape:?}: no row chain"
        );
        if rank > 1 {
            let xf = tensor(&mut rng, shape, true);
            check(&format!("norm F {shape:?}"), &p, &[xf, g, b]);
        }
    }
    let exe = int_max_subtracted(&mut rng, (9, 70), 1);
    assert!(format!("{exe:?}").contains("Rows"));
    // A softmax over the last dim of the layer-norm output: two row chains' worth of
    // reductions in one.
    let mut p = layer_norm(6, 50);
    let y = *p.outputs().last().unwrap();
    let mx = p.reduce_max(y, &[1]).unwrap();
    let d = p.sub(y, mx, &[0]).unwrap();
    let e = p.exp(d).unwrap();
    let s = p.reduce_sum(e, &[1]).unwrap();
    let sm = p.div(e, s, &[0]).unwrap();
    p.output(sm).unwrap();
    let inputs = [
        tensor(&mut rng, &[6, 50], false),
        tensor(&mut rng, &[50], false),
        tensor(&mut rng, &[50], false),
    ];
    check("layer_norm softmax", &p, &inputs);
}

/// A row chain's `add`, `sub`, `mul` and `div` with a value per row on the right (each read
/// once per row) give `run`'s bits in every float type: rows of 300 in tiles, rows of 3 (many
/// to a tile), a transposed input (rows read one by one), and NaNs and infinities among the
/// values, so that some rows' maxima and sums are NaN or infinite.
#[test]
fn per_row_values_match_run_in_each_float_type() {
    use xla_bcast::stablehlo::StableHloElement;

    fn case<T>(from: fn(f64) -> T)
    where
        T: StableHloElement + Clone,
        Tensor: From<ArrayD<T>>,
    {
        for (m, n, transposed) in [(37, 300, false), (200, 3, false), (40, 90, true)] {
            let value = |i: usize| match i % 97 {
                5 => f64::NAN,
                11 => f64::INFINITY,
                23 => -0.0,
                _ => (i % 1000) as f64 * 0.0625 - 30.0,
            };
            let x = match transposed {
                false => ArrayD::from_shape_fn(IxDyn(&[m, n]), |i| from(value(i[0] * n + i[1]))),
                true => ArrayD::from_shape_fn(IxDyn(&[n, m]), |i| from(value(i[0] * m + i[1])))
                    .reversed_axes(),
            };
            let mut p = Program::new("per_row");
            let px = p.parameter::<T>(&[m, n]);
            let mx = p.reduce_max(px, &[1]).unwrap();
            let s = p.reduce_sum(px, &[1]).unwrap();
            let a = p.sub(px, mx, &[0]).unwrap();
            let b = p.mul(a, s, &[0]).unwrap();
            let c = p.add(b, mx, &[0]).unwrap();
            let d = p.div(c, s, &[0]).unwrap();
            p.output(d).unwrap();
            let name = format!(
                "{} ({m}, {n}), transposed: {transposed}",
                std::any::type_name::<T>()
            );
            let inputs = [Tensor::from(x)];
            let want = p.run(&inputs).unwrap();
            let exe = p.compile().unwrap();
            assert!(format!("{exe:?}").contains("Rows"), "{name}: no row chain");
            let got = exe.run(&inputs).unwrap();
            assert!(bits(&got[0]) == bits(&want[0]), "{name}: differs");
        }
    }
    case::<f32>(|v| v as f32);
    case::<f64>(|v| v);
    #[cfg(feature = "half")]
    case::<half::f16>(half::f16::from_f64);
    #[cfg(feature = "half")]
    case::<half::bf16>(half::bf16::from_f64);
}

/// Which NaN an op gives where an operand is NaN is defined once (the first NaN operand,
/// quieted, for every float op of two operands but `pow`), so a chain and `Program::run` agree
/// on its bits too, sign and payload. Random programs over NaNs of both signs and payloads,
/// operands broadcast or not, compared bit for bit (NaNs not folded together). Loops compiled
/// apart gave NaNs of either sign in optimized builds before (`cargo test --release`, as CI
/// runs this test too): the halves' on this machine, `f32`'s `+` on CI's.
#[test]
fn nan_results_have_the_same_bits_in_both_roads() {
    use xla_bcast::stablehlo::StableHloElement;

    fn case<T>(nans: [u64; 3], from: fn(f64) -> T, of_bits: fn(u64) -> T, bits: fn(&T) -> u64)
    where
        T: StableHloElement + Clone,
        Tensor: From<ArrayD<T>>,
    {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let tensor = |rng: &mut Rng, shape: &[usize]| {
            let n: usize = shape.iter().product();
            let values = (0..n).map(|_| match rng.below(6) {
                k @ 0..=2 => of_bits(nans[k]),
                _ => from((rng.below(200) as f64 - 100.0) / 8.0),
            });
            Tensor::from(ArrayD::from_shape_vec(IxDyn(shape), values.collect()).unwrap())
        };
        let name = std::any::type_name::<T>();
        for round in 0..60 {
            let rank = 1 + rng.below(3);
            let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(70)).collect();
            let last = [shape[rank - 1]];
            let mut p = Program::new("nans");
            let x = p.parameter::<T>(&shape);
            let mut inputs = vec![tensor(&mut rng, &shape)];
            let mut full = vec![x];
            for _ in 0..1 + rng.below(8) {
                let a = full[rng.below(full.len())];
                let b = match rng.below(2) {
                    0 => full[rng.below(full.len())],
                    _ => {
                        let row = p.parameter::<T>(&last);
                        inputs.push(tensor(&mut rng, &last));
                        p.broadcast_in_dim(row, &shape, &[rank - 1]).unwrap()
                    }
                };
                full.push(match rng.below(11) {
                    0 => p.max(a, b, &[]).unwrap(),
                    1 => p.min(b, a, &[]).unwrap(),
                    2 => p.clamp(b, a, b).unwrap(),
                    3 => p.atan2(a, b, &[]).unwrap(),
                    4 => p.rem(a, b, &[]).unwrap(),
                    5 => {
                        let axis = rng.below(rank);
                        let m = p.reduce_max(a, &[axis]).unwrap();
                        let dims: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
                        p.max(a, m, &dims).unwrap()
                    }
                    9 => {
                        // A sum's lanes add with one instruction, and fold a NaN lane again.
                        let axis = rng.below(rank);
                        let m = p.reduce_sum(a, &[axis]).unwrap();
                        let dims: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
                        p.add(a, m, &dims).unwrap()
                    }
                    6 => p.sub(a, b, &[]).unwrap(),
                    7 => p.mul(b, a, &[]).unwrap(),
                    8 => p.div(a, b, &[]).unwrap(),
                    _ => p.add(a, b, &[]).unwrap(),
                });
            }
            p.output(*full.last().unwrap()).unwrap();
            let want = p.run(&inputs).unwrap();
            let got = p.compile().unwrap().run(&inputs).unwrap();
            let (g, w) = (T::of(&got[0]).unwrap(), T::of(&want[0]).unwrap());
            let first = g.iter().zip(w).position(|(g, w)| bits(g) != bits(w));
            assert_eq!(first, None, "{name}, round {round}: {p:?}");
        }
    }
    let f32_nans = [0x7fc0_0000, 0xffc0_0000, 0x7fa0_0001];
    case::<f32>(
        f32_nans,
        |v| v as f32,
        |b| f32::from_bits(b as u32),
        |v| v.to_bits().into(),
    );
    let f64_nans = [0x7ff8 << 48, 0xfff8 << 48, 0x7ff4 << 48 | 1];
    case::<f64>(f64_nans, |v| v, f64::from_bits, |v| v.to_bits());
    #[cfg(feature = "half")]
    {
        use half::{bf16, f16};
        let f16_nans = [0x7e00, 0xfe00, 0x7d01];
        let f16_of = |b: u64| f16::from_bits(b as u16);
        case::<f16>(f16_nans, f16::from_f64, f16_of, |v| v.to_bits().into());
        let bf16_nans = [0x7fc0, 0xffc0, 0x7fa1];
        let bf16_of = |b: u64| bf16::from_bits(b as u16);
        case::<bf16>(bf16_nans, bf16::from_f64, bf16_of, |v| v.to_bits().into());
    }
}

/// Reductions over leading dims run node by node, as `Program::run` runs them, between the
/// chains of the nodes around them, and give `run`'s bits: one fold and several, rank 2 and 3,
/// one leading dim and two, folds small enough for one thread and large enough to fold in
/// blocks, per-column inputs and outputs, integers; an input in F order (a fold `run` makes in
/// another order) and a column of one element.
#[test]
fn leading_dim_reductions_match_run() {
    let mut rng = Rng(0x5eed_1ead_d1a5_0001);
    for (shape, k) in [
        (&[2usize, 3][..], 1),
        (&[5, 40], 1),
        (&[300, 17], 1),
        (&[3, 4, 33], 1),
        (&[4, 6, 50], 2),
        (&[512, 512], 1),
        (&[8, 64, 40], 2),
        (&[9000, 24], 1),
        (&[300, 40, 3], 2),
    ] {
        let folded: Vec<usize> = (0..k).collect();
        let p = norm_over(shape, &folded, true);
        let (g, b) = (
            tensor(&mut rng, &shape[k..], false),
            tensor(&mut rng, &shape[k..], false),
        );
        let x = tensor(&mut rng, shape, false);
        check(
            &format!("norm {shape:?}"),
            &p,
            &[x.clone(), g.clone(), b.clone()],
        );
        if shape.iter().product::<usize>() < 50_000 {
            let xf = tensor(&mut rng, shape, true);
            check(&format!("norm F {shape:?}"), &p, &[xf, g, b]);
        }
        if k == 1 && shape.len() == 2 {
            check("softmax 0", &softmax(shape[0], shape[1], 0), &[x]);
        }
    }
    let p = norm_over(&[40, 1], &[0], true);
    let inputs = [
        tensor(&mut rng, &[40, 1], false),
        tensor(&mut rng, &[1], false),
        tensor(&mut rng, &[1], false),
    ];
    check("norm of one column", &p, &inputs);
    int_max_subtracted(&mut rng, (70, 9), 0);
    // A column sum between a softmax's nodes leaves the nodes after it in the chain they
    // join without it: `x * 3` in the softmax's chain over the last dim.
    let mut p = softmax_last_of(&[64, 300]);
    let x = p.parameters()[0];
    let g = p.reduce_sum(x, &[0]).unwrap();
    let three = p.constant(3.0f32);
    let w = p.mul(x, three, &[]).unwrap();
    p.output(g).unwrap();
    p.output(w).unwrap();
    let exe = check(
        "softmax, column sums, x * 3",
        &p,
        &[tensor(&mut rng, &[64, 300], false)],
    );
    assert_eq!(
        format!("{exe:?}").matches("Rows(").count(),
        1,
        "x * 3 joins the softmax"
    );
}

/// A softmax over leading dims, `y = e / sum(e)` with `e = exp(x - max(x))` (or, `log`, the
/// log-softmax `y = (x - max) - log(sum(e))`); with `with_max`, the maximum is an output too.
fn softmax_over(shape: &[usize], k: usize, with_max: bool, log: bool) -> Program {
    let (lead, kept): (Vec<usize>, Vec<usize>) = ((0..k).collect(), (k..shape.len()).collect());
    let mut p = Program::new("softmax_over");
    let x = p.parameter::<f32>(shape);
    let mx = p.reduce_max(x, &lead).unwrap();
    let d = p.sub(x, mx, &kept).unwrap();
    let e = p.exp(d).unwrap();
    let s = p.reduce_sum(e, &lead).unwrap();
    let y = match log {
        false => p.div(e, s, &kept).unwrap(),
        true => {
            let l = p.log(s).unwrap();
            p.sub(d, l, &kept).unwrap()
        }
    };
    p.output(y).unwrap();
    if with_max {
        p.output(mx).unwrap();
    }
    p
}

/// A softmax over the first dim and over two leading dims, with the maximum as an output too,
/// and a log-softmax: `run`'s bits allocating, into the caller's arrays and into arrays whose
/// rows are spaced in memory.
#[test]
fn leading_dim_softmaxes_match_run() {
    let mut rng = Rng(0x5eed_0f5e_1170_0001);
    for (shape, k) in [(&[9000usize, 24][..], 1), (&[60, 150, 40], 2)] {
        for (with_max, log) in [(false, false), (true, false), (false, true)] {
            let name = format!("softmax over {k} dims of {shape:?}, max {with_max}, log {log}");
            let p = softmax_over(shape, k, with_max, log);
            let x = tensor(&mut rng, shape, false);
            let exe = check(&name, &p, std::slice::from_ref(&x));
            // Into rows 8 elements apart more than their length.
            let want = p.run(std::slice::from_ref(&x)).unwrap();
            let mut wide = shape.to_vec();
            *wide.last_mut().unwrap() += 8;
            let mut spaced = ArrayD::<f32>::zeros(IxDyn(&wide));
            spaced.slice_each_axis_inplace(|ax| match ax.axis.index() == shape.len() - 1 {
                true => ndarray::Slice::from(..shape[shape.len() - 1]),
                false => ndarray::Slice::from(..),
            });
            let mut outs = vec![Tensor::from(spaced)];
            for w in &want[1..] {
                outs.push(Tensor::from(ArrayD::<f32>::zeros(IxDyn(w.shape()))));
            }
            exe.run_into(
                std::slice::from_ref(&x),
                &mut outs.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
            )
            .unwrap();
            for (j, (g, w)) in outs.iter().zip(&want).enumerate() {
                assert!(bits(g) == bits(w), "{name}, into spaced rows: output {j}");
            }
        }
    }
}

/// An output that a later stage reads (the dense backward's `dz`, read by its bias-gradient
/// sum) is written into the caller's array when that array is laid out as `run` lays out the
/// value, and the later stage reads it there: `run`'s bits, in the caller's own allocation.
#[test]
fn outputs_read_later_are_written_in_place() {
    let mut rng = Rng(0x1234_5678_9abc_def0);
    for (m, n) in [(7, 9), (300, 200)] {
        let p = dense_backward(m, n);
        let inputs = [
            tensor(&mut rng, &[m, n], false),
            tensor(&mut rng, &[m, n], false),
        ];
        let want = p.run(&inputs).unwrap();
        let exe = p.compile().unwrap();
        let mut outs = [
            Tensor::from(ArrayD::<f32>::zeros(IxDyn(&[m, n]))),
            Tensor::from(ArrayD::<f32>::zeros(IxDyn(&[n]))),
        ];
        let ptr = |t: &Tensor| match t {
            Tensor::F32(a) => a.as_ptr(),
            other => panic!("not f32: {other:?}"),
        };
        let before = ptr(&outs[0]);
        for _ in 0..2 {
            exe.run_into(
                &inputs,
                &mut outs.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
            )
            .unwrap();
            assert_eq!(ptr(&outs[0]), before, "dz was not written in place");
            for (k, (g, w)) in outs.iter().zip(&want).enumerate() {
                assert!(bits(g) == bits(w), "({m}, {n}) output {k} differs");
            }
        }
    }
}

/// A row chain whose tile cannot be allocated (one row of 2^60 elements on 64-bit targets,
/// broadcast from a single one, so no input is that large) is an allocation error, as in
/// `Program::run`: never a panic or an abort.
#[test]
fn unallocatable_row_chains_are_errors() {
    let n = 1usize << (usize::BITS - 4);
    let mut p = Program::new("huge_rows");
    let x = p.parameter::<f32>(&[1]);
    let b = p.broadcast_in_dim(x, &[1, n], &[0]).unwrap();
    let s = p.reduce_sum(b, &[1]).unwrap();
    p.output(s).unwrap();
    let exe = p.compile().unwrap();
    assert!(format!("{exe:?}").contains("Rows"));
    let x = [Tensor::from(ArrayD::<f32>::ones(IxDyn(&[1])))];
    assert!(matches!(
        exe.run(&x),
        Err(BroadcastError::Allocation { .. })
    ));
    // `run` needs the broadcast row as an array: 2^62 bytes, refused on 64-bit targets (a
    // 32-bit one may find the 1 GiB it needs there).
    if usize::BITS == 64 {
        assert!(matches!(p.run(&x), Err(BroadcastError::Allocation { .. })));
    }
    // The same over columns: each column's sum subtracted back (2^63 bytes of result on
    // 64-bit targets).
    if usize::BITS < 64 {
        return;
    }
    let mut p = Program::new("huge_columns");
    let x = p.parameter::<f32>(&[1]);
    let b = p.broadcast_in_dim(x, &[2, n], &[0]).unwrap();
    let s = p.reduce_sum(b, &[0]).unwrap();
    let d = p.sub(b, s, &[1]).unwrap();
    p.output(d).unwrap();
    let exe = p.compile().unwrap();
    let x = [Tensor::from(ArrayD::<f32>::ones(IxDyn(&[1])))];
    assert!(matches!(
        exe.run(&x),
        Err(BroadcastError::Allocation { .. })
    ));
}

/// A chain whose tile sizes overflow `usize` in bytes (rows of `2^62 + 16` elements, and of
/// `2^62` exactly, whose product with the element size wraps to zero) is refused as
/// `Program::run` refuses it, never sized from a wrapped product.
#[cfg(target_pointer_width = "64")]
#[test]
fn chains_whose_sizes_overflow_are_errors() {
    for n in [(1usize << 62) + 16, 1 << 62] {
        let mut p = Program::new("overflowing_rows");
        let c = p.constant(1.0f32);
        let b = p.broadcast_in_dim(c, &[n], &[]).unwrap();
        let s = p.reduce_sum(b, &[0]).unwrap();
        p.output(s).unwrap();
        assert!(matches!(p.run(&[]), Err(BroadcastError::Allocation { .. })));
        let exe = p.compile().unwrap();
        assert!(
            matches!(exe.run(&[]), Err(BroadcastError::Allocation { .. })),
            "rows of {n}"
        );
    }
}

/// `(t + c) * c` for a `t` read across its rows (a transpose, whole or in part of a higher
/// rank, and a view read backwards along its rows), for elements of every size: compiled,
/// allocating and into the caller's arrays, and `Program::run`, against the elements' own
/// arithmetic.
#[test]
fn transposed_inputs_match_elementwise() {
    use ndarray::s;
    use xla_bcast::stablehlo::{StableHloElement, TensorView};
    use xla_bcast::XlaElement;

    fn case<T>(make: fn(u64) -> T)
    where
        T: StableHloElement + XlaElement,
        Tensor: From<ArrayD<T>>,
        for<'a> TensorView<'a>: From<ndarray::ArrayViewD<'a, T>>,
    {
        let name = std::any::type_name::<T>();
        let array = |shape: &[usize], salt: u64| {
            let n: usize = shape.iter().product();
            let v: Vec<T> = (0..n as u64).map(|i| make(i * 7919 + salt)).collect();
            ArrayD::from_shape_vec(IxDyn(shape), v).unwrap()
        };
        let run_all = |p: &Program, views: &[TensorView<'_>], want: &ArrayD<T>, what: &str| {
            let want = Tensor::from(want.clone());
            let exe = p.compile().unwrap();
            let got = exe.run_views(views).unwrap();
            assert!(got[0] == want, "{name} {what}: executable");
            let mut outs = [Tensor::from(ArrayD::from_elem(want.shape(), make(0)))];
            exe.run_views_into(
                views,
                &mut outs.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
            )
            .unwrap();
            assert!(outs[0] == want, "{name} {what}: executable into");
            assert!(p.run_views(views).unwrap()[0] == want, "{name} {what}: run");
        };
        // Out shape, the input's dims in it (the input's shape permuted).
        let cases: [(&[usize], &[usize]); 6] = [
            (&[3, 5], &[1, 0]),
            (&[37, 70], &[1, 0]),
            (&[64, 300], &[1, 0]),
            (&[9, 1030], &[1, 0]),
            (&[2, 9, 40], &[0, 2, 1]),
            (&[3, 40, 17], &[0, 2, 1]),
        ];
        for (shape, dims) in cases {
            let mut in_shape = vec![0; shape.len()];
            for (k, &d) in dims.iter().enumerate() {
                in_shape[k] = shape[d];
            }
            let (x, c) = (array(&in_shape, 1), array(shape, 2));
            let mut p = Program::new("across");
            let (px, pc) = (p.parameter::<T>(&in_shape), p.parameter::<T>(shape));
            let t = p.broadcast_in_dim(px, shape, dims).unwrap();
            let sum = p.add(t, pc, &[]).unwrap();
            let y = p.mul(sum, pc, &[]).unwrap();
            p.output(y).unwrap();
            let want = ArrayD::from_shape_fn(IxDyn(shape), |i| {
                let mut at = vec![0; shape.len()];
                for (k, &d) in dims.iter().enumerate() {
                    at[k] = i[d];
                }
                x[IxDyn(&at)].xla_add(c[&i]).xla_mul(c[&i])
            });
            let views = [TensorView::from(x.view()), TensorView::from(c.view())];
            run_all(&p, &views, &want, &format!("{shape:?} from {dims:?}"));
        }
        // A view read across its rows and backwards along them.
        let (m, n) = (33, 50);
        let (x, c) = (array(&[n, m], 3), array(&[m, n], 4));
        let view = x.t().slice_move(s![.., ..;-1]).into_dyn();
        let mut p = Program::new("backwards");
        let (px, pc) = (p.parameter::<T>(&[m, n]), p.parameter::<T>(&[m, n]));
        let sum = p.add(px, pc, &[]).unwrap();
        let y = p.mul(sum, pc, &[]).unwrap();
        p.output(y).unwrap();
        let want =
            ArrayD::from_shape_fn(IxDyn(&[m, n]), |i| view[&i].xla_add(c[&i]).xla_mul(c[&i]));
        let views = [TensorView::from(view.view()), TensorView::from(c.view())];
        run_all(&p, &views, &want, "backwards view");
    }
    case::<f32>(|i| (i % 1000) as f32 * 0.25 - 100.0);
    case::<f64>(|i| (i % 1000) as f64 * 0.125 - 60.0);
    case::<i8>(|i| i as i8);
    case::<u16>(|i| (i * 31) as u16);
    case::<i64>(|i| (i as i64).wrapping_mul(0x9e37_79b9));
    #[cfg(feature = "complex")]
    case::<num_complex::Complex<f32>>(|i| num_complex::Complex::new(i as f32 * 0.5, -(i as f32)));
}

/// `argmin`, `argmax`, `iota` and array constants in executables: `Program::run`'s results.
#[test]
fn arg_reductions_iotas_and_constants_match_run() {
    let mut rng = Rng(0x0bad_cafe_f00d_d00d);
    let mut p = Program::new("new ops");
    let x = p.parameter::<f32>(&[6, 50]);
    let c = p.constant_array(&ndarray::Array2::from_shape_fn((6, 50), |(i, j)| {
        (i * j % 7) as f32
    }));
    let y = p.sub(x, c, &[]).unwrap();
    let e = p.exp(y).unwrap();
    let i = p.argmax::<i32>(e, 1).unwrap();
    let j = p.argmin::<i32>(y, 0).unwrap();
    let cols = p.iota::<f32>(&[6, 50], 1).unwrap();
    let z = p.mul(e, cols, &[]).unwrap();
    for v in [i, j, z] {
        p.output(v).unwrap();
    }
    let mut input = tensor(&mut rng, &[6, 50], false);
    if let Tensor::F32(a) = &mut input {
        a[[2, 7]] = f32::NAN;
        a[[4, 0]] = a[[4, 1]]; // ties
    }
    let want = p.run(std::slice::from_ref(&input)).unwrap();
    let got = p
        .compile()
        .unwrap()
        .run(std::slice::from_ref(&input))
        .unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!(bits(g) == bits(w));
    }
    let idx: ndarray::Array1<i32> = want[0].clone().into_array().unwrap();
    assert_eq!(idx[2], 7, "the NaN is the maximum");
}

/// `run_into` and `run_views_into` write into the caller's own arrays and views of any
/// dimension type: a fixed-rank `Array4`, a transposed view, an output a later stage reads.
#[test]
fn outputs_go_into_the_callers_views() {
    use ndarray::{Array1, Array2, Array4};
    use xla_bcast::stablehlo::{TensorView, TensorViewMut};
    let mut rng = Rng(0x5eed_0001);
    let p = batch_norm_of(&[2, 3, 4, 5]);
    let inputs = [
        tensor(&mut rng, &[2, 3, 4, 5], false),
        tensor(&mut rng, &[5], false),
        tensor(&mut rng, &[5], false),
    ];
    let want = p.run(&inputs).unwrap();
    let exe = p.compile().unwrap();
    let mut y = Array4::<f32>::zeros((2, 3, 4, 5));
    exe.run_into(&inputs, &mut [TensorViewMut::from(&mut y)])
        .unwrap();
    assert!(bits(&Tensor::from(y.clone())) == bits(&want[0]));
    // A transposed view of the caller's, and an output that a later stage reads.
    let mut q = Program::new("dense backward");
    let (m, n) = (40, 30);
    let dy = q.parameter::<f32>(&[m, n]);
    let z = q.parameter::<f32>(&[m, n]);
    let zero = q.constant(0.0f32);
    let pos = q.gt(z, zero, &[]).unwrap();
    let dz = q.select(pos, dy, zero).unwrap();
    let db = q.reduce_sum(dz, &[0]).unwrap();
    q.output(dz).unwrap();
    q.output(db).unwrap();
    let (a, b) = (
        tensor(&mut rng, &[m, n], false),
        tensor(&mut rng, &[m, n], false),
    );
    let want = q.run(&[a.clone(), b.clone()]).unwrap();
    let exe = q.compile().unwrap();
    let mut dz_t = Array2::<f32>::zeros((n, m));
    let mut db_out = Array1::<f32>::zeros(n);
    let views = [TensorView::from(&a), TensorView::from(&b)];
    let into = [
        TensorViewMut::from(dz_t.view_mut().reversed_axes()),
        TensorViewMut::from(&mut db_out),
    ];
    exe.run_views_into(&views, &mut { into }).unwrap();
    assert!(bits(&Tensor::from(dz_t.t().to_owned())) == bits(&want[0]));
    assert!(bits(&Tensor::from(db_out.clone())) == bits(&want[1]));
    let mut dz = Array2::<f32>::zeros((m, n)); // laid out as `run` lays it out: lent
    exe.run_into(
        &[a.clone(), b.clone()],
        &mut [
            TensorViewMut::from(&mut dz),
            TensorViewMut::from(&mut db_out),
        ],
    )
    .unwrap();
    assert!(bits(&Tensor::from(dz)) == bits(&want[0]));
    assert!(bits(&Tensor::from(db_out)) == bits(&want[1]));
    // The wrong rank is an error that names the output.
    let mut wrong = Array1::<f32>::zeros(m * n);
    let err = exe
        .run_views_into(
            &views,
            &mut [
                TensorViewMut::from(&mut wrong),
                TensorViewMut::from(&mut Array1::<f32>::zeros(n)),
            ],
        )
        .unwrap_err();
    assert!(err.to_string().contains("output 0"), "{err}");
}
