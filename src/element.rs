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
//! * float ops are IEEE-754; `rem` is C's `fmod`; `max` / `min` propagate NaN and order
//!   `-0.0 < +0.0` (IEEE-754 `maximum` / `minimum`, as StableHLO specifies).

/// An element type the arithmetic ops accept, with XLA's semantics for each op.
///
/// Implemented for `f32`, `f64`, `i8`..`i64`, `isize`, `u8`..`u64` and `usize`.
///
/// ```
/// use xla_bcast::XlaElement;
/// assert_eq!(i32::MAX.xla_add(1), i32::MIN);
/// assert_eq!(7i32.xla_div(0), -1);
/// assert_eq!(7u8.xla_div(0), u8::MAX);
/// assert_eq!(i64::MIN.xla_div(-1), i64::MIN);
/// assert_eq!(7i16.xla_rem(0), 7);
/// assert!(f32::NAN.xla_max(1.0).is_nan());
/// ```
pub trait XlaElement: Copy + Send + Sync + PartialOrd + std::fmt::Debug + 'static {
    /// `self + rhs` (integers wrap).
    fn xla_add(self, rhs: Self) -> Self;
    /// `self - rhs` (integers wrap).
    fn xla_sub(self, rhs: Self) -> Self;
    /// `self * rhs` (integers wrap).
    fn xla_mul(self, rhs: Self) -> Self;
    /// `self / rhs` (integer division by zero and `MIN / -1` as XLA defines them).
    fn xla_div(self, rhs: Self) -> Self;
    /// `self % rhs` (integer `x % 0 = x`, `MIN % -1 = 0`; floats: `fmod`).
    fn xla_rem(self, rhs: Self) -> Self;
    /// The larger value (floats: NaN propagates).
    fn xla_max(self, rhs: Self) -> Self;
    /// The smaller value (floats: NaN propagates).
    fn xla_min(self, rhs: Self) -> Self;
    /// `self` to the power `rhs` (integers: wrapping; a negative exponent gives `1` for base
    /// `1`, `+-1` for base `-1` by the exponent's parity, `0` otherwise).
    fn xla_pow(self, rhs: Self) -> Self;
    /// The additive identity, for sums.
    fn xla_zero() -> Self;
    /// The multiplicative identity, for products.
    fn xla_one() -> Self;
    /// The smallest value (-inf for floats), the identity of `max`.
    fn xla_lowest() -> Self;
    /// The largest value (+inf for floats), the identity of `min`.
    fn xla_highest() -> Self;
}

macro_rules! int_common {
    ($t:ty) => {
        #[inline(always)]
        fn xla_add(self, rhs: Self) -> Self {
            self.wrapping_add(rhs)
        }
        #[inline(always)]
        fn xla_sub(self, rhs: Self) -> Self {
            self.wrapping_sub(rhs)
        }
        #[inline(always)]
        fn xla_mul(self, rhs: Self) -> Self {
            self.wrapping_mul(rhs)
        }
        #[inline(always)]
        fn xla_rem(self, rhs: Self) -> Self {
            // wrapping_rem gives MIN % -1 = 0.
            if rhs == 0 {
                self
            } else {
                self.wrapping_rem(rhs)
            }
        }
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
        fn xla_zero() -> Self {
            0
        }
        fn xla_one() -> Self {
            1
        }
        fn xla_lowest() -> Self {
            <$t>::MIN
        }
        fn xla_highest() -> Self {
            <$t>::MAX
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
    ($($t:ty),*) => {$(
        impl XlaElement for $t {
            int_common!($t);
            #[inline(always)]
            fn xla_div(self, rhs: Self) -> Self {
                // wrapping_div gives MIN / -1 = MIN.
                if rhs == 0 { -1 } else { self.wrapping_div(rhs) }
            }
            #[inline]
            fn xla_pow(self, rhs: Self) -> Self {
                match (self, rhs) {
                    (_, 0..) => pow_by_squaring!(self, rhs),
                    // 1/base^|rhs| is an integer only for |base| = 1; the rest truncates to 0.
                    (1, _) => 1,
                    (-1, _) => if rhs & 1 == 1 { -1 } else { 1 },
                    _ => 0,
                }
            }
        }
    )*};
}

macro_rules! unsigned_int {
    ($($t:ty),*) => {$(
        impl XlaElement for $t {
            int_common!($t);
            #[inline(always)]
            fn xla_div(self, rhs: Self) -> Self {
                if rhs == 0 { <$t>::MAX } else { self / rhs }
            }
            #[inline]
            fn xla_pow(self, rhs: Self) -> Self {
                pow_by_squaring!(self, rhs)
            }
        }
    )*};
}

macro_rules! float {
    ($($t:ty),*) => {$(
        impl XlaElement for $t {
            #[inline(always)]
            fn xla_add(self, rhs: Self) -> Self { self + rhs }
            #[inline(always)]
            fn xla_sub(self, rhs: Self) -> Self { self - rhs }
            #[inline(always)]
            fn xla_mul(self, rhs: Self) -> Self { self * rhs }
            #[inline(always)]
            fn xla_div(self, rhs: Self) -> Self { self / rhs }
            #[inline(always)]
            fn xla_rem(self, rhs: Self) -> Self { self % rhs }
            #[inline(always)]
            fn xla_max(self, rhs: Self) -> Self {
                // NaN wins; on equal values prefer +0.0 over -0.0.
                if self.is_nan() || rhs.is_nan() {
                    self + rhs
                } else if self > rhs || (self == rhs && rhs.is_sign_negative()) {
                    self
                } else {
                    rhs
                }
            }
            #[inline(always)]
            fn xla_min(self, rhs: Self) -> Self {
                if self.is_nan() || rhs.is_nan() {
                    self + rhs
                } else if self < rhs || (self == rhs && self.is_sign_negative()) {
                    self
                } else {
                    rhs
                }
            }
            #[inline]
            fn xla_pow(self, rhs: Self) -> Self { self.powf(rhs) }
            fn xla_zero() -> Self { 0.0 }
            fn xla_one() -> Self { 1.0 }
            fn xla_lowest() -> Self { <$t>::NEG_INFINITY }
            fn xla_highest() -> Self { <$t>::INFINITY }
        }
    )*};
}

signed_int!(i8, i16, i32, i64, isize);
unsigned_int!(u8, u16, u32, u64, usize);
float!(f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

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
