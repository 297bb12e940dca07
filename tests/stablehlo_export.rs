//! `xla_bcast::stablehlo`: programs recorded with the crate's shape rules, run here and printed
//! as StableHLO. Golden text for the forms XLA parses, and a corpus of programs (every op and
//! element type, every broadcasting pattern of the conformance data, a few hundred random
//! programs) run through the crate. With `XLA_BCAST_EXPORT=<file>` the corpus, with its inputs
//! and the crate's outputs as raw little-endian bytes, is written there for
//! `tools/xla_check.py`, which runs every module on XLA's CPU compiler and compares bit for bit
//! (`.ci/run` does both).

mod common;

use common::workloads as crate_workloads;
use ndarray::{ArrayD, IxDyn};
use serde_json::{json, Value as Json};
use xla_bcast::stablehlo::{
    Kind, Mesh, PartitionSpec, Program, ShardingDialect, StableHloElement, Tensor, Value,
};
use xla_bcast::BroadcastError;

#[test]
fn golden_text() {
    let mut p = Program::new("bias_add");
    let x = p.parameter::<f32>(&[2, 3]);
    let v = p.parameter::<f32>(&[3]);
    let y = p.add(x, v, &[1]).unwrap();
    let m = p.gt(y, x, &[]).unwrap();
    let s = p.select(m, y, x).unwrap();
    let r = p.reduce_in_dim(s, &[3, 1], &[1, 0]).unwrap();
    p.output(y).unwrap();
    p.output(r).unwrap();
    let want = "module @bias_add {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3x1xf32>) {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %1 = stablehlo.add %arg0, %0 : tensor<2x3xf32>
    %2 = stablehlo.compare  GT, %1, %arg0,  FLOAT : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
    %3 = stablehlo.select %2, %1, %arg0 : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %4 = stablehlo.constant dense<0x00000000> : tensor<f32>
    %5 = stablehlo.reduce(%3 init: %4) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
    %6 = stablehlo.broadcast_in_dim %5, dims = [0] : (tensor<3xf32>) -> tensor<3x1xf32>
    return %1, %6 : tensor<2x3xf32>, tensor<3x1xf32>
  }
}
";
    assert_eq!(p.to_stablehlo(), want);
    // Integer compares say SIGNED or UNSIGNED; a bool sum reduces with `or`.
    let mut q = Program::new("ints");
    let a = q.parameter::<u8>(&[4]);
    let b = q.parameter::<i64>(&[]);
    let c = q.lt(a, a, &[]).unwrap();
    let d = q.ge(b, b, &[]).unwrap();
    let any = q.reduce_in_dim(c, &[], &[]).unwrap();
    q.output(any).unwrap();
    q.output(d).unwrap();
    let text = q.to_stablehlo();
    assert!(text.contains("stablehlo.compare  LT, %arg0, %arg0,  UNSIGNED : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>"), "{text}");
    assert!(text.contains("stablehlo.compare  GE, %arg1, %arg1,  SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>"), "{text}");
    assert!(
        text.contains("applies stablehlo.or across dimensions = [0]"),
        "{text}"
    );
}

#[test]
fn record_time_errors_are_the_crates() {
    let mut p = Program::new("e");
    let x = p.parameter::<f32>(&[2, 3]);
    let v = p.parameter::<f32>(&[3]);
    let i = p.parameter::<i32>(&[3]);
    let strict = ndarray::Array2::<f32>::zeros((2, 3));
    let want = ndarray::Array1::<f32>::zeros(3);
    let expected = {
        use xla_bcast::prelude::*;
        strict.add_bcast(&want, &[]).unwrap_err()
    };
    assert_eq!(p.add(x, v, &[]).unwrap_err(), expected);
    assert!(matches!(
        p.add(x, i, &[1]),
        Err(BroadcastError::ElementType { .. })
    ));
    assert!(matches!(
        p.shift_left(x, v, &[1]),
        Err(BroadcastError::ElementType { .. })
    ));
    assert!(matches!(
        p.atan2(i, i, &[]),
        Err(BroadcastError::ElementType { .. })
    ));
    assert!(p.select(x, x, x).is_err());
    assert!(p.clamp(v, x, v).is_err());
    assert!(p.reduce_in_dim(x, &[2], &[1]).is_err());
    // Inputs of the wrong type or shape.
    p.output(x).unwrap();
    let bad = p.run(&[
        ArrayD::<f32>::zeros(IxDyn(&[3, 2])).into(),
        ArrayD::<f32>::zeros(IxDyn(&[3])).into(),
        ArrayD::<i32>::zeros(IxDyn(&[3])).into(),
    ]);
    assert!(
        matches!(bad, Err(BroadcastError::ArgumentShape { .. })),
        "{bad:?}"
    );
    let bad = p.run(&[ArrayD::<f32>::zeros(IxDyn(&[2, 3])).into()]);
    assert!(bad.is_err());
    // A value of another program is an error, never a panic or a wrong node.
    let mut other = Program::new("other");
    let foreign = other.parameter::<f32>(&[2, 3]);
    let _ = other.parameter::<f32>(&[9]);
    let err = p.add(x, foreign, &[]).unwrap_err();
    assert!(
        matches!(err, BroadcastError::ForeignValue { .. }),
        "{err:?}"
    );
    assert!(err.to_string().starts_with(&format!(
        "add: a value of another program was given to program {:?}",
        p.name()
    )));
    assert!(p.output(foreign).is_err() && p.shape(foreign).is_err());
    let _ = other.parameter::<f32>(&[1]);
    let far = other.parameter::<f32>(&[1]);
    assert!(p.reduce_in_dim(far, &[1], &[0]).is_err());
    assert!(p.broadcast_in_dim(far, &[1], &[0]).is_err());
    assert!(p.select(far, far, far).is_err() && p.clamp(far, far, far).is_err());
}

// ----- the corpus -----

/// A deterministic generator (xorshift), so the corpus is the same every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Values worth testing for each type: extremes, NaNs, infinities, signed zeros.
trait Sample: StableHloElement + Copy {
    fn sample(rng: &mut Rng) -> Self;
    fn bytes(values: &[Self]) -> String;
    /// Values from 0 to 9 (exponents every reference agrees on).
    fn small(rng: &mut Rng, shape: &[usize]) -> Tensor;
}

macro_rules! int_sample {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            fn sample(rng: &mut Rng) -> Self {
                match rng.below(6) {
                    0 => <$t>::MIN,
                    1 => <$t>::MAX,
                    2 => 0,
                    3 => 1,
                    _ => (rng.below(13) as i64 - 4) as $t,
                }
            }
            fn bytes(values: &[Self]) -> String {
                values.iter().flat_map(|v| v.to_le_bytes()).map(|b| format!("{b:02x}")).collect()
            }
            fn small(rng: &mut Rng, shape: &[usize]) -> Tensor {
                let n: usize = shape.iter().product();
                let v: Vec<$t> = (0..n).map(|_| rng.below(10) as $t).collect();
                ArrayD::from_shape_vec(IxDyn(shape), v).unwrap().into()
            }
        }
    )*};
}
int_sample!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_sample {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            fn sample(rng: &mut Rng) -> Self {
                match rng.below(10) {
                    0 => <$t>::NAN,
                    1 => <$t>::INFINITY,
                    2 => <$t>::NEG_INFINITY,
                    3 => -0.0,
                    4 => 0.0,
                    // No subnormals: XLA's CPU runtime flushes them to zero, where the crate
                    // (and StableHLO's specification) keep them (docs/references.md).
                    _ => (rng.below(41) as $t - 20.0) * 0.375,
                }
            }
            fn bytes(values: &[Self]) -> String {
                values.iter().flat_map(|v| v.to_le_bytes()).map(|b| format!("{b:02x}")).collect()
            }
            fn small(rng: &mut Rng, shape: &[usize]) -> Tensor {
                random::<$t>(rng, shape)
            }
        }
    )*};
}
float_sample!(f32, f64);

#[cfg(feature = "half")]
macro_rules! half_sample {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            fn sample(rng: &mut Rng) -> Self {
                <$t>::from_f32(f32::sample(rng))
            }
            fn bytes(values: &[Self]) -> String {
                values.iter().flat_map(|v| v.to_le_bytes()).map(|b| format!("{b:02x}")).collect()
            }
            fn small(rng: &mut Rng, shape: &[usize]) -> Tensor {
                random::<$t>(rng, shape)
            }
        }
    )*};
}
#[cfg(feature = "half")]
half_sample!(half::f16, half::bf16);

#[cfg(feature = "complex")]
macro_rules! complex_sample {
    ($($t:ty),*) => {$(
        impl Sample for num_complex::Complex<$t> {
            fn sample(rng: &mut Rng) -> Self {
                Self::new(<$t>::sample(rng), <$t>::sample(rng))
            }
            fn bytes(values: &[Self]) -> String {
                values
                    .iter()
                    .flat_map(|v| [v.re.to_le_bytes(), v.im.to_le_bytes()].concat())
                    .map(|b| format!("{b:02x}"))
                    .collect()
            }
            fn small(rng: &mut Rng, shape: &[usize]) -> Tensor {
                random::<Self>(rng, shape)
            }
        }
    )*};
}
#[cfg(feature = "complex")]
complex_sample!(f32, f64);

impl Sample for bool {
    fn sample(rng: &mut Rng) -> Self {
        rng.below(2) == 1
    }
    fn bytes(values: &[Self]) -> String {
        values.iter().map(|&b| format!("{:02x}", b as u8)).collect()
    }
    fn small(rng: &mut Rng, shape: &[usize]) -> Tensor {
        random::<bool>(rng, shape)
    }
}

fn tensor_json(t: &Tensor) -> Json {
    macro_rules! bytes {
        ($($variant:ident: $t:ty),*) => {
            match t {
                $(Tensor::$variant(a) => <$t>::bytes(&a.iter().copied().collect::<Vec<_>>()),)*
                #[allow(unreachable_patterns)]
                _ => unreachable!("the corpus uses the default types"),
            }
        };
    }
    let hex = match t {
        #[cfg(feature = "half")]
        Tensor::F16(a) => half::f16::bytes(&a.iter().copied().collect::<Vec<_>>()),
        #[cfg(feature = "half")]
        Tensor::Bf16(a) => half::bf16::bytes(&a.iter().copied().collect::<Vec<_>>()),
        #[cfg(feature = "complex")]
        Tensor::C64(a) => {
            <num_complex::Complex<f32>>::bytes(&a.iter().copied().collect::<Vec<_>>())
        }
        #[cfg(feature = "complex")]
        Tensor::C128(a) => {
            <num_complex::Complex<f64>>::bytes(&a.iter().copied().collect::<Vec<_>>())
        }
        _ => {
            bytes!(Pred: bool, I8: i8, I16: i16, I32: i32, I64: i64, U8: u8, U16: u16, U32: u32, U64: u64, F32: f32, F64: f64)
        }
    };
    json!({"type": t.element_type().name, "shape": t.shape(), "bytes": hex})
}

fn random<T: Sample>(rng: &mut Rng, shape: &[usize]) -> Tensor
where
    Tensor: From<ArrayD<T>>,
{
    let n: usize = shape.iter().product();
    let values: Vec<T> = (0..n).map(|_| T::sample(rng)).collect();
    ArrayD::from_shape_vec(IxDyn(shape), values).unwrap().into()
}

/// Runs `p` on `inputs` here and records it for XLA.
fn case(name: String, p: &Program, inputs: Vec<Tensor>, corpus: &mut Vec<Json>) {
    let module = p.to_stablehlo();
    // XLA's CPU compiler approximates f32 (and f16, bf16) division and atan2: its results can
    // be 1 ulp off the correctly rounded ones the crate gives (docs/references.md).
    // Float `pow` is an approximation on both sides (libm's here): 1 ulp there too.
    let approximated = (module.contains("stablehlo.divide") || module.contains("stablehlo.atan2"))
        && (module.contains("f32>") || module.contains("f16>"))
        || module.contains("stablehlo.power");
    case_within(name, p, inputs, u32::from(approximated), corpus);
}

/// [`case`] with the results allowed `ulps` apart.
fn case_within(name: String, p: &Program, inputs: Vec<Tensor>, ulps: u32, corpus: &mut Vec<Json>) {
    let outputs = p.run(&inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    let module = p.to_stablehlo();
    corpus.push(json!({
        "name": name,
        "ulps": ulps,
        "module": module,
        "inputs": inputs.iter().map(tensor_json).collect::<Vec<_>>(),
        "outputs": outputs.iter().map(tensor_json).collect::<Vec<_>>(),
    }));
}

type Recorder = fn(&mut Program, Value, Value, &[usize]) -> Result<Value, BroadcastError>;

type Reducer = fn(&mut Program, Value, &[usize]) -> Result<Value, BroadcastError>;

const REDUCE: [(&str, Reducer); 6] = [
    ("reduce_sum", Program::reduce_sum),
    ("reduce_prod", Program::reduce_prod),
    ("reduce_max", Program::reduce_max),
    ("reduce_min", Program::reduce_min),
    ("reduce_and", Program::reduce_and),
    ("reduce_or", Program::reduce_or),
];

type Unarier = fn(&mut Program, Value) -> Result<Value, BroadcastError>;

const UNARY: [(&str, Unarier); 12] = [
    ("abs", Program::abs),
    ("neg", Program::neg),
    ("sign", Program::sign),
    ("not", Program::not),
    ("floor", Program::floor),
    ("ceil", Program::ceil),
    ("round_nearest_even", Program::round_nearest_even),
    ("round_nearest_afz", Program::round_nearest_afz),
    ("is_finite", Program::is_finite),
    ("popcnt", Program::popcnt),
    ("clz", Program::clz),
    ("sqrt", Program::sqrt),
];

const BINARY: [(&str, Recorder); 15] = [
    ("add", Program::add),
    ("sub", Program::sub),
    ("mul", Program::mul),
    ("div", Program::div),
    ("rem", Program::rem),
    ("max", Program::max),
    ("min", Program::min),
    ("pow", Program::pow),
    ("and", Program::and),
    ("or", Program::or),
    ("xor", Program::xor),
    ("shift_left", Program::shift_left),
    ("shift_right_arithmetic", Program::shift_right_arithmetic),
    ("shift_right_logical", Program::shift_right_logical),
    ("atan2", Program::atan2),
];

const COMPARE: [(&str, Recorder); 6] = [
    ("eq", Program::eq),
    ("ne", Program::ne),
    ("lt", Program::lt),
    ("le", Program::le),
    ("gt", Program::gt),
    ("ge", Program::ge),
];

/// Every op the type has, on a (2, 3) lhs and a broadcast (3) rhs, and every comparison,
/// select, clamp, reduce and broadcast_in_dim.
fn ops_of<T: Sample>(rng: &mut Rng, corpus: &mut Vec<Json>)
where
    Tensor: From<ArrayD<T>>,
{
    let ty = T::TYPE.name;
    for (name, record) in BINARY.iter().chain(&COMPARE) {
        let mut p = Program::new(name);
        let (x, v) = (p.parameter::<T>(&[4, 5]), p.parameter::<T>(&[5]));
        if T::TYPE.kind == Kind::Complex && matches!(*name, "div" | "pow" | "atan2") {
            // The textbook formulas here, XLA's own algorithms there: they differ (most with
            // infinities and NaNs), documented in the README, not compared bit for bit.
            continue;
        }
        let Ok(y) = record(&mut p, x, v, &[1]) else {
            continue; // not defined for this type (checked against the crate's traits below)
        };
        p.output(y).unwrap();
        let mut inputs = vec![random::<T>(rng, &[4, 5]), random::<T>(rng, &[5])];
        if *name == "pow" && T::TYPE.kind != Kind::Float {
            // XLA's integer pow reads 6 bits of the exponent; the crate the whole exponent
            // (docs/references.md): exponents below 64 here.
            inputs[1] = T::small(rng, &[5]);
        }
        case(format!("{name}/{ty}"), &p, inputs, corpus);
    }
    let mut p = Program::new("others");
    let x = p.parameter::<T>(&[3, 4]);
    let pred = p.parameter::<bool>(&[3, 1]);
    let lo = p.parameter::<T>(&[]);
    let s = p.select(pred, x, lo).unwrap();
    // Complex numbers have no clamp: a second select stands in.
    let c = p
        .clamp(lo, x, lo)
        .or_else(|_| p.select(pred, lo, x))
        .unwrap();
    let r = p.reduce_in_dim(x, &[4, 1], &[1, 0]).unwrap();
    let b = p.broadcast_in_dim(lo, &[2, 3], &[]).unwrap();
    // Not zero: XLA simplifies `x + 0.0` to `x`, wrong for `x = -0.0` (docs/references.md).
    let k = p.constant(T::xla_one());
    let plus = p.add(x, k, &[]).unwrap();
    for v in [s, c, r, b, plus] {
        p.output(v).unwrap();
    }
    let inputs = vec![
        random::<T>(rng, &[3, 4]),
        random::<bool>(rng, &[3, 1]),
        random::<T>(rng, &[]),
    ];
    case(format!("select_clamp_reduce/{ty}"), &p, inputs, corpus);
}

/// The unary ops of every type, on `[3, 4]` inputs.
fn unaries_of<T: Sample>(rng: &mut Rng, corpus: &mut Vec<Json>)
where
    Tensor: From<ArrayD<T>>,
{
    let ty = T::TYPE.name;
    for (name, record) in UNARY {
        let mut p = Program::new(name);
        let x = p.parameter::<T>(&[3, 4]);
        let Ok(y) = record(&mut p, x) else {
            continue; // not defined for this type (checked in tests/stablehlo_unary.rs)
        };
        p.output(y).unwrap();
        case(
            format!("{name}/{ty}"),
            &p,
            vec![random::<T>(rng, &[3, 4])],
            corpus,
        );
    }
}

/// A transcendental op: its name, recorder, input range, and ulps for f32, f64, f16, bf16.
type Transcendental = (&'static str, Unarier, (f64, f64), [u32; 4]);

/// The transcendental ops: each op and float type on 256 inputs over the op's range (and its
/// special values), and the ulps XLA's results may be from the crate's (the most this corpus
/// shows, XLA's error and the crate's together: both approximate, XLA per type its own way;
/// docs/references.md).
#[rustfmt::skip]
const TRANSCENDENTAL: [Transcendental; 11] = [
    // (name, recorder, input range, ulps for f32, f64, f16, bf16)
    ("exp", Program::exp, (-120.0, 120.0), [2, 2, 1, 1]),
    ("expm1", Program::expm1, (-20.0, 90.0), [5, 3, 2, 1]),
    ("log", Program::log, (0.0, 1e30), [1, 2, 1, 1]),
    ("log1p", Program::log1p, (-1.0, 1e6), [2, 90, 1, 1]),
    ("logistic", Program::logistic, (-100.0, 100.0), [3, 4, 1, 1]),
    ("tanh", Program::tanh, (-12.0, 12.0), [4, 8, 1, 1]),
    ("rsqrt", Program::rsqrt, (0.0, 1e30), [1, 1, 1, 1]),
    ("cbrt", Program::cbrt, (-1e30, 1e30), [1, 2, 1, 1]),
    ("sin", Program::sin, (-100.0, 100.0), [1, 1, 1, 1]),
    ("cos", Program::cos, (-100.0, 100.0), [1, 1, 1, 1]),
    ("tan", Program::tan, (-100.0, 100.0), [1, 1, 1, 1]),
];

/// Each transcendental op on one float type: `make` turns `f64` inputs into its tensor and
/// `which` picks its column of ulps.
fn transcendentals_of(
    rng: &mut Rng,
    ty: &str,
    param: fn(&mut Program, &[usize]) -> Value,
    make: fn(Vec<f64>) -> Tensor,
    which: usize,
    corpus: &mut Vec<Json>,
) {
    for (name, record, (lo, hi), ulps) in TRANSCENDENTAL {
        let mut xs = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1.0,
            -1.0,
            0.5,
        ];
        while xs.len() < 256 {
            let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            xs.push(match xs.len() % 2 {
                0 => lo + (hi - lo) * u,
                _ => (u * 40.0 - 30.0).exp2() * if rng.next() & 1 == 0 { 1.0 } else { -1.0 },
            });
        }
        let mut p = Program::new(name);
        let x = param(&mut p, &[256]);
        let y = record(&mut p, x).unwrap();
        p.output(y).unwrap();
        case_within(
            format!("{name}/{ty}"),
            &p,
            vec![make(xs)],
            ulps[which],
            corpus,
        );
        // XLA's CPU code gives zero where these results are subnormal (README).
        if matches!(name, "exp" | "logistic") {
            corpus.last_mut().expect("just pushed")["flushes"] = json!(true);
        }
    }
}

/// The complex ops on 128 inputs with finite parts (zeros among them), each allowed a few
/// machine epsilons of the modulus apart: XLA and the crate compute them in different ways. Signed zeros are alike
/// here (XLA's `sign` keeps a zero's signs where StableHLO gives `+0`, and its `sqrt` gives
/// `+0` parts where C99's principal root, the crate's, keeps `-0`: README).
#[cfg(feature = "complex")]
fn complex_ops_of(rng: &mut Rng, corpus: &mut Vec<Json>) {
    use num_complex::Complex;
    let ops = UNARY
        .iter()
        .map(|&(name, record)| (name, record, (-10.0, 10.0)))
        .chain(
            TRANSCENDENTAL
                .iter()
                .map(|&(name, record, _, _)| (name, record, (-4.0, 4.0))),
        );
    for (name, record, (lo, hi)) in ops {
        let mut part = || {
            let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            if u < 0.1 {
                0.0
            } else {
                lo + (hi - lo) * u
            }
        };
        let values: Vec<Complex<f64>> = (0..128).map(|_| Complex::new(part(), part())).collect();
        let narrow: Vec<Complex<f32>> = values
            .iter()
            .map(|z| Complex::new(z.re as f32, z.im as f32))
            .collect();
        let line = |n| IxDyn(&[n]);
        for (ty, input) in [
            (
                "complex<f32>",
                Tensor::from(ArrayD::from_shape_vec(line(128), narrow.clone()).unwrap()),
            ),
            (
                "complex<f64>",
                Tensor::from(ArrayD::from_shape_vec(line(128), values.clone()).unwrap()),
            ),
        ] {
            let mut p = Program::new(name);
            let x = match ty {
                "complex<f32>" => p.parameter::<Complex<f32>>(&[128]),
                _ => p.parameter::<Complex<f64>>(&[128]),
            };
            // XLA's CPU compiler refuses a complex `cbrt` (README).
            let Some(y) = record(&mut p, x).ok().filter(|_| name != "cbrt") else {
                continue; // not defined for complex numbers
            };
            p.output(y).unwrap();
            // Complex results: within 8 machine epsilons of the modulus (`tools/xla_check.py`).
            let ulps = match name {
                "neg" => 0,
                "abs" => 1,
                _ => 8,
            };
            case_within(format!("{name}/{ty}"), &p, vec![input], ulps, corpus);
            corpus.last_mut().expect("just pushed")["signed_zeros"] = json!(true);
        }
    }
}

/// `convert` from `T` to every element type, on 64 of `T`'s values worth testing.
fn converts_of<T: Sample>(rng: &mut Rng, corpus: &mut Vec<Json>)
where
    Tensor: From<ArrayD<T>>,
{
    let targets: Vec<(&str, Unarier)> = vec![
        ("i1", Program::convert::<bool>),
        ("i8", Program::convert::<i8>),
        ("i16", Program::convert::<i16>),
        ("i32", Program::convert::<i32>),
        ("i64", Program::convert::<i64>),
        ("ui8", Program::convert::<u8>),
        ("ui16", Program::convert::<u16>),
        ("ui32", Program::convert::<u32>),
        ("ui64", Program::convert::<u64>),
        ("f32", Program::convert::<f32>),
        ("f64", Program::convert::<f64>),
        #[cfg(feature = "half")]
        ("f16", Program::convert::<half::f16>),
        #[cfg(feature = "half")]
        ("bf16", Program::convert::<half::bf16>),
        #[cfg(feature = "complex")]
        (
            "complex<f32>",
            Program::convert::<num_complex::Complex<f32>>,
        ),
        #[cfg(feature = "complex")]
        (
            "complex<f64>",
            Program::convert::<num_complex::Complex<f64>>,
        ),
    ];
    for (to, record) in targets {
        let mut p = Program::new("convert");
        let x = p.parameter::<T>(&[64]);
        let y = record(&mut p, x).unwrap();
        p.output(y).unwrap();
        case(
            format!("convert/{}->{to}", T::TYPE.name),
            &p,
            vec![random::<T>(rng, &[64])],
            corpus,
        );
    }
}

/// Conversions whose two roundings through `f32` (XLA's, and the crate's) differ from one:
/// values just past a tie of the narrow type that `f32` rounds onto the tie.
#[cfg(feature = "half")]
fn convert_ties(corpus: &mut Vec<Json>) {
    let wide = |v: Vec<f64>| Tensor::from(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap());
    let f64s = vec![
        1.0 + 2f64.powi(-8) + 2f64.powi(-30),
        1.0 + 2f64.powi(-11) + 2f64.powi(-40),
    ];
    let ints = vec![(1i64 << 62) + (1 << 54) + 1, (1 << 40) + (1 << 32) + 1];
    for (to, record) in [
        ("f16", Program::convert::<half::f16> as Unarier),
        ("bf16", Program::convert::<half::bf16>),
    ] {
        let mut p = Program::new("convert");
        let x = p.parameter::<f64>(&[2]);
        let y = record(&mut p, x).unwrap();
        p.output(y).unwrap();
        case(
            format!("convert ties/f64->{to}"),
            &p,
            vec![wide(f64s.clone())],
            corpus,
        );
        let mut p = Program::new("convert");
        let x = p.parameter::<i64>(&[2]);
        let y = record(&mut p, x).unwrap();
        p.output(y).unwrap();
        let input = Tensor::from(ArrayD::from_shape_vec(IxDyn(&[2]), ints.clone()).unwrap());
        case(format!("convert ties/i64->{to}"), &p, vec![input], corpus);
    }
}

/// The reductions over axes of every type, on `[3, 2]` inputs.
fn reductions_of<T: Sample>(rng: &mut Rng, corpus: &mut Vec<Json>)
where
    Tensor: From<ArrayD<T>>,
{
    let ty = T::TYPE.name;
    // Reductions over dims of 2 and 3 (XLA drops the init of a reduction over a size-1 or
    // empty dim, which changes the sign of a zero sum: README), the products over 2 elements
    // only, whose rounding then does not depend on the order.
    for (name, record) in REDUCE {
        for axes in [&[1][..], &[0], &[0, 1]] {
            if name == "reduce_prod" && axes != [1] {
                continue;
            }
            let mut p = Program::new(name);
            let x = p.parameter::<T>(&[3, 2]);
            let Ok(y) = record(&mut p, x, axes) else {
                continue; // not defined for this type (checked in tests/stablehlo_reduce.rs)
            };
            p.output(y).unwrap();
            case(
                format!("{name}{axes:?}/{ty}"),
                &p,
                vec![random::<T>(rng, &[3, 2])],
                corpus,
            );
        }
    }
}

/// `argmin` and `argmax` over each axis of `[5, 4, 3]` inputs (NaNs, signed zeros and ties
/// among them), into indices of three integer types; and array constants of the type.
fn arg_reductions_of<T: Sample>(rng: &mut Rng, corpus: &mut Vec<Json>)
where
    Tensor: From<ArrayD<T>>,
{
    let ty = T::TYPE.name;
    for axis in 0..3 {
        for max in [false, true] {
            let mut p = Program::new("arg");
            let x = p.parameter::<T>(&[5, 4, 3]);
            let (a, b) = match max {
                false => (p.argmin::<i32>(x, axis), p.argmin::<u8>(x, axis)),
                true => (p.argmax::<i64>(x, axis), p.argmax::<u8>(x, axis)),
            };
            p.output(a.unwrap()).unwrap();
            p.output(b.unwrap()).unwrap();
            let name = if max { "argmax" } else { "argmin" };
            case(
                format!("{name}[{axis}]/{ty}"),
                &p,
                vec![random::<T>(rng, &[5, 4, 3])],
                corpus,
            );
        }
    }
    let mut p = Program::new("constants");
    let c = ArrayD::<T>::from_shape_fn(IxDyn(&[2, 3]), |_| T::sample(rng));
    let splat = ArrayD::<T>::from_elem(IxDyn(&[3]), T::sample(rng));
    let (c, splat) = (p.constant_array(&c), p.constant_array(&splat));
    p.output(c).unwrap();
    p.output(splat).unwrap();
    case(format!("constant_array/{ty}"), &p, vec![], corpus);
}

/// `iota` of several types along each dim, and a causal mask built from two.
fn iotas(corpus: &mut Vec<Json>) {
    let mut p = Program::new("iota");
    for dim in 0..3 {
        let a = p.iota::<f32>(&[3, 4, 2], dim).unwrap();
        let b = p.iota::<u16>(&[3, 4, 2], dim).unwrap();
        let c = p.iota::<i64>(&[3, 4, 2], dim).unwrap();
        for v in [a, b, c] {
            p.output(v).unwrap();
        }
    }
    case("iota".to_string(), &p, vec![], corpus);
    let mut p = Program::new("causal");
    let x = p.parameter::<f32>(&[2, 5, 5]);
    let (q, k) = (
        p.iota::<i32>(&[5, 5], 0).unwrap(),
        p.iota::<i32>(&[5, 5], 1).unwrap(),
    );
    let keep = p.le(k, q, &[]).unwrap();
    let keep = p.broadcast_in_dim(keep, &[2, 5, 5], &[1, 2]).unwrap();
    let low = p.constant(f32::NEG_INFINITY);
    let low = p.broadcast_in_dim(low, &[2, 5, 5], &[]).unwrap();
    let masked = p.select(keep, x, low).unwrap();
    p.output(masked).unwrap();
    let mut rng = Rng(0x510e_527f_ade6_82d1);
    case(
        "causal mask".to_string(),
        &p,
        vec![random::<f32>(&mut rng, &[2, 5, 5])],
        corpus,
    );
}

/// Random chains of ops with random broadcasting: degenerate dims, rank-0 and lower-rank
/// operands with `broadcast_dimensions`.
fn random_programs<T: Sample>(rng: &mut Rng, count: usize, corpus: &mut Vec<Json>)
where
    Tensor: From<ArrayD<T>>,
{
    // Integer pow with exponents of 64 and more is a documented difference (see `ops_of`).
    let integer = T::TYPE.kind != Kind::Float;
    let ops: Vec<(&str, Recorder)> = BINARY
        .iter()
        .copied()
        .filter(|(name, _)| !(integer && *name == "pow"))
        .collect();
    let mut made = 0;
    while made < count {
        let rank = 1 + rng.below(3);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
        let mut p = Program::new("random");
        let x = p.parameter::<T>(&shape);
        let mut inputs = vec![random::<T>(rng, &shape)];
        let mut cur = x;
        for _ in 0..1 + rng.below(4) {
            // The other operand: the same shape with some dims 1, a scalar, or a suffix of dims
            // placed with broadcast_dimensions.
            let (other_shape, dims): (Vec<usize>, Vec<usize>) = match rng.below(3) {
                0 => (
                    shape
                        .iter()
                        .map(|&n| if rng.below(2) == 0 { 1 } else { n })
                        .collect(),
                    vec![],
                ),
                1 => (vec![], vec![]),
                _ => {
                    let keep: Vec<usize> = (0..rank).filter(|_| rng.below(2) == 0).collect();
                    (keep.iter().map(|&d| shape[d]).collect(), keep)
                }
            };
            let y = p.parameter::<T>(&other_shape);
            inputs.push(random::<T>(rng, &other_shape));
            let (_, record) = ops[rng.below(ops.len())];
            let (a, b) = if rng.below(2) == 0 {
                (cur, y)
            } else {
                (y, cur)
            };
            if let Ok(next) = record(&mut p, a, b, &dims) {
                cur = next;
            }
        }
        p.output(cur).unwrap();
        case(format!("random{made}/{}", T::TYPE.name), &p, inputs, corpus);
        made += 1;
    }
}

/// The broadcasting patterns of the conformance data: XLA binary ops, NumPy's implicit rule
/// spelled out, and broadcast_in_dim. (Paddle's patterns need a reshape of `y`'s trailing
/// size-1 dims, which a program does not record.)
fn conformance(corpus: &mut Vec<Json>) {
    let data: Json = serde_json::from_str(include_str!("data/xla_binary.json")).unwrap();
    let shape = |v: &Json| -> Vec<usize> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect()
    };
    let fill = |shape: &[usize], f: &dyn Fn(usize) -> f32| -> Tensor {
        let n: usize = shape.iter().product();
        ArrayD::from_shape_vec(IxDyn(shape), (0..n).map(f).collect())
            .unwrap()
            .into()
    };
    for (k, c) in data["cases"].as_array().unwrap().iter().enumerate() {
        if c["out"].is_null() {
            continue;
        }
        let (ls, rs, dims) = (shape(&c["lhs"]), shape(&c["rhs"]), shape(&c["dims"]));
        let mut p = Program::new("conformance");
        let (l, r) = (p.parameter::<f32>(&ls), p.parameter::<f32>(&rs));
        let out = p.add(l, r, &dims).unwrap();
        p.output(out).unwrap();
        let inputs = vec![
            fill(&ls, &|i| i as f32),
            fill(&rs, &|i| 1000.0 * (i + 1) as f32),
        ];
        case(format!("xla_binary{k}"), &p, inputs, corpus);
    }
    // NumPy's patterns, as the strict rule spells them: the lower-rank operand's dims map onto
    // the trailing ones (what `xla_bcast::numpy` translates them into).
    let data: Json = serde_json::from_str(include_str!("data/numpy.json")).unwrap();
    for (k, c) in data["cases"].as_array().unwrap().iter().enumerate() {
        let shapes = c["shapes"].as_array().unwrap();
        if shapes.len() != 2 || c["out"].is_null() {
            continue;
        }
        let (ls, rs) = (shape(&shapes[0]), shape(&shapes[1]));
        let (lo, hi) = (ls.len().min(rs.len()), ls.len().max(rs.len()));
        let dims: Vec<usize> = if lo == hi {
            vec![]
        } else {
            (hi - lo..hi).collect()
        };
        let mut p = Program::new("conformance");
        let (l, r) = (p.parameter::<f32>(&ls), p.parameter::<f32>(&rs));
        let out = p.add(l, r, &dims).unwrap();
        p.output(out).unwrap();
        let inputs = vec![
            fill(&ls, &|i| i as f32),
            fill(&rs, &|i| 1000.0 * (i + 1) as f32),
        ];
        case(format!("numpy{k}"), &p, inputs, corpus);
    }
    let data: Json = serde_json::from_str(include_str!("data/broadcast_in_dim.json")).unwrap();
    for (k, c) in data["cases"].as_array().unwrap().iter().enumerate() {
        if c["ok"] != true {
            continue;
        }
        let (operand, out_shape, dims) = (
            shape(&c["operand"]),
            shape(&c["out_shape"]),
            shape(&c["dims"]),
        );
        let mut p = Program::new("conformance");
        let x = p.parameter::<f32>(&operand);
        let out = p.broadcast_in_dim(x, &out_shape, &dims).unwrap();
        p.output(out).unwrap();
        case(
            format!("broadcast_in_dim{k}"),
            &p,
            vec![fill(&operand, &|i| (i + 1) as f32)],
            corpus,
        );
    }
}

#[test]
fn export_corpus() {
    let mut corpus = Vec::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    ops_of::<bool>(&mut rng, &mut corpus);
    ops_of::<i8>(&mut rng, &mut corpus);
    ops_of::<i16>(&mut rng, &mut corpus);
    ops_of::<i32>(&mut rng, &mut corpus);
    ops_of::<i64>(&mut rng, &mut corpus);
    ops_of::<u8>(&mut rng, &mut corpus);
    ops_of::<u16>(&mut rng, &mut corpus);
    ops_of::<u32>(&mut rng, &mut corpus);
    ops_of::<u64>(&mut rng, &mut corpus);
    ops_of::<f32>(&mut rng, &mut corpus);
    ops_of::<f64>(&mut rng, &mut corpus);
    #[cfg(feature = "half")]
    {
        ops_of::<half::f16>(&mut rng, &mut corpus);
        ops_of::<half::bf16>(&mut rng, &mut corpus);
        random_programs::<half::f16>(&mut rng, 30, &mut corpus);
        random_programs::<half::bf16>(&mut rng, 30, &mut corpus);
    }
    #[cfg(feature = "complex")]
    {
        ops_of::<num_complex::Complex<f32>>(&mut rng, &mut corpus);
        ops_of::<num_complex::Complex<f64>>(&mut rng, &mut corpus);
    }
    let per_type = corpus.len();
    conformance(&mut corpus);
    random_programs::<f32>(&mut rng, 120, &mut corpus);
    random_programs::<i32>(&mut rng, 120, &mut corpus);
    random_programs::<f64>(&mut rng, 40, &mut corpus);
    random_programs::<u8>(&mut rng, 40, &mut corpus);
    // Streams of their own, so that the cases above keep their inputs.
    let mut unary_rng = Rng(0x2545_f491_4f6c_dd1d);
    unaries_of::<bool>(&mut unary_rng, &mut corpus);
    unaries_of::<i8>(&mut unary_rng, &mut corpus);
    unaries_of::<i16>(&mut unary_rng, &mut corpus);
    unaries_of::<i32>(&mut unary_rng, &mut corpus);
    unaries_of::<i64>(&mut unary_rng, &mut corpus);
    unaries_of::<u8>(&mut unary_rng, &mut corpus);
    unaries_of::<u16>(&mut unary_rng, &mut corpus);
    unaries_of::<u32>(&mut unary_rng, &mut corpus);
    unaries_of::<u64>(&mut unary_rng, &mut corpus);
    unaries_of::<f32>(&mut unary_rng, &mut corpus);
    unaries_of::<f64>(&mut unary_rng, &mut corpus);
    #[cfg(feature = "half")]
    {
        unaries_of::<half::f16>(&mut unary_rng, &mut corpus);
        unaries_of::<half::bf16>(&mut unary_rng, &mut corpus);
    }
    #[cfg(feature = "complex")]
    complex_ops_of(&mut Rng(0x6a09_e667_f3bc_c909), &mut corpus);
    // Streams of their own, so that the cases above keep their inputs.
    let mut arg_rng = Rng(0x9b05_688c_2b3e_6c1f);
    arg_reductions_of::<bool>(&mut arg_rng, &mut corpus);
    arg_reductions_of::<i8>(&mut arg_rng, &mut corpus);
    arg_reductions_of::<i32>(&mut arg_rng, &mut corpus);
    arg_reductions_of::<u16>(&mut arg_rng, &mut corpus);
    arg_reductions_of::<u64>(&mut arg_rng, &mut corpus);
    arg_reductions_of::<f32>(&mut arg_rng, &mut corpus);
    arg_reductions_of::<f64>(&mut arg_rng, &mut corpus);
    #[cfg(feature = "half")]
    {
        arg_reductions_of::<half::f16>(&mut arg_rng, &mut corpus);
        arg_reductions_of::<half::bf16>(&mut arg_rng, &mut corpus);
    }
    iotas(&mut corpus);
    let mut math_rng = Rng(0x1405_7b7e_f767_814f);
    fn vec(xs: Vec<f64>) -> ArrayD<f64> {
        ArrayD::from_shape_vec(IxDyn(&[xs.len()]), xs).unwrap()
    }
    transcendentals_of(
        &mut math_rng,
        "f32",
        |p, s| p.parameter::<f32>(s),
        |xs| vec(xs).mapv(|x| x as f32).into(),
        0,
        &mut corpus,
    );
    transcendentals_of(
        &mut math_rng,
        "f64",
        |p, s| p.parameter::<f64>(s),
        |xs| vec(xs).into(),
        1,
        &mut corpus,
    );
    #[cfg(feature = "half")]
    {
        transcendentals_of(
            &mut math_rng,
            "f16",
            |p, s| p.parameter::<half::f16>(s),
            |xs| vec(xs).mapv(half::f16::from_f64).into(),
            2,
            &mut corpus,
        );
        transcendentals_of(
            &mut math_rng,
            "bf16",
            |p, s| p.parameter::<half::bf16>(s),
            |xs| vec(xs).mapv(half::bf16::from_f64).into(),
            3,
            &mut corpus,
        );
    }
    let mut convert_rng = Rng(0x510e_527f_ade6_82d1);
    converts_of::<bool>(&mut convert_rng, &mut corpus);
    converts_of::<i8>(&mut convert_rng, &mut corpus);
    converts_of::<i16>(&mut convert_rng, &mut corpus);
    converts_of::<i32>(&mut convert_rng, &mut corpus);
    converts_of::<i64>(&mut convert_rng, &mut corpus);
    converts_of::<u8>(&mut convert_rng, &mut corpus);
    converts_of::<u16>(&mut convert_rng, &mut corpus);
    converts_of::<u32>(&mut convert_rng, &mut corpus);
    converts_of::<u64>(&mut convert_rng, &mut corpus);
    converts_of::<f32>(&mut convert_rng, &mut corpus);
    converts_of::<f64>(&mut convert_rng, &mut corpus);
    #[cfg(feature = "half")]
    {
        converts_of::<half::f16>(&mut convert_rng, &mut corpus);
        converts_of::<half::bf16>(&mut convert_rng, &mut corpus);
        convert_ties(&mut corpus);
    }
    #[cfg(feature = "complex")]
    {
        converts_of::<num_complex::Complex<f32>>(&mut convert_rng, &mut corpus);
        converts_of::<num_complex::Complex<f64>>(&mut convert_rng, &mut corpus);
    }
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    reductions_of::<bool>(&mut rng, &mut corpus);
    reductions_of::<i8>(&mut rng, &mut corpus);
    reductions_of::<i16>(&mut rng, &mut corpus);
    reductions_of::<i32>(&mut rng, &mut corpus);
    reductions_of::<i64>(&mut rng, &mut corpus);
    reductions_of::<u8>(&mut rng, &mut corpus);
    reductions_of::<u16>(&mut rng, &mut corpus);
    reductions_of::<u32>(&mut rng, &mut corpus);
    reductions_of::<u64>(&mut rng, &mut corpus);
    reductions_of::<f32>(&mut rng, &mut corpus);
    reductions_of::<f64>(&mut rng, &mut corpus);
    #[cfg(feature = "half")]
    {
        reductions_of::<half::f16>(&mut rng, &mut corpus);
        reductions_of::<half::bf16>(&mut rng, &mut corpus);
    }
    #[cfg(feature = "complex")]
    {
        reductions_of::<num_complex::Complex<f32>>(&mut rng, &mut corpus);
        reductions_of::<num_complex::Complex<f64>>(&mut rng, &mut corpus);
    }
    // Every op of every type: 15 binary + 6 compare for integers (no atan2), and so on.
    assert!(per_type >= 11 * 7, "{per_type}");
    assert!(corpus.len() > 500, "{}", corpus.len());
    if let Ok(path) = std::env::var("XLA_BCAST_EXPORT") {
        std::fs::write(
            &path,
            serde_json::to_string(&json!({"cases": corpus})).unwrap(),
        )
        .unwrap();
        println!("wrote {} programs to {path}", corpus.len());
    }
}

/// `run` gives the array ops' results, bit for bit, where the engine takes its other roads:
/// sums large enough to fold in parallel blocks (over the outer dim, the inner one, both), of
/// each kind of element, and binary ops on transposed and broadcast operands.
#[test]
fn run_matches_the_array_ops_on_large_inputs() {
    use ndarray::Array2;
    use xla_bcast::prelude::*;
    let (m, n) = (700, 450);
    let f = Array2::from_shape_fn((m, n), |(i, j)| {
        ((i * 31 + j * 17) % 1000) as f32 * 0.37 - 150.0
    });
    let i = f.mapv(|v| (v * 1000.0) as i32);
    let b = f.mapv(|v| v > 140.0);
    for (operand, dims) in [
        (vec![n], vec![1]),
        (vec![m], vec![0]),
        (vec![], vec![]),
        (vec![1, n], vec![0, 1]),
    ] {
        let run = |t: Tensor| {
            let mut p = Program::new("sum");
            let x = match &t {
                Tensor::F32(_) => p.parameter::<f32>(&[m, n]),
                Tensor::I32(_) => p.parameter::<i32>(&[m, n]),
                _ => p.parameter::<bool>(&[m, n]),
            };
            let s = p.reduce_in_dim(x, &operand, &dims).unwrap();
            p.output(s).unwrap();
            p.run(&[t]).unwrap().remove(0)
        };
        let fd = f.clone().into_dyn();
        assert_eq!(
            run(fd.clone().into()),
            fd.reduce_in_dim(&operand[..], &dims).unwrap().into(),
            "f32 {operand:?}"
        );
        let id = i.clone().into_dyn();
        assert_eq!(
            run(id.clone().into()),
            id.reduce_in_dim(&operand[..], &dims).unwrap().into(),
            "i32 {operand:?}"
        );
        let bd = b.clone().into_dyn();
        assert_eq!(
            run(bd.clone().into()),
            bd.reduce_in_dim(&operand[..], &dims).unwrap().into(),
            "bool {operand:?}"
        );
    }
    // A transposed lhs and a broadcast column, through the kernel table's staged and gathered
    // reads.
    let mut p = Program::new("t");
    let x = p.parameter::<f32>(&[m, n]);
    let c = p.parameter::<f32>(&[n, 1]);
    let xt = p.broadcast_in_dim(x, &[n, m], &[1, 0]).unwrap();
    let y = p.sub(xt, c, &[]).unwrap();
    let g = p.gt(c, xt, &[]).unwrap();
    p.output(y).unwrap();
    p.output(g).unwrap();
    let col = f.slice(ndarray::s![..n, ..1]).to_owned();
    let out = p
        .run(&[f.clone().into_dyn().into(), col.clone().into_dyn().into()])
        .unwrap();
    let want = f.t().sub_bcast(&col, &[]).unwrap();
    assert_eq!(out[0], want.into_dyn().into());
    assert_eq!(out[1], col.gt_bcast(&f.t(), &[]).unwrap().into_dyn().into());
}

/// Shardings on a 2-D mesh, a dim split and a dim replicated, in Shardy's text (the default)
/// and GSPMD's: the mesh, an argument's and a result's attribute, and a pinned intermediate.
#[test]
fn shardy_text() {
    let mut p = Program::new("sharded");
    p.set_mesh(Mesh::new(&[("data", 4), ("model", 2)]).unwrap())
        .unwrap();
    let x = p.parameter::<f32>(&[8, 6]);
    p.shard(x, &PartitionSpec::new(&[&["data"], &[]])).unwrap();
    let e = p.exp(x).unwrap();
    p.shard(e, &PartitionSpec::new(&[&[], &["model"]])).unwrap();
    let s = p.reduce_sum(e, &[0]).unwrap();
    p.output(s).unwrap();
    p.shard(s, &PartitionSpec::new(&[&["model"]])).unwrap();
    let head =
        "module @sharded attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {";
    let body = "    %0 = stablehlo.exponential %arg0 : tensor<8x6xf32>";
    let reduce = "    %2 = stablehlo.constant dense<0x00000000> : tensor<f32>
    %3 = stablehlo.reduce(%1 init: %2) applies stablehlo.add across dimensions = [0] : (tensor<8x6xf32>, tensor<f32>) -> tensor<6xf32>
    return %3 : tensor<6xf32>
  }
}
";
    let shardy = format!(
        r#"{head}
  sdy.mesh @mesh = <["data"=4, "model"=2]>
  func.func public @main(%arg0: tensor<8x6xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{"data"}}, {{}}]>}}) -> (tensor<6xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{"model"}}]>}}) {{
{body}
    %1 = sdy.sharding_constraint %0 <@mesh, [{{}}, {{"model"}}]> : tensor<8x6xf32>
"#
    );
    assert_eq!(p.to_stablehlo(), shardy + reduce);
    let gspmd = format!(
        r#"{head}
  func.func public @main(%arg0: tensor<8x6xf32> {{mhlo.sharding = "{{devices=[4,1,2]<=[8] last_tile_dim_replicate}}"}}) -> (tensor<6xf32> {{mhlo.sharding = "{{devices=[2,4]<=[4,2]T(1,0) last_tile_dim_replicate}}"}}) {{
{body}
    %1 = stablehlo.custom_call @Sharding(%0) {{mhlo.sharding = "{{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}}"}} : (tensor<8x6xf32>) -> tensor<8x6xf32>
"#
    );
    assert_eq!(p.to_stablehlo_with(ShardingDialect::Gspmd), gspmd + reduce);
    // Without shardings, both dialects print the same module.
    let mut q = Program::new("plain");
    let y = q.parameter::<f32>(&[2]);
    q.output(y).unwrap();
    assert_eq!(
        q.to_stablehlo(),
        q.to_stablehlo_with(ShardingDialect::Gspmd)
    );
    assert!(!q.to_stablehlo().contains("sdy"));
}

/// A mesh axis of the SPMD corpus: name and size.
type Axis = (&'static str, usize);

/// The SPMD corpus's meshes: 1-D, 2-D and 4-D, 8 devices each.
const MESHES: [&[Axis]; 3] = [
    &[("x", 8)],
    &[("data", 4), ("model", 2)],
    &[("a", 2), ("b", 2), ("c", 2), ("d", 1)],
];

/// A random sharding of `shape` on `mesh`: each dim split over mesh axes (unused so far) whose
/// device count divides it, or replicated.
fn random_spec(rng: &mut Rng, mesh: &[Axis], shape: &[usize]) -> Vec<Vec<&'static str>> {
    let mut free: Vec<Axis> = mesh.to_vec();
    shape
        .iter()
        .map(|&n| {
            let mut axes = Vec::new();
            let mut devices = 1;
            while !free.is_empty() && rng.below(3) > 0 {
                let (name, size) = free[rng.below(free.len())];
                if n % (devices * size) != 0 {
                    break;
                }
                free.retain(|&(f, _)| f != name);
                axes.push(name);
                devices *= size;
            }
            axes
        })
        .collect()
}

/// The devices a dim split over `axes` of `mesh` spans (an axis of size 1 splits nothing).
fn devices(mesh: &[Axis], axes: &[&str]) -> usize {
    let size = |a: &&str| mesh.iter().find(|(n, _)| n == a).map_or(1, |(_, s)| *s);
    axes.iter().map(size).product()
}

/// Shards `v` as `spec` says, and returns the spec for the corpus.
fn shard(p: &mut Program, v: Value, spec: &[Vec<&'static str>]) -> Json {
    let dims: Vec<&[&str]> = spec.iter().map(|d| &d[..]).collect();
    p.shard(v, &PartitionSpec::new(&dims)).unwrap();
    json!(spec)
}

/// A tensor of `shape` holding integers from 0 to `max` (sums and products of a few of them are
/// exact in every type, in any order), of the type `convert` makes from `f64`.
fn exact(rng: &mut Rng, shape: &[usize], lo: i64, max: i64, convert: Unarier) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| (lo + rng.below((max - lo + 1) as usize) as i64) as f64)
        .collect();
    let mut p = Program::new("values");
    let x = p.parameter::<f64>(shape);
    let y = convert(&mut p, x).unwrap();
    p.output(y).unwrap();
    p.run(&[ArrayD::from_shape_vec(IxDyn(shape), v).unwrap().into()])
        .unwrap()
        .remove(0)
}

/// An element type of the SPMD corpus: its name, a parameter of it, and the conversion to it.
type Typed = (&'static str, fn(&mut Program, &[usize]) -> Value, Unarier);

fn spmd_types() -> Vec<Typed> {
    macro_rules! ty {
        ($t:ty) => {
            (
                <$t as StableHloElement>::TYPE.name,
                (|p: &mut Program, s: &[usize]| p.parameter::<$t>(s))
                    as fn(&mut Program, &[usize]) -> Value,
                Program::convert::<$t> as Unarier,
            )
        };
    }
    #[allow(unused_mut)]
    let mut types: Vec<Typed> = vec![
        ty!(bool),
        ty!(i8),
        ty!(i16),
        ty!(i32),
        ty!(i64),
        ty!(u8),
        ty!(u16),
        ty!(u32),
        ty!(u64),
        ty!(f32),
        ty!(f64),
    ];
    #[cfg(feature = "half")]
    types.extend([ty!(half::f16), ty!(half::bf16)]);
    #[cfg(feature = "complex")]
    types.extend([
        ty!(num_complex::Complex<f32>),
        ty!(num_complex::Complex<f64>),
    ]);
    types
}

/// Records a case of the SPMD corpus: the program (every parameter and output sharded), its
/// inputs and the crate's outputs, the mesh and the specs, and whether a reduction runs over a
/// split dim (XLA must then insert a collective).
fn spmd_case(
    name: String,
    p: &Program,
    inputs: Vec<Tensor>,
    specs: (Vec<Json>, Vec<Json>),
    mesh: &[Axis],
    reduces_split: bool,
    corpus: &mut Vec<Json>,
) {
    let before = corpus.len();
    case(name, p, inputs, corpus);
    let c = &mut corpus[before];
    c["mesh"] = json!(mesh.iter().map(|(n, s)| json!([n, s])).collect::<Vec<_>>());
    c["in_specs"] = json!(specs.0);
    c["out_specs"] = json!(specs.1);
    c["reduces_split"] = json!(reduces_split);
    c["module_gspmd"] = json!(p.to_stablehlo_with(ShardingDialect::Gspmd));
}

/// The programs `tools/xla_spmd_check.py` runs on 8 devices (`XLA_BCAST_SPMD_EXPORT=<file>`):
/// every op family of every element type on each mesh, the workloads of the fused-programs
/// benchmarks, and 240 random programs, all with random shardings.
#[test]
fn spmd_corpus() {
    let mut corpus = Vec::new();
    let mut rng = Rng(0x243f_6a88_85a3_08d3);
    for mesh in MESHES {
        let set_mesh = |p: &mut Program| p.set_mesh(Mesh::new(mesh).unwrap()).unwrap();
        let shape: Vec<usize> = match mesh.len() {
            4 => vec![2, 4, 2, 4],
            _ => vec![8, 4],
        };
        let mesh_name = mesh
            .iter()
            .map(|(n, s)| format!("{n}{s}"))
            .collect::<Vec<_>>()
            .join("x");
        for (ty, param, convert) in spmd_types() {
            // Binary ops and comparisons: two sharded operands, each result sharded anew.
            let mut p = Program::new("binary");
            set_mesh(&mut p);
            let (x, y) = (param(&mut p, &shape), param(&mut p, &shape));
            let sx = random_spec(&mut rng, mesh, &shape);
            let sy = random_spec(&mut rng, mesh, &shape);
            let ins = vec![shard(&mut p, x, &sx), shard(&mut p, y, &sy)];
            let mut outs = Vec::new();
            for (name, record) in BINARY.iter().chain(&COMPARE) {
                // XLA's complex `div`, `pow` and `atan2` take other algorithms (README).
                if ty.starts_with("complex") && matches!(*name, "pow" | "div" | "atan2") {
                    continue;
                }
                if let Ok(v) = record(&mut p, x, y, &[]) {
                    p.output(v).unwrap();
                    let spec = random_spec(&mut rng, mesh, &shape);
                    outs.push(shard(&mut p, v, &spec));
                }
            }
            let inputs = vec![
                exact(&mut rng, &shape, 0, 3, convert),
                exact(&mut rng, &shape, 1, 3, convert),
            ];
            spmd_case(
                format!("spmd binary/{ty}/{mesh_name}"),
                &p,
                inputs,
                (ins, outs),
                mesh,
                false,
                &mut corpus,
            );
            // `select`, `clamp`, a split row broadcast, `convert`; the transcendental ops of
            // floats, within the ulps of the single-device corpus.
            let mut p = Program::new("misc");
            set_mesh(&mut p);
            let last = shape.len() - 1;
            let (x, y) = (param(&mut p, &shape), param(&mut p, &shape));
            let c = p.parameter::<bool>(&shape);
            let r = param(&mut p, &shape[last..]);
            let mut ins = Vec::new();
            for (v, s) in [
                (x, &shape[..]),
                (y, &shape[..]),
                (c, &shape[..]),
                (r, &shape[last..]),
            ] {
                let spec = random_spec(&mut rng, mesh, s);
                ins.push(shard(&mut p, v, &spec));
            }
            let mut results = vec![p.select(c, x, y).unwrap()];
            results.extend(p.clamp(y, x, y).ok());
            results.push(p.broadcast_in_dim(r, &shape, &[last]).unwrap());
            results.push(p.convert::<f32>(x).unwrap());
            let column = ["f32", "f64", "f16", "bf16"].iter().position(|&t| t == ty);
            if column.is_some() {
                for (_, record, _, _) in TRANSCENDENTAL {
                    results.push(record(&mut p, x).unwrap());
                }
            }
            let mut outs = Vec::new();
            for v in results {
                p.output(v).unwrap();
                outs.push(shard(&mut p, v, &random_spec(&mut rng, mesh, &shape)));
            }
            let inputs = vec![
                exact(&mut rng, &shape, 1, 3, convert),
                exact(&mut rng, &shape, 0, 3, convert),
                exact(&mut rng, &shape, 0, 1, Program::convert::<bool>),
                exact(&mut rng, &shape[last..], 0, 3, convert),
            ];
            spmd_case(
                format!("spmd misc/{ty}/{mesh_name}"),
                &p,
                inputs,
                (ins, outs),
                mesh,
                false,
                &mut corpus,
            );
            if let Some(col) = column {
                // The largest of the ops' allowances for this type.
                let ulps = TRANSCENDENTAL.iter().map(|t| t.3[col]).max().unwrap_or(0);
                corpus.last_mut().expect("just pushed")["ulps"] = json!(ulps);
            }
            // The exact unary ops and reductions over every axis set of one or two dims.
            let mut p = Program::new("unary_reduce");
            set_mesh(&mut p);
            let x = param(&mut p, &shape);
            let sx = random_spec(&mut rng, mesh, &shape);
            let ins = vec![shard(&mut p, x, &sx)];
            let mut outs = Vec::new();
            for (_, record) in UNARY {
                if let Ok(v) = record(&mut p, x) {
                    p.output(v).unwrap();
                    outs.push(shard(&mut p, v, &random_spec(&mut rng, mesh, &shape)));
                }
            }
            let mut reduces_split = false;
            for (name, record) in REDUCE {
                let axes = [rng.below(shape.len())];
                // XLA's CPU collectives refuse an integer `and` or `or` across devices (README).
                let bitwise = matches!(name, "reduce_and" | "reduce_or");
                if bitwise && ty != "i1" && !sx[axes[0]].is_empty() {
                    continue;
                }
                if let Ok(v) = record(&mut p, x, &axes) {
                    reduces_split |= devices(mesh, &sx[axes[0]]) > 1;
                    p.output(v).unwrap();
                    let kept: Vec<usize> = (0..shape.len())
                        .filter(|&d| d != axes[0])
                        .map(|d| shape[d])
                        .collect();
                    outs.push(shard(&mut p, v, &random_spec(&mut rng, mesh, &kept)));
                }
            }
            // Values 1 and 2: products over any dim stay exact.
            let inputs = vec![exact(&mut rng, &shape, 1, 2, convert)];
            spmd_case(
                format!("spmd unary, reduce/{ty}/{mesh_name}"),
                &p,
                inputs,
                (ins, outs),
                mesh,
                reduces_split,
                &mut corpus,
            );
        }
        // The workloads: rows split (statistics over the unsplit last dim, bit for bit), and
        // the dense layer's bias gradient summed over its split batch dim.
        for (name, p, shapes, split) in [
            (
                "layer_norm",
                crate_workloads::layer_norm(8, 16),
                vec![vec![8, 16], vec![16], vec![16]],
                0,
            ),
            (
                "softmax",
                crate_workloads::softmax(8, 16, 1),
                vec![vec![8, 16]],
                0,
            ),
            (
                "attention",
                crate_workloads::attention(8, 4, 8),
                vec![vec![8, 4, 8, 8], vec![8, 8]],
                0,
            ),
            (
                "dense_backward",
                crate_workloads::dense_backward(16, 8),
                vec![vec![16, 8], vec![16, 8]],
                0,
            ),
        ] {
            let mut p = p;
            set_mesh(&mut p);
            let params: Vec<Value> = p.parameters().to_vec();
            let mut ins = Vec::new();
            for (v, s) in params.iter().zip(&shapes) {
                let mut spec = vec![Vec::new(); s.len()];
                if s.len() > 1 {
                    spec[split] = vec![mesh[0].0];
                }
                ins.push(shard(&mut p, *v, &spec));
            }
            let outputs: Vec<Value> = p.outputs().to_vec();
            let outs: Vec<Json> = outputs
                .iter()
                .map(|&v| {
                    let rank = p.shape(v).unwrap().len();
                    let spec = vec![Vec::new(); rank];
                    shard(&mut p, v, &spec)
                })
                .collect();
            // Layer norm's beta zero: XLA contracts `x * g + beta` into a fused multiply-add,
            // which can cancel to a result many ulps from the rounded product's (README).
            let inputs: Vec<Tensor> = shapes
                .iter()
                .enumerate()
                .map(|(k, s)| match (name, k) {
                    ("layer_norm", 2) => exact(&mut rng, s, 0, 0, Program::convert::<f32>),
                    _ => exact(&mut rng, s, -3, 3, Program::convert::<f32>),
                })
                .collect();
            spmd_case(
                format!("spmd {name}/{mesh_name}"),
                &p,
                inputs,
                (ins, outs),
                mesh,
                name == "dense_backward",
                &mut corpus,
            );
            // XLA's `rsqrt`, `exp` and `f32` division are approximations (README).
            if name != "dense_backward" {
                corpus.last_mut().expect("just pushed")["ulps"] = json!(4);
            }
        }
        // Random programs: chains of ops with broadcasts of split operands and reductions over
        // split dims.
        for k in 0..80 {
            let mut p = Program::new("random");
            set_mesh(&mut p);
            let x = p.parameter::<f32>(&shape);
            let sx = random_spec(&mut rng, mesh, &shape);
            let mut ins = vec![shard(&mut p, x, &sx)];
            let mut inputs = vec![exact(&mut rng, &shape, -3, 3, Program::convert::<f32>)];
            let mut v = x;
            let mut reduces_split = false;
            let last = shape.len() - 1;
            for _ in 0..1 + rng.below(5) {
                v = match rng.below(5) {
                    0 => {
                        // A split row broadcast along the other dims.
                        let b = p.parameter::<f32>(&shape[last..]);
                        let spec = random_spec(&mut rng, mesh, &shape[last..]);
                        ins.push(shard(&mut p, b, &spec));
                        inputs.push(exact(
                            &mut rng,
                            &shape[last..],
                            -3,
                            3,
                            Program::convert::<f32>,
                        ));
                        p.add(v, b, &[last]).unwrap()
                    }
                    1 => {
                        // A reduction, broadcast back.
                        let axis = rng.below(shape.len());
                        reduces_split |= devices(mesh, &sx[axis]) > 1;
                        let r = p.reduce_sum(v, &[axis]).unwrap();
                        let dims: Vec<usize> = (0..shape.len()).filter(|&d| d != axis).collect();
                        p.sub(v, r, &dims).unwrap()
                    }
                    2 => p.abs(v).unwrap(),
                    3 => {
                        let c = p.constant(2.0f32);
                        p.max(v, c, &[]).unwrap()
                    }
                    _ => p.neg(v).unwrap(),
                };
                // Pinned as a sharding constraint, now and then.
                if rng.below(3) == 0 {
                    let spec = random_spec(&mut rng, mesh, &shape);
                    shard(&mut p, v, &spec);
                }
            }
            p.output(v).unwrap();
            let spec = random_spec(&mut rng, mesh, &shape);
            let outs = vec![shard(&mut p, v, &spec)];
            spmd_case(
                format!("spmd random {k}/{mesh_name}"),
                &p,
                inputs,
                (ins, outs),
                mesh,
                reduces_split,
                &mut corpus,
            );
            // XLA's simplifier folds negations and zero additions that decide a zero's sign
            // (README): zeros of either sign alike here.
            corpus.last_mut().expect("just pushed")["signed_zeros"] = json!(true);
        }
    }
    // General floats summed over a split dim: XLA adds per device, then across devices, so
    // these are measured (the ulps printed), not compared bit for bit.
    for mesh in MESHES {
        for k in 0..4 {
            let mut p = Program::new("sum");
            p.set_mesh(Mesh::new(mesh).unwrap()).unwrap();
            let x = p.parameter::<f32>(&[256, 16]);
            let ins = vec![shard(&mut p, x, &[vec![mesh[0].0], vec![]])];
            let s = p.reduce_sum(x, &[0]).unwrap();
            p.output(s).unwrap();
            let outs = vec![shard(&mut p, s, &[vec![]])];
            let values: Vec<f32> = (0..256 * 16)
                .map(|_| (rng.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0)
                .collect();
            let input = ArrayD::from_shape_vec(IxDyn(&[256, 16]), values)
                .unwrap()
                .into();
            spmd_case(
                format!("spmd general sum {k}/{}", mesh[0].0),
                &p,
                vec![input],
                (ins, outs),
                mesh,
                true,
                &mut corpus,
            );
            corpus.last_mut().expect("just pushed")["measure_ulps"] = json!(true);
        }
    }
    assert!(corpus.len() > 300, "{}", corpus.len());
    if let Ok(path) = std::env::var("XLA_BCAST_SPMD_EXPORT") {
        std::fs::write(
            &path,
            serde_json::to_string(&json!({"cases": corpus})).unwrap(),
        )
        .unwrap();
        println!("wrote {} programs to {path}", corpus.len());
    }
}
