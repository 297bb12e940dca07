//! PaddlePaddle's `axis` rule: the examples of Paddle's broadcasting page and the aborted case.

use ndarray::{array, Array, Array1, Array3, ArrayD, IxDyn};
use xla_bcast::paddle;
use xla_bcast::prelude::*;
use xla_bcast::shape::{numpy_shape, paddle_shape};

fn ones(shape: &[usize]) -> ArrayD<f32> {
    ArrayD::ones(IxDyn(shape))
}

#[test]
fn identical_shapes_broadcast_whatever_axis() {
    for axis in [-1, 0, 2, 7] {
        assert_eq!(
            paddle_shape(&[2, 3, 4], &[2, 3, 4], axis).unwrap(),
            vec![2, 3, 4]
        );
    }
}

#[test]
fn numpy_style_examples_of_the_page() {
    // Paddle's `x + y` follows NumPy's rule.
    assert_eq!(
        numpy_shape(&[&[2, 3, 1, 5], &[3, 4, 1]]).unwrap(),
        vec![2, 3, 4, 5]
    );
    assert!(numpy_shape(&[&[2, 3, 4], &[2, 3, 6]]).is_err());
    assert_eq!(numpy_shape(&[&[2, 1, 4], &[3, 1]]).unwrap(), vec![2, 3, 4]);
    assert!(numpy_shape(&[&[2, 1, 4], &[3, 2]]).is_err());
    // The same pairs under elementwise_add's default axis -1.
    assert_eq!(
        paddle_shape(&[2, 1, 4], &[3, 1], -1).unwrap(),
        vec![2, 3, 4]
    );
    assert!(paddle_shape(&[2, 1, 4], &[3, 2], -1).is_err());
}

#[test]
fn axis_examples_of_the_page() {
    let r = paddle::elementwise_add(&ones(&[2, 1, 4]), &ones(&[3, 1]), 1).unwrap();
    assert_eq!(r.shape(), &[2, 3, 4]);

    let e = paddle::elementwise_add(&ones(&[2, 3, 4, 5]), &ones(&[4, 5]), 1).unwrap_err();
    match &e {
        BroadcastError::PaddleAxis { axis, reason, .. } => {
            assert_eq!(*axis, 1);
            assert!(
                reason.contains("dim 1 has size 3 against size 4"),
                "{reason}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }

    let x = Array::from_shape_fn((2, 3, 4, 5), |(a, b, c, d)| {
        (a * 1000 + b * 100 + c * 10 + d) as f32
    });
    let y = Array1::from(vec![0.5f32, 1.5, 2.5]);
    let r = paddle::elementwise_add(&x, &y, 1).unwrap();
    assert_eq!(r.shape(), &[2, 3, 4, 5]);
    for ((a, b, c, d), &v) in r.indexed_iter() {
        assert_eq!(v, x[[a, b, c, d]] + y[b]);
    }
}

#[test]
fn aborted_case_applies_the_rule() {
    // Paddle aborts the process on x = [2, 1, 3], y = [1, 1], axis = 2; the crate drops y's
    // trailing ones and broadcasts it as a scalar.
    let x = Array::from_shape_fn((2, 1, 3), |(i, _, k)| (3 * i + k) as f64);
    let y = ArrayD::from_elem(IxDyn(&[1, 1]), 1000.0);
    let r = paddle::elementwise_add(&x, &y, 2).unwrap();
    assert_eq!(r, x.mapv(|v| v + 1000.0).into_dyn());
}

#[test]
fn lower_rank_x_swaps_roles() {
    let x = array![[1.0, 2.0]]; // (1, 2): trailing dims kept, placed at axis 1 of y
    let y = Array3::<f64>::zeros((4, 1, 2));
    let r = paddle::elementwise_sub(&x, &y, 1).unwrap();
    assert_eq!(r.shape(), &[4, 1, 2]);
    assert_eq!(r[[3, 0, 1]], 2.0);
}

#[test]
fn errors_name_the_axis() {
    for (x, y, axis) in [
        (vec![3], vec![1], 1),              // axis out of range
        (vec![4, 4, 3], vec![1, 1, 1], -2), // equal ranks need -1 or 0
        (vec![4, 1], vec![1, 1], 1),
        (vec![2, 3, 4], vec![3, 4], 2), // runs past the end
    ] {
        let e = paddle_shape(&x, &y, axis).unwrap_err();
        assert!(matches!(e, BroadcastError::PaddleAxis { .. }));
        assert!(e.to_string().contains(&format!("axis {axis}")), "{e}");
    }
}

#[test]
fn generic_elementwise_and_family() {
    let x = array![[1i32, 2], [3, 4]];
    let y = array![2i32];
    assert_eq!(
        paddle::elementwise_mul(&x, &y, -1).unwrap(),
        array![[2, 4], [6, 8]]
    );
    assert_eq!(
        paddle::elementwise_max(&x, &y, -1).unwrap(),
        array![[2, 2], [3, 4]]
    );
    assert_eq!(
        paddle::elementwise_pow(&x, &y, -1).unwrap(),
        array![[1, 4], [9, 16]]
    );
    let r = paddle::elementwise(&x, &array![10i32, 20], 0, |a, b| a + b).unwrap();
    assert_eq!(r, array![[11, 12], [23, 24]]);
}
