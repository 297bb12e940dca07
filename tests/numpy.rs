//! NumPy / PyTorch implicit broadcasting: the examples of PyTorch's broadcasting page and the
//! wrapper's contract (one engine path, errors naming the trailing dim).

use ndarray::{arr0, array, Array, ArrayD, IxDyn};
use xla_bcast::numpy;
use xla_bcast::prelude::*;
use xla_bcast::shape::numpy_shape;

#[test]
fn five_three_four_one_with_three_one_one() {
    assert_eq!(
        numpy_shape(&[&[5, 3, 4, 1], &[3, 1, 1]]).unwrap(),
        vec![5, 3, 4, 1]
    );
    let x = ArrayD::<f32>::ones(IxDyn(&[5, 3, 4, 1]));
    let y = Array::from_shape_fn((3, 1, 1), |(i, _, _)| i as f32);
    let r = numpy::add(&x, &y).unwrap();
    assert_eq!(r.shape(), &[5, 3, 4, 1]);
    assert_eq!(r[[4, 2, 3, 0]], 3.0);
}

#[test]
fn one_nine_four_with_fifteen_one_four() {
    assert_eq!(
        numpy_shape(&[&[1, 9, 4], &[15, 1, 4]]).unwrap(),
        vec![15, 9, 4]
    );
}

#[test]
fn vector_times_one_element_vector() {
    assert_eq!(
        numpy::mul(&array![1, 2, 3], &array![2]).unwrap(),
        array![2, 4, 6]
    );
}

#[test]
fn column_plus_row_gives_table() {
    let a = array![[0], [10], [20], [30]];
    let b = array![1, 2, 3];
    let c = numpy::add(&a, &b).unwrap();
    assert_eq!(
        c,
        array![[1, 2, 3], [11, 12, 13], [21, 22, 23], [31, 32, 33]]
    );
    // The same through the strict core, written explicitly.
    assert_eq!(a.add_bcast(&b, &[1]).unwrap(), c);
}

#[test]
fn empty_against_two_by_two_names_sizes_0_and_2() {
    // PyTorch's page says x = empty((0,)) fails "because it has no dimension"; the real reason is
    // that its size 0 meets size 2.
    let x = ArrayD::<f32>::zeros(IxDyn(&[0]));
    let y = ArrayD::<f32>::zeros(IxDyn(&[2, 2]));
    let e = numpy::add(&x, &y).unwrap_err();
    match &e {
        BroadcastError::NumpyIncompatible {
            first_size,
            second_size,
            axis_from_end,
            ..
        } => {
            assert_eq!((*first_size, *second_size, *axis_from_end), (0, 2, 1));
        }
        other => panic!("unexpected {other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("sizes 0 and 2") && msg.contains("trailing dim -1"),
        "{msg}"
    );
}

#[test]
fn rank_zero_operands_broadcast() {
    assert_eq!(numpy::add(&arr0(1), &array![1, 2]).unwrap(), array![2, 3]);
    assert_eq!(numpy::add(&arr0(1), &arr0(2)).unwrap(), arr0(3));
}

#[test]
fn one_against_zero_gives_zero() {
    assert_eq!(numpy_shape(&[&[3, 0], &[1, 3, 1]]).unwrap(), vec![1, 3, 0]);
    let r = numpy::add(
        &ArrayD::<i32>::zeros(IxDyn(&[3, 0])),
        &ArrayD::<i32>::zeros(IxDyn(&[1, 3, 1])),
    )
    .unwrap();
    assert_eq!(r.shape(), &[1, 3, 0]);
}

#[test]
fn three_shapes_and_names_the_pair() {
    let e = numpy_shape(&[&[3, 3], &[], &[4, 5]]).unwrap_err();
    match e {
        BroadcastError::NumpyIncompatible { first, second, .. } => {
            assert_eq!((&*first, &*second), (&[3, 3][..], &[4, 5][..]));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn broadcast_to_and_arrays_are_zero_copy() {
    let v = array![1.0, 2.0];
    let b = numpy::broadcast_to(&v, &[3, 2]).unwrap();
    assert_eq!(b.as_ptr(), v.as_ptr());
    assert_eq!(b.strides(), &[0, 1]);
    assert!(numpy::broadcast_to(&array![[1.0, 2.0]], &[2]).is_err());
    let a = array![[1.0], [2.0]];
    let row = array![[5.0, 6.0, 7.0]];
    let views = numpy::broadcast_arrays(&[&a, &row]).unwrap();
    assert_eq!(
        views[0],
        array![[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]].into_dyn()
    );
    assert_eq!(views[0].as_ptr(), a.as_ptr());
}

#[test]
fn comparisons_and_generic_zip() {
    let a = array![[1, 5], [3, 4]];
    assert_eq!(
        numpy::gt(&a, &array![2, 4]).unwrap(),
        array![[false, true], [true, false]]
    );
    assert_eq!(
        numpy::eq(&a, &arr0(4)).unwrap(),
        array![[false, false], [false, true]]
    );
    let r = numpy::zip_with(&a, &array![10], |x: i32, y: i32| (x * y) as f64).unwrap();
    assert_eq!(r, array![[10.0, 50.0], [30.0, 40.0]]);
}

#[test]
fn element_semantics_stay_xla() {
    assert_eq!(
        numpy::div(&array![7i32, -7], &array![0i32]).unwrap(),
        array![-1, -1]
    );
    assert_eq!(
        numpy::rem(&array![-7i32], &array![2i32]).unwrap(),
        array![-1]
    );
    assert!(numpy::max(&array![f64::NAN, 1.0], &array![0.0]).unwrap()[0].is_nan());
}
