//! The op tables: every elementwise binary op and every comparison of the crate, one row each.
//!
//! The extension traits ([`crate::ops`]), the strict operators ([`crate::strict`]), the NumPy
//! and Paddle wrappers, the [`Program`](crate::stablehlo::Program) recorder with its type
//! checks, and the evaluator's element functions are all generated from these rows: adding an op
//! is a row here and its element function in [`crate::element`].

/// Calls `$m!` with every elementwise binary op, one row each:
///
/// `name, StableHLO name, Variant, element trait, element function,
///  [allocating method, _into method, in-place method], Paddle's name,
///  [std operator, its method, its assign operator, its method] (or [] for none),
///  doc element type, doc value of 4 op 3;`
macro_rules! binary_ops {
    ($m:ident) => {
        $m! {
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
    ($m:ident) => {
        $m! {
            eq, "EQ", Eq, PartialEq, ==, [eq_bcast, eq_bcast_into], "[[false, false], [false, true]]";
            ne, "NE", Ne, PartialEq, !=, [ne_bcast, ne_bcast_into], "[[true, true], [true, false]]";
            lt, "LT", Lt, PartialOrd, <, [lt_bcast, lt_bcast_into], "[[true, true], [false, false]]";
            le, "LE", Le, PartialOrd, <=, [le_bcast, le_bcast_into], "[[true, true], [false, true]]";
            gt, "GT", Gt, PartialOrd, >, [gt_bcast, gt_bcast_into], "[[false, false], [true, false]]";
            ge, "GE", Ge, PartialOrd, >=, [ge_bcast, ge_bcast_into], "[[false, false], [true, true]]";
        }
    };
}
