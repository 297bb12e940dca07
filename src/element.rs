//! Element semantics after XLA: what `add`, `div`, `max`, ... mean for one pair of elements.
//!
//! None of these panic, in debug or release builds:
//!
//! * integer `add`, `sub`, `mul` wrap (two's complement);
//! * integer `div`: signed `x / 0 = -1`, unsigned `x / 0 = MAX`, `MIN / -1 = MIN`;
//! * integer `rem`: `x % 0 = x`, `MIN % -1 = 0`; the sign follows the dividend;
//! * integer `pow`: wrapping exponentiation by squaring (`0^0 = 1`); a negative exponent gives
//!   `1` for base `1`, `-1` or `1` for base `-1` by the exponent's parity (`(-1)^-1 = -1`,
//!   `(-1)^-2 = 1`), and `0` for every other base, `0` included (StableHLO's `power` and XLA's
//!   CPU compiler agree on this); unsigned exponents are never negative;
//! * integer `and`, `or`, `xor` are bitwise;
//! * integer shifts read the shift amount as unsigned (a negative one is huge): an amount of
//!   the bit width or more gives `0` for `shift_left` and `shift_right_logical`, and the sign
//!   bit everywhere for `shift_right_arithmetic`, which shifts the bit pattern (also of an
//!   unsigned type) with the top bit copied in; `shift_right_logical` fills with zeros (also
//!   for a signed type);
//! * float ops are IEEE-754, and an op of two operands (but `pow`) with a NaN operand gives
//!   the first NaN operand, quieted (sign and payload kept); `rem` is C's `fmod`; `max` and
//!   `min` propagate NaN and order `-0.0 < +0.0` (IEEE-754 `maximum` / `minimum`, as
//!   StableHLO specifies); `atan2` is computed in `f64` and rounded once (as StableHLO's
//!   reference interpreter does);
//! * `bool` is XLA's `PRED`: `add` and `max` are logical or, `mul` and `min` logical and, and
//!   `and`, `or`, `xor` are logical; `false < true`.
//!
//! Which ops a type has is decided at compile time by the traits below, after the StableHLO
//! specification: [`XlaElement`] (`add`, `mul`: every type), [`XlaNumber`] (`sub`, `div`,
//! `pow`: not `bool`), [`XlaOrd`] (`max`, `min`, `clamp`: not complex), [`XlaReal`] (`rem`:
//! integers and real floats), [`XlaBitwise`] (`and`, `or`, `xor`: integers and `bool`),
//! [`XlaInteger`] (shifts) and [`XlaFloat`] (`atan2`). Generic code needs one bound:
//! [`XlaRealFloat`] for the real floats, [`XlaInteger`] for the integers, each of which has every
//! trait its types have. The sub-byte integers of XLA (`i2`,
//! `i4`, `ui2`, `ui4`) have no Rust type and are not supported.
//!
//! An op a type does not have does not compile: a shift of floats,
//!
//! ```compile_fail
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//! let _ = array![1.0f32].shift_left_bcast(&array![1.0f32], &[]);
//! ```
//!
//! an `atan2` of integers,
//!
//! ```compile_fail
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//! let _ = array![1i32].atan2_bcast(&array![1i32], &[]);
//! ```
//!
//! or a subtraction of `bool`s (XLA defines none for `PRED`):
//!
//! ```compile_fail
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//! let _ = array![true].sub_bcast(&array![false], &[]);
//! ```
//!
//! or an order of complex numbers (with the feature `complex`):
//!
//! ```compile_fail
//! use ndarray::array;
//! use num_complex::Complex64;
//! use xla_bcast::prelude::*;
//! let a = array![Complex64::new(1.0, 2.0)];
//! let _ = a.max_bcast(&a, &[]);
//! let _ = a.lt_bcast(&a, &[]);
//! ```
//!
//! while the same calls on the right types do:
//!
//! ```
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//! assert_eq!(array![1u8].shift_left_bcast(&array![3u8], &[]).unwrap(), array![8u8]);
//! assert_eq!(array![0.0f32].atan2_bcast(&array![-1.0f32], &[]).unwrap()[0], std::f32::consts::PI);
//! assert_eq!(array![true].add_bcast(&array![true], &[]).unwrap(), array![true]);
//! ```
//!
//! | type | XlaElement | XlaNumber | XlaOrd | XlaReal | XlaBitwise | XlaInteger | XlaFloat |
//! |---|---|---|---|---|---|---|---|
//! | `i8`..`i64`, `isize`, `u8`..`u64`, `usize` | yes | yes | yes | yes | yes | yes | |
//! | `f32`, `f64` | yes | yes | yes | yes | | | yes |
//! | `bool` | yes | | yes | | yes | | |
//! | `half::f16`, `half::bf16` (feature `half`) | yes | yes | yes | yes | | | yes |
//! | `num_complex::Complex<f32>`, `Complex<f64>` (feature `complex`) | yes | yes | | | | | yes |
//!
//! `f16` and `bf16` compute as XLA's CPU compiler does: each op in `f32` (`atan2` in `f64`),
//! rounded once to the type (for `+ - * /` that is the correctly rounded result). Complex
//! numbers use the textbook formulas (`(a+bi)(c+di) = (ac-bd) + (ad+bc)i`, division by
//! `c^2+d^2`), `pow(a, b) = exp(b ln a)` and `atan2(y, x) = -i ln((x + iy) / sqrt(x^2 + y^2))`
//! (StableHLO's definition, computed in `f64`); they have `eq` and `ne` but no order, so no
//! `max`, `min`, `clamp` or `lt`.
/// An element type of the crate, with XLA's `add` and `mul` (every type has them; `bool`'s are
/// logical or and and) and their identities, which sums need.
///
/// Implemented for `f32`, `f64`, `i8`..`i64`, `isize`, `u8`..`u64`, `usize` and `bool`; see the
/// [module](self) for which further traits each has.
///
/// ```
/// use xla_bcast::XlaElement;
/// assert_eq!(i32::MAX.xla_add(1), i32::MIN);
/// assert_eq!(true.xla_add(true), true); // PRED: or
/// assert_eq!(true.xla_mul(false), false); // PRED: and
/// ```
pub trait XlaElement: Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    /// `self + rhs` (integers wrap; `bool`: or).
    fn xla_add(self, rhs: Self) -> Self;
    /// `self * rhs` (integers wrap; `bool`: and).
    fn xla_mul(self, rhs: Self) -> Self;
    /// `xla_add`, but where both operands are NaN the NaN may be either's: the one instruction
    /// a sum's lanes run (a lane that ends NaN is summed again with `xla_add`, so a sum gives
    /// `xla_add`'s bits). Not for users; the default is `xla_add`.
    #[doc(hidden)]
    #[inline(always)]
    fn xla_add_lanes(self, rhs: Self) -> Self {
        self.xla_add(rhs)
    }
    /// The additive identity, for sums.
    fn xla_zero() -> Self;
    /// The multiplicative identity, for products.
    fn xla_one() -> Self;
}

/// The arithmetic XLA defines for numbers (not for `bool`): `sub`, `div`, `pow`.
///
/// ```
/// use xla_bcast::XlaNumber;
/// assert_eq!(7i32.xla_div(0), -1);
/// assert_eq!(7u8.xla_div(0), u8::MAX);
/// assert_eq!(i64::MIN.xla_div(-1), i64::MIN);
/// assert_eq!((-1i32).xla_pow(-3), -1);
/// ```
pub trait XlaNumber: XlaElement {
    /// `self - rhs` (integers wrap).
    fn xla_sub(self, rhs: Self) -> Self;
    /// `self / rhs` (integer division by zero and `MIN / -1` as XLA defines them).
    fn xla_div(self, rhs: Self) -> Self;
    /// `self` to the power `rhs` (integers: wrapping; a negative exponent gives `1` for base
    /// `1`, `+-1` for base `-1` by the exponent's parity, `0` otherwise).
    fn xla_pow(self, rhs: Self) -> Self;
    /// `-self` (integers wrap: `-MIN = MIN`, unsigned `-x = 0 - x`; floats flip the sign bit,
    /// of zeros and NaNs too).
    fn xla_neg(self) -> Self;
}

/// Ordered elements (not complex): `max`, `min` (and `clamp`) and their identities.
///
/// ```
/// use xla_bcast::{XlaElement, XlaOrd};
/// assert!(f32::NAN.xla_max(1.0).is_nan());
/// // Which NaN: the first operand that is one, quieted (its sign and payload kept).
/// assert_eq!(f32::NAN.xla_min(-f32::NAN).to_bits(), f32::NAN.to_bits());
/// assert_eq!(1.0f32.xla_max(-f32::NAN).to_bits(), (-f32::NAN).to_bits());
/// assert_eq!((-f32::NAN).xla_add(f32::NAN).to_bits(), (-f32::NAN).to_bits()); // every op
/// assert_eq!(true.xla_min(false), false); // PRED: and
/// ```
pub trait XlaOrd: XlaElement + PartialOrd {
    /// The larger value (floats: NaN propagates, the first NaN operand quieted;
    /// `-0.0 < +0.0`; `bool`: or).
    fn xla_max(self, rhs: Self) -> Self;
    /// The smaller value (floats: NaN propagates, as `xla_max`; `-0.0 < +0.0`; `bool`: and).
    fn xla_min(self, rhs: Self) -> Self;
    /// The smallest value (-inf for floats), the identity of `max`.
    fn xla_lowest() -> Self;
    /// The largest value (+inf for floats), the identity of `min`.
    fn xla_highest() -> Self;
    /// XLA's `clamp`: `min(max(self, lo), hi)`.
    #[inline(always)]
    fn xla_clamp(self, lo: Self, hi: Self) -> Self {
        self.xla_max(lo).xla_min(hi)
    }
}

/// Integers and real floats: `rem`.
///
/// ```
/// use xla_bcast::XlaReal;
/// assert_eq!(7i16.xla_rem(0), 7);
/// assert_eq!((-7.5f64).xla_rem(2.0), -1.5);
/// ```
pub trait XlaReal: XlaNumber + XlaOrd {
    /// `self % rhs` (integer `x % 0 = x`, `MIN % -1 = 0`; floats: `fmod`).
    fn xla_rem(self, rhs: Self) -> Self;
}

/// Integers (bitwise) and `bool` (logical): `and`, `or`, `xor`.
///
/// ```
/// use xla_bcast::XlaBitwise;
/// assert_eq!(0b1100u8.xla_xor(0b1010), 0b0110);
/// assert_eq!(true.xla_and(false), false);
/// ```
pub trait XlaBitwise: XlaElement {
    /// `self & rhs`.
    fn xla_and(self, rhs: Self) -> Self;
    /// `self | rhs`.
    fn xla_or(self, rhs: Self) -> Self;
    /// `self ^ rhs`.
    fn xla_xor(self, rhs: Self) -> Self;
    /// `!self` (bitwise; `bool`: logical).
    fn xla_not(self) -> Self;
}

/// Integers: the shifts, with XLA's rule for amounts at or past the bit width (and negative
/// ones, read as unsigned: as large).
///
/// ```
/// use xla_bcast::XlaInteger;
/// assert_eq!((-1i64).xla_shift_left(1), -2);
/// assert_eq!(1i32.xla_shift_left(32), 0);
/// assert_eq!((-8i32).xla_shift_right_arithmetic(-1), -1); // sign fill
/// assert_eq!((-1i64).xla_shift_right_logical(1), i64::MAX);
/// assert_eq!(0x80u8.xla_shift_right_arithmetic(7), 0xff); // the bit pattern, top bit copied
/// ```
pub trait XlaInteger: XlaReal + XlaBitwise {
    /// `self << rhs`; `0` when `rhs` (as unsigned) is at least the bit width.
    fn xla_shift_left(self, rhs: Self) -> Self;
    /// `self >> rhs` with the top bit copied in; all top bits when `rhs` (as unsigned) is at
    /// least the bit width.
    fn xla_shift_right_arithmetic(self, rhs: Self) -> Self;
    /// `self >> rhs` with zeros shifted in; `0` when `rhs` (as unsigned) is at least the bit
    /// width.
    fn xla_shift_right_logical(self, rhs: Self) -> Self;
}

/// Floating-point elements: `atan2`.
///
/// ```
/// use xla_bcast::XlaFloat;
/// assert_eq!(1.0f64.xla_atan2(0.0), std::f64::consts::FRAC_PI_2);
/// assert_eq!((-0.0f32).xla_atan2(-1.0), -std::f32::consts::PI);
/// ```
pub trait XlaFloat: XlaNumber {
    /// The angle of the point `(rhs, self)`: `atan2(self, rhs)`, in `(-pi, pi]`.
    fn xla_atan2(self, rhs: Self) -> Self;
}

/// The real floating-point types (`f32`, `f64`; `f16`, `bf16` with the feature `half`): every
/// op the crate defines on them, under one bound. Generic code over floats bounds its element
/// type by this (beside `num_traits::Float` or whatever else it uses) and calls every op of
/// the crate on them: `add_bcast` .. `atan2_bcast`, the comparisons, `select`, `clamp`,
/// `reduce_in_dim`, the strict operators (all but the bitwise ones) and the wrappers. For
/// integers the one bound is [`XlaInteger`].
///
/// Implemented for every type that is both [`XlaFloat`] and [`XlaReal`].
///
/// ```
/// use ndarray::{Array1, Array2};
/// use xla_bcast::prelude::*;
///
/// /// A layer norm over the rows of `x`, for any real float type.
/// fn layer_norm<T: XlaRealFloat + num_traits::Float>(
///     x: Array2<T>,
///     g: &Array1<T>,
///     b: &Array1<T>,
/// ) -> Result<Array2<T>, BroadcastError> {
///     let (rows, n) = x.dim();
///     let n = T::from(n).unwrap();
///     let mean = x.reduce_in_dim(rows, &[0])?.mapv(|s| s / n);
///     let xc = x.into_strict() - mean.in_dims(&[0]);
///     let var = (&xc * &xc).reduce_in_dim(rows, &[0])?.mapv(|s| s / n);
///     let rstd = var.mapv(|v| (v + T::from(1e-5).unwrap()).sqrt().recip());
///     let y = (xc * rstd.in_dims(&[0])).max_bcast(&ndarray::arr0(T::neg_infinity()), &[])?; // max: any op
///     Ok((y.into_strict() * g.in_dims(&[1]) + b.in_dims(&[1])).into_inner())
/// }
///
/// let x = ndarray::array![[1.0f32, 2.0, 3.0], [2.0, 2.0, 2.0]];
/// let y = layer_norm(x, &Array1::ones(3), &Array1::zeros(3)).unwrap();
/// assert!((y[[0, 2]] - 1.2247).abs() < 1e-3 && y[[1, 0]] == 0.0);
/// let y64 = layer_norm(ndarray::array![[1.0f64, 3.0]], &Array1::ones(2), &Array1::zeros(2)).unwrap();
/// assert!((y64[[0, 1]] - 1.0).abs() < 1e-4);
/// ```
pub trait XlaRealFloat: XlaFloat + XlaReal {}

impl<T: XlaFloat + XlaReal> XlaRealFloat for T {}

/// An integer type's ops: all but `div` and `pow` alike for signed and unsigned types (`$u` is
/// the unsigned type of the width, `$s` the signed one); those two are given as expressions of
/// the operands `$x` and `$y`.
macro_rules! int_ops {
    ($t:ty, $u:ty, $s:ty, |$x:ident, $y:ident| div: $div:expr, pow: $pow:expr) => {
        impl XlaNumber for $t {
            #[inline(always)]
            fn xla_sub(self, rhs: Self) -> Self {
                self.wrapping_sub(rhs)
            }
            #[inline(always)]
            fn xla_div(self, rhs: Self) -> Self {
                let ($x, $y) = (self, rhs);
                $div
            }
            #[inline(always)]
            fn xla_neg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline]
            fn xla_pow(self, rhs: Self) -> Self {
                let ($x, $y) = (self, rhs);
                $pow
            }
        }

        impl XlaElement for $t {
            #[inline(always)]
            fn xla_add(self, rhs: Self) -> Self {
                self.wrapping_add(rhs)
            }
            #[inline(always)]
            fn xla_mul(self, rhs: Self) -> Self {
                self.wrapping_mul(rhs)
            }
            fn xla_zero() -> Self {
                0
            }
            fn xla_one() -> Self {
                1
            }
        }

        impl XlaOrd for $t {
            #[inline(always)]
            fn xla_max(self, rhs: Self) -> Self {
                if self >= rhs {
                    self
                } else {
                    rhs
                }
            }
            #[inline(always)]
            fn xla_min(self, rhs: Self) -> Self {
                if self <= rhs {
                    self
                } else {
                    rhs
                }
            }
            fn xla_lowest() -> Self {
                <$t>::MIN
            }
            fn xla_highest() -> Self {
                <$t>::MAX
            }
        }

        impl XlaReal for $t {
            #[inline(always)]
            fn xla_rem(self, rhs: Self) -> Self {
                // wrapping_rem gives MIN % -1 = 0.
                if rhs == 0 {
                    self
                } else {
                    self.wrapping_rem(rhs)
                }
            }
        }

        impl XlaInteger for $t {
            // The amount's bits read as unsigned: a negative amount is past the width.
            #[inline(always)]
            fn xla_shift_left(self, rhs: Self) -> Self {
                match rhs as $u {
                    n if n < <$t>::BITS as $u => self << n,
                    _ => 0,
                }
            }
            #[inline(always)]
            fn xla_shift_right_arithmetic(self, rhs: Self) -> Self {
                let n = (rhs as $u).min(<$t>::BITS as $u - 1);
                ((self as $s) >> n) as $t
            }
            #[inline(always)]
            fn xla_shift_right_logical(self, rhs: Self) -> Self {
                match rhs as $u {
                    n if n < <$t>::BITS as $u => ((self as $u) >> n) as $t,
                    _ => 0,
                }
            }
        }
    };
}

/// Wrapping exponentiation by squaring over the bits of a non-negative exponent.
macro_rules! pow_by_squaring {
    ($base:expr, $exp:expr) => {{
        let (mut base, mut exp, mut acc) = ($base, $exp, 1);
        while exp != 0 {
            if exp & 1 == 1 {
                acc = base.wrapping_mul(acc);
            }
            base = base.wrapping_mul(base);
            exp >>= 1;
        }
        acc
    }};
}

macro_rules! signed_int {
    ($(($t:ty, $u:ty)),*) => {$(
        int_ops!($t, $u, $t, |x, y|
            // wrapping_div gives MIN / -1 = MIN.
            div: if y == 0 { -1 } else { x.wrapping_div(y) },
            pow: match (x, y) {
                (_, 0..) => pow_by_squaring!(x, y),
                // 1/x^|y| is an integer only for |x| = 1; the rest truncates to 0.
                (1, _) => 1,
                (-1, _) => if y & 1 == 1 { -1 } else { 1 },
                _ => 0,
            }
        );
    )*};
}

macro_rules! unsigned_int {
    ($(($t:ty, $s:ty)),*) => {$(
        int_ops!($t, $t, $s, |x, y|
            div: if y == 0 { <$t>::MAX } else { x / y },
            pow: pow_by_squaring!(x, y)
        );
    )*};
}

macro_rules! float {
    ($($t:ty),*) => {$(
        impl XlaElement for $t {
            #[inline(always)]
            fn xla_add(self, rhs: Self) -> Self { first_of(self, self + rhs) }
            #[inline(always)]
            fn xla_mul(self, rhs: Self) -> Self { first_of(self, self * rhs) }
            #[inline(always)]
            fn xla_add_lanes(self, rhs: Self) -> Self { self + rhs }
            fn xla_zero() -> Self { 0.0 }
            fn xla_one() -> Self { 1.0 }
        }

        impl XlaNumber for $t {
            #[inline(always)]
            fn xla_sub(self, rhs: Self) -> Self { first_of(self, self - rhs) }
            #[inline(always)]
            fn xla_div(self, rhs: Self) -> Self { first_of(self, self / rhs) }
            #[inline]
            fn xla_pow(self, rhs: Self) -> Self { self.powf(rhs) }
            #[inline(always)]
            fn xla_neg(self) -> Self { -self }
        }

        impl XlaOrd for $t {
            #[inline(always)]
            fn xla_max(self, rhs: Self) -> Self {
                // NaN wins; on equal values +0.0 over -0.0 (equal values have equal bits but
                // for the zeros, whose AND is +0.0 if either is). Selects only, no branch, so
                // folds and loops vectorise.
                let larger = if self > rhs { self } else { rhs };
                let equal = <$t>::from_bits(self.to_bits() & rhs.to_bits());
                let m = if self == rhs { equal } else { larger };
                first_nan(self, rhs, m)
            }
            #[inline(always)]
            fn xla_min(self, rhs: Self) -> Self {
                // As `xla_max`: on equal values -0.0 over +0.0 (the OR of their bits).
                let smaller = if self < rhs { self } else { rhs };
                let equal = <$t>::from_bits(self.to_bits() | rhs.to_bits());
                let m = if self == rhs { equal } else { smaller };
                first_nan(self, rhs, m)
            }
            fn xla_lowest() -> Self { <$t>::NEG_INFINITY }
            fn xla_highest() -> Self { <$t>::INFINITY }
        }

        impl XlaReal for $t {
            #[inline(always)]
            fn xla_rem(self, rhs: Self) -> Self { first_nan(self, rhs, self % rhs) }
        }

        impl XlaFloat for $t {
            #[inline]
            fn xla_atan2(self, rhs: Self) -> Self {
                first_nan(self, rhs, (self as f64).atan2(rhs as f64) as $t)
            }
        }
    )*};
}

/// `m`, or where `a` or `b` is NaN the first NaN of the two, quieted: the one NaN every float
/// op of two operands gives (but `pow`, whose `pow(NaN, 0)` is 1), defined here so that every
/// copy of every loop gives its bits. Selects only.
#[inline(always)]
fn first_nan<T: FloatBits>(a: T, b: T, m: T) -> T {
    let nan = if a.is_nan() { a } else { b };
    let quiet = T::from_raw(nan.raw() | T::QUIET);
    if a.is_nan() || b.is_nan() {
        quiet
    } else {
        m
    }
}

/// `r`, the result of `+ - * /` on `a` and another operand, or `a` quieted where `a` is NaN:
/// [`first_nan`] for the ops whose hardware gives a lone NaN operand quieted, with one select.
/// Without it, where both operands are NaN the result is whichever the compiler put first, and
/// it commutes `+` and `*` as it likes: loops compiled apart (vector body and tail, the AVX2
/// and AVX-512 copies) gave different NaNs for one sum.
#[inline(always)]
fn first_of<T: FloatBits>(a: T, r: T) -> T {
    if a.is_nan() {
        T::from_raw(a.raw() | T::QUIET)
    } else {
        r
    }
}

/// The bits of `f32` and `f64`, as [`first_nan`] reads them.
trait FloatBits: Copy {
    type Bits: Copy + std::ops::BitOr<Output = Self::Bits>;
    /// The quiet bit of a NaN.
    const QUIET: Self::Bits;
    fn raw(self) -> Self::Bits;
    fn from_raw(b: Self::Bits) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! float_bits {
    ($($t:ty: $b:ty),*) => {$(
        impl FloatBits for $t {
            type Bits = $b;
            const QUIET: $b = 1 << (<$t>::MANTISSA_DIGITS - 2);
            #[inline(always)]
            fn raw(self) -> $b { self.to_bits() }
            #[inline(always)]
            fn from_raw(b: $b) -> Self { <$t>::from_bits(b) }
            #[inline(always)]
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
        }
    )*};
}
float_bits!(f32: u32, f64: u64);

signed_int!((i8, u8), (i16, u16), (i32, u32), (i64, u64), (isize, usize));
unsigned_int!((u8, i8), (u16, i16), (u32, i32), (u64, i64), (usize, isize));
float!(f32, f64);

impl XlaElement for bool {
    #[inline(always)]
    fn xla_add(self, rhs: Self) -> Self {
        self | rhs
    }
    #[inline(always)]
    fn xla_mul(self, rhs: Self) -> Self {
        self & rhs
    }
    fn xla_zero() -> Self {
        false
    }
    fn xla_one() -> Self {
        true
    }
}

impl XlaOrd for bool {
    // PRED's max and min are its add and mul: or and and.
    #[inline(always)]
    fn xla_max(self, rhs: Self) -> Self {
        self.xla_add(rhs)
    }
    #[inline(always)]
    fn xla_min(self, rhs: Self) -> Self {
        self.xla_mul(rhs)
    }
    fn xla_lowest() -> Self {
        false
    }
    fn xla_highest() -> Self {
        true
    }
}

/// Rust's own operators are XLA's here: bitwise on integers, logical on `bool`.
macro_rules! bitwise {
    ($($t:ty),*) => {$(
        impl XlaBitwise for $t {
            #[inline(always)]
            fn xla_and(self, rhs: Self) -> Self {
                self & rhs
            }
            #[inline(always)]
            fn xla_or(self, rhs: Self) -> Self {
                self | rhs
            }
            #[inline(always)]
            fn xla_xor(self, rhs: Self) -> Self {
                self ^ rhs
            }
            #[inline(always)]
            fn xla_not(self) -> Self {
                !self
            }
        }
    )*};
}

bitwise!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, bool);

/// `f16` to `f32`, exactly, in plain integer and float operations with no branch the compiler
/// cannot turn into a select, so a loop of them vectorises (`half`'s own conversion checks the
/// CPU for F16C at every call, which keeps an elementwise loop scalar; `docs/experiments.md`).
#[cfg(feature = "half")]
#[inline(always)]
fn f16_to_f32(h: half::f16) -> f32 {
    let h = u32::from(h.to_bits());
    let magnitude = (h & 0x7fff) << 13;
    let exponent = magnitude & (0x1f << 23);
    // Rebias the exponent (15 to 127); infinities and NaNs keep the top exponent, and a NaN
    // comes out quiet (as the F16C conversion makes it).
    let mut bits = magnitude + ((127 - 15) << 23);
    if exponent == 0x1f << 23 {
        bits += (128 - 16) << 23;
        if magnitude != exponent {
            bits |= 0x0040_0000;
        }
    }
    // Subnormals (and zero): renormalise through the float unit.
    let subnormal = f32::from_bits(bits + (1 << 23)) - f32::from_bits(113 << 23);
    let bits = if exponent == 0 {
        subnormal.to_bits()
    } else {
        bits
    };
    f32::from_bits(bits | ((h & 0x8000) << 16))
}

/// `f32` to `f16`, rounded to nearest, ties to even (NaN stays NaN, quiet), in operations that
/// vectorise (see [`f16_to_f32`]).
#[cfg(feature = "half")]
#[inline(always)]
fn f32_to_f16(f: f32) -> half::f16 {
    let bits = f.to_bits();
    let sign = bits & 0x8000_0000;
    let magnitude = bits ^ sign;
    // The smallest f32 that rounds to infinity in f16, and the smallest normal f16.
    const OVERFLOW: u32 = (127 + 16) << 23;
    const NORMAL: u32 = 113 << 23;
    // Subnormal results: adding 0.5 (as a float with the right exponent) rounds the mantissa
    // to f16's subnormal grid in the float unit, ties to even.
    const DENORM_MAGIC: u32 = ((127 - 15) + (23 - 10) + 1) << 23;
    let sub = (f32::from_bits(magnitude) + f32::from_bits(DENORM_MAGIC)).to_bits() - DENORM_MAGIC;
    // Normal results: rebias and round to nearest even on the 13 dropped bits.
    let odd = (magnitude >> 13) & 1;
    let normal = (magnitude.wrapping_sub((127 - 15) << 23) + 0xfff + odd) >> 13;
    let special = if magnitude > 0x7f80_0000 {
        0x7e00
    } else {
        0x7c00
    };
    let out = if magnitude >= OVERFLOW {
        special
    } else if magnitude < NORMAL {
        sub
    } else {
        normal
    };
    half::f16::from_bits((out | (sign >> 16)) as u16)
}

/// `f16` and `bf16` in and out of `f32` for the ops below.
#[cfg(feature = "half")]
pub(crate) trait ViaF32: Copy {
    fn widen(self) -> f32;
    fn narrow(v: f32) -> Self;
}

#[cfg(feature = "half")]
impl ViaF32 for half::f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        f16_to_f32(self)
    }
    #[inline(always)]
    fn narrow(v: f32) -> Self {
        f32_to_f16(v)
    }
}

#[cfg(feature = "half")]
impl ViaF32 for half::bf16 {
    // `half`'s bf16 conversions are plain bit operations already.
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn narrow(v: f32) -> Self {
        half::bf16::from_f32(v)
    }
}

/// `f(a, b)` of two halves in `f32`, narrowed; where `a` or `b` is NaN, the first of them that
/// is, quieted ([`first_nan`]): in `f32` the compiler may give either operand's NaN, and a
/// half's loops widen and narrow in vector copies whose operand order differs.
#[cfg(feature = "half")]
#[inline(always)]
fn via_f32<T: ViaF32>(a: T, b: T, f: impl Fn(f32, f32) -> f32) -> T {
    let (x, y) = (a.widen(), b.widen());
    T::narrow(first_nan(x, y, f(x, y)))
}

/// `f16` and `bf16`: each op in `f32` (exact for these types' `+ - * /` after one rounding),
/// a NaN operand's NaN kept as [`via_f32`] says.
#[cfg(feature = "half")]
macro_rules! half_float {
    ($($t:ty),*) => {$(
        impl XlaElement for $t {
            #[inline(always)]
            fn xla_add(self, rhs: Self) -> Self { via_f32(self, rhs, |a, b| a + b) }
            #[inline(always)]
            fn xla_mul(self, rhs: Self) -> Self { via_f32(self, rhs, |a, b| a * b) }
            #[inline(always)]
            fn xla_add_lanes(self, rhs: Self) -> Self {
                <$t as ViaF32>::narrow(self.widen() + rhs.widen())
            }
            fn xla_zero() -> Self { <$t>::ZERO }
            fn xla_one() -> Self { <$t>::ONE }
        }

        impl XlaNumber for $t {
            #[inline(always)]
            fn xla_sub(self, rhs: Self) -> Self { via_f32(self, rhs, |a, b| a - b) }
            #[inline(always)]
            fn xla_div(self, rhs: Self) -> Self { via_f32(self, rhs, |a, b| a / b) }
            #[inline]
            fn xla_pow(self, rhs: Self) -> Self { <$t as ViaF32>::narrow(self.widen().powf(rhs.widen())) }
            #[inline(always)]
            fn xla_neg(self) -> Self { -self }
        }

        impl XlaOrd for $t {
            #[inline(always)]
            fn xla_max(self, rhs: Self) -> Self { via_f32(self, rhs, f32::xla_max) }
            #[inline(always)]
            fn xla_min(self, rhs: Self) -> Self { via_f32(self, rhs, f32::xla_min) }
            fn xla_lowest() -> Self { <$t>::NEG_INFINITY }
            fn xla_highest() -> Self { <$t>::INFINITY }
        }

        impl XlaReal for $t {
            #[inline(always)]
            fn xla_rem(self, rhs: Self) -> Self { via_f32(self, rhs, |a, b| a % b) }
        }

        impl XlaFloat for $t {
            #[inline]
            fn xla_atan2(self, rhs: Self) -> Self {
                if self.is_nan() || rhs.is_nan() {
                    return via_f32(self, rhs, |y, _| y);
                }
                <$t>::from_f64(self.to_f64().atan2(rhs.to_f64()))
            }
        }
    )*};
}

#[cfg(feature = "half")]
half_float!(half::f16, half::bf16);

#[cfg(feature = "complex")]
macro_rules! complex {
    ($($t:ty),*) => {$(
        impl XlaElement for num_complex::Complex<$t> {
            #[inline(always)]
            fn xla_add(self, rhs: Self) -> Self { self + rhs }
            #[inline(always)]
            fn xla_mul(self, rhs: Self) -> Self { self * rhs }
            fn xla_zero() -> Self { Self::new(0.0, 0.0) }
            fn xla_one() -> Self { Self::new(1.0, 0.0) }
        }

        impl XlaNumber for num_complex::Complex<$t> {
            #[inline(always)]
            fn xla_sub(self, rhs: Self) -> Self { self - rhs }
            #[inline(always)]
            fn xla_div(self, rhs: Self) -> Self { self / rhs }
            #[inline]
            fn xla_pow(self, rhs: Self) -> Self { self.powc(rhs) }
            #[inline(always)]
            fn xla_neg(self) -> Self { -self }
        }

        impl XlaFloat for num_complex::Complex<$t> {
            #[inline]
            fn xla_atan2(self, rhs: Self) -> Self {
                use num_complex::Complex64;
                let (y, x) = (
                    Complex64::new(self.re as f64, self.im as f64),
                    Complex64::new(rhs.re as f64, rhs.im as f64),
                );
                let i = Complex64::i();
                let r = -i * ((x + i * y) / (x * x + y * y).sqrt()).ln();
                Self::new(r.re as $t, r.im as $t)
            }
        }
    )*};
}

#[cfg(feature = "complex")]
complex!(f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorisable f16 conversions against `half`'s: every f16 to f32 bit for bit, and
    /// back; f32 values around every f16 (and halfway between neighbours: ties to even) to
    /// the same f16 (NaN to some NaN).
    #[cfg(feature = "half")]
    #[test]
    fn f16_conversions_match_half() {
        use half::f16;
        for h in 0..=u16::MAX {
            let h = f16::from_bits(h);
            let (ours, theirs) = (f16_to_f32(h), h.to_f32());
            assert_eq!(ours.to_bits(), theirs.to_bits(), "{:#06x}", h.to_bits());
            if !h.is_nan() {
                assert_eq!(
                    f32_to_f16(ours).to_bits(),
                    h.to_bits(),
                    "{:#06x}",
                    h.to_bits()
                );
            }
        }
        let mut probes = vec![f32::MAX, f32::MIN_POSITIVE, 1e-10, 65520.0, 65519.99, 1e10];
        for h in 0..0x7c00u16 {
            let (lo, hi) = (f16::from_bits(h).to_f32(), f16::from_bits(h + 1).to_f32());
            let mid = (f64::from(lo) + f64::from(hi)) / 2.0;
            probes.extend([mid as f32, f32::from_bits((mid as f32).to_bits() + 1)]);
            probes.push(f32::from_bits((mid as f32).to_bits() - 1));
        }
        for p in probes.iter().flat_map(|&p| [p, -p]) {
            let (ours, theirs) = (f32_to_f16(p), f16::from_f32(p));
            assert_eq!(ours.to_bits(), theirs.to_bits(), "{p:e}");
        }
        for nan in [f32::NAN, -f32::NAN, f32::from_bits(0x7f80_0001)] {
            assert!(f32_to_f16(nan).is_nan());
        }
    }

    #[test]
    fn signed_zeros() {
        assert!(0.0f64.xla_max(-0.0).is_sign_positive());
        assert!((-0.0f64).xla_max(0.0).is_sign_positive());
        assert!(0.0f64.xla_min(-0.0).is_sign_negative());
        assert!((-0.0f32).xla_min(0.0).is_sign_negative());
    }

    #[test]
    fn int_pow() {
        assert_eq!(3i32.xla_pow(4), 81);
        assert_eq!(2i8.xla_pow(7), i8::MIN); // wraps
        assert_eq!(2i32.xla_pow(-1), 0);
        assert_eq!(1i32.xla_pow(-5), 1);
        assert_eq!((-1i32).xla_pow(-1), -1);
        assert_eq!((-1i32).xla_pow(-2), 1);
        assert_eq!((-1i8).xla_pow(i8::MIN), 1); // MIN is even
        assert_eq!((-1i64).xla_pow(i64::MIN + 1), -1);
        assert_eq!((-1i16).xla_pow(3), -1);
        assert_eq!(0i32.xla_pow(-1), 0);
        assert_eq!((-2i32).xla_pow(-1), 0);
        assert_eq!(i32::MIN.xla_pow(-1), 0);
        assert_eq!(0i32.xla_pow(0), 1);
        assert_eq!((-3i64).xla_pow(3), -27);
        assert_eq!(0u8.xla_pow(0), 1);
        assert_eq!(2u64.xla_pow(64), 0);
    }
}
