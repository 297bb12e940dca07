//! The transcendental functions of the crate's unary ops, public for use in your own loops (a
//! [`StrictZip`](crate::zip::StrictZip) closure, a slice): [`exp`], [`expm1`], [`log`],
//! [`log1p`], [`tanh`], [`logistic`], [`sin`], [`cos`], [`tan`], [`rsqrt`], [`cbrt`], for
//! `f32` (computed in `f32`) and `f64` (in `f64`). Each gives the bits of the program op of the
//! same name (`Program::exp`, ...), and of the eager ops built on it. `f16` and `bf16` take the
//! `f32` ones and round once.
//!
//! They vectorise where they are compiled with FMA: inside the crate's loops (a `StrictZip`
//! closure, the eager unary ops) they are, in its AVX2 and FMA copies. In a loop of your own,
//! compile it for FMA (`-C target-cpu=native`, or a `#[target_feature(enable = "avx2,fma")]`
//! function): without it each `mul_add` is a call into libm, about 16x slower
//! (`docs/experiments.md`, "Fused loops").
//!
//! ```
//! use ndarray::Array1;
//! use xla_bcast::{math, prelude::*};
//!
//! let x = Array1::linspace(-3.0f32, 3.0, 1000);
//! // In the crate's loop, compiled with FMA: vectorised (std's `f32::exp` is a call per element).
//! let softplus = StrictZip::from(&x).map_collect(|x| math::log1p(math::exp(x))).unwrap();
//! assert!((softplus[999] - 3.0486).abs() < 1e-4);
//! ```
//!
//! Each is branch-free, with selects where special values need them, so that a loop over a
//! slice vectorises: rounding to an integer is the add-and-subtract of 1.5 * 2^(mantissa
//! bits), powers of two are built in the exponent bits, and integers stay in floats. The range
//! reductions and the series are fused multiply-adds (`mul_add`, rounded once): one
//! instruction in the kernels' AVX2 and FMA copies, the platform's `fma` in the baseline
//! copy, the same bits in each. The accuracy of each,
//! measured over many inputs per type, is in the README's element semantics and tested in
//! `tests/stablehlo_math.rs`.

/// One precision's functions: its float and bits types, the mantissa width, the exponent
/// bias, ln 2 split so that `k * LN2_HI` is exact for every exponent `k` the type reaches,
/// the clamp bounds beyond which `e^x` is infinite or zero, the scale for subnormals, and the
/// series lengths (Taylor terms of `e^r - 1` for `|r| <= ln 2 / 2`; terms of `2 atanh(s)` for
/// `|s| < 0.172`), long enough that the first omitted term is under 2^-(mantissa + 4) of the
/// result.
macro_rules! precision {
    (
        $m:ident, $t:ident, $bits:ty, mantissa: $mant:literal, bias: $bias:literal,
        ln2: ($hi:literal, $lo:literal), clamp: ($min:literal, $max:literal),
        subnormal: ($scale:literal, $shift:literal), tanh_one: $one:literal,
        exp_terms: $et:literal, ln_terms: $lt:literal
    ) => {
        pub(crate) mod $m {
            const LN2_HI: $t = $hi;
            const LN2_LO: $t = $lo;
            /// Adding this to a value under 2^(mantissa - 1) in magnitude, then subtracting
            /// it, rounds the value to an integer (ties to even).
            const ROUND: $t = 1.5 * (1u64 << $mant) as $t;
            const MANT_MASK: $bits = (1 << $mant) - 1;
            const EXP_MASK: $bits = (1 << (<$bits>::BITS - 1 - $mant)) - 1;

            /// `2^k` for an integer `k` (held as a float) in the normal exponent range:
            /// `k + bias` lands in the low bits of `k + bias + ROUND`, and shifted up it is
            /// the exponent.
            #[inline(always)]
            fn pow2(k: $t) -> $t {
                <$t>::from_bits((k + (ROUND + $bias as $t)).to_bits() << $mant)
            }

            /// `y * 2^k` for an integer `k` up to the clamp's range, rounded once: two exact
            /// scalings by halves of `k`, each a normal power of two, the second of which
            /// rounds (to a subnormal, zero or infinity).
            #[inline(always)]
            fn scale(y: $t, k: $t) -> $t {
                let k1 = (k * 0.5 + ROUND) - ROUND;
                y * pow2(k1) * pow2(k - k1)
            }

            /// `e^r - 1` for `|r| <= ln 2 / 2`: its Taylor series.
            #[inline(always)]
            fn expm1_reduced(r: $t) -> $t {
                let mut c = [1.0 as $t; $et];
                for i in 1..$et {
                    c[i] = c[i - 1] / (i + 1) as $t;
                }
                let mut p = c[$et - 1];
                for i in (0..$et - 1).rev() {
                    p = r.mul_add(p, c[i]);
                }
                r * p
            }

            /// `x = k ln 2 + r` with `|r| <= ln 2 / 2` and `k` an integer (`x` clamped).
            #[inline(always)]
            fn reduce(x: $t) -> ($t, $t) {
                let k = x.mul_add(std::$t::consts::LOG2_E, ROUND) - ROUND;
                ((-k).mul_add(LN2_LO, (-k).mul_add(LN2_HI, x)), k)
            }

            /// `e^x`.
            #[inline(always)]
            pub(crate) fn exp(x: $t) -> $t {
                let (r, k) = reduce(x.clamp($min, $max));
                let y = scale(1.0 + expm1_reduced(r), k);
                if x.is_nan() {
                    x
                } else {
                    y
                }
            }

            /// `e^x - 1`, accurate near zero: `2^k (e^r - 1) + (2^k - 1)`, both exact but for
            /// the last rounding, where `2^k - 1` is (`|k| <= mantissa + 1`); `e^x - 1` beyond,
            /// where nothing cancels.
            #[inline(always)]
            pub(crate) fn expm1(x: $t) -> $t {
                let (r, k) = reduce(x.clamp($min, $max));
                let m = expm1_reduced(r);
                let p = pow2(k.clamp(-($mant as $t) - 4.0, $mant as $t + 4.0));
                let near = p * m + (p - 1.0);
                let far = scale(1.0 + m, k) - 1.0;
                let y = if k.abs() <= $mant as $t + 1.0 {
                    near
                } else {
                    far
                };
                // `-0.0` and NaN come back as they are.
                if x == 0.0 || x.is_nan() {
                    x
                } else {
                    y
                }
            }

            /// `ln x`: `x = 2^e m` with `m` in `[sqrt(2)/2, sqrt(2))`, `ln m = 2 atanh(s)`
            /// with `s = (m - 1) / (m + 1)`.
            #[inline(always)]
            pub(crate) fn ln(x: $t) -> $t {
                // Subnormals scaled into the normal range first.
                let tiny = x < <$t>::MIN_POSITIVE;
                let xs = if tiny { x * $scale } else { x };
                let bits = xs.to_bits();
                // The biased exponent as a float: its bits under those of 2^mantissa, less
                // 2^mantissa.
                let two_m = (1u64 << $mant) as $t;
                let biased = <$t>::from_bits(two_m.to_bits() | (bits >> $mant) & EXP_MASK) - two_m;
                let m = <$t>::from_bits((bits & MANT_MASK) | (1.0 as $t).to_bits());
                let high = m > std::$t::consts::SQRT_2;
                let m = if high { m * 0.5 } else { m };
                let e = biased - $bias as $t - if tiny { $shift } else { 0.0 }
                    + if high { 1.0 } else { 0.0 };
                let f = m - 1.0;
                let s = f / (2.0 + f);
                let z = s * s;
                // 2 atanh(s) = 2s + s z p, p = 2/3 + 2z/5 + 2z^2/7 + ...
                let mut p = 2.0 / (2 * $lt + 1) as $t;
                for d in (1..$lt).rev() {
                    p = z.mul_add(p, 2.0 / (2 * d + 1) as $t);
                }
                // `ln m = f - (s f - s z p)`, where `f - 2s = s f` exactly in real numbers: the
                // large part `f` is exact and the corrections small.
                let lnm = f - (s * f - s * z * p);
                let y = e * LN2_HI + (lnm + e * LN2_LO);
                if x == 0.0 {
                    <$t>::NEG_INFINITY
                } else if x < 0.0 || x.is_nan() {
                    <$t>::NAN
                } else if x == <$t>::INFINITY {
                    x
                } else {
                    y
                }
            }

            /// `ln(1 + x)`, accurate near zero: `ln(u) x / (u - 1)` for `u = 1 + x`, which
            /// cancels the rounding of `u` (and `x` itself where `u` rounds to 1).
            #[inline(always)]
            pub(crate) fn ln_1p(x: $t) -> $t {
                let u = 1.0 + x;
                let y = ln(u) * (x / (u - 1.0));
                if u == 1.0 || x == <$t>::INFINITY {
                    x
                } else if u == 0.0 {
                    <$t>::NEG_INFINITY
                } else {
                    y
                }
            }

            /// `tanh x = -expm1(-2|x|) / (2 + expm1(-2|x|))`, signed; 1 where that rounds to
            /// 1. `e^-2|x|` never overflows, so one path of `expm1` serves.
            #[inline(always)]
            pub(crate) fn tanh(x: $t) -> $t {
                let a = x.abs();
                let (r, k) = reduce(-2.0 * a.min($one));
                let p = pow2(k);
                let em = p * expm1_reduced(r) + (p - 1.0);
                let y = if a > $one { 1.0 } else { -em / (2.0 + em) };
                // NaN keeps its payload; every other result takes `x`'s sign.
                if x.is_nan() {
                    x
                } else {
                    y.copysign(x)
                }
            }

            /// `1 / (1 + e^-x)`, as `e^x / (1 + e^x)` below zero, where `e^-x` would
            /// overflow before the result underflows.
            #[inline(always)]
            pub(crate) fn logistic(x: $t) -> $t {
                let e = exp(-x.abs());
                let num = if x < 0.0 { e } else { 1.0 };
                num / (1.0 + e)
            }
        }
    };
}

precision!(
    f32, f32, u32, mantissa: 23, bias: 127,
    ln2: (0.69311523, 3.1946183e-5), clamp: (-105.0, 90.0),
    subnormal: (33554432.0, 25.0), tanh_one: 10.0,
    exp_terms: 7, ln_terms: 5
);
precision!(
    f64, f64, u64, mantissa: 52, bias: 1023,
    ln2: (0.6931467056274414, 4.7493250390316726e-07), clamp: (-746.0, 710.0),
    subnormal: (18014398509481984.0, 54.0), tanh_one: 20.0,
    exp_terms: 13, ln_terms: 12
);

/// `sin`, `cos` and `tan` of `f32` values, computed in `f64` and rounded once: `x = k pi/2 + r`
/// with pi/2 in three parts of 33 bits (each `k * part` exact for `|k| < 2^20`), then the
/// series of `sin r` and `cos r` for `|r| <= pi/4`, chosen and signed by `k mod 4` through
/// bits. Beyond [`trig::LIMIT`] (and for infinities and NaN) the platform's function takes
/// over ([`trig::wide`]).
pub(crate) mod trig {
    const PIO2_1: f64 = 1.5707963267341256;
    const PIO2_2: f64 = 6.077100506303966e-11;
    const PIO2_3: f64 = 2.0222662487959506e-21;
    const ROUND: f64 = 6755399441055744.0;
    /// Where the reduction stops being exact enough: `|x| / (pi/2) < 2^19`.
    pub(crate) const LIMIT: f32 = 823550.0;

    /// `(sin r, cos r, k mod 4)` for `x = k pi/2 + r`.
    #[inline(always)]
    fn reduce(x: f64) -> (f64, f64, u64) {
        let t = x * std::f64::consts::FRAC_2_PI + ROUND;
        let k = t - ROUND;
        let r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
        let z = r * r;
        // Taylor series to r^15 and r^14: the first omitted terms are under 2^-50.
        let mut s = -1.0 / 1_307_674_368_000.0;
        let mut c = 1.0 / 87_178_291_200.0;
        for (si, ci) in [
            (1.0 / 6_227_020_800.0, -1.0 / 479_001_600.0),
            (-1.0 / 39_916_800.0, 1.0 / 3_628_800.0),
            (1.0 / 362_880.0, -1.0 / 40_320.0),
            (-1.0 / 5_040.0, 1.0 / 720.0),
            (1.0 / 120.0, -1.0 / 24.0),
            (-1.0 / 6.0, 0.5),
        ] {
            s = si + z * s;
            c = ci + z * c;
        }
        // `r (1 + z s)`: `sin(-0) = -0`; its one more rounding is far below `f32`'s.
        (r * (1.0 + z * s), 1.0 - z * c, t.to_bits() & 3)
    }

    /// `a` where `bit` is 0, `b` where it is 1, and the sign flipped where `flip` is 1.
    #[inline(always)]
    fn pick(a: f64, b: f64, bit: u64, flip: u64) -> f64 {
        let mask = 0u64.wrapping_sub(bit);
        f64::from_bits((a.to_bits() & !mask | b.to_bits() & mask) ^ (flip << 63))
    }

    /// `sin x` for `|x| < LIMIT`.
    #[inline(always)]
    pub(crate) fn sin(x: f32) -> f32 {
        let (s, c, q) = reduce(f64::from(x));
        pick(s, c, q & 1, q >> 1) as f32
    }

    /// `cos x` for `|x| < LIMIT`.
    #[inline(always)]
    pub(crate) fn cos(x: f32) -> f32 {
        let (s, c, q) = reduce(f64::from(x));
        pick(c, s, q & 1, (q ^ (q >> 1)) & 1) as f32
    }

    /// `tan x` for `|x| < LIMIT`.
    #[inline(always)]
    pub(crate) fn tan(x: f32) -> f32 {
        let (s, c, q) = reduce(f64::from(x));
        (pick(s, c, q & 1, 0) / pick(c, s, q & 1, q & 1)) as f32
    }

    /// Whether `x` is left to the platform's function: beyond the reduction's range, infinite
    /// or NaN.
    #[inline(always)]
    pub(crate) fn wide(x: f32) -> bool {
        x.is_nan() || x.abs() >= LIMIT
    }
}

/// `1 / sqrt(x)`, in `f64` (for `f32`, rounded once more: correctly rounded but for inputs
/// within about 2^-29 ulp of a rounding boundary).
#[inline(always)]
fn rsqrt_f64(x: f64) -> f64 {
    1.0 / x.sqrt()
}

/// `f32` sin, cos or tan: [`trig`]'s, the platform's `f64` function beyond its range.
#[inline(always)]
fn trig_f32(x: f32, fast: fn(f32) -> f32, wide: fn(f64) -> f64) -> f32 {
    let y = fast(x);
    if trig::wide(x) {
        wide(f64::from(x)) as f32
    } else {
        y
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The functions, each defined for `f32` and `f64` (`$f32`, `$f64`), with its docs.
macro_rules! functions {
    ($($name:ident, $f32:expr, $f64:expr, $doc:literal, $ex:literal;)*) => {
        /// `f32` or `f64`: the types this module's functions take (sealed).
        ///
        /// ```
        /// use xla_bcast::math::{self, Float};
        ///
        /// fn softplus<T: Float>(x: T) -> T {
        ///     math::log1p(math::exp(x))
        /// }
        /// assert!((softplus(0.0f64) - 2f64.ln()).abs() < 1e-15);
        /// ```
        pub trait Float: Copy + sealed::Sealed {
            $(#[doc(hidden)] fn $name(self) -> Self;)*
        }
        impl Float for f32 {
            $(#[inline(always)] fn $name(self) -> f32 { ($f32)(self) })*
        }
        impl Float for f64 {
            $(#[inline(always)] fn $name(self) -> f64 { ($f64)(self) })*
        }
        $(
            #[doc = $doc]
            ///
            /// ```
            /// use xla_bcast::math;
            #[doc = $ex]
            /// ```
            #[inline(always)]
            pub fn $name<T: Float>(x: T) -> T {
                Float::$name(x)
            }
        )*
    };
}

functions! {
    exp, self::f32::exp, self::f64::exp,
        "`e^x`. `f32`: within 1 ulp of the correctly rounded result; `f64`: within 1 ulp of \
         glibc's. Branch-free: vectorises.",
        "assert_eq!((math::exp(0.0f32), math::exp(f64::NEG_INFINITY)), (1.0, 0.0));";
    expm1, self::f32::expm1, self::f64::expm1,
        "`e^x - 1`, accurate near zero. Within 2 ulps (`f32`: of the correctly rounded result; \
         `f64`: of glibc's). Branch-free: vectorises.",
        "assert_eq!(math::expm1(-0.0f64).to_bits(), (-0.0f64).to_bits());";
    log, self::f32::ln, self::f64::ln,
        "The natural logarithm (`-inf` at zero, NaN below). Within 1 ulp (`f32`: of the \
         correctly rounded result; `f64`: of glibc's). Branch-free: vectorises.",
        "assert_eq!((math::log(1.0f32), math::log(0.0f64)), (0.0, f64::NEG_INFINITY));";
    log1p, self::f32::ln_1p, self::f64::ln_1p,
        "`ln(1 + x)`, accurate near zero. Within 2 ulps (`f32`: of the correctly rounded result; \
         `f64`: of glibc's). Branch-free: vectorises.",
        "assert_eq!(math::log1p(-1.0f32), f32::NEG_INFINITY);";
    tanh, self::f32::tanh, self::f64::tanh,
        "The hyperbolic tangent. `f32`: within 2 ulps of the correctly rounded result; `f64`: \
         within 3 ulps of glibc's. Branch-free: vectorises.",
        "assert_eq!((math::tanh(f32::INFINITY), math::tanh(-0.0f64).to_bits()), (1.0, (-0.0f64).to_bits()));";
    logistic, self::f32::logistic, self::f64::logistic,
        "`1 / (1 + e^-x)`. Within 2 ulps (`f32`: of the correctly rounded result; `f64`: of \
         glibc's `1 / (1 + exp(-x))` in a form that neither overflows nor cancels). \
         Branch-free: vectorises.",
        "assert_eq!((math::logistic(0.0f32), math::logistic(f64::NEG_INFINITY)), (0.5, 0.0));";
    sin, |x| trig_f32(x, trig::sin, f64::sin), f64::sin,
        "The sine (radians). `f32`: computed in `f64` and rounded once (the correctly rounded \
         result but where glibc's `f64` sine straddles a rounding boundary), vectorised for \
         `|x| < 823550`; beyond, and for `f64`, the platform's function.",
        "assert_eq!(math::sin(std::f32::consts::FRAC_PI_2), 1.0);";
    cos, |x| trig_f32(x, trig::cos, f64::cos), f64::cos,
        "The cosine (radians), as [`sin`].",
        "assert_eq!(math::cos(0.0f64), 1.0);";
    tan, |x| trig_f32(x, trig::tan, f64::tan), f64::tan,
        "The tangent (radians), as [`sin`].",
        "assert_eq!(math::tan(0.0f32), 0.0);";
    rsqrt, |x: f32| rsqrt_f64(f64::from(x)) as f32, rsqrt_f64,
        "`1 / sqrt(x)` (`inf` at `+0.0`, `-inf` at `-0.0`): `f32` computed in `f64` and rounded \
         once (correctly rounded but within about 2^-29 ulp of a boundary); `f64` two roundings.",
        "assert_eq!((math::rsqrt(4.0f32), math::rsqrt(-0.0f64)), (0.5, f64::NEG_INFINITY));";
    cbrt, |x: f32| f64::from(x).cbrt() as f32, f64::cbrt,
        "The cube root: the platform's `f64` function (`f32` rounded once).",
        "assert_eq!(math::cbrt(-27.0f64), -3.0);";
}
