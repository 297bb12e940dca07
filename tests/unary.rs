//! The eager unary ops (`xla_exp`, ...): bit for bit `Program::run`'s op of the same name, for
//! every op on `f32`, `f64` and `i32` (NaNs included, as bits), in each form (fresh, `_into`,
//! in place), at sizes that run serially and split over threads, and on a strided view.

mod common;

use common::Rng;
use ndarray::{s, Array1, Array2, ArrayView2};
use xla_bcast::prelude::*;
use xla_bcast::stablehlo::{Program, Tensor, Value};
use xla_bcast::BroadcastError;

type Recorder = fn(&mut Program, Value) -> Result<Value, BroadcastError>;

fn program<T>(record: Recorder, x: ArrayView2<'_, T>) -> Tensor
where
    T: xla_bcast::stablehlo::StableHloElement + Clone,
    Tensor: From<ndarray::ArrayD<T>>,
{
    let mut p = Program::new("u");
    let v = p.parameter::<T>(x.shape());
    let y = record(&mut p, v).unwrap();
    p.output(y).unwrap();
    p.run(&[Tensor::from(x.to_owned().into_dyn())])
        .unwrap()
        .remove(0)
}

/// Float inputs: specials, tiny to huge magnitudes of both signs, values near zero.
fn floats(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    let specials = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1.0,
        -1.0,
        0.5,
        1e6,
        -3e38,
    ];
    (0..n)
        .map(|i| match i % 4 {
            0 => specials[(i / 4) % specials.len()],
            1 => (rng.unit() - 0.5) * 8.0,
            2 => (rng.unit() * 200.0 - 100.0).exp2() * if rng.next() & 1 == 0 { 1.0 } else { -1.0 },
            _ => (rng.unit() - 0.5) * 2000.0,
        })
        .collect()
}

macro_rules! float_ops {
    ($t:ty, $variant:ident; $($name:ident, $m:ident, $into:ident, $assign:ident;)*) => {{
        for (m, n) in [(7, 9), (200, 300)] {
            let x = Array2::from_shape_vec((m, n), floats(m * n, 7)).unwrap().mapv(|v| v as $t);
            let strided = x.slice(s![..;2, 1..]);
            $(
                for view in [x.view(), strided] {
                    let Tensor::$variant(want) = program::<$t>(Program::$name, view) else { panic!() };
                    let want: Vec<_> = want.iter().map(|v| v.to_bits()).collect();
                    let bits = |a: &Array2<$t>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    let got = view.$m().unwrap();
                    assert_eq!(bits(&got), want, "{} {}", stringify!($name), stringify!($t));
                    let mut out = Array2::<$t>::zeros(view.raw_dim());
                    view.$into(&mut out).unwrap();
                    assert_eq!(bits(&out), want, "{} into", stringify!($name));
                    let mut inplace = view.to_owned();
                    inplace.$assign();
                    assert_eq!(bits(&inplace), want, "{} in place", stringify!($name));
                }
            )*
        }
    }};
}

macro_rules! all_float_ops {
    ($t:ty, $variant:ident) => {
        float_ops!($t, $variant;
            abs, xla_abs, xla_abs_into, xla_abs_assign;
            neg, xla_neg, xla_neg_into, xla_neg_assign;
            sign, xla_sign, xla_sign_into, xla_sign_assign;
            floor, xla_floor, xla_floor_into, xla_floor_assign;
            ceil, xla_ceil, xla_ceil_into, xla_ceil_assign;
            round_nearest_even, xla_round_nearest_even, xla_round_nearest_even_into, xla_round_nearest_even_assign;
            round_nearest_afz, xla_round_nearest_afz, xla_round_nearest_afz_into, xla_round_nearest_afz_assign;
            sqrt, xla_sqrt, xla_sqrt_into, xla_sqrt_assign;
            rsqrt, xla_rsqrt, xla_rsqrt_into, xla_rsqrt_assign;
            cbrt, xla_cbrt, xla_cbrt_into, xla_cbrt_assign;
            exp, xla_exp, xla_exp_into, xla_exp_assign;
            expm1, xla_expm1, xla_expm1_into, xla_expm1_assign;
            log, xla_log, xla_log_into, xla_log_assign;
            log1p, xla_log1p, xla_log1p_into, xla_log1p_assign;
            logistic, xla_logistic, xla_logistic_into, xla_logistic_assign;
            tanh, xla_tanh, xla_tanh_into, xla_tanh_assign;
            sin, xla_sin, xla_sin_into, xla_sin_assign;
            cos, xla_cos, xla_cos_into, xla_cos_assign;
            tan, xla_tan, xla_tan_into, xla_tan_assign;
        )
    };
}

#[test]
fn float_ops_give_the_program_bits() {
    all_float_ops!(f32, F32);
    all_float_ops!(f64, F64);
}

#[test]
fn integer_and_predicate_ops_give_the_program_bits() {
    let x = Array2::from_shape_fn((300, 301), |(i, j)| {
        [i32::MIN, -1, 0, 1, i32::MAX][(i + j) % 5].wrapping_add((i * j) as i32 % 1000)
    });
    type Op = (Recorder, fn(&Array2<i32>) -> Array2<i32>);
    let ops: [Op; 6] = [
        (Program::abs, |x| x.xla_abs().unwrap()),
        (Program::neg, |x| x.xla_neg().unwrap()),
        (Program::sign, |x| x.xla_sign().unwrap()),
        (Program::not, |x| x.xla_not().unwrap()),
        (Program::popcnt, |x| x.xla_popcnt().unwrap()),
        (Program::clz, |x| x.xla_clz().unwrap()),
    ];
    for (k, (record, eager)) in ops.iter().enumerate() {
        let Tensor::I32(want) = program::<i32>(*record, x.view()) else {
            panic!()
        };
        assert_eq!(eager(&x).into_dyn(), want, "op {k}");
    }
    let f = Array1::from(floats(999, 3)).mapv(|v| v as f32);
    let Tensor::Pred(want) =
        program::<f32>(Program::is_finite, f.view().insert_axis(ndarray::Axis(0)))
    else {
        panic!()
    };
    assert_eq!(
        f.xla_is_finite()
            .unwrap()
            .insert_axis(ndarray::Axis(0))
            .into_dyn(),
        want
    );
    let b = Array1::from(vec![true, false, true]);
    assert_eq!(b.xla_not().unwrap(), Array1::from(vec![false, true, false]));
}

/// An output of the wrong shape is refused, with nothing written.
#[test]
fn into_checks_the_output_shape() {
    let x = Array2::<f32>::ones((2, 3));
    let mut out = Array2::<f32>::zeros((3, 2));
    let e = x.xla_exp_into(&mut out).unwrap_err();
    assert_eq!(
        e.to_string(),
        "exp: the output has shape [3, 2] but the result has shape [2, 3]; pass an output of \
         the result's shape"
    );
    assert_eq!(out, Array2::<f32>::zeros((3, 2)));
}

/// Bits of an element, for comparing conversions exactly.
trait Bits: Copy {
    fn bits(self) -> u64;
}
macro_rules! bits {
    ($($t:ty: |$x:ident| $e:expr;)*) => {$(
        impl Bits for $t {
            fn bits(self) -> u64 {
                let $x = self;
                $e
            }
        }
    )*};
}
bits! {
    bool: |x| x as u64;
    i8: |x| x as u8 as u64;
    i32: |x| x as u32 as u64;
    i64: |x| x as u64;
    u8: |x| x as u64;
    u16: |x| x as u64;
    u64: |x| x;
    f32: |x| x.to_bits() as u64;
    f64: |x| x.to_bits();
}

/// `xla_convert` against `Program::convert`, bit for bit, from `x` (of `$t`) to each `$u`.
macro_rules! converts_like_the_program {
    ($x:expr, $t:ty; $($u:ty),*) => {{
        let x: Array1<$t> = $x;
        $(
            let mut p = Program::new("c");
            let v = p.parameter::<$t>(&[x.len()]);
            let y = p.convert::<$u>(v).unwrap();
            p.output(y).unwrap();
            let want = p.run(&[Tensor::from(x.clone().into_dyn())]).unwrap().remove(0);
            let want: Vec<u64> = want.view::<$u>().unwrap().iter().map(|v| v.bits()).collect();
            let got: Vec<u64> = x.xla_convert::<$u>().unwrap().iter().map(|v| v.bits()).collect();
            assert_eq!(got, want, "{} to {}", stringify!($t), stringify!($u));
            let mut out = Array1::<$u>::default(x.len());
            x.xla_convert_into(&mut out).unwrap();
            assert_eq!(out.iter().map(|v| v.bits()).collect::<Vec<_>>(), want);
        )*
    }};
}

#[test]
fn conversions_give_the_program_bits() {
    let f = [
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        127.9,
        -128.9,
        255.5,
        65535.9,
        1e10,
        -1e10,
        3e38,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-40,
        9.3e18,
        -9.3e18,
    ];
    let x64 = Array1::from(f.to_vec());
    converts_like_the_program!(x64.clone(), f64; bool, i8, i32, i64, u8, u16, u64, f32, f64);
    converts_like_the_program!(x64.mapv(|v| v as f32), f32; bool, i8, i32, i64, u8, u16, u64, f32, f64);
    let ints = [
        0i64,
        1,
        -1,
        127,
        128,
        -129,
        255,
        256,
        65535,
        65536,
        i32::MAX as i64 + 1,
        i64::MIN,
        i64::MAX,
        16777217,
        -16777217,
    ];
    let i = Array1::from(ints.to_vec());
    converts_like_the_program!(i.clone(), i64; bool, i8, i32, i64, u8, u16, u64, f32, f64);
    converts_like_the_program!(i.mapv(|v| v as i32), i32; bool, i8, i32, i64, u8, u16, u64, f32, f64);
    converts_like_the_program!(i.mapv(|v| v as u8), u8; bool, i8, i32, i64, u8, u16, u64, f32, f64);
    converts_like_the_program!(Array1::from(vec![true, false, true]), bool; bool, i8, i32, i64, u8, u16, u64, f32, f64);
}
