//! Every example of XLA's *Broadcasting semantics* document, as a test.

use ndarray::{arr0, array, Array, Array1, Array2, Array3, Array4, ArrayD, Axis, IxDyn};
use xla_bcast::prelude::*;
use xla_bcast::shape::binary_op_shape;

#[test]
fn matrix_plus_vector_along_dim_1() {
    let x = array![[1, 2, 3], [4, 5, 6]];
    let v = array![7, 8, 9];
    let r: Array2<i32> = x.add_bcast(&v, &[1]).unwrap();
    assert_eq!(r, array![[8, 10, 12], [11, 13, 15]]);
}

#[test]
fn matrix_plus_vector_needs_broadcast_dimensions() {
    let x = array![[1, 2, 3], [4, 5, 6]];
    let v = array![7, 8, 9];
    let e = x.add_bcast(&v, &[]).unwrap_err();
    assert!(matches!(e, BroadcastError::RankMismatch { .. }));
    assert!(e.to_string().contains("[2, 3]") && e.to_string().contains("[3]"));
}

#[test]
fn scalar_plus_matrix() {
    let x = array![[1, 2, 3], [4, 5, 6]];
    let want = array![[8, 9, 10], [11, 12, 13]];
    assert_eq!(x.add_bcast(&arr0(7), &[]).unwrap(), want);
    assert_eq!(arr0(7).add_bcast(&x, &[]).unwrap(), want);
    assert_eq!(x.strict() + 7, want);
}

#[test]
fn three_by_three_plus_vector_both_ways() {
    let z = Array2::<i32>::zeros((3, 3));
    let v = array![7, 8, 9];
    assert_eq!(
        z.add_bcast(&v, &[1]).unwrap(),
        array![[7, 8, 9], [7, 8, 9], [7, 8, 9]]
    );
    assert_eq!(
        z.add_bcast(&v, &[0]).unwrap(),
        array![[7, 7, 7], [8, 8, 8], [9, 9, 9]]
    );
}

#[test]
fn two_by_three_plus_vector_along_dim_0_is_illegal() {
    let x = Array2::<i32>::zeros((2, 3));
    let e = x.add_bcast(&array![7, 8, 9], &[0]).unwrap_err();
    match e {
        BroadcastError::IncompatibleDims {
            lhs_size, rhs_size, ..
        } => assert_eq!((lhs_size, rhs_size), (2, 3)),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn cuboid_plus_matrix_on_dims_1_2() {
    let x = Array3::<i32>::zeros((2, 3, 4));
    let m = Array::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as i32);
    let r = x.add_bcast(&m, &[1, 2]).unwrap();
    assert_eq!(r.shape(), &[2, 3, 4]);
    for k in 0..2 {
        assert_eq!(r.index_axis(Axis(0), k), m);
    }
}

const MNPQ: [usize; 4] = [2, 3, 4, 5];

#[test]
fn vector_t_on_each_dim_of_mnpq() {
    let x = Array4::<i64>::zeros(MNPQ);
    for dim in 0..4 {
        let t = Array1::from_shape_fn(MNPQ[dim], |i| i as i64 + 1);
        let r = x.add_bcast(&t, &[dim]).unwrap();
        assert_eq!(r.shape(), &MNPQ);
        for (idx, &v) in r.indexed_iter() {
            let idx = [idx.0, idx.1, idx.2, idx.3];
            assert_eq!(v, idx[dim] as i64 + 1);
        }
    }
    // T must equal the matched dim.
    assert!(x.add_bcast(&Array1::<i64>::zeros(7), &[2]).is_err());
}

#[test]
fn matrix_tv_on_pairs_of_mnpq() {
    let x = Array4::<i64>::zeros(MNPQ);
    for dims in [[2, 3], [1, 2], [0, 3]] {
        let tv =
            Array2::from_shape_fn((MNPQ[dims[0]], MNPQ[dims[1]]), |(i, j)| (10 * i + j) as i64);
        let r = x.add_bcast(&tv, &dims).unwrap();
        for (idx, &v) in r.indexed_iter() {
            let idx = [idx.0, idx.1, idx.2, idx.3];
            assert_eq!(v, tv[[idx[dims[0]], idx[dims[1]]]]);
        }
    }
}

#[test]
fn illegal_tv_matches() {
    // TxV with T = P (4) and V = N (3): V to N and T to P needs dims (2, 1), which decrease.
    let x = Array4::<i64>::zeros(MNPQ);
    let tv = Array2::<i64>::zeros((4, 3));
    assert!(matches!(
        x.add_bcast(&tv, &[2, 1]),
        Err(BroadcastError::BroadcastDimsNotIncreasing { .. })
    ));
    // V to both P and N: one dim named twice.
    let tv = Array2::<i64>::zeros((4, 4));
    for dims in [[2, 2], [1, 1]] {
        assert!(matches!(
            x.add_bcast(&tv, &dims),
            Err(BroadcastError::BroadcastDimsNotIncreasing { .. })
        ));
    }
}

#[test]
fn degenerate_examples() {
    assert_eq!(binary_op_shape(&[2, 1], &[2, 3], &[]).unwrap(), vec![2, 3]);
    assert_eq!(
        binary_op_shape(&[1, 2, 5], &[7, 2, 5], &[]).unwrap(),
        vec![7, 2, 5]
    );
    assert_eq!(
        binary_op_shape(&[7, 2, 5], &[7, 1, 5], &[]).unwrap(),
        vec![7, 2, 5]
    );
    let e = binary_op_shape(&[7, 2, 5], &[7, 2, 6], &[]).unwrap_err();
    assert!(matches!(
        e,
        BroadcastError::IncompatibleDims {
            lhs_dim: 2,
            rhs_dim: 2,
            lhs_size: 5,
            rhs_size: 6,
            ..
        }
    ));
    let a = ArrayD::<i32>::zeros(IxDyn(&[7, 2, 5]));
    let b = ArrayD::<i32>::zeros(IxDyn(&[7, 1, 5]));
    assert_eq!(a.add_bcast(&b, &[]).unwrap().shape(), &[7, 2, 5]);
}

#[test]
fn outer_product_by_degenerate_dims() {
    let a = array![[1], [2]];
    let b = array![[10, 20, 30]];
    assert_eq!(
        a.add_bcast(&b, &[]).unwrap(),
        array![[11, 21, 31], [12, 22, 32]]
    );
    assert_eq!(a.strict() * &b, array![[10, 20, 30], [20, 40, 60]]);
}

#[test]
fn vector_plus_1x2_with_dims_0() {
    let v = array![1, 2, 3, 4];
    let m = array![[5, 6]];
    let r = v.add_bcast(&m, &[0]).unwrap();
    assert_eq!(r, array![[6, 7], [7, 8], [8, 9], [9, 10]]);
}

#[test]
fn one_by_two_plus_4x3x1_with_dims_1_2() {
    let m = array![[1, 2]];
    let x = Array3::from_shape_fn((4, 3, 1), |(i, j, _)| (100 * i + 10 * j) as i32);
    let r = m.add_bcast(&x, &[1, 2]).unwrap();
    assert_eq!(r.shape(), &[4, 3, 2]);
    for ((i, j, k), &v) in r.indexed_iter() {
        assert_eq!(v, (100 * i + 10 * j) as i32 + m[[0, k]]);
    }
}
