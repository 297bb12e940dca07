//! Every element type with the ops XLA defines for it: `bool` as XLA's `PRED`, the integer
//! bitwise ops and shifts at their edges, `f16`/`bf16` (feature `half`) and complex numbers
//! (feature `complex`), through the strict ops, the `strict()` operators and the wrappers.

use ndarray::{arr0, array, Array2};
use xla_bcast::prelude::*;
use xla_bcast::{numpy, paddle};

#[test]
fn bool_is_pred() {
    let a = array![false, false, true, true];
    let b = array![false, true, false, true];
    assert_eq!(
        a.add_bcast(&b, &[]).unwrap(),
        array![false, true, true, true]
    );
    assert_eq!(
        a.mul_bcast(&b, &[]).unwrap(),
        array![false, false, false, true]
    );
    assert_eq!(
        a.max_bcast(&b, &[]).unwrap(),
        array![false, true, true, true]
    );
    assert_eq!(
        a.min_bcast(&b, &[]).unwrap(),
        array![false, false, false, true]
    );
    assert_eq!(
        a.and_bcast(&b, &[]).unwrap(),
        array![false, false, false, true]
    );
    assert_eq!(
        a.or_bcast(&b, &[]).unwrap(),
        array![false, true, true, true]
    );
    assert_eq!(
        a.xor_bcast(&b, &[]).unwrap(),
        array![false, true, true, false]
    );
    assert_eq!(
        a.lt_bcast(&b, &[]).unwrap(),
        array![false, true, false, false]
    );
    // A sum of PREDs is an any, a product an all.
    let m = array![[true, false], [false, false]];
    assert_eq!(
        m.reduce_in_dim(&[2], &[0]).unwrap(),
        array![true, false].into_dyn()
    );
    assert_eq!(
        m.reduce_in_dim_with(&[2], &[0], true, |x, y| x.xla_mul(y))
            .unwrap(),
        array![false, false].into_dyn()
    );
    assert_eq!(a.strict() ^ &b, array![false, true, true, false]);
    assert_eq!(
        a.clamp_bcast(&arr0(false), &b).unwrap(),
        array![false, false, false, true]
    );
}

#[test]
fn shifts_at_and_past_the_width() {
    let x = array![1i8, -1, -128, 64, 1, -1];
    let n = array![7i8, 8, 1, -1, 127, -128];
    assert_eq!(
        x.shift_left_bcast(&n, &[]).unwrap(),
        array![-128i8, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        x.shift_right_arithmetic_bcast(&n, &[]).unwrap(),
        array![0i8, -1, -64, 0, 0, -1]
    );
    assert_eq!(
        x.shift_right_logical_bcast(&n, &[]).unwrap(),
        array![0i8, 0, 64, 0, 0, 0]
    );
    // Unsigned: the arithmetic shift copies the top bit of the pattern.
    let u = array![0x80u32, 0x8000_0000, 7];
    let k = array![4u32, 31, 32];
    assert_eq!(
        u.shift_right_arithmetic_bcast(&k, &[]).unwrap(),
        array![0x8u32, u32::MAX, 0]
    );
    assert_eq!(
        u.shift_right_logical_bcast(&k, &[]).unwrap(),
        array![0x8u32, 1, 0]
    );
    assert_eq!(u.shift_left_bcast(&k, &[]).unwrap(), array![0x800u32, 0, 0]);
    // Broadcast amounts, the operators, the wrappers.
    let m = Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as i64);
    let by = array![1i64, 2, 3, 64];
    let want = Array2::from_shape_fn((3, 4), |(i, j)| {
        let v = (i * 4 + j) as i64;
        if j == 3 {
            0
        } else {
            v << (j + 1)
        }
    });
    assert_eq!(m.shift_left_bcast(&by, &[1]).unwrap(), want);
    assert_eq!(numpy::shift_left(&m, &by).unwrap(), want);
    assert_eq!(paddle::elementwise_shift_left(&m, &by, 1).unwrap(), want);
    let row = by.clone().into_shape_with_order((1, 4)).unwrap();
    assert_eq!(m.strict() << &row, want);
    assert_eq!(
        m.strict() >> &row,
        m.shift_right_arithmetic_bcast(&row, &[]).unwrap()
    );
    let mut acc = m.clone();
    acc.shift_left_assign_bcast(&by, &[1]).unwrap();
    assert_eq!(acc, want);
    // `and`/`or`/`xor` of integers are bitwise.
    assert_eq!((m.strict() & 6i64) | &arr0(1i64), m.mapv(|v| (v & 6) | 1));
}

#[test]
fn atan2_of_floats() {
    let y = array![0.0f64, 1.0, -1.0, -0.0, 0.0, f64::NAN];
    let x = array![0.0f64, 0.0, 0.0, -1.0, -1.0, 1.0];
    let r = y.atan2_bcast(&x, &[]).unwrap();
    let pi = std::f64::consts::PI;
    assert_eq!(
        r.slice(ndarray::s![..5]),
        array![0.0, pi / 2.0, -pi / 2.0, -pi, pi]
    );
    assert!(r[5].is_nan());
    // f32 is computed in f64 and rounded once.
    let a = Array2::from_shape_fn((7, 5), |(i, j)| i as f32 * 0.7 - 2.0 + j as f32);
    let b = array![0.3f32, -1.5, 2.0, -0.0, 5.5];
    let got = a.atan2_bcast(&b, &[1]).unwrap();
    let want = Array2::from_shape_fn((7, 5), |(i, j)| {
        (a[[i, j]] as f64).atan2(b[j] as f64) as f32
    });
    assert_eq!(got, want);
}

/// Every real float op of two operands (but `pow`) gives, where an operand is NaN, the first
/// NaN operand quieted, in every copy of the engine's loops: operands full or broadcast along
/// a row, lengths that leave vector tails, each pair of NaNs in both orders.
#[test]
fn the_first_nan_operand_is_the_result() {
    let nans = [0x7fc0_0000u32, 0xffc0_0000, 0x7fa0_0001, 0xff80_0003];
    let value = |i: usize| match i % 7 {
        k @ 0..=3 => f32::from_bits(nans[k]),
        k => k as f32 - 5.5,
    };
    let rule = |a: f32, b: f32, r: f32| match (a.is_nan(), b.is_nan()) {
        (true, _) => a.to_bits() | 0x40_0000,
        (false, true) => b.to_bits() | 0x40_0000,
        _ => r.to_bits(),
    };
    type Op = fn(&Array2<f32>, &Array2<f32>) -> Array2<f32>;
    type Scalar = fn(f32, f32) -> f32;
    let ops: [(&str, Op, Scalar); 7] = [
        ("add", |a, b| a.add_bcast(b, &[]).unwrap(), |a, b| a + b),
        ("sub", |a, b| a.sub_bcast(b, &[]).unwrap(), |a, b| a - b),
        ("mul", |a, b| a.mul_bcast(b, &[]).unwrap(), |a, b| a * b),
        ("div", |a, b| a.div_bcast(b, &[]).unwrap(), |a, b| a / b),
        ("rem", |a, b| a.rem_bcast(b, &[]).unwrap(), |a, b| a % b),
        ("max", |a, b| a.max_bcast(b, &[]).unwrap(), f32::max),
        ("atan2", |a, b| a.atan2_bcast(b, &[]).unwrap(), f32::atan2),
    ];
    for (rows, cols) in [(1, 61), (9, 62), (4, 257)] {
        let a = Array2::from_shape_fn((rows, cols), |(i, j)| value(i * cols + j));
        let b = Array2::from_shape_fn((rows, cols), |(i, j)| value(i * cols + j + 3 * i + 1));
        // A (1, cols) operand: degenerate broadcasting, a row read with stride 0.
        let row = b.slice(ndarray::s![..1, ..]).to_owned();
        for (name, op, f) in ops {
            for (x, y) in [(&a, &b), (&b, &a), (&a, &row), (&row, &a)] {
                let got = op(x, y);
                let (x, y) = (
                    x.broadcast(got.dim()).unwrap(),
                    y.broadcast(got.dim()).unwrap(),
                );
                for ((g, &p), &q) in got.iter().zip(x).zip(y) {
                    let want = rule(p, q, f(p, q));
                    if p.is_nan() || q.is_nan() {
                        assert_eq!(g.to_bits(), want, "{name}({p:?}, {q:?}) at {rows}x{cols}");
                    }
                }
            }
        }
    }
}

#[cfg(feature = "half")]
#[test]
fn half_floats_round_each_op_once() {
    use half::{bf16, f16};
    let h = |v: f32| f16::from_f32(v);
    let a = array![h(0.1), h(65504.0), h(-0.0), h(1.0), f16::NAN];
    let b = array![h(0.3), h(65504.0), h(0.0), h(3.0), h(1.0)];
    let sum = a.add_bcast(&b, &[]).unwrap();
    assert_eq!(sum[0], f16::from_f32(h(0.1).to_f32() + h(0.3).to_f32()));
    assert_eq!(sum[1], f16::INFINITY);
    assert!(sum[2] == f16::ZERO && sum[2].is_sign_positive());
    let q = a.div_bcast(&b, &[]).unwrap();
    assert_eq!(q[3], f16::from_f32(1.0 / 3.0));
    let mx = a.max_bcast(&b, &[]).unwrap();
    assert!(mx[4].is_nan() && mx[2].is_sign_positive());
    let mn = a.min_bcast(&b, &[]).unwrap();
    assert!(mn[2].is_sign_negative());
    let t = Array2::from_shape_fn((40, 30), |(i, j)| {
        bf16::from_f32((i * 30 + j) as f32 * 0.25)
    });
    let s = t.t().add_bcast(&t.t(), &[]).unwrap();
    assert_eq!(s, t.t().mapv(|v| bf16::from_f32(v.to_f32() * 2.0)));
    let tr = t.t().to_owned();
    let staged = tr.t().sub_bcast(&t, &[]).unwrap();
    assert!(staged.iter().all(|v| *v == bf16::ZERO));
    assert_eq!(
        array![bf16::ONE]
            .atan2_bcast(&array![bf16::ZERO], &[])
            .unwrap()[0],
        bf16::from_f64(std::f64::consts::FRAC_PI_2)
    );
    assert_eq!(
        t.reduce_in_dim(&[30], &[1]).unwrap()[0],
        t.column(0)
            .iter()
            .fold(bf16::ZERO, |acc, &v| acc.xla_add(v))
    );
}

#[cfg(feature = "complex")]
#[test]
fn complex_numbers_have_arithmetic_and_equality() {
    use num_complex::Complex64 as C;
    let a = array![C::new(1.5, 2.5), C::new(7.5, 5.5)];
    let b = array![C::new(2.5, 1.5), C::new(5.5, 7.5)];
    assert_eq!(
        a.add_bcast(&b, &[]).unwrap(),
        array![C::new(4.0, 4.0), C::new(13.0, 13.0)]
    );
    assert_eq!(
        a.mul_bcast(&b, &[]).unwrap()[0],
        C::new(1.5 * 2.5 - 2.5 * 1.5, 1.5 * 1.5 + 2.5 * 2.5)
    );
    let q = a.div_bcast(&b, &[]).unwrap();
    assert!((q[1] * b[1] - a[1]).norm() < 1e-12);
    assert_eq!(a.eq_bcast(&a, &[]).unwrap(), array![true, true]);
    assert_eq!(a.ne_bcast(&b, &[]).unwrap(), array![true, true]);
    // StableHLO's atan2_op_test_c128.
    let r = array![C::new(1.0, 0.0), C::new(-1.0, 0.0)]
        .atan2_bcast(&array![C::new(0.0, 0.0), C::new(0.0, 0.0)], &[])
        .unwrap();
    let half_pi = std::f64::consts::FRAC_PI_2;
    assert!((r[0] - C::new(half_pi, 0.0)).norm() < 1e-12);
    assert!((r[1] - C::new(-half_pi, 0.0)).norm() < 1e-12);
    let m = Array2::from_shape_fn((3, 2), |(i, j)| C::new(i as f64, j as f64));
    assert_eq!(m.reduce_in_dim(&[2], &[1]).unwrap()[1], C::new(3.0, 3.0));
    assert_eq!(
        m.strict() * &array![[C::i(), C::i()]],
        m.mapv(|z| z * C::i())
    );
    assert_eq!(
        numpy::add(&m, &array![C::new(1.0, 0.0), C::new(0.0, 1.0)]).unwrap()[[2, 1]],
        C::new(2.0, 2.0)
    );
}
