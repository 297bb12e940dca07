//! `Program`'s reductions over axes (`reduce_sum` .. `reduce_or`): run against a plain fold of
//! the crate's element functions over every axis set, for each kind of element; their errors;
//! their StableHLO text. (`tests/stablehlo_export.rs` runs them on XLA.)

use ndarray::{ArrayD, Dimension, IxDyn};
use xla_bcast::stablehlo::{Program, StableHloElement, Tensor, Value};
use xla_bcast::{BroadcastError, XlaBitwise, XlaElement, XlaOrd};

type Reducer = fn(&mut Program, Value, &[usize]) -> Result<Value, BroadcastError>;

/// `f` folded from `init` over `axes` of `x`, in index order: the result drops those axes.
fn naive<T: Copy>(x: &ArrayD<T>, axes: &[usize], init: T, f: impl Fn(T, T) -> T) -> ArrayD<T> {
    let kept: Vec<usize> = (0..x.ndim()).filter(|d| !axes.contains(d)).collect();
    let shape: Vec<usize> = kept.iter().map(|&d| x.shape()[d]).collect();
    let mut out = ArrayD::from_elem(IxDyn(&shape), init);
    for (index, &v) in x.indexed_iter() {
        let at: Vec<usize> = kept.iter().map(|&d| index[d]).collect();
        let slot = &mut out[IxDyn(&at)];
        *slot = f(*slot, v);
    }
    out
}

/// `record` of `x` over `axes`, run.
fn run<T: StableHloElement>(record: Reducer, x: &ArrayD<T>, axes: &[usize]) -> Tensor
where
    Tensor: From<ArrayD<T>>,
{
    let mut p = Program::new("r");
    let v = p.parameter::<T>(x.shape());
    let r = record(&mut p, v, axes).unwrap();
    p.output(r).unwrap();
    p.run(&[x.clone().into()]).unwrap().remove(0)
}

/// Float results compared by their bits, any NaN equal to any NaN.
fn bits(t: &Tensor) -> ArrayD<u32> {
    f32::of(t)
        .expect("an f32 result")
        .mapv(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
}

/// Every axis set of a 3-D operand, unsorted ones too.
const AXES: [&[usize]; 9] = [
    &[],
    &[0],
    &[1],
    &[2],
    &[0, 2],
    &[2, 0],
    &[1, 2],
    &[0, 1, 2],
    &[2, 1, 0],
];

/// Floats whose sums and products of a few are exact, and NaN, infinities and both zeros: the
/// fold's order (lanes here, index order in `naive`) cannot change a bit.
fn floats(shape: &[usize]) -> ArrayD<f32> {
    let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0];
    ArrayD::from_shape_fn(IxDyn(shape), |i| {
        let k = i.slice().iter().fold(7usize, |a, &v| a * 31 + v);
        match k % 13 {
            0..=4 if k % 3 == 0 => specials[k % 5],
            _ => (k % 17) as f32 * 0.5 - 4.0,
        }
    })
}

#[test]
fn reductions_match_a_plain_fold() {
    let shape = [3, 4, 5];
    let f = floats(&shape);
    // Only the order-free ones on NaN and infinities; sums and products on finite values.
    let finite = f.mapv(|v| if v.is_finite() { v } else { 1.5 });
    let i = ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
        let k = ix.slice().iter().fold(3i32, |a, &v| {
            a.wrapping_mul(1_000_003).wrapping_add(v as i32)
        });
        match k % 7 {
            0 => i32::MIN,
            1 => i32::MAX,
            _ => k,
        }
    });
    let u = i.mapv(|v| v as u8);
    let b = i.mapv(|v| v % 3 != 0);
    for axes in AXES {
        let t = |a: ArrayD<f32>| bits(&Tensor::from(a));
        assert_eq!(
            bits(&run(Program::reduce_max, &f, axes)),
            t(naive(&f, axes, f32::xla_lowest(), f32::xla_max)),
            "max {axes:?}"
        );
        assert_eq!(
            bits(&run(Program::reduce_min, &f, axes)),
            t(naive(&f, axes, f32::xla_highest(), f32::xla_min)),
            "min {axes:?}"
        );
        assert_eq!(
            bits(&run(Program::reduce_sum, &finite, axes)),
            t(naive(&finite, axes, 0.0, f32::xla_add)),
            "sum {axes:?}"
        );
        let two = finite
            .slice(ndarray::s![.., ..2, ..])
            .mapv(|v| v.clamp(-2.0, 2.0))
            .into_dyn();
        assert_eq!(
            bits(&run(Program::reduce_prod, &two, axes)),
            t(naive(&two, axes, 1.0, f32::xla_mul)),
            "prod {axes:?}"
        );
        for (name, record, init, f) in [
            (
                "sum",
                Program::reduce_sum as Reducer,
                0,
                i32::xla_add as fn(i32, i32) -> i32,
            ),
            ("prod", Program::reduce_prod, 1, i32::xla_mul),
            ("max", Program::reduce_max, i32::MIN, i32::xla_max),
            ("min", Program::reduce_min, i32::MAX, i32::xla_min),
            ("and", Program::reduce_and, -1, i32::xla_and),
            ("or", Program::reduce_or, 0, i32::xla_or),
        ] {
            assert_eq!(
                run(record, &i, axes),
                Tensor::from(naive(&i, axes, init, f)),
                "i32 {name} {axes:?}"
            );
            let init = init as u8;
            let init = match name {
                "max" => 0,
                "min" | "and" => u8::MAX,
                _ => init,
            };
            let g = match name {
                "sum" => u8::xla_add as fn(u8, u8) -> u8,
                "prod" => u8::xla_mul,
                "max" => u8::xla_max,
                "min" => u8::xla_min,
                "and" => u8::xla_and,
                _ => u8::xla_or,
            };
            assert_eq!(
                run(record, &u, axes),
                Tensor::from(naive(&u, axes, init, g)),
                "u8 {name} {axes:?}"
            );
        }
        // `bool`: the sum and max are any, the product and min all.
        for (record, all) in [
            (Program::reduce_sum as Reducer, false),
            (Program::reduce_max, false),
            (Program::reduce_or, false),
            (Program::reduce_prod, true),
            (Program::reduce_min, true),
            (Program::reduce_and, true),
        ] {
            let want = match all {
                true => naive(&b, axes, true, |a, x| a && x),
                false => naive(&b, axes, false, |a, x| a || x),
            };
            assert_eq!(run(record, &b, axes), Tensor::from(want), "bool {axes:?}");
        }
    }
}

/// Large enough to fold in parallel blocks, into partial results combined in order.
#[test]
fn large_reductions_match_a_plain_fold() {
    // Infinities and both zeros, no NaN (which would make every maximum NaN).
    let f = floats(&[600, 700]).mapv(|v| if v.is_nan() { -9.0 } else { v });
    for axes in [&[0][..], &[1], &[0, 1]] {
        let want = naive(&f, axes, f32::xla_lowest(), f32::xla_max);
        assert_eq!(
            bits(&run(Program::reduce_max, &f, axes)),
            bits(&Tensor::from(want)),
            "{axes:?}"
        );
    }
    let i = ArrayD::from_shape_fn(IxDyn(&[600, 700]), |ix| {
        (ix[0] * 7 + ix[1] * 13) as i64 - 4000
    });
    for axes in [&[0][..], &[1]] {
        let want = naive(&i, axes, 0, i64::xla_add);
        assert_eq!(
            run(Program::reduce_sum, &i, axes),
            Tensor::from(want),
            "{axes:?}"
        );
    }
}

#[test]
fn bad_axes_and_types_are_errors() {
    let mut p = Program::new("e");
    let x = p.parameter::<f32>(&[2, 3]);
    let err = p.reduce_max(x, &[2]).unwrap_err();
    assert!(
        matches!(
            err,
            BroadcastError::ReduceAxes {
                op: "reduce_max",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "reduce_max: axes [2] of an operand of shape [2, 3]: axis 2 is out of range for rank 2; \
         give each axis once, below the rank"
    );
    let err = p.reduce_sum(x, &[1, 1]).unwrap_err();
    assert!(err.to_string().contains("axis 1 is given twice"), "{err}");
    let err = p.reduce_and(x, &[0]).unwrap_err();
    assert!(
        matches!(
            err,
            BroadcastError::ElementType {
                op: "reduce_and",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("f32"), "{err}");
    assert!(p.reduce_or(x, &[]).is_err());
    // Nothing was recorded by the failures.
    let ok = p.reduce_min(x, &[1, 0]).unwrap();
    assert_eq!(p.shape(ok).unwrap(), &[] as &[usize]);
}

#[test]
fn reductions_print_one_reduce_from_their_identity() {
    let mut p = Program::new("m");
    let x = p.parameter::<f32>(&[2, 3, 4]);
    let b = p.parameter::<bool>(&[5]);
    let i = p.parameter::<u8>(&[5]);
    let m = p.reduce_max(x, &[2, 0]).unwrap();
    let any = p.reduce_sum(b, &[0]).unwrap();
    let all = p.reduce_and(i, &[0]).unwrap();
    for v in [m, any, all] {
        p.output(v).unwrap();
    }
    let text = p.to_stablehlo();
    for line in [
        "%0 = stablehlo.constant dense<0xFF800000> : tensor<f32>",
        "%1 = stablehlo.reduce(%arg0 init: %0) applies stablehlo.maximum across dimensions = [0, 2] : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<3xf32>",
        "%2 = stablehlo.constant dense<false> : tensor<i1>",
        "%3 = stablehlo.reduce(%arg1 init: %2) applies stablehlo.or across dimensions = [0] : (tensor<5xi1>, tensor<i1>) -> tensor<i1>",
        "%4 = stablehlo.constant dense<255> : tensor<ui8>",
        "%5 = stablehlo.reduce(%arg2 init: %4) applies stablehlo.and across dimensions = [0] : (tensor<5xui8>, tensor<ui8>) -> tensor<ui8>",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
}

/// Complex numbers sum and multiply; they have no order, so no maximum or minimum.
#[cfg(feature = "complex")]
#[test]
fn complex_numbers_sum_and_multiply() {
    use num_complex::Complex;
    let x = ArrayD::from_shape_fn(IxDyn(&[2, 3]), |i| {
        Complex::new(i[0] as f64 - 0.5, i[1] as f64 * 0.25)
    });
    let want = naive(&x, &[1], Complex::new(0.0, 0.0), |a, b| a + b);
    assert_eq!(run(Program::reduce_sum, &x, &[1]), Tensor::from(want));
    let want = naive(&x, &[0], Complex::new(1.0, 0.0), |a, b| a * b);
    assert_eq!(run(Program::reduce_prod, &x, &[0]), Tensor::from(want));
    let mut p = Program::new("c");
    let v = p.parameter::<Complex<f32>>(&[3]);
    for record in [
        Program::reduce_max as Reducer,
        Program::reduce_min,
        Program::reduce_and,
    ] {
        let err = record(&mut p, v, &[0]).unwrap_err();
        assert!(matches!(err, BroadcastError::ElementType { .. }), "{err:?}");
    }
}

/// StableHLO's interpreter test of `reduce` (`stablehlo/tests/interpret/reduce.mlir`): a sum of
/// `[[0, 1, 2, 3, 4, 5]]` (`i64`) over dim 1 from 0 is `[15]`.
#[test]
fn the_interpreters_reduce_test() {
    let x = ndarray::array![[0i64, 1, 2, 3, 4, 5]].into_dyn();
    assert_eq!(
        run(Program::reduce_sum, &x, &[1]),
        Tensor::from(ndarray::array![15i64].into_dyn())
    );
}
