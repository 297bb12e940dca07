//! The op tables: every elementwise binary op, every comparison and every unary op of the crate,
//! one row each.
//!
//! The extension traits ([`crate::ops`]), the strict operators ([`crate::strict`]), the NumPy
//! and Paddle wrappers, the [`Program`](crate::stablehlo::Program) recorder with its type
//! checks, and the evaluator's element functions are all generated from these rows: adding an op
//! is a row here and its element function in [`crate::element`] (a unary op's in the
//! evaluator's `elem`): the element types a program runs it on are those its element function
//! is defined for, which a test holds to the row's kinds.

/// Calls `$m!` with every elementwise binary op, one row each (after the tokens given after
/// `$m`, if any):
///
/// `name, StableHLO name, Variant, element trait, element function,
///  [allocating method, _into method, in-place method], Paddle's name,
///  [std operator, its method, its assign operator, its method] (or [] for none),
///  doc element type, doc value of 4 op 3;`
macro_rules! binary_ops {
    ($m:ident $($pre:tt)*) => {
        $m! {
            $($pre)*
            add, "add", Add, XlaElement, xla_add, [add_bcast, add_bcast_into, add_assign_bcast],
                elementwise_add, [Add, add, AddAssign, add_assign], "i64", "7";
            sub, "subtract", Sub, XlaNumber, xla_sub, [sub_bcast, sub_bcast_into, sub_assign_bcast],
                elementwise_sub, [Sub, sub, SubAssign, sub_assign], "i64", "1";
            mul, "multiply", Mul, XlaElement, xla_mul, [mul_bcast, mul_bcast_into, mul_assign_bcast],
                elementwise_mul, [Mul, mul, MulAssign, mul_assign], "i64", "12";
            div, "divide", Div, XlaNumber, xla_div, [div_bcast, div_bcast_into, div_assign_bcast],
                elementwise_div, [Div, div, DivAssign, div_assign], "i64", "1";
            rem, "remainder", Rem, XlaReal, xla_rem, [rem_bcast, rem_bcast_into, rem_assign_bcast],
                elementwise_mod, [Rem, rem, RemAssign, rem_assign], "i64", "1";
            max, "maximum", Max, XlaOrd, xla_max, [max_bcast, max_bcast_into, max_assign_bcast],
                elementwise_max, [], "i64", "4";
            min, "minimum", Min, XlaOrd, xla_min, [min_bcast, min_bcast_into, min_assign_bcast],
                elementwise_min, [], "i64", "3";
            pow, "power", Pow, XlaNumber, xla_pow, [pow_bcast, pow_bcast_into, pow_assign_bcast],
                elementwise_pow, [], "i64", "64";
            and, "and", And, XlaBitwise, xla_and, [and_bcast, and_bcast_into, and_assign_bcast],
                elementwise_and, [BitAnd, bitand, BitAndAssign, bitand_assign], "i64", "0";
            or, "or", Or, XlaBitwise, xla_or, [or_bcast, or_bcast_into, or_assign_bcast],
                elementwise_or, [BitOr, bitor, BitOrAssign, bitor_assign], "i64", "7";
            xor, "xor", Xor, XlaBitwise, xla_xor, [xor_bcast, xor_bcast_into, xor_assign_bcast],
                elementwise_xor, [BitXor, bitxor, BitXorAssign, bitxor_assign], "i64", "7";
            shift_left, "shift_left", ShiftLeft, XlaInteger, xla_shift_left,
                [shift_left_bcast, shift_left_bcast_into, shift_left_assign_bcast],
                elementwise_shift_left, [Shl, shl, ShlAssign, shl_assign], "i64", "32";
            shift_right_arithmetic, "shift_right_arithmetic", ShiftRightArithmetic, XlaInteger,
                xla_shift_right_arithmetic,
                [shift_right_arithmetic_bcast, shift_right_arithmetic_bcast_into,
                 shift_right_arithmetic_assign_bcast],
                elementwise_shift_right_arithmetic, [Shr, shr, ShrAssign, shr_assign], "i64", "0";
            shift_right_logical, "shift_right_logical", ShiftRightLogical, XlaInteger,
                xla_shift_right_logical,
                [shift_right_logical_bcast, shift_right_logical_bcast_into,
                 shift_right_logical_assign_bcast],
                elementwise_shift_right_logical, [], "i64", "0";
            atan2, "atan2", Atan2, XlaFloat, xla_atan2, [atan2_bcast, atan2_bcast_into, atan2_assign_bcast],
                elementwise_atan2, [], "f64", "4f64.atan2(3.0)";
        }
    };
}

/// Calls `$m!` with every comparison, one row each:
///
/// `name, StableHLO direction, Variant, element trait, Rust operator,
///  [allocating method, _into method], doc result of [[1, 2], [3, 4]] op [2, 4] (along dim 1);`
macro_rules! compare_ops {
    ($m:ident $($pre:tt)*) => {
        $m! {
            $($pre)*
            eq, "EQ", Eq, PartialEq, ==, [eq_bcast, eq_bcast_into], "[[false, false], [false, true]]";
            ne, "NE", Ne, PartialEq, !=, [ne_bcast, ne_bcast_into], "[[true, true], [true, false]]";
            lt, "LT", Lt, PartialOrd, <, [lt_bcast, lt_bcast_into], "[[true, true], [false, false]]";
            le, "LE", Le, PartialOrd, <=, [le_bcast, le_bcast_into], "[[true, true], [false, true]]";
            gt, "GT", Gt, PartialOrd, >, [gt_bcast, gt_bcast_into], "[[false, false], [true, false]]";
            ge, "GE", Ge, PartialOrd, >=, [ge_bcast, ge_bcast_into], "[[false, false], [true, true]]";
        }
    };
}

/// Calls `$m!` with every elementwise unary op, one row each:
///
/// `name => Variant, StableHLO name, [eager method, _into method, in-place method (for results of
///  the input's type)], [element
///  kinds it is defined on], doc text, doc element type, doc input, doc result;`
macro_rules! unary_ops {
    ($m:ident $($pre:tt)*) => {
        $m! {
            $($pre)*
            abs => Abs, "abs", [xla_abs, xla_abs_into, xla_abs_assign], [Signed, Float, Complex], "`|x|` (integers wrap: `abs(MIN) = MIN`)", i32, [-3, 0, i32::MIN], [3, 0, i32::MIN];
            neg => Neg, "negate", [xla_neg, xla_neg_into, xla_neg_assign], [Signed, Unsigned, Float, Complex], "`-x` (integers wrap)", f32, [1.5f32, -0.0, f32::INFINITY], [-1.5f32, 0.0, f32::NEG_INFINITY];
            sign => Sign, "sign", [xla_sign, xla_sign_into, xla_sign_assign], [Signed, Float, Complex], "`-1`, `0` or `1` by the sign of `x` (floats keep the zero's sign and NaN)", f64, [-2.5, -0.0, 7.0], [-1.0, -0.0, 1.0];
            not => Not, "not", [xla_not, xla_not_into, xla_not_assign], [Pred, Signed, Unsigned], "bitwise not (`bool`: logical)", u8, [0u8, 1, 255], [255u8, 254, 0];
            floor => Floor, "floor", [xla_floor, xla_floor_into, xla_floor_assign], [Float], "the largest integer not above `x`", f32, [1.5f32, -1.5, -0.25], [1.0f32, -2.0, -1.0];
            ceil => Ceil, "ceil", [xla_ceil, xla_ceil_into, xla_ceil_assign], [Float], "the smallest integer not below `x`", f32, [1.5f32, -1.5, 0.25], [2.0f32, -1.0, 1.0];
            round_nearest_even => RoundNearestEven, "round_nearest_even", [xla_round_nearest_even, xla_round_nearest_even_into, xla_round_nearest_even_assign], [Float], "`x` rounded to the nearest integer, ties to even", f32, [0.5f32, 1.5, -2.5], [0.0f32, 2.0, -2.0];
            round_nearest_afz => RoundNearestAfz, "round_nearest_afz", [xla_round_nearest_afz, xla_round_nearest_afz_into, xla_round_nearest_afz_assign], [Float], "`x` rounded to the nearest integer, ties away from zero", f32, [0.5f32, 1.5, -2.5], [1.0f32, 2.0, -3.0];
            is_finite => IsFinite, "is_finite", [xla_is_finite, xla_is_finite_into], [Float], "whether `x` is neither infinite nor NaN (a `bool` result)", f32, [1.0f32, f32::NAN, f32::NEG_INFINITY], [true, false, false];
            popcnt => Popcnt, "popcnt", [xla_popcnt, xla_popcnt_into, xla_popcnt_assign], [Signed, Unsigned], "the number of one bits", i8, [0i8, 7, -1], [0i8, 3, 8];
            clz => Clz, "count_leading_zeros", [xla_clz, xla_clz_into, xla_clz_assign], [Signed, Unsigned], "the number of leading zero bits", u16, [0u16, 1, 0x8000], [16u16, 15, 0];
            sqrt => Sqrt, "sqrt", [xla_sqrt, xla_sqrt_into, xla_sqrt_assign], [Float, Complex], "the square root, correctly rounded (`sqrt(-0.0) = -0.0`, NaN below zero)", f64, [4.0, -0.0, 2.25], [2.0, -0.0, 1.5];
            rsqrt => Rsqrt, "rsqrt", [xla_rsqrt, xla_rsqrt_into, xla_rsqrt_assign], [Float, Complex], "`1 / sqrt(x)` (`inf` at `+0.0`, `-inf` at `-0.0`)", f32, [4.0f32, 0.25, f32::INFINITY], [0.5f32, 2.0, 0.0];
            cbrt => Cbrt, "cbrt", [xla_cbrt, xla_cbrt_into, xla_cbrt_assign], [Float, Complex], "the cube root (negative below zero)", f64, [8.0, -27.0, -0.0], [2.0, -3.0, -0.0];
            exp => Exp, "exponential", [xla_exp, xla_exp_into, xla_exp_assign], [Float, Complex], "`e^x`", f64, [0.0, f64::NEG_INFINITY, f64::INFINITY], [1.0, 0.0, f64::INFINITY];
            expm1 => Expm1, "exponential_minus_one", [xla_expm1, xla_expm1_into, xla_expm1_assign], [Float, Complex], "`e^x - 1`, accurate near zero", f64, [0.0, -0.0, f64::NEG_INFINITY], [0.0, -0.0, -1.0];
            log => Log, "log", [xla_log, xla_log_into, xla_log_assign], [Float, Complex], "the natural logarithm (`-inf` at zero, NaN below)", f64, [1.0, 0.0, f64::INFINITY], [0.0, f64::NEG_INFINITY, f64::INFINITY];
            log1p => Log1p, "log_plus_one", [xla_log1p, xla_log1p_into, xla_log1p_assign], [Float, Complex], "`ln(1 + x)`, accurate near zero", f64, [0.0, -0.0, -1.0], [0.0, -0.0, f64::NEG_INFINITY];
            logistic => Logistic, "logistic", [xla_logistic, xla_logistic_into, xla_logistic_assign], [Float, Complex], "`1 / (1 + e^-x)`", f32, [0.0f32, f32::INFINITY, f32::NEG_INFINITY], [0.5f32, 1.0, 0.0];
            tanh => Tanh, "tanh", [xla_tanh, xla_tanh_into, xla_tanh_assign], [Float, Complex], "the hyperbolic tangent", f32, [0.0f32, -0.0, f32::INFINITY], [0.0f32, -0.0, 1.0];
            sin => Sin, "sine", [xla_sin, xla_sin_into, xla_sin_assign], [Float, Complex], "the sine (radians)", f64, [0.0, -0.0, std::f64::consts::FRAC_PI_2], [0.0, -0.0, 1.0];
            cos => Cos, "cosine", [xla_cos, xla_cos_into, xla_cos_assign], [Float, Complex], "the cosine (radians)", f64, [0.0, -0.0, std::f64::consts::PI], [1.0, 1.0, -1.0];
            tan => Tan, "tan", [xla_tan, xla_tan_into, xla_tan_assign], [Float, Complex], "the tangent (radians)", f64, [0.0, -0.0, std::f64::consts::FRAC_PI_4], [0.0, -0.0, 0.9999999999999999];
        }
    };
}
