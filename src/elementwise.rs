//! The element functions of every elementwise op of the op table ([`crate::op_table`]), as
//! types: what an op computes on one element of each type, which the kernel table
//! ([`crate::engine::table`]) compiles one small loop of per op and type. The arithmetic is
//! the crate's own ([`crate::element`], [`crate::math`]), so results are those of the array
//! ops, bit for bit.

use crate::element::XlaFloat;
use crate::math;

/// An element function of `ARITY` inputs, known by its type: `f` on the inputs `A`
/// (one type for all of them) gives an `Out`. Programs compile a table kernel of it
/// ([`crate::engine::table`]); the eager unary ops ([`crate::unary`]) a closure of it.
pub trait Elementwise<A, const ARITY: usize> {
    /// The result's type.
    type Out;
    /// The function.
    fn f(x: [A; ARITY]) -> Self::Out;
    /// Whether `f` is a fast form that leaves some inputs to [`Elementwise::exact`]: a table
    /// kernel then runs `f` branch-free over the whole run, and a second pass puts `exact`'s
    /// results where it has them.
    const EXACT: bool = false;
    /// The result for inputs `f` does not cover, `None` for the others.
    #[inline(always)]
    fn exact(_x: &[A; ARITY]) -> Option<Self::Out> {
        None
    }
    /// Whether `f`'s arithmetic, not memory, bounds a run of it (a transcendental function of
    /// the crate's own, branch-free: [`crate::math`]): a program's kernel of it is then compiled
    /// in the widest copy the CPU runs as well ([`crate::engine::table::run_wide`]).
    const WIDE: bool = false;
}

/// `F` of one element, as a table kernel gives it: `exact`'s result where it has one.
#[inline(always)]
pub(crate) fn apply<A: Clone, F: Elementwise<A, 1>>(x: A) -> F::Out {
    if F::EXACT {
        if let Some(v) = F::exact(std::array::from_ref(&x)) {
            return v;
        }
    }
    F::f([x])
}

#[cfg(feature = "stablehlo")]
pub use program::*;

/// An element as `convert` reads it: every value of every element type, exactly.
#[derive(Clone, Copy)]
pub enum Scalar {
    Bool(bool),
    Int(i128),
    Float(f64),
    #[cfg(feature = "complex")]
    Complex(f64, f64),
}

/// A source element type of `convert`.
pub trait Load: Copy {
    fn load(self) -> Scalar;
}

/// A destination element type of `convert`, with its rules for values it cannot hold
/// (StableHLO leaves them to the implementation; these are XLA's CPU compiler's).
pub trait Store {
    fn store(s: Scalar) -> Self;
}

impl Load for bool {
    #[inline(always)]
    fn load(self) -> Scalar {
        Scalar::Bool(self)
    }
}

impl Store for bool {
    /// Zero is `false` (a complex number's imaginary part is ignored).
    #[inline(always)]
    fn store(s: Scalar) -> bool {
        match s {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(v) => v != 0.0,
            #[cfg(feature = "complex")]
            Scalar::Complex(v, _) => v != 0.0,
        }
    }
}

macro_rules! convert_ints {
    ($($t:ty),*) => {$(
        impl Load for $t {
            #[inline(always)]
            fn load(self) -> Scalar {
                Scalar::Int(self as i128)
            }
        }
        impl Store for $t {
            /// Integers wrap; floats truncate toward zero and saturate, NaN giving 0.
            #[inline(always)]
            fn store(s: Scalar) -> $t {
                match s {
                    Scalar::Bool(b) => b as $t,
                    Scalar::Int(i) => i as $t,
                    Scalar::Float(v) => v as $t,
                    #[cfg(feature = "complex")]
                    Scalar::Complex(v, _) => v as $t,
                }
            }
        }
    )*};
}
convert_ints!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! convert_floats {
    ($($t:ty),*) => {$(
        impl Load for $t {
            #[inline(always)]
            fn load(self) -> Scalar {
                Scalar::Float(self as f64)
            }
        }
        impl Store for $t {
            /// Rounded to nearest, ties to even, once.
            #[inline(always)]
            fn store(s: Scalar) -> $t {
                match s {
                    Scalar::Bool(b) => u8::from(b) as $t,
                    Scalar::Int(i) => i as $t,
                    Scalar::Float(v) => v as $t,
                    #[cfg(feature = "complex")]
                    Scalar::Complex(v, _) => v as $t,
                }
            }
        }
    )*};
}
convert_floats!(f32, f64);

#[cfg(feature = "half")]
macro_rules! convert_halves {
    ($($t:ty),*) => {$(
        impl Load for $t {
            #[inline(always)]
            fn load(self) -> Scalar {
                Scalar::Float(self.to_f64())
            }
        }
        impl Store for $t {
            /// Through `f32` (rounded to nearest, ties to even, at each step), as XLA's CPU
            /// compiler converts: from `f64` and wide integers that is two roundings.
            #[inline(always)]
            fn store(s: Scalar) -> $t {
                <$t as crate::element::ViaF32>::narrow(<f32 as Store>::store(s))
            }
        }
    )*};
}
#[cfg(feature = "half")]
convert_halves!(half::f16, half::bf16);

#[cfg(feature = "complex")]
macro_rules! convert_complex {
    ($($t:ty),*) => {$(
        impl Load for num_complex::Complex<$t> {
            #[inline(always)]
            fn load(self) -> Scalar {
                Scalar::Complex(self.re as f64, self.im as f64)
            }
        }
        impl Store for num_complex::Complex<$t> {
            /// Each part as a float is; a real value gets a zero imaginary part.
            #[inline(always)]
            fn store(s: Scalar) -> Self {
                match s {
                    Scalar::Complex(re, im) => Self::new(re as $t, im as $t),
                    real => Self::new(<$t as Store>::store(real), 0.0),
                }
            }
        }
    )*};
}
#[cfg(feature = "complex")]
convert_complex!(f32, f64);

/// `convert` to `U`, as an element function of any source type.
pub struct Convert<U>(std::marker::PhantomData<U>);

impl<T: Load, U: Store> Elementwise<T, 1> for Convert<U> {
    type Out = U;
    #[inline(always)]
    fn f([x]: [T; 1]) -> U {
        U::store(x.load())
    }
}

/// The unary ops, per element type: `same!` for results of the input's type, each as its
/// Rust form.
macro_rules! same {
    ($v:ident: [$($t:ty),*] |$x:ident| $body:expr) => { same!($v: [$($t),*] |$x| $body, false); };
    ($v:ident: [$($t:ty),*] |$x:ident| $body:expr, $wide:literal) => {$(
        impl Elementwise<$t, 1> for $v {
            type Out = $t;
            #[inline(always)]
            fn f([$x]: [$t; 1]) -> $t {
                $body
            }
            const WIDE: bool = $wide;
        }
    )*};
}
pub struct Abs;
pub struct Neg;
pub struct Sign;
pub struct Not;
pub struct Floor;
pub struct Ceil;
pub struct RoundNearestEven;
pub struct RoundNearestAfz;
pub struct IsFinite;
pub struct Popcnt;
pub struct Clz;
pub struct Sqrt;
same!(Abs: [i8, i16, i32, i64] |x| x.wrapping_abs());
same!(Sign: [i8, i16, i32, i64] |x| x.signum());
same!(Neg: [u8, u16, u32, u64] |x| x.wrapping_neg());
same!(Not: [u8, u16, u32, u64, bool] |x| !x);
same!(Neg: [i8, i16, i32, i64] |x| x.wrapping_neg());
same!(Not: [i8, i16, i32, i64] |x| !x);
same!(Popcnt: [i8, i16, i32, i64] |x| x.count_ones() as _);
same!(Clz: [i8, i16, i32, i64] |x| x.leading_zeros() as _);
same!(Popcnt: [u8, u16, u32, u64] |x| x.count_ones() as _);
same!(Clz: [u8, u16, u32, u64] |x| x.leading_zeros() as _);
same!(Abs: [f32, f64] |x| x.abs());
same!(Neg: [f32, f64] |x| -x);
same!(Sign: [f32, f64] |x| if x.is_nan() || x == 0.0 { x } else { 1.0f32.copysign(x as f32) as _ });
same!(Floor: [f32, f64] |x| x.floor());
same!(Ceil: [f32, f64] |x| x.ceil());
same!(RoundNearestEven: [f32, f64] |x| x.round_ties_even());
same!(RoundNearestAfz: [f32, f64] |x| x.round());
same!(Sqrt: [f32, f64] |x| x.sqrt());
pub struct Rsqrt;
pub struct Cbrt;
pub struct Exp;
pub struct Expm1;
pub struct Log;
pub struct Log1p;
pub struct Logistic;
pub struct Tanh;
pub struct Sin;
pub struct Cos;
pub struct Tan;
/// The transcendental ops: each precision's own ([`math`]); `rsqrt` of `f32` in `f64`,
/// rounded once; `sin`, `cos`, `tan` and `cbrt` through the platform's `f64` functions,
/// element by element.
macro_rules! transcendental {
    ($($v:ident: $f:ident;)*) => {$(
        same!($v: [f32] |x| math::f32::$f(x), true);
        same!($v: [f64] |x| math::f64::$f(x), true);
    )*};
}
transcendental! {
    Exp: exp;
    Expm1: expm1;
    Log: ln;
    Log1p: ln_1p;
    Logistic: logistic;
    Tanh: tanh;
}
macro_rules! in_f64 {
    ($($v:ident: $f:expr, $wide:literal;)*) => {$(
        same!($v: [f32] |x| $f(x as f64) as f32, $wide);
        same!($v: [f64] |x| $f(x), $wide);
    )*};
}
in_f64! {
    Rsqrt: math::rsqrt::<f64>, true;
    Cbrt: f64::cbrt, false;
}
same!(Sin: [f64] |x| x.sin());
same!(Cos: [f64] |x| x.cos());
same!(Tan: [f64] |x| x.tan());
/// `f32`'s `sin`, `cos`, `tan`: [`math::trig`]'s, the platform's `f64` function for the
/// inputs beyond its range.
macro_rules! trig {
    ($($v:ident: $f:ident;)*) => {$(
        impl Elementwise<f32, 1> for $v {
            type Out = f32;
            #[inline(always)]
            fn f([x]: [f32; 1]) -> f32 {
                math::trig::$f(x)
            }
            const EXACT: bool = true;
            #[inline(always)]
            fn exact([x]: &[f32; 1]) -> Option<f32> {
                math::trig::wide(*x).then(|| f64::from(*x).$f() as f32)
            }
            const WIDE: bool = true;
        }
    )*};
}
trig! {
    Sin: sin;
    Cos: cos;
    Tan: tan;
}
impl<T: XlaFloat + Into<f64>> Elementwise<T, 1> for IsFinite {
    type Out = bool;
    #[inline(always)]
    fn f([x]: [T; 1]) -> bool {
        x.into().is_finite()
    }
}
#[cfg(feature = "complex")]
same!(Neg: [num_complex::Complex<f32>, num_complex::Complex<f64>] |x| -x);
/// Complex numbers: `num_complex`'s functions where it has them (principal branches, as
/// StableHLO's), and for the rest their definitions, with `expm1` and `log1p` kept
/// accurate near zero through the real ones; `abs` is the modulus, of the real type.
/// The principal square root of a complex number: C99's (Annex G) special values, and
/// the root from `(|x| + |z|) / 2`, which cancels nothing.
#[cfg(feature = "complex")]
macro_rules! complex_sqrt {
    ($t:ident, $z:expr) => {{
        let (x, y) = ($z.re, $z.im);
        let c = num_complex::Complex::<$t>::new;
        if y.is_infinite() {
            c($t::INFINITY, y)
        } else if x.is_nan() {
            c(x, if y.is_nan() { y } else { $t::NAN })
        } else if x.is_infinite() {
            match (x > 0.0, y.is_nan()) {
                (true, _) => c(
                    x,
                    if y.is_nan() {
                        y
                    } else {
                        (0.0 as $t).copysign(y)
                    },
                ),
                (false, true) => c(y, $t::INFINITY),
                (false, false) => c(0.0, $t::INFINITY.copysign(y)),
            }
        } else if y.is_nan() {
            c(y, y)
        } else if x == 0.0 && y == 0.0 {
            c(0.0, y)
        } else {
            // Halved first so that `|x| + |z|` cannot overflow.
            let t = ((x.abs() * 0.5) + (x * 0.5).hypot(y * 0.5)).sqrt();
            if x >= 0.0 {
                c(t, y / (2.0 * t))
            } else {
                c(y.abs() / (2.0 * t), t.copysign(y))
            }
        }
    }};
}
#[cfg(feature = "complex")]
macro_rules! complex_unary {
    ($t:ident) => {
        same!(Sqrt: [num_complex::Complex<$t>] |z| complex_sqrt!($t, z));
        same!(Rsqrt: [num_complex::Complex<$t>] |z| complex_sqrt!($t, z).inv());
        same!(Cbrt: [num_complex::Complex<$t>] |z| z.cbrt());
        same!(Exp: [num_complex::Complex<$t>] |z| z.exp());
        same!(Log: [num_complex::Complex<$t>] |z| z.ln());
        same!(Sin: [num_complex::Complex<$t>] |z| z.sin());
        same!(Cos: [num_complex::Complex<$t>] |z| z.cos());
        same!(Tan: [num_complex::Complex<$t>] |z| z.tan());
        same!(Tanh: [num_complex::Complex<$t>] |z| z.tanh());
        same!(Logistic: [num_complex::Complex<$t>] |z| (num_complex::Complex::<$t>::new(1.0, 0.0) + (-z).exp()).inv());
        // e^(x+iy) - 1 = (e^x - 1) cos y - 2 sin^2(y/2) + i e^x sin y
        same!(Expm1: [num_complex::Complex<$t>] |z| {
            let half = (z.im * 0.5).sin();
            num_complex::Complex::new(
                z.re.exp_m1() * z.im.cos() - 2.0 * half * half,
                z.re.exp() * z.im.sin(),
            )
        });
        // ln(1 + z): |1 + z|^2 - 1 = 2x + x^2 + y^2, through the real log1p
        same!(Log1p: [num_complex::Complex<$t>] |z| {
            let (x, y) = (z.re, z.im);
            num_complex::Complex::new(
                0.5 * (x * (2.0 + x) + y * y).ln_1p(),
                y.atan2(1.0 + x),
            )
        });
        // StableHLO's: NaN parts give NaN, zero gives +0, the rest `z / |z|` (each part
        // divided by the real modulus).
        same!(Sign: [num_complex::Complex<$t>] |z| {
            if z.re.is_nan() || z.im.is_nan() {
                num_complex::Complex::new($t::NAN, $t::NAN)
            } else if z.re == 0.0 && z.im == 0.0 {
                num_complex::Complex::new(0.0, 0.0)
            } else {
                let n = z.norm();
                num_complex::Complex::new(z.re / n, z.im / n)
            }
        });
        impl Elementwise<num_complex::Complex<$t>, 1> for Abs {
            type Out = $t;
            #[inline(always)]
            fn f([z]: [num_complex::Complex<$t>; 1]) -> $t {
                z.norm()
            }
        }
    };
}
#[cfg(feature = "complex")]
complex_unary!(f64);
/// `Complex<f32>`: each op in `Complex<f64>`, rounded once per part (a pole or a
/// cancellation then costs the `f64` digits, not the result's).
#[cfg(feature = "complex")]
macro_rules! complex_via_f64 {
    ($($v:ident),*) => {$(
        same!($v: [num_complex::Complex<f32>] |z| {
            let wide = num_complex::Complex::new(f64::from(z.re), f64::from(z.im));
            let r = <$v as Elementwise<num_complex::Complex<f64>, 1>>::f([wide]);
            num_complex::Complex::new(r.re as f32, r.im as f32)
        });
    )*};
}
#[cfg(feature = "complex")]
complex_via_f64!(Sign, Sqrt, Rsqrt, Cbrt, Exp, Expm1, Log, Log1p, Logistic, Tanh, Sin, Cos, Tan);
#[cfg(feature = "complex")]
impl Elementwise<num_complex::Complex<f32>, 1> for Abs {
    type Out = f32;
    #[inline(always)]
    fn f([z]: [num_complex::Complex<f32>; 1]) -> f32 {
        f64::from(z.re).hypot(f64::from(z.im)) as f32
    }
}

/// `f16` and `bf16`: each in `f32`, rounded once (exact for all of these: the results are
/// values of the type, or for `sqrt` correctly rounded through `f32`, which has more than
/// twice their precision).
#[cfg(feature = "half")]
macro_rules! via_f32 {
    ($($v:ident),*) => {$(
        via_f32!(@ $v, half::f16);
        via_f32!(@ $v, half::bf16);
    )*};
    (@ $v:ident, $t:ty) => {
        impl Elementwise<$t, 1> for $v {
            type Out = $t;
            #[inline(always)]
            fn f([x]: [$t; 1]) -> $t {
                use crate::element::ViaF32;
                ViaF32::narrow(<$v as Elementwise<f32, 1>>::f([x.widen()]))
            }
            const EXACT: bool = <$v as Elementwise<f32, 1>>::EXACT;
            const WIDE: bool = <$v as Elementwise<f32, 1>>::WIDE;
            #[inline(always)]
            fn exact([x]: &[$t; 1]) -> Option<$t> {
                use crate::element::ViaF32;
                <$v as Elementwise<f32, 1>>::exact(&[x.widen()]).map(ViaF32::narrow)
            }
        }
    };
}
#[cfg(feature = "half")]
via_f32!(
    Abs,
    Neg,
    Sign,
    Floor,
    Ceil,
    RoundNearestEven,
    RoundNearestAfz,
    Sqrt,
    Rsqrt,
    Cbrt,
    Exp,
    Expm1,
    Log,
    Log1p,
    Logistic,
    Tanh,
    Sin,
    Cos,
    Tan
);

/// The binary ops' and reductions' element functions: programs only.
#[cfg(feature = "stablehlo")]
mod program {
    use super::Elementwise;
    use crate::element::{
        XlaBitwise, XlaElement, XlaFloat, XlaInteger, XlaNumber, XlaOrd, XlaReal,
    };
    use crate::engine::reduce::TableFold;

    /// The table's element functions ([`crate::op_table`]) as types.
    macro_rules! binary {
    ($( $name:ident, $hlo:literal, $v:ident, $bound:ident, $elem:ident, [$($methods:ident),*],
        $paddle:ident, [$($std:tt)*], $t:literal, $expect:literal; )*) => {$(
        pub struct $v;
        impl<T: $bound> Elementwise<T, 2> for $v {
            type Out = T;
            #[inline(always)]
            fn f([a, b]: [T; 2]) -> T {
                T::$elem(a, b)
            }
        }
    )*};
}
    binary_ops!(binary);

    macro_rules! compare {
    ($( $name:ident, $hlo:literal, $v:ident, $bound:ident, $cmp:tt, [$($methods:ident),*], $expect:literal; )*) => {$(
        pub struct $v;
        impl<T: $bound> Elementwise<T, 2> for $v {
            type Out = bool;
            #[inline(always)]
            fn f([a, b]: [T; 2]) -> bool {
                a $cmp b
            }
        }
    )*};
}
    compare_ops!(compare);

    /// The reductions' folds: each op's function from its identity.
    impl<T: XlaElement> TableFold<T> for Add {
        fn identity() -> T {
            T::xla_zero()
        }
        #[inline(always)]
        fn f(acc: T, x: T) -> T {
            acc.xla_add(x)
        }
        #[inline(always)]
        fn lanes(acc: T, x: T) -> T {
            acc.xla_add_lanes(x)
        }
        #[allow(clippy::eq_op)] // NaN is the one value unequal to itself
        fn nan(x: &T) -> bool {
            x != x
        }
    }
    impl<T: XlaElement> TableFold<T> for Mul {
        fn identity() -> T {
            T::xla_one()
        }
        #[inline(always)]
        fn f(acc: T, x: T) -> T {
            acc.xla_mul(x)
        }
    }
    impl<T: XlaOrd> TableFold<T> for Max {
        fn identity() -> T {
            T::xla_lowest()
        }
        #[inline(always)]
        fn f(acc: T, x: T) -> T {
            acc.xla_max(x)
        }
    }
    impl<T: XlaOrd> TableFold<T> for Min {
        fn identity() -> T {
            T::xla_highest()
        }
        #[inline(always)]
        fn f(acc: T, x: T) -> T {
            acc.xla_min(x)
        }
    }
    impl<T: XlaBitwise> TableFold<T> for And {
        fn identity() -> T {
            T::xla_zero().xla_not()
        }
        #[inline(always)]
        fn f(acc: T, x: T) -> T {
            acc.xla_and(x)
        }
    }
    impl<T: XlaBitwise> TableFold<T> for Or {
        fn identity() -> T {
            T::xla_zero()
        }
        #[inline(always)]
        fn f(acc: T, x: T) -> T {
            acc.xla_or(x)
        }
    }

    /// `clamp(x, lo, hi)` (the operand first, as [`XlaOrd::xla_clamp`] takes it).
    pub struct Clamp;
    impl<T: XlaOrd> Elementwise<T, 3> for Clamp {
        type Out = T;
        #[inline(always)]
        fn f([x, lo, hi]: [T; 3]) -> T {
            x.xla_clamp(lo, hi)
        }
    }
}
