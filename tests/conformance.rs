//! Golden cases recorded from the reference implementations (XLA via TensorFlow, JAX, NumPy,
//! Paddle); see `tests/data/README.md` for the format. Every case must match: shape, values,
//! and error-or-not.

use ndarray::{ArrayD, IxDyn};
use serde_json::Value;
use xla_bcast::prelude::*;

fn cases(json: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(json).expect("valid JSON");
    v["cases"].as_array().expect("cases").clone()
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect()
}

/// `0, 1, 2, ...` (or starting at `start`) times `scale`, in row-major order.
fn filled(shape: &[usize], start: f64, scale: f64) -> ArrayD<f64> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(
        IxDyn(shape),
        (0..n).map(|i| (i as f64 + start) * scale).collect(),
    )
    .unwrap()
}

fn first(shape: &[usize]) -> ArrayD<f64> {
    filled(shape, 0.0, 1.0)
}

fn second(shape: &[usize]) -> ArrayD<f64> {
    filled(shape, 1.0, 1000.0)
}

fn check_values(case: &Value, got: &ArrayD<f64>) {
    if let Some(values) = case.get("values").and_then(|v| v.as_array()) {
        let want: Vec<f64> = values.iter().map(|x| x.as_f64().unwrap()).collect();
        let got: Vec<f64> = got.iter().copied().collect();
        assert_eq!(got, want, "values of {case}");
    }
}

/// Runs `op` on every case and checks it against the recorded outcome.
fn check_all(
    json: &str,
    ok_key: fn(&Value) -> Option<Vec<usize>>,
    op: impl Fn(&Value) -> Result<ArrayD<f64>, BroadcastError>,
) -> usize {
    let cases = cases(json);
    for case in &cases {
        match (ok_key(case), op(case)) {
            (Some(want), Ok(got)) => {
                assert_eq!(got.shape(), want.as_slice(), "shape of {case}");
                check_values(case, &got);
            }
            (None, Err(e)) => assert!(!e.to_string().is_empty()),
            (Some(_), Err(e)) => panic!("{case}: expected success, got {e}"),
            (None, Ok(got)) => panic!("{case}: expected an error, got shape {:?}", got.shape()),
        }
    }
    cases.len()
}

fn out_field(case: &Value) -> Option<Vec<usize>> {
    case.get("out").filter(|v| !v.is_null()).map(shape)
}

#[test]
fn xla_binary_ops() {
    let n = check_all(include_str!("data/xla_binary.json"), out_field, |c| {
        let (lhs, rhs) = (first(&shape(&c["lhs"])), second(&shape(&c["rhs"])));
        lhs.add_bcast(&rhs, &shape(&c["dims"]))
    });
    assert_eq!(n, 150);
}

#[test]
fn xla_binary_shape_rule_agrees_with_ops() {
    for c in cases(include_str!("data/xla_binary.json")) {
        let got = xla_bcast::shape::binary_op_shape(
            &shape(&c["lhs"]),
            &shape(&c["rhs"]),
            &shape(&c["dims"]),
        );
        assert_eq!(got.ok(), out_field(&c), "{c}");
    }
}

#[test]
fn broadcast_in_dim() {
    let ok = |c: &Value| c["ok"].as_bool().unwrap().then(|| shape(&c["out_shape"]));
    let n = check_all(include_str!("data/broadcast_in_dim.json"), ok, |c| {
        let operand = filled(&shape(&c["operand"]), 1.0, 1.0);
        let view = operand.broadcast_in_dim(&shape(&c["out_shape"]), &shape(&c["dims"]))?;
        // Zero-copy: the view points into the operand (unless one of them is empty).
        if !view.is_empty() {
            assert_eq!(view.as_ptr(), operand.as_ptr());
        }
        Ok(view.to_owned())
    });
    assert_eq!(n, 150);
}

#[test]
fn numpy_implicit_broadcasting() {
    let n = check_all(include_str!("data/numpy.json"), out_field, |c| {
        let shapes: Vec<Vec<usize>> = c["shapes"].as_array().unwrap().iter().map(shape).collect();
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        let out = xla_bcast::numpy::broadcast_shapes(&refs)?;
        assert_eq!(xla_bcast::shape::numpy_shape(&refs)?, out);
        if shapes.len() == 2 {
            let r = xla_bcast::numpy::add(&first(&shapes[0]), &second(&shapes[1]))?;
            assert_eq!(r.shape(), out.as_slice());
            Ok(r)
        } else {
            Ok(ArrayD::zeros(IxDyn(&out)))
        }
    });
    assert_eq!(n, 150);
}

#[test]
fn paddle_axis_broadcasting() {
    // Where Paddle aborted the process (`paddle_aborted`), the crate applies the documented rule
    // (trailing size-1 dims of the lower-rank operand are dropped); the recorded `out` there is
    // what that rule gives.
    let outcome = |c: &Value| {
        if c.get("paddle_aborted").and_then(|a| a.as_bool()) == Some(true) {
            // Paddle overran the end of x with y's trailing ones; dropped, y fits and the
            // result has the higher-rank operand's shape.
            let (x, y) = (shape(&c["x"]), shape(&c["y"]));
            Some(if x.len() >= y.len() { x } else { y })
        } else {
            out_field(c)
        }
    };
    let n = check_all(include_str!("data/paddle.json"), outcome, |c| {
        let axis = c["axis"].as_i64().unwrap() as isize;
        let (x, y) = (first(&shape(&c["x"])), second(&shape(&c["y"])));
        let r = xla_bcast::paddle::elementwise_add(&x, &y, axis)?;
        assert_eq!(
            xla_bcast::shape::paddle_shape(x.shape(), y.shape(), axis)?,
            r.shape()
        );
        Ok(r)
    });
    assert_eq!(n, 150);
}
