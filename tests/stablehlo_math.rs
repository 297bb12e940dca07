//! The transcendental unary ops' accuracy, in ulps, over many inputs per type: `f32` against
//! the correctly rounded result (the platform's `f64` function rounded to `f32`, which is off
//! only where that function's error straddles an `f32` rounding boundary), `f64` against the
//! platform's `f64` function (glibc's: within 1 ulp of the correctly rounded result, so the
//! bound against that is one more). Special values must match exactly. The bounds asserted
//! are the README's.

mod common;

use common::Rng;
use ndarray::Array1;
use xla_bcast::stablehlo::{Program, Tensor, Value};
use xla_bcast::BroadcastError;

type Unarier = fn(&mut Program, Value) -> Result<Value, BroadcastError>;

/// An op: its name, recorder, reference, bounds in ulps (`f32`, `f64`) and input range.
type Case = (
    &'static str,
    Unarier,
    fn(f64) -> f64,
    (u64, u64),
    (f64, f64),
);

/// The form that neither overflows nor cancels on either side of zero.
fn logistic(x: f64) -> f64 {
    let e = (-x.abs()).exp();
    if x < 0.0 {
        e / (1.0 + e)
    } else {
        1.0 / (1.0 + e)
    }
}

#[rustfmt::skip]
const CASES: [Case; 11] = [
    ("exp", Program::exp, f64::exp, (1, 1), (-750.0, 750.0)),
    ("expm1", Program::expm1, f64::exp_m1, (2, 2), (-60.0, 710.0)),
    ("log", Program::log, f64::ln, (1, 1), (0.0, 1e300)),
    ("log1p", Program::log1p, f64::ln_1p, (2, 2), (-1.0, 1e30)),
    ("logistic", Program::logistic, logistic, (2, 2), (-800.0, 800.0)),
    ("tanh", Program::tanh, f64::tanh, (2, 3), (-25.0, 25.0)),
    ("rsqrt", Program::rsqrt, rsqrt, (0, 0), (0.0, 1e300)),
    ("cbrt", Program::cbrt, f64::cbrt, (0, 0), (-1e300, 1e300)),
    ("sin", Program::sin, f64::sin, (0, 0), (-1e4, 1e4)),
    ("cos", Program::cos, f64::cos, (0, 0), (-1e4, 1e4)),
    ("tan", Program::tan, f64::tan, (0, 0), (-1e4, 1e4)),
];

fn rsqrt(x: f64) -> f64 {
    1.0 / x.sqrt()
}

/// Inputs for a range: uniform over it, log-uniform magnitudes (tiny to huge, both signs where
/// the range has them), values near zero, and the special values.
fn inputs(range: (f64, f64), n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    let mut xs = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        5e-324,
        -5e-324,
        1.0,
        -1.0,
        range.0,
        range.1,
    ];
    for i in 0..n {
        let x = match i % 3 {
            0 => range.0 + (range.1 - range.0) * rng.unit(),
            1 => {
                let m = (rng.unit() * 1400.0 - 700.0).exp2();
                if rng.next() & 1 == 0 {
                    m
                } else {
                    -m
                }
            }
            _ => (rng.unit() - 0.5) * 4.0,
        };
        xs.push(x);
    }
    xs
}

/// The distance in ulps between two values of a float type given by their bits (`sign` its
/// sign bit): the count of values between them, `-0.0` and `+0.0` one apart; 0 for two NaNs,
/// `u64::MAX` for a NaN and a number.
fn ulps(a: u64, b: u64, a_nan: bool, b_nan: bool, sign: u64) -> u64 {
    if a_nan || b_nan {
        return if a_nan && b_nan { 0 } else { u64::MAX };
    }
    let key = |v: u64| -> i128 {
        if v & sign != 0 {
            -((v & !sign) as i128) - 1
        } else {
            v as i128
        }
    };
    (key(a) - key(b)).unsigned_abs() as u64
}

/// The special values at the front of [`inputs`] (zeros, infinities, NaN), where a result must
/// be exact.
const SPECIALS: usize = 5;

fn run(record: Unarier, x: Tensor) -> Tensor {
    let shape = x.shape().to_vec();
    let mut p = Program::new("m");
    let v = match &x {
        Tensor::F32(_) => p.parameter::<f32>(&shape),
        _ => p.parameter::<f64>(&shape),
    };
    let y = record(&mut p, v).unwrap();
    p.output(y).unwrap();
    p.run(&[x]).unwrap().remove(0)
}

/// Each op's largest error per type over about 30,000 inputs, against its bound; the
/// largest are printed (`--nocapture`) for the README.
#[test]
fn transcendentals_are_within_their_ulps() {
    let n = if cfg!(debug_assertions) {
        30_000
    } else {
        1_000_000
    };
    for (i, &(name, record, reference, bounds, range)) in CASES.iter().enumerate() {
        let xs = inputs(range, n, 0x9e37_79b9_7f4a_7c15 ^ i as u64);
        // f32, against the correctly rounded result.
        let x32: Array1<f32> = xs.iter().map(|&x| x as f32).collect();
        let Tensor::F32(got) = run(record, Tensor::from(x32.clone().into_dyn())) else {
            panic!("f32 result");
        };
        let mut worst32 = (0, 0.0f32);
        for (k, (&x, &g)) in x32.iter().zip(got.iter()).enumerate() {
            let want = reference(x as f64) as f32;
            let d = ulps(
                g.to_bits().into(),
                want.to_bits().into(),
                g.is_nan(),
                want.is_nan(),
                1 << 31,
            );
            assert!(
                k >= SPECIALS || d == 0,
                "{name} f32 at {x:e}: {g:e}, not {want:e}"
            );
            if d > worst32.0 {
                worst32 = (d, x);
            }
        }
        // f64, against the platform's function.
        let x64 = Array1::from(xs.clone());
        let Tensor::F64(got) = run(record, Tensor::from(x64.clone().into_dyn())) else {
            panic!("f64 result");
        };
        let mut worst64 = (0, 0.0f64);
        for (k, (&x, &g)) in x64.iter().zip(got.iter()).enumerate() {
            let want = reference(x);
            let d = ulps(
                g.to_bits(),
                want.to_bits(),
                g.is_nan(),
                want.is_nan(),
                1 << 63,
            );
            assert!(
                k >= SPECIALS || d == 0,
                "{name} f64 at {x:e}: {g:e}, not {want:e}"
            );
            if d > worst64.0 {
                worst64 = (d, x);
            }
        }
        println!(
            "{}: f32 {} ulp (at {:e}), f64 {} ulp (at {:e})",
            name, worst32.0, worst32.1, worst64.0, worst64.1
        );
        assert!(
            worst32.0 <= bounds.0,
            "{} f32: {} ulps at {:e}",
            name,
            worst32.0,
            worst32.1
        );
        assert!(
            worst64.0 <= bounds.1,
            "{} f64: {} ulps at {:e}",
            name,
            worst64.0,
            worst64.1
        );
    }
}

/// `xla_bcast::math`'s functions give the program ops' bits, NaNs included, for `f32` and
/// `f64`, over each op's inputs.
#[test]
fn public_math_gives_the_program_bits() {
    use xla_bcast::math;
    type Pair = (&'static str, fn(f32) -> f32, fn(f64) -> f64);
    let public: [Pair; 11] = [
        ("exp", math::exp, math::exp),
        ("expm1", math::expm1, math::expm1),
        ("log", math::log, math::log),
        ("log1p", math::log1p, math::log1p),
        ("logistic", math::logistic, math::logistic),
        ("tanh", math::tanh, math::tanh),
        ("rsqrt", math::rsqrt, math::rsqrt),
        ("cbrt", math::cbrt, math::cbrt),
        ("sin", math::sin, math::sin),
        ("cos", math::cos, math::cos),
        ("tan", math::tan, math::tan),
    ];
    for (i, (&(name, record, _, _, range), &(public_name, f32s, f64s))) in
        CASES.iter().zip(&public).enumerate()
    {
        assert_eq!(name, public_name);
        let mut xs = inputs(range, 20_000, 0x5eed ^ i as u64);
        xs.extend([1e6, -1e6, 823549.0, 823551.0, 3e38, -3e38]); // beyond trig's range
        let x32: Array1<f32> = xs.iter().map(|&x| x as f32).collect();
        let Tensor::F32(got) = run(record, Tensor::from(x32.clone().into_dyn())) else {
            panic!("f32 result");
        };
        for (&x, &g) in x32.iter().zip(got.iter()) {
            assert_eq!(f32s(x).to_bits(), g.to_bits(), "{name} f32 at {x:e}");
        }
        let x64 = Array1::from(xs);
        let Tensor::F64(got) = run(record, Tensor::from(x64.clone().into_dyn())) else {
            panic!("f64 result");
        };
        for (&x, &g) in x64.iter().zip(got.iter()) {
            assert_eq!(f64s(x).to_bits(), g.to_bits(), "{name} f64 at {x:e}");
        }
    }
}
