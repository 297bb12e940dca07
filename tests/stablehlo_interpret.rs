//! StableHLO's own interpreter tests for the elementwise ops (`stablehlo/tests/interpret/*.mlir`
//! in openxla/stablehlo: inputs, attributes and expected outputs, in `tests/data/`), run through
//! the crate's ops. `expect_eq` cases must match bit for bit; `expect_almost_eq` ones as the
//! interpreter's check does (within the test's tolerance, 1e-4 unless it says otherwise, NaN
//! equal to NaN), and zeros must also have the expected sign.
//!
//! Skipped, and counted: the sub-byte integers (`i2`, `i4`, `ui2`, `ui4`), which have no Rust
//! type, and the types of cargo features that are off.

use std::collections::BTreeMap;

use ndarray::{ArrayD, IxDyn};
use serde_json::Value;
use xla_bcast::prelude::*;
use xla_bcast::stablehlo::{Program, StableHloElement, Tensor, Value as Handle};

const DATA: &str = include_str!("data/stablehlo_interpret.json");

/// An element type the cases use: parsed from the interpreter's text, compared as its check
/// compares.
trait Elem: Clone + std::fmt::Debug {
    fn parse(text: &str) -> Self;
    /// A value as the data holds it: a string, or `[re, im]` for a complex one.
    fn from_json(v: &Value) -> Self {
        Self::parse(v.as_str().unwrap())
    }
    fn matches(got: &Self, want: &Self, tolerance: Option<f64>) -> bool;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn parse(text: &str) -> Self {
                text.parse::<i128>().unwrap_or_else(|_| panic!("{text}")) as $t
            }
            fn matches(got: &Self, want: &Self, _: Option<f64>) -> bool {
                got == want
            }
        }
    )*};
}
int_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Elem for bool {
    fn parse(text: &str) -> Self {
        match text {
            "true" => true,
            "false" => false,
            _ => panic!("{text}"),
        }
    }
    fn matches(got: &Self, want: &Self, _: Option<f64>) -> bool {
        got == want
    }
}

macro_rules! float_elem {
    ($($t:ty, $bits:ty);*) => {$(
        impl Elem for $t {
            fn parse(text: &str) -> Self {
                match text.strip_prefix("0x") {
                    Some(hex) => <$t>::from_bits(<$bits>::from_str_radix(hex, 16).unwrap()),
                    None => text.parse().unwrap_or_else(|_| panic!("{text}")),
                }
            }
            fn matches(got: &Self, want: &Self, tolerance: Option<f64>) -> bool {
                if got.is_nan() || want.is_nan() {
                    return got.is_nan() && want.is_nan();
                }
                if *want == 0.0 || *got == 0.0 {
                    // The interpreter's check calls -0.0 and +0.0 equal; these tests are
                    // stricter.
                    return got.to_bits() == want.to_bits()
                        || (*got != 0.0 && tolerance.is_some_and(|t| (*got as f64).abs() <= t));
                }
                match tolerance {
                    None => got.to_bits() == want.to_bits(),
                    Some(t) => {
                        got == want
                            || (got.is_finite()
                                && want.is_finite()
                                && (*got as f64 - *want as f64).abs() <= t)
                    }
                }
            }
        }
    )*};
}
float_elem!(f32, u32; f64, u64);

#[cfg(feature = "half")]
macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn parse(text: &str) -> Self {
                match text.strip_prefix("0x") {
                    Some(hex) => <$t>::from_bits(u16::from_str_radix(hex, 16).unwrap()),
                    None => <$t>::from_f64(text.parse().unwrap_or_else(|_| panic!("{text}"))),
                }
            }
            fn matches(got: &Self, want: &Self, tolerance: Option<f64>) -> bool {
                let exact = got.to_bits() == want.to_bits();
                let (g, w) = (f64::from(*got), f64::from(*want));
                exact || f64::matches(&g, &w, tolerance)
            }
        }
    )*};
}
#[cfg(feature = "half")]
half_elem!(half::f16, half::bf16);

#[cfg(feature = "complex")]
macro_rules! complex_elem {
    ($($t:ty),*) => {$(
        impl Elem for num_complex::Complex<$t> {
            fn parse(text: &str) -> Self {
                panic!("a complex value is a pair, not {text}")
            }
            fn from_json(v: &Value) -> Self {
                let part = |k: usize| <$t>::parse(v[k].as_str().unwrap());
                Self::new(part(0), part(1))
            }
            fn matches(got: &Self, want: &Self, tolerance: Option<f64>) -> bool {
                <$t>::matches(&got.re, &want.re, tolerance)
                    && <$t>::matches(&got.im, &want.im, tolerance)
            }
        }
    )*};
}
#[cfg(feature = "complex")]
complex_elem!(f32, f64);

/// One operand or result of a case.
fn tensor<T: Elem>(v: &Value) -> ArrayD<T> {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let values: Vec<T> = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(T::from_json)
        .collect();
    ArrayD::from_shape_vec(IxDyn(&shape), values).unwrap()
}

type Outcome<T> = Result<ArrayD<T>, BroadcastError>;

/// The ops every element type with an order has: add, mul, max, min, clamp.
fn common<T: XlaOrd>(op: &str, x: &[ArrayD<T>]) -> Option<Outcome<T>> {
    Some(match op {
        "add" => x[0].add_bcast(&x[1], &[]),
        "mul" => x[0].mul_bcast(&x[1], &[]),
        "max" => x[0].max_bcast(&x[1], &[]),
        "min" => x[0].min_bcast(&x[1], &[]),
        // clamp(min, operand, max)
        "clamp" => x[1].clamp_bcast(&x[0], &x[2]),
        _ => return None,
    })
}

fn number<T: XlaReal>(op: &str, x: &[ArrayD<T>]) -> Option<Outcome<T>> {
    Some(match op {
        "sub" => x[0].sub_bcast(&x[1], &[]),
        "div" => x[0].div_bcast(&x[1], &[]),
        "rem" => x[0].rem_bcast(&x[1], &[]),
        "pow" => x[0].pow_bcast(&x[1], &[]),
        _ => return common(op, x),
    })
}

fn bitwise<T: XlaBitwise + XlaOrd>(op: &str, x: &[ArrayD<T>]) -> Option<Outcome<T>> {
    Some(match op {
        "and" => x[0].and_bcast(&x[1], &[]),
        "or" => x[0].or_bcast(&x[1], &[]),
        "xor" => x[0].xor_bcast(&x[1], &[]),
        _ => return None,
    })
}

fn integer<T: XlaInteger>(op: &str, x: &[ArrayD<T>]) -> Option<Outcome<T>> {
    Some(match op {
        "shift_left" => x[0].shift_left_bcast(&x[1], &[]),
        "shift_right_arithmetic" => x[0].shift_right_arithmetic_bcast(&x[1], &[]),
        "shift_right_logical" => x[0].shift_right_logical_bcast(&x[1], &[]),
        _ => return bitwise(op, x).or_else(|| number(op, x)),
    })
}

fn float<T: XlaReal + XlaFloat>(op: &str, x: &[ArrayD<T>]) -> Option<Outcome<T>> {
    Some(match op {
        "atan2" => x[0].atan2_bcast(&x[1], &[]),
        _ => return number(op, x),
    })
}

fn boolean(op: &str, x: &[ArrayD<bool>]) -> Option<Outcome<bool>> {
    bitwise(op, x).or_else(|| common(op, x))
}

/// Complex numbers have no order, so no `max` or `min` (see the crate's element docs).
#[cfg(feature = "complex")]
fn complex<T>(op: &str, x: &[ArrayD<T>]) -> Option<Outcome<T>>
where
    T: XlaFloat + XlaNumber,
{
    Some(match op {
        "add" => x[0].add_bcast(&x[1], &[]),
        "sub" => x[0].sub_bcast(&x[1], &[]),
        "mul" => x[0].mul_bcast(&x[1], &[]),
        "div" => x[0].div_bcast(&x[1], &[]),
        "pow" => x[0].pow_bcast(&x[1], &[]),
        "atan2" => x[0].atan2_bcast(&x[1], &[]),
        _ => return None,
    })
}

/// `compare` (eq and ne only) and the other ops of a complex case; `false` for the ops that
/// complex numbers deliberately lack (`max`, `min`: StableHLO orders them lexicographically
/// and plans to drop that).
#[cfg(feature = "complex")]
fn run_complex<T>(case: &Value) -> bool
where
    T: Elem + XlaFloat + XlaNumber + PartialEq,
{
    let op = case["op"].as_str().unwrap();
    let x: Vec<ArrayD<T>> = case["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(tensor)
        .collect();
    if op == "compare" {
        let got = match case["direction"].as_str().unwrap() {
            "EQ" => x[0].eq_bcast(&x[1], &[]),
            "NE" => x[0].ne_bcast(&x[1], &[]),
            d => panic!("complex numbers have no order: {d}"),
        };
        check(case, got);
        return true;
    }
    match complex(op, &x) {
        Some(got) => {
            check(case, got);
            true
        }
        None => {
            assert!(matches!(op, "max" | "min"), "no {op} for complex numbers");
            false
        }
    }
}

/// `compare` with the case's direction.
fn compare<T: PartialOrd + Clone + Sync>(case: &Value, x: &[ArrayD<T>]) -> Outcome<bool> {
    let (a, b) = (&x[0], &x[1]);
    match case["direction"].as_str().unwrap() {
        "EQ" => a.eq_bcast(b, &[]),
        "NE" => a.ne_bcast(b, &[]),
        "LT" => a.lt_bcast(b, &[]),
        "LE" => a.le_bcast(b, &[]),
        "GT" => a.gt_bcast(b, &[]),
        "GE" => a.ge_bcast(b, &[]),
        d => panic!("direction {d}"),
    }
}

fn check<T: Elem>(case: &Value, got: Outcome<T>) {
    let name = case["name"].as_str().unwrap();
    let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
    let want: ArrayD<T> = tensor(&case["expected"]);
    let tolerance = case["tolerance"].as_f64();
    assert_eq!(got.shape(), want.shape(), "{name}");
    for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
        assert!(
            T::matches(g, w, tolerance),
            "{name}: element {i} is {g:?}, expected {w:?}"
        );
    }
}

/// Runs a case whose operands are of type `T`, with `ops` for the type's op set.
fn run<T: Elem + PartialOrd + Send + Sync>(
    case: &Value,
    ops: impl Fn(&str, &[ArrayD<T>]) -> Option<Outcome<T>>,
) {
    let op = case["op"].as_str().unwrap();
    let inputs = case["inputs"].as_array().unwrap();
    if op == "select" {
        let pred: ArrayD<bool> = tensor(&inputs[0]);
        let (t, f): (ArrayD<T>, ArrayD<T>) = (tensor(&inputs[1]), tensor(&inputs[2]));
        return check(case, pred.select_bcast(&t, &f));
    }
    let x: Vec<ArrayD<T>> = inputs.iter().map(tensor).collect();
    if op == "compare" {
        return check(case, compare(case, &x));
    }
    let name = case["name"].as_str().unwrap();
    let got = ops(op, &x).unwrap_or_else(|| panic!("{name}: no {op} for this type"));
    check(case, got);
}

#[test]
fn interpreter_tests_pass() {
    let data: Value = serde_json::from_str(DATA).unwrap();
    let cases = data["cases"].as_array().unwrap();
    let (mut ran, mut skipped) = (0, BTreeMap::<String, usize>::new());
    for case in cases {
        let inputs = case["inputs"].as_array().unwrap();
        // select's operands after the predicate decide.
        let ty = inputs[usize::from(case["op"] == "select")]["type"]
            .as_str()
            .unwrap();
        match ty {
            "i8" => run::<i8>(case, integer),
            "i16" => run::<i16>(case, integer),
            "i32" => run::<i32>(case, integer),
            "i64" => run::<i64>(case, integer),
            "ui8" => run::<u8>(case, integer),
            "ui16" => run::<u16>(case, integer),
            "ui32" => run::<u32>(case, integer),
            "ui64" => run::<u64>(case, integer),
            "i1" => run::<bool>(case, boolean),
            "f32" => run::<f32>(case, float),
            "f64" => run::<f64>(case, float),
            #[cfg(feature = "half")]
            "f16" => run::<half::f16>(case, float),
            #[cfg(feature = "half")]
            "bf16" => run::<half::bf16>(case, float),
            #[cfg(feature = "complex")]
            "complex<f32>" | "complex<f64>" => {
                let ran = match ty {
                    "complex<f32>" => run_complex::<num_complex::Complex<f32>>(case),
                    _ => run_complex::<num_complex::Complex<f64>>(case),
                };
                if !ran {
                    *skipped.entry(format!("{ty} {}", case["op"])).or_default() += 1;
                    continue;
                }
            }
            other => {
                *skipped.entry(other.to_string()).or_default() += 1;
                continue;
            }
        }
        ran += 1;
    }
    let mut expected_skips = vec!["i2", "i4", "ui2", "ui4"];
    if cfg!(not(feature = "half")) {
        expected_skips.extend(["bf16", "f16"]);
    }
    if cfg!(not(feature = "complex")) {
        expected_skips.extend(["complex<f32>", "complex<f64>"]);
    } else {
        // max and min of complex numbers, which the crate leaves out on purpose.
        expected_skips.extend(["complex<f32> \"max\"", "complex<f32> \"min\""]);
        expected_skips.extend(["complex<f64> \"max\"", "complex<f64> \"min\""]);
    }
    for ty in skipped.keys() {
        assert!(
            expected_skips.contains(&ty.as_str()),
            "no test ran for {ty}"
        );
    }
    println!("{ran} interpreter tests passed; skipped by type: {skipped:?}");
    // Every case of a type the build has runs: 134 with no optional feature, 10 more with
    // `half`, 12 more with `complex` (all but its 4 max and min cases).
    let floor = 134
        + if cfg!(feature = "half") { 10 } else { 0 }
        + if cfg!(feature = "complex") { 12 } else { 0 };
    assert!(ran >= floor, "only {ran} cases ran, expected {floor}");
}

const UNARY_DATA: &str = include_str!("data/stablehlo_interpret_unary.json");

/// A unary case through a `Program` (the crate has these ops there only): recorded, run, and
/// checked as the interpreter's check does; `false` when the program refuses the op for the
/// type (the complex ops other than `neg`, which the crate does not run yet).
fn run_unary<T, R>(case: &Value) -> bool
where
    T: Elem + StableHloElement,
    R: Elem + StableHloElement,
    Tensor: From<ArrayD<T>>,
{
    type Record = fn(&mut Program, Handle) -> Result<Handle, BroadcastError>;
    let record: Record = match case["op"].as_str().unwrap() {
        "abs" => Program::abs,
        "neg" => Program::neg,
        "sign" => Program::sign,
        "not" => Program::not,
        "floor" => Program::floor,
        "ceil" => Program::ceil,
        "round_nearest_even" => Program::round_nearest_even,
        "round_nearest_afz" => Program::round_nearest_afz,
        "is_finite" => Program::is_finite,
        "popcnt" => Program::popcnt,
        "clz" => Program::clz,
        "sqrt" => Program::sqrt,
        "rsqrt" => Program::rsqrt,
        "cbrt" => Program::cbrt,
        "exp" => Program::exp,
        "expm1" => Program::expm1,
        "log" => Program::log,
        "log1p" => Program::log1p,
        "logistic" => Program::logistic,
        "tanh" => Program::tanh,
        "sin" => Program::sin,
        "cos" => Program::cos,
        "tan" => Program::tan,
        "convert" => Program::convert::<R>,
        op => panic!("no unary op {op}"),
    };
    let x: ArrayD<T> = tensor(&case["inputs"][0]);
    let mut p = Program::new("case");
    let v = p.parameter::<T>(x.shape());
    let Ok(y) = record(&mut p, v) else {
        return false;
    };
    p.output(y).unwrap();
    let got = p.run(&[x.into()]).map(|mut out| {
        let t = out.remove(0);
        R::of(&t).expect("the result's element type").clone()
    });
    check(case, got);
    true
}

/// The unary case of type `T`: a `bool` result for `is_finite`, else one of `T`.
fn unary_of<T>(case: &Value) -> bool
where
    T: Elem + StableHloElement,
    Tensor: From<ArrayD<T>>,
{
    match case["op"].as_str().unwrap() {
        "is_finite" => run_unary::<T, bool>(case),
        "convert" => convert_of::<T>(case),
        _ => run_unary::<T, T>(case),
    }
}

/// A `convert` case from `T`, to the type its expected result has.
fn convert_of<T>(case: &Value) -> bool
where
    T: Elem + StableHloElement,
    Tensor: From<ArrayD<T>>,
{
    match case["expected"]["type"].as_str().unwrap() {
        "i1" => run_unary::<T, bool>(case),
        "i8" => run_unary::<T, i8>(case),
        "i16" => run_unary::<T, i16>(case),
        "i32" => run_unary::<T, i32>(case),
        "i64" => run_unary::<T, i64>(case),
        "ui8" => run_unary::<T, u8>(case),
        "ui16" => run_unary::<T, u16>(case),
        "ui32" => run_unary::<T, u32>(case),
        "ui64" => run_unary::<T, u64>(case),
        "f32" => run_unary::<T, f32>(case),
        "f64" => run_unary::<T, f64>(case),
        #[cfg(feature = "half")]
        "f16" => run_unary::<T, half::f16>(case),
        #[cfg(feature = "half")]
        "bf16" => run_unary::<T, half::bf16>(case),
        #[cfg(feature = "complex")]
        "complex<f32>" => run_unary::<T, num_complex::Complex<f32>>(case),
        #[cfg(feature = "complex")]
        "complex<f64>" => run_unary::<T, num_complex::Complex<f64>>(case),
        _ => false,
    }
}

#[test]
fn unary_interpreter_tests_pass() {
    let data: Value = serde_json::from_str(UNARY_DATA).unwrap();
    let cases = data["cases"].as_array().unwrap();
    let (mut ran, mut skipped) = (0, BTreeMap::<String, usize>::new());
    for case in cases {
        let ty = case["inputs"][0]["type"].as_str().unwrap();
        let done = match ty {
            "i8" => unary_of::<i8>(case),
            "i16" => unary_of::<i16>(case),
            "i32" => unary_of::<i32>(case),
            "i64" => unary_of::<i64>(case),
            "ui8" => unary_of::<u8>(case),
            "ui16" => unary_of::<u16>(case),
            "ui32" => unary_of::<u32>(case),
            "ui64" => unary_of::<u64>(case),
            "i1" => unary_of::<bool>(case),
            "f32" => unary_of::<f32>(case),
            "f64" => unary_of::<f64>(case),
            #[cfg(feature = "half")]
            "f16" => unary_of::<half::f16>(case),
            #[cfg(feature = "half")]
            "bf16" => unary_of::<half::bf16>(case),
            // The modulus is real.
            #[cfg(feature = "complex")]
            "complex<f32>" if case["op"] == "abs" => {
                run_unary::<num_complex::Complex<f32>, f32>(case)
            }
            #[cfg(feature = "complex")]
            "complex<f64>" if case["op"] == "abs" => {
                run_unary::<num_complex::Complex<f64>, f64>(case)
            }
            #[cfg(feature = "complex")]
            "complex<f32>" => unary_of::<num_complex::Complex<f32>>(case),
            #[cfg(feature = "complex")]
            "complex<f64>" => unary_of::<num_complex::Complex<f64>>(case),
            _ => false,
        };
        if done {
            ran += 1;
        } else {
            let to = case["expected"]["type"].as_str().unwrap();
            *skipped
                .entry(format!("{ty} {} {to}", case["op"]))
                .or_default() += 1;
        }
    }
    // Not run: sub-byte integers (no Rust type) and the types of features that are off, on
    // either side (a `convert`'s result type too).
    for what in skipped.keys() {
        let mut words = what.split(' ');
        let (ty, to) = (words.next().unwrap(), words.nth(1).unwrap());
        let missing = |ty: &str| {
            matches!(ty, "i4" | "ui4")
                || (cfg!(not(feature = "half")) && matches!(ty, "f16" | "bf16"))
                || (cfg!(not(feature = "complex")) && ty.starts_with("complex"))
        };
        assert!(missing(ty) || missing(to), "no test ran for {what}");
    }
    println!("{ran} unary interpreter tests passed; not run: {skipped:?}");
    // 108 cases: 8 of sub-byte integers; 12 of `half` and 25 of complex numbers need those
    // features.
    let floor = 63
        + if cfg!(feature = "half") { 12 } else { 0 }
        + if cfg!(feature = "complex") { 25 } else { 0 };
    assert!(ran >= floor, "only {ran} cases ran, expected {floor}");
}
