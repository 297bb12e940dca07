//! `Program`'s unary ops: run against Rust's own functions on each type's edge values (NaN,
//! both zeros, infinities, ties; `MIN` and `MAX`), their type errors and their StableHLO text.
//! (`tests/stablehlo_export.rs` runs them on XLA.)

mod common;

use common::bits;
use ndarray::{arr1, Array1};
use xla_bcast::stablehlo::{Program, StableHloElement, Tensor, Value};
use xla_bcast::BroadcastError;

type Unarier = fn(&mut Program, Value) -> Result<Value, BroadcastError>;

/// A unary op's name, its recorder and Rust's function for it.
type Case = (&'static str, Unarier, fn(f64) -> f64);

/// `record` run on `x`.
fn run<T: StableHloElement>(record: Unarier, x: &Array1<T>) -> Result<Tensor, BroadcastError>
where
    Tensor: From<ndarray::ArrayD<T>>,
{
    let mut p = Program::new("u");
    let v = p.parameter::<T>(x.shape());
    let y = record(&mut p, v)?;
    p.output(y)?;
    Ok(p.run(&[x.clone().into_dyn().into()])?.remove(0))
}

#[test]
fn float_ops_match_rust() {
    let edges = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        2.5,
        -7.75,
        1e300,
        4.0,
        f64::MIN_POSITIVE,
    ];
    let x = arr1(&edges);
    let x32 = x.mapv(|v| v as f32);
    let sign = |v: f64| {
        if v.is_nan() || v == 0.0 {
            v
        } else {
            1f64.copysign(v)
        }
    };
    let cases: [Case; 8] = [
        ("abs", Program::abs, f64::abs),
        ("neg", Program::neg, |v| -v),
        ("sign", Program::sign, sign),
        ("floor", Program::floor, f64::floor),
        ("ceil", Program::ceil, f64::ceil),
        (
            "round_nearest_even",
            Program::round_nearest_even,
            f64::round_ties_even,
        ),
        ("round_nearest_afz", Program::round_nearest_afz, f64::round),
        ("sqrt", Program::sqrt, f64::sqrt),
    ];
    for (name, record, f) in cases {
        let want = |v: Array1<f64>| bits(&Tensor::from(v.into_dyn()));
        assert_eq!(
            bits(&run(record, &x).unwrap()),
            want(x.mapv(f)),
            "{name} f64"
        );
        // In f32: the same function, of an f32 input (exact for these, or correctly rounded).
        let want32 = x32.mapv(|v| f(f64::from(v)) as f32);
        assert_eq!(
            bits(&run(record, &x32).unwrap()),
            bits(&Tensor::from(want32.into_dyn())),
            "{name} f32"
        );
    }
    let finite = run(Program::is_finite, &x).unwrap();
    assert_eq!(finite, Tensor::from(x.mapv(f64::is_finite).into_dyn()));
}

#[test]
fn integer_ops_match_rust() {
    let x = arr1(&[i32::MIN, i32::MIN + 1, -7, -1, 0, 1, 6, i32::MAX]);
    let t = |a: Array1<i32>| Tensor::from(a.into_dyn());
    assert_eq!(run(Program::abs, &x).unwrap(), t(x.mapv(i32::wrapping_abs)));
    assert_eq!(run(Program::neg, &x).unwrap(), t(x.mapv(i32::wrapping_neg)));
    assert_eq!(run(Program::sign, &x).unwrap(), t(x.mapv(i32::signum)));
    assert_eq!(run(Program::not, &x).unwrap(), t(x.mapv(|v| !v)));
    assert_eq!(
        run(Program::popcnt, &x).unwrap(),
        t(x.mapv(|v| v.count_ones() as i32))
    );
    assert_eq!(
        run(Program::clz, &x).unwrap(),
        t(x.mapv(|v| v.leading_zeros() as i32))
    );
    let u = arr1(&[0u8, 1, 2, 127, 128, 255]);
    let t = |a: Array1<u8>| Tensor::from(a.into_dyn());
    assert_eq!(run(Program::neg, &u).unwrap(), t(u.mapv(u8::wrapping_neg)));
    assert_eq!(run(Program::not, &u).unwrap(), t(u.mapv(|v| !v)));
    assert_eq!(
        run(Program::popcnt, &u).unwrap(),
        t(u.mapv(|v| v.count_ones() as u8))
    );
    assert_eq!(
        run(Program::clz, &u).unwrap(),
        t(u.mapv(|v| v.leading_zeros() as u8))
    );
    let b = arr1(&[true, false]);
    assert_eq!(
        run(Program::not, &b).unwrap(),
        Tensor::from(arr1(&[false, true]).into_dyn())
    );
}

/// Each op exists for the types StableHLO defines it on; the others are type errors naming the
/// op and the type.
#[test]
fn ops_a_type_lacks_are_errors() {
    let f = arr1(&[1.0f32]);
    let u = arr1(&[1u32]);
    let b = arr1(&[true]);
    for (record, name) in [
        (Program::not as Unarier, "not"),
        (Program::popcnt, "popcnt"),
        (Program::clz, "clz"),
    ] {
        let err = run(record, &f).unwrap_err();
        assert!(
            matches!(err, BroadcastError::ElementType { op, .. } if op == name),
            "{err:?}"
        );
        assert!(err.to_string().contains("f32"), "{err}");
    }
    for record in [
        Program::abs as Unarier,
        Program::sign,
        Program::floor,
        Program::sqrt,
        Program::is_finite,
    ] {
        assert!(matches!(
            run(record, &u),
            Err(BroadcastError::ElementType { .. })
        ));
    }
    for record in [
        Program::neg as Unarier,
        Program::abs,
        Program::popcnt,
        Program::round_nearest_even,
    ] {
        assert!(matches!(
            run(record, &b),
            Err(BroadcastError::ElementType { .. })
        ));
    }
    // The transcendental ops: floats (and complex numbers) only.
    let i = arr1(&[2i32]);
    for (record, name) in [
        (Program::exp as Unarier, "exp"),
        (Program::expm1, "expm1"),
        (Program::log, "log"),
        (Program::log1p, "log1p"),
        (Program::logistic, "logistic"),
        (Program::tanh, "tanh"),
        (Program::rsqrt, "rsqrt"),
        (Program::cbrt, "cbrt"),
        (Program::sin, "sin"),
        (Program::cos, "cos"),
        (Program::tan, "tan"),
    ] {
        for err in [run(record, &i).unwrap_err(), run(record, &b).unwrap_err()] {
            assert!(
                matches!(&err, BroadcastError::ElementType { op, .. } if *op == name),
                "{err:?}"
            );
        }
        assert!(run(record, &f).is_ok(), "{name}");
    }
}

#[test]
fn unary_ops_print_as_stablehlo() {
    let mut p = Program::new("u");
    let x = p.parameter::<f32>(&[2, 3]);
    let i = p.parameter::<i64>(&[4]);
    let r = p.round_nearest_afz(x).unwrap();
    let fin = p.is_finite(r).unwrap();
    let z = p.clz(i).unwrap();
    for v in [r, fin, z] {
        p.output(v).unwrap();
    }
    let text = p.to_stablehlo();
    for line in [
        "%0 = stablehlo.round_nearest_afz %arg0 : tensor<2x3xf32>",
        "%1 = stablehlo.is_finite %0 : (tensor<2x3xf32>) -> tensor<2x3xi1>",
        "%2 = stablehlo.count_leading_zeros %arg1 : tensor<4xi64>",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
}

/// `x` converted to `U` by a program.
fn convert<T, U>(x: &[T]) -> Tensor
where
    T: StableHloElement + Clone,
    U: StableHloElement,
    Tensor: From<ndarray::ArrayD<T>>,
{
    let mut p = Program::new("c");
    let v = p.parameter::<T>(&[x.len()]);
    let y = p.convert::<U>(v).unwrap();
    p.output(y).unwrap();
    p.run(&[arr1(x).into_dyn().into()]).unwrap().remove(0)
}

/// `convert` as XLA's CPU compiler does where StableHLO leaves it open: integers wrap, floats
/// round once to nearest (ties to even), floats to integers truncate and saturate (NaN: 0),
/// anything to `bool` is `!= 0`.
#[test]
fn convert_follows_xla() {
    let nan = f32::NAN;
    let f = [2.9f32, -2.9, 300.0, -300.0, nan, f32::INFINITY, -0.0];
    assert_eq!(
        convert::<f32, i8>(&f),
        Tensor::from(arr1(&[2i8, -2, 127, -128, 0, 127, 0]).into_dyn())
    );
    assert_eq!(
        convert::<f32, u8>(&f),
        Tensor::from(arr1(&[2u8, 0, 255, 0, 0, 255, 0]).into_dyn())
    );
    assert_eq!(
        convert::<f32, bool>(&f),
        Tensor::from(arr1(&[true, true, true, true, true, true, false]).into_dyn())
    );
    assert_eq!(
        convert::<i32, i8>(&[300, -129, 127]),
        Tensor::from(arr1(&[44i8, 127, 127]).into_dyn())
    );
    assert_eq!(
        convert::<u8, i8>(&[255u8]),
        Tensor::from(arr1(&[-1i8]).into_dyn())
    );
    assert_eq!(
        convert::<bool, f64>(&[true, false]),
        Tensor::from(arr1(&[1.0, 0.0]).into_dyn())
    );
    // One rounding, to nearest even: 2^24 + 1 is a tie in f32; 2^53 + 1 one in f64.
    assert_eq!(
        convert::<i32, f32>(&[16_777_217]),
        Tensor::from(arr1(&[16_777_216f32]).into_dyn())
    );
    assert_eq!(
        convert::<i64, f64>(&[(1 << 53) + 1, (1 << 53) + 3]),
        Tensor::from(arr1(&[9007199254740992.0, 9007199254740996.0]).into_dyn())
    );
    assert_eq!(
        convert::<f64, f32>(&[1.0 + f64::EPSILON, 1e300]),
        Tensor::from(arr1(&[1.0f32, f32::INFINITY]).into_dyn())
    );
}

/// Conversions to `f16` and `bf16` go through `f32`, as XLA's do: `1 + 2^-8 + 2^-30` is just
/// above a `bf16` tie, but in `f32` it is the tie, which rounds to even (XLA gives `1.0` too;
/// one rounding would give `1 + 2^-7`).
#[cfg(feature = "half")]
#[test]
fn conversions_to_half_precision_go_through_f32() {
    use half::{bf16, f16};
    let x = [1.0 + 2f64.powi(-8) + 2f64.powi(-30)];
    assert_eq!(
        convert::<f64, bf16>(&x),
        Tensor::from(arr1(&[bf16::ONE]).into_dyn())
    );
    let x = [1.0 + 2f64.powi(-11) + 2f64.powi(-40)];
    assert_eq!(
        convert::<f64, f16>(&x),
        Tensor::from(arr1(&[f16::ONE]).into_dyn())
    );
    let x = [(1i64 << 62) + (1 << 54) + 1];
    let want = bf16::from_f32((1u64 << 62) as f32);
    assert_eq!(
        convert::<i64, bf16>(&x),
        Tensor::from(arr1(&[want]).into_dyn())
    );
}

/// A complex number converts by its real part; a real one gets a zero imaginary part.
#[cfg(feature = "complex")]
#[test]
fn complex_conversions_keep_the_real_part() {
    use num_complex::Complex;
    let z = [Complex::new(2.5f32, -1.0), Complex::new(0.0, 3.0)];
    assert_eq!(
        convert::<_, f64>(&z),
        Tensor::from(arr1(&[2.5, 0.0]).into_dyn())
    );
    assert_eq!(
        convert::<_, bool>(&z),
        Tensor::from(arr1(&[true, false]).into_dyn())
    );
    assert_eq!(
        convert::<i32, Complex<f64>>(&[-7]),
        Tensor::from(arr1(&[Complex::new(-7.0, 0.0)]).into_dyn())
    );
}
