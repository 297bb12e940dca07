//! Generic numeric code: one bound from the crate beside `num_traits`'s, for the real floats
//! (`XlaRealFloat`) and for the integers (`XlaInteger`), reaches every op defined on them.

use ndarray::{arr0, array, Array1, Array2};
use num_traits::{Float, PrimInt};
use xla_bcast::prelude::*;
use xla_bcast::{numpy, paddle};

/// A layer norm over the rows of `x`, written once for every real float type.
fn layer_norm<T: Float + XlaRealFloat>(
    x: Array2<T>,
    g: &Array1<T>,
    b: &Array1<T>,
) -> Result<Array2<T>, BroadcastError> {
    let (rows, n) = x.dim();
    let n = T::from(n).unwrap();
    let mean = x.reduce_in_dim(rows, &[0])?.mapv(|s| s / n);
    let xc = x.into_strict() - mean.in_dims(&[0]);
    let var = (&xc * &xc).reduce_in_dim(rows, &[0])?.mapv(|s| s / n);
    let rstd = var.mapv(|v| (v + T::from(1e-5).unwrap()).sqrt().recip());
    Ok((xc * rstd.in_dims(&[0]) * g.in_dims(&[1]) + b.in_dims(&[1])).into_inner())
}

/// Every op the crate defines on real floats, called under the one bound.
fn every_float_op<T: Float + XlaRealFloat>(
    x: &Array2<T>,
    v: &Array1<T>,
) -> Result<(), BroadcastError> {
    let _ = x.add_bcast(v, &[1])?;
    let _ = x.sub_bcast(v, &[1])?;
    let _ = x.mul_bcast(v, &[1])?;
    let _ = x.div_bcast(v, &[1])?;
    let _ = x.rem_bcast(v, &[1])?;
    let _ = x.max_bcast(v, &[1])?;
    let _ = x.min_bcast(v, &[1])?;
    let _ = x.pow_bcast(v, &[1])?;
    let _ = x.atan2_bcast(v, &[1])?;
    let mask = x.gt_bcast(v, &[1])?;
    let _ = (
        x.eq_bcast(v, &[1])?,
        x.ne_bcast(v, &[1])?,
        x.lt_bcast(v, &[1])?,
    );
    let _ = (x.le_bcast(v, &[1])?, x.ge_bcast(v, &[1])?);
    let _ = mask.select_bcast(x, &x.mapv(|e| -e))?;
    let _ = x.clamp_bcast(&arr0(T::zero()), &arr0(T::one()))?;
    let _ = x.reduce_in_dim(v.len(), &[1])?;
    let s = x.strict();
    let _ = -(&s + v.in_dims(&[1])) * T::one() / &s % &s - &s;
    let _ = numpy::max(x, v)?;
    let _ = paddle::elementwise_max(x, v, -1)?;
    Ok(())
}

/// Every op the crate defines on integers, under `XlaInteger`.
fn every_integer_op<T: PrimInt + XlaInteger>(
    x: &Array2<T>,
    v: &Array1<T>,
) -> Result<Array2<T>, BroadcastError> {
    let _ = x
        .sub_bcast(v, &[1])?
        .div_bcast(v, &[1])?
        .rem_bcast(v, &[1])?;
    let _ = x
        .max_bcast(v, &[1])?
        .min_bcast(v, &[1])?
        .pow_bcast(v, &[1])?;
    let _ = x
        .and_bcast(v, &[1])?
        .or_bcast(v, &[1])?
        .xor_bcast(v, &[1])?;
    let _ = x
        .shift_left_bcast(v, &[1])?
        .shift_right_arithmetic_bcast(v, &[1])?;
    let _ = x.shift_right_logical_bcast(v, &[1])?.lt_bcast(v, &[1])?;
    let _ = x.clamp_bcast(&arr0(T::zero()), &arr0(T::one()))?;
    let s = x.strict();
    let r = ((&s + v.in_dims(&[1])) * T::one() - &s) & &s | &s;
    Ok((r ^ &s << &s >> &s).into_inner())
}

#[test]
fn one_bound_for_the_real_floats() {
    let x = array![[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]];
    let (g, b) = (array![1.0, 2.0, 0.5], array![0.0, 1.0, 0.0]);
    let y64 = layer_norm(x.clone(), &g, &b).unwrap();
    let y32 = layer_norm(
        x.mapv(|v| v as f32),
        &g.mapv(|v| v as f32),
        &b.mapv(|v| v as f32),
    )
    .unwrap();
    let want = array![[-1.2247, 1.0, 0.6124], [0.0, 1.0, 0.0]];
    for ((a, b), w) in y64.iter().zip(&y32).zip(&want) {
        assert!(
            (a - w).abs() < 1e-3 && (f64::from(*b) - w).abs() < 1e-3,
            "{a} {b} {w}"
        );
    }
    every_float_op(&x, &g).unwrap();
    every_float_op(&x.mapv(|v| v as f32), &g.mapv(|v| v as f32)).unwrap();
    #[cfg(feature = "half")]
    {
        use half::{bf16, f16};
        let y = layer_norm(
            x.mapv(f16::from_f64),
            &g.mapv(f16::from_f64),
            &b.mapv(f16::from_f64),
        )
        .unwrap();
        assert!((y[[0, 0]].to_f64() + 1.2247).abs() < 1e-2);
        every_float_op(&x.mapv(bf16::from_f64), &g.mapv(bf16::from_f64)).unwrap();
    }
}

#[test]
fn one_bound_for_the_integers() {
    let x = array![[1, 2, 3], [4, 5, 6]];
    let v = array![1, 2, 3];
    let r32 = every_integer_op(&x, &v).unwrap();
    let r64 = every_integer_op(&x.mapv(i64::from), &v.mapv(i64::from)).unwrap();
    assert_eq!(r32.mapv(i64::from), r64);
    // ((v & x) | x) ^ ((x << x) >> x) is x ^ x for these small values.
    assert_eq!(r32, Array2::<i32>::zeros((2, 3)));
    every_integer_op(&x.mapv(|e| e as u8), &v.mapv(|e| e as u8)).unwrap();
}
