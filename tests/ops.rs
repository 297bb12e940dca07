//! The strict op family on every kind of array: result types, `_into`, in place, comparisons,
//! `select`, the `strict()` operators, zero-copy views and XLA element semantics.

use ndarray::{
    arr0, array, s, ArcArray, Array, Array1, Array2, Array3, ArrayD, ArrayView2, Axis, CowArray,
    Ix2, Ix3, IxDyn, ShapeBuilder,
};
use xla_bcast::layout::{self, Layout};
use xla_bcast::prelude::*;

#[test]
fn result_dimension_type_follows_dimmax() {
    let a = Array2::<f64>::ones((2, 3));
    let v = Array1::<f64>::ones(3);
    let r: Array2<f64> = a.add_bcast(&v, &[1]).unwrap();
    assert_eq!(r.shape(), &[2, 3]);
    let r: Array2<f64> = v.add_bcast(&a, &[1]).unwrap();
    assert_eq!(r.shape(), &[2, 3]);
    let d = ArrayD::<f64>::ones(IxDyn(&[2, 3]));
    let r: ArrayD<f64> = a.add_bcast(&d, &[]).unwrap();
    assert_eq!(r.shape(), &[2, 3]);
    let r: Array3<f64> = Array3::<f64>::ones((4, 2, 3))
        .mul_bcast(&a, &[1, 2])
        .unwrap();
    assert_eq!(r.sum(), 24.0);
}

#[test]
fn every_array_kind_works() {
    let owned = array![[1.0, 2.0], [3.0, 4.0]];
    let view: ArrayView2<f64> = owned.view();
    let arc: ArcArray<f64, Ix2> = owned.to_shared();
    let cow = CowArray::from(owned.view());
    let mut buf = owned.clone();
    let vm = buf.view_mut();
    let row = array![10.0, 20.0];
    let want = array![[11.0, 22.0], [13.0, 24.0]];
    assert_eq!(owned.add_bcast(&row, &[1]).unwrap(), want);
    assert_eq!(view.add_bcast(&row, &[1]).unwrap(), want);
    assert_eq!(arc.add_bcast(&row, &[1]).unwrap(), want);
    assert_eq!(cow.add_bcast(&row, &[1]).unwrap(), want);
    assert_eq!(vm.add_bcast(&row, &[1]).unwrap(), want);
    assert_eq!(owned.add_bcast(&row.view(), &[1]).unwrap(), want);
    assert_eq!(owned.add_bcast(&row.to_shared(), &[1]).unwrap(), want);
}

#[test]
fn strided_inputs() {
    let base = Array::from_shape_fn((6, 8), |(i, j)| (i * 8 + j) as i64);
    let lhs = base.slice(s![..;2, ..;-3]); // stepped and reversed
    let rhs = base.slice(s![0, ..;-3]);
    let r = lhs.sub_bcast(&rhs, &[1]).unwrap();
    for ((i, j), &v) in r.indexed_iter() {
        assert_eq!(v, lhs[[i, j]] - rhs[j]);
    }
    let t = base.t(); // transposed
    let r = t.add_bcast(&Array1::from_elem(6, 1i64), &[1]).unwrap();
    assert_eq!(r, t.mapv(|x| x + 1));
    let f = Array::from_shape_vec((3, 4).f(), (0..12).collect::<Vec<i64>>()).unwrap();
    let r = f.mul_bcast(&array![[2i64]], &[]).unwrap();
    assert_eq!(r, f.mapv(|x| 2 * x));
    assert!(r.t().is_standard_layout(), "an F input gives an F result");
}

#[test]
fn broadcast_views_as_inputs() {
    let v = array![1, 2, 3];
    let wide = v.broadcast_in_dim(&[2, 3], &[1]).unwrap();
    let r = wide.add_bcast(&array![[10], [20]], &[]).unwrap();
    assert_eq!(r, array![[11, 12, 13], [21, 22, 23]].into_dyn());
}

#[test]
fn into_writes_only_on_success() {
    let a = array![[1, 2], [3, 4]];
    let mut out = Array2::<i32>::from_elem((2, 2), -7);
    a.add_bcast_into(&array![1, 1], &[0], &mut out).unwrap();
    assert_eq!(out, array![[2, 3], [4, 5]]);

    let mut wrong = Array2::<i32>::from_elem((2, 3), -7);
    let e = a
        .add_bcast_into(&array![1, 1], &[0], &mut wrong)
        .unwrap_err();
    assert!(matches!(e, BroadcastError::OutputShape { .. }));
    assert!(wrong.iter().all(|&x| x == -7));
    let e = a
        .add_bcast_into(&array![1, 1, 1], &[0], &mut out)
        .unwrap_err();
    assert!(matches!(e, BroadcastError::IncompatibleDims { .. }));
    assert_eq!(out, array![[2, 3], [4, 5]]);

    // Into a strided, transposed output.
    let mut t = Array2::<i32>::zeros((2, 2).f());
    a.mul_bcast_into(&arr0(3), &[], &mut t).unwrap();
    assert_eq!(t, array![[3, 6], [9, 12]]);
}

#[test]
fn in_place_ops() {
    let mut a = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
    a.add_assign_bcast(&array![10.0, 20.0], &[0]).unwrap();
    assert_eq!(a, array![[11.0, 12.0, 13.0], [24.0, 25.0, 26.0]]);
    a.max_assign_bcast(&array![[20.0, 0.0, 30.0]], &[]).unwrap();
    assert_eq!(a, array![[20.0, 12.0, 30.0], [24.0, 25.0, 30.0]]);
    // The result would be larger than self: refused, self unchanged.
    let before = a.clone();
    let mut col = array![[1.0], [2.0]];
    let e = col.add_assign_bcast(&a, &[]).unwrap_err();
    assert!(matches!(e, BroadcastError::OutputShape { .. }));
    assert_eq!(col, array![[1.0], [2.0]]);
    assert_eq!(a, before);
    // In place on a view of part of an array.
    let mut big = Array2::<f64>::zeros((4, 4));
    big.slice_mut(s![1..3, ..;2])
        .sub_assign_bcast(&arr0(1.0), &[])
        .unwrap();
    assert_eq!(big.sum(), -4.0);
    assert_eq!(big[[1, 2]], -1.0);
    assert_eq!(big[[1, 1]], 0.0);
}

#[test]
fn comparisons() {
    let a = array![[1.0, f64::NAN], [3.0, 4.0]];
    let b = array![3.0, 4.0];
    assert_eq!(
        a.lt_bcast(&b, &[1]).unwrap(),
        array![[true, false], [false, false]]
    );
    assert_eq!(
        a.ne_bcast(&b, &[1]).unwrap(),
        array![[true, true], [false, false]]
    );
    assert_eq!(
        a.ge_bcast(&b, &[0]).unwrap(),
        array![[false, false], [false, true]]
    );
    let mut out = Array2::from_elem((2, 2), true);
    a.eq_bcast_into(&arr0(3.0), &[], &mut out).unwrap();
    assert_eq!(out, array![[false, false], [true, false]]);
}

#[test]
fn select() {
    let pred = array![[true, false, true]];
    let t = array![[1, 2, 3], [4, 5, 6]];
    let f = array![[-1], [-2]];
    let r = pred.select_bcast(&t, &f).unwrap();
    assert_eq!(r, array![[1, -1, 3], [4, -2, 6]]);
    let r = arr0(false).select_bcast(&t, &f).unwrap();
    assert_eq!(r, array![[-1, -1, -1], [-2, -2, -2]]);
    assert!(array![true, false].select_bcast(&t, &f).is_err()); // rank 1 vs rank 2
    let mut wrong = Array2::<i32>::zeros((3, 3));
    assert!(pred.select_bcast_into(&t, &f, &mut wrong).is_err());
    assert!(wrong.iter().all(|&x| x == 0));
}

#[test]
fn strict_operators() {
    let a = array![[1, 2, 3], [4, 5, 6]];
    assert_eq!(a.strict() + &array![[1], [2]], array![[2, 3, 4], [6, 7, 8]]);
    assert_eq!(a.strict() - &arr0(1), array![[0, 1, 2], [3, 4, 5]]);
    assert_eq!(a.strict() * a.strict(), a.mapv(|x| x * x));
    assert_eq!(a.strict() / 0, Array2::from_elem((2, 3), -1));
    assert_eq!(a.strict() % 4, array![[1, 2, 3], [0, 1, 2]]);
    let r = std::panic::catch_unwind(|| a.strict() + &array![1, 2, 3]);
    let msg = *r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("different ranks"), "{msg}");
    let r = std::panic::catch_unwind(|| a.strict() + &array![[1, 2]]);
    let msg = *r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("incompatible"), "{msg}");
}

/// A strict array equals an array (either side) or another strict one with the same elements.
#[test]
fn strict_equality() {
    let (a, b) = (array![[1, 2], [3, 4]], array![[1, 2], [3, 5]]);
    assert!(a.strict() == a.view() && a.strict() != b);
    assert!(a == a.view().strict() && b != a.strict());
    assert!(a.strict() == a.view().strict() && a.strict() != b.strict());
}

#[test]
fn zero_copy_views() {
    let a = Array::from_shape_fn((2, 3), |(i, j)| i * 3 + j);
    let b = a.broadcast_in_dim(&[4, 2, 3], &[1, 2]).unwrap();
    assert_eq!(b.as_ptr(), a.as_ptr());
    assert_eq!(b.strides(), &[0, 3, 1]);
    let t = a.broadcast_in_dim(&[3, 5, 2], &[2, 0]).unwrap();
    assert_eq!(t.as_ptr(), a.as_ptr());
    assert_eq!(t.strides(), &[1, 0, 3]);
    assert_eq!(t[[2, 4, 1]], a[[1, 2]]);
    let col = array![[7], [8]];
    let d = col.broadcast_in_dim(&[2, 3], &[0, 1]).unwrap();
    assert_eq!(d.strides(), &[1, 0]);
    let l = a.broadcast_leading(&[2, 2]).unwrap();
    assert_eq!(l.shape(), &[2, 2, 2, 3]);
    assert_eq!(l.strides(), &[0, 0, 3, 1]);
    assert_eq!(l.as_ptr(), a.as_ptr());
    // A view of a view keeps the original borrow.
    let s = a.slice(s![.., 1..]);
    let v = s.broadcast_in_dim(&[2, 2, 2], &[0, 2]).unwrap();
    assert_eq!(v.as_ptr(), &a[[0, 1]] as *const usize);
}

#[test]
fn broadcast_in_dim_errors() {
    let a = Array3::<u8>::zeros((2, 1, 3));
    for (out, dims) in [
        (vec![2, 1, 3], vec![0, 1]),    // too few dims
        (vec![2, 1, 3], vec![0, 1, 3]), // out of range
        (vec![2, 1, 3], vec![0, 0, 2]), // duplicate
        (vec![2, 4, 4], vec![0, 1, 2]), // 3 -> 4
        (vec![2, 3], vec![0, 1, 1]),    // lower output rank
    ] {
        let e = a.broadcast_in_dim(&out, &dims).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("broadcast_in_dim: operand [2, 1, 3]"),
            "{msg}"
        );
    }
    let e = a.broadcast_in_dim(&[usize::MAX, 2, 3], &[1, 2, 0]);
    assert!(e.is_err());
}

#[test]
fn xla_integer_semantics_every_type() {
    macro_rules! signed {
        ($($t:ty),*) => {$(
            let a = array![<$t>::MAX, <$t>::MIN, 7, <$t>::MIN, -7];
            let b = array![1 as $t, 1, 0, -1, 2];
            assert_eq!(a.add_bcast(&b, &[]).unwrap()[0], <$t>::MIN);
            assert_eq!(a.sub_bcast(&b, &[]).unwrap()[1], <$t>::MAX);
            assert_eq!(a.mul_bcast(&array![2 as $t], &[]).unwrap()[0], -2);
            let q = a.div_bcast(&b, &[]).unwrap();
            assert_eq!((q[2], q[3], q[4]), (-1, <$t>::MIN, -3));
            let r = a.rem_bcast(&b, &[]).unwrap();
            assert_eq!((r[2], r[3], r[4]), (7, 0, -1));
        )*};
    }
    macro_rules! unsigned {
        ($($t:ty),*) => {$(
            let a = array![<$t>::MAX, 0, 7];
            let b = array![1 as $t, 1, 0];
            let s = a.add_bcast(&b, &[]).unwrap();
            assert_eq!(s[0], 0);
            assert_eq!(a.sub_bcast(&b, &[]).unwrap()[1], <$t>::MAX);
            assert_eq!(a.div_bcast(&b, &[]).unwrap()[2], <$t>::MAX);
            assert_eq!(a.rem_bcast(&b, &[]).unwrap()[2], 7);
        )*};
    }
    signed!(i8, i16, i32, i64, isize);
    unsigned!(u8, u16, u32, u64, usize);
}

/// Integer `pow` as StableHLO's interpreter test `power_op_test_si64` and XLA's CPU compiler
/// give it: a negative exponent is `1` for base 1, `+-1` by parity for base -1, else 0.
#[test]
fn integer_pow_with_negative_exponents() {
    let base = array![-1i64, -1, -3, 1, -3, 0, -1, -1, 2, i64::MIN];
    let exp = array![1i64, 0, -3, -3, 3, 2, -1, -2, -1, -1];
    let want = array![-1i64, 1, 0, 1, -27, 0, -1, 1, 0, 0];
    assert_eq!(base.pow_bcast(&exp, &[]).unwrap(), want);
    for (b, e, w) in [
        (-1i8, i8::MIN, 1i8),
        (-1, i8::MIN + 1, -1),
        (-1, -7, -1),
        (1, -100, 1),
    ] {
        assert_eq!(
            array![b].pow_bcast(&array![e], &[]).unwrap()[0],
            w,
            "{b}^{e}"
        );
    }
    let ub = array![0u64, 0, 1, 1, 5];
    let ue = array![0u64, 1, 0, 2, 5];
    assert_eq!(ub.pow_bcast(&ue, &[]).unwrap(), array![1u64, 0, 1, 1, 3125]);
}

#[test]
fn float_semantics() {
    let a = array![f32::NAN, 1.0, -0.0, 5.5];
    let b = array![1.0f32, f32::NAN, 0.0, 2.0];
    let mx = a.max_bcast(&b, &[]).unwrap();
    assert!(mx[0].is_nan() && mx[1].is_nan());
    assert!(mx[2] == 0.0 && mx[2].is_sign_positive());
    let mn = a.min_bcast(&b, &[]).unwrap();
    assert!(mn[2] == 0.0 && mn[2].is_sign_negative());
    assert_eq!(a.rem_bcast(&b, &[]).unwrap()[3], 1.5);
    assert_eq!(
        array![1.0f64].div_bcast(&array![0.0], &[]).unwrap()[0],
        f64::INFINITY
    );
    assert_eq!(
        array![2.0f64].pow_bcast(&array![0.5], &[]).unwrap()[0],
        2f64.sqrt()
    );
}

#[test]
fn zip_with_other_types() {
    let a = array![[1u8, 2], [3, 4]];
    let names = array!["x", "y"];
    let r = a.zip_bcast(&names, &[1], |n, s| format!("{s}{n}")).unwrap();
    assert_eq!(
        r,
        array![["x1".to_string(), "y2".into()], ["x3".into(), "y4".into()]]
    );
    let _: Array<String, Ix2> = r;
    let r3: Array<i16, Ix3> = Array3::<u8>::ones((2, 2, 2))
        .zip_bcast(&a, &[1, 2], |x, y| (x + y) as i16)
        .unwrap();
    assert_eq!(r3.sum(), 2 * (2 + 3 + 4 + 5));
}

#[test]
fn empty_arrays() {
    let a = Array2::<f32>::zeros((0, 3));
    let r = a.add_bcast(&array![1.0, 2.0, 3.0], &[1]).unwrap();
    assert_eq!(r.shape(), &[0, 3]);
    let r = array![[1.0f32]]
        .add_bcast(&Array2::zeros((4, 0)), &[])
        .unwrap();
    assert_eq!(r.shape(), &[4, 0]);
    // An empty result with an F-ordered input: no memory order to follow.
    let f = Array2::<f32>::zeros((2, 6).f());
    let r = Array3::<f32>::zeros((0, 2, 6))
        .add_bcast(&f, &[1, 2])
        .unwrap();
    assert_eq!(r.shape(), &[0, 2, 6]);
}

/// Operands read across their rows at sizes that take the engine's tiled walk (tiles of 128,
/// with edge strips), for every plain element size and for a type that is not plain: each result
/// is checked element by element against indexing.
#[test]
fn transposed_operands_in_tiled_walks() {
    let (m, n) = (520, 300);
    // Logical (m, n) views whose rows are columns of their storage.
    let base = Array2::from_shape_fn((n, m), |(i, j)| (i * 7 + j * 3) as i64 % 1000);
    let wide = Array2::from_shape_fn((n, 2 * m), |(i, j)| (i * 5 + j) as i64 % 1000);
    let plain = base.t(); // strides (1, m)
    let reversed = base.slice(s![..;-1, ..]).reversed_axes(); // strides (1, -m)
    let stepped = wide.slice(s![.., ..;2]).reversed_axes(); // strides (2, 2m): gathered, not staged
    let rows = Array2::from_shape_fn((m, n), |(i, j)| (i * 11 + j) as i64 % 1000);
    let check = |x: ArrayView2<i64>| {
        let want = Array2::from_shape_fn((m, n), |(i, j)| x[[i, j]] - rows[[i, j]]);
        assert_eq!(x.sub_bcast(&rows, &[]).unwrap(), want);
        // The transposed operand on the right, and on both sides.
        let want = Array2::from_shape_fn((m, n), |(i, j)| rows[[i, j]] - x[[i, j]]);
        assert_eq!(rows.sub_bcast(&x, &[]).unwrap(), want);
        let want = x.mapv(|v| v * v);
        assert_eq!(x.mul_bcast(&x, &[]).unwrap(), want);
        // Broadcast along a new leading dim: the tiles sit under a head dim.
        let x3 = x.broadcast_in_dim(&[2, m, n], &[1, 2]).unwrap();
        let want = Array3::from_shape_fn((2, m, n), |(k, i, j)| x[[i, j]] + k as i64);
        let k = array![0i64, 1];
        assert_eq!(x3.add_bcast(&k, &[0]).unwrap(), want.into_dyn());
    };
    check(plain);
    check(reversed.view());
    check(stepped.view());

    // Rank 3 with reversed axes: the operand's unit-stride dim is the outermost one.
    let x = Array3::from_shape_fn((270, 3, 260), |(i, j, k)| (i * 31 + j * 7 + k) as f32);
    let xp = x.view().permuted_axes([2, 1, 0]);
    let z = Array3::from_shape_fn((260, 3, 270), |(i, j, k)| (i + j * 1000 + k * 3) as f32);
    let want = Array3::from_shape_fn((260, 3, 270), |(i, j, k)| xp[[i, j, k]] - z[[i, j, k]]);
    assert_eq!(xp.sub_bcast(&z, &[]).unwrap(), want);

    // Every plain size: u8, i16, f32, f64, and bool predicates; map (relayout) and in place.
    let cast = |f: fn(i64) -> f64| plain.mapv(f);
    let u = plain.mapv(|v| v as u8);
    assert_eq!(
        u.max_bcast(&rows.mapv(|v| v as u8), &[]).unwrap(),
        Array2::from_shape_fn((m, n), |(i, j)| u[[i, j]].max(rows[[i, j]] as u8))
    );
    // (A C-ordered partner keeps the result in standard layout, so the transposed side is staged.)
    let h = plain.mapv(|v| v as i16);
    let hr = rows.mapv(|v| v as i16);
    assert_eq!(
        h.add_bcast(&hr, &[]).unwrap(),
        Array2::from_shape_fn((m, n), |(i, j)| h[[i, j]] + hr[[i, j]])
    );
    let f = plain.mapv(|v| v as f32);
    let mut acc = Array2::<f32>::ones((m, n));
    acc.mul_assign_bcast(&f, &[]).unwrap();
    assert_eq!(acc, f);
    let d = cast(|v| v as f64 * 0.5);
    let mut into = Array2::<f64>::zeros((m, n));
    d.div_bcast_into(&arr0(2.0), &[], &mut into).unwrap();
    assert_eq!(into, d.mapv(|v| v / 2.0));
    let pred = plain.mapv(|v| v % 3 == 0);
    let dc = d.as_standard_layout();
    let r = pred.select_bcast(&dc, &arr0(-1.0)).unwrap();
    assert_eq!(
        r,
        Array2::from_shape_fn((m, n), |(i, j)| if pred[[i, j]] { d[[i, j]] } else { -1.0 })
    );
    // `mapv` kept the transposed memory order; relayout a row-major copy to column-major.
    assert_eq!(d.strides(), &[1, m as isize]);
    let c = d.as_standard_layout();
    let col_major = layout::to_buffer(&c, &Layout::col_major(2)).unwrap();
    assert_eq!(col_major, d.t().iter().copied().collect::<Vec<_>>());
    let back = layout::from_buffer(&col_major, &[m, n], &Layout::col_major(2)).unwrap();
    assert!(back.is_standard_layout());
    assert_eq!(back, c.into_dyn());

    // Small transposes tile too (one tile at the smallest size, else tiles and edges), for
    // every staging width.
    for (m, n) in [(128, 128), (137, 203), (255, 129)] {
        let t = Array2::from_shape_fn((n, m), |(i, j)| ((i * 13 + j * 7) % 251) as i64);
        let x = t.t();
        let y = Array2::from_shape_fn((m, n), |(i, j)| ((i + j * 3) % 7) as i64);
        let want = Array2::from_shape_fn((m, n), |(i, j)| x[[i, j]] * 2 + y[[i, j]]);
        let (x1, y1) = (x.mapv(|v| v as u8), y.mapv(|v| v as u8));
        assert_eq!(
            x1.add_bcast(&x1, &[]).unwrap().add_bcast(&y1, &[]).unwrap(),
            want.mapv(|v| v as u8)
        );
        let (x2, y2) = (x.mapv(|v| v as i16), y.mapv(|v| v as i16));
        assert_eq!(
            x2.add_bcast(&x2, &[]).unwrap().add_bcast(&y2, &[]).unwrap(),
            want.mapv(|v| v as i16)
        );
        let (x4, y4) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
        assert_eq!(
            (x4.mul_bcast(&arr0(2.0), &[]).unwrap())
                .add_bcast(&y4, &[])
                .unwrap(),
            want.mapv(|v| v as f32)
        );
        assert_eq!(
            y.add_bcast(&x, &[]).unwrap().add_bcast(&x, &[]).unwrap(),
            want
        );
    }

    // Not plain: the walk reads it in place instead of staging it.
    let names = plain.mapv(|v| v.to_string());
    let r = names
        .zip_bcast(&rows, &[0, 1], |s, v| format!("{s}:{v}"))
        .unwrap();
    assert_eq!(
        r[[m - 1, n - 1]],
        format!("{}:{}", plain[[m - 1, n - 1]], rows[[m - 1, n - 1]])
    );
    assert!(r
        .indexed_iter()
        .all(|((i, j), s)| *s == format!("{}:{}", plain[[i, j]], rows[[i, j]])));
}

/// Small walks (below the parallel threshold, any shape) stage an operand read across its rows
/// too: whole 8x8 blocks through the register transposes, the edges one by one, packed into
/// one run when the other operands are contiguous, at the padded pitch when not.
#[test]
fn small_transposed_operands_are_staged() {
    for (m, n) in [
        (8, 8),
        (13, 29),
        (64, 64),
        (9, 100),
        (100, 9),
        (7, 50),
        (50, 7),
        (31, 33),
    ] {
        let t = Array2::from_shape_fn((n, m), |(i, j)| ((i * 13 + j * 7) % 251) as i64);
        let x = t.t();
        let y = Array2::from_shape_fn((m, n), |(i, j)| ((i + j * 3) % 7) as i64);
        let at = |i: usize, j: usize| x[[i, j]];
        let want =
            |g: &dyn Fn(usize, usize) -> i64| Array2::from_shape_fn((m, n), |(i, j)| g(i, j));
        // Every plain width, packed (contiguous partner, fresh output), on either side.
        let (x1, y1) = (x.mapv(|v| v as u8), y.mapv(|v| v as u8));
        assert_eq!(
            x1.add_bcast(&y1, &[]).unwrap(),
            want(&|i, j| at(i, j) + y[[i, j]]).mapv(|v| v as u8)
        );
        let (x2, y2) = (x.mapv(|v| v as i16), y.mapv(|v| v as i16));
        assert_eq!(
            y2.sub_bcast(&x2, &[]).unwrap(),
            want(&|i, j| y[[i, j]] - at(i, j)).mapv(|v| v as i16)
        );
        let (x4, y4) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
        assert_eq!(
            x4.mul_bcast(&y4, &[]).unwrap(),
            want(&|i, j| at(i, j) * y[[i, j]]).mapv(|v| v as f32)
        );
        // Both sides transposed: two staged parts.
        assert_eq!(x.add_bcast(&x, &[]).unwrap(), want(&|i, j| 2 * at(i, j)));
        let p = x.mapv(|v| v % 3 == 0);
        assert_eq!(
            p.select_bcast(&x, &y).unwrap(),
            want(&|i, j| if at(i, j) % 3 == 0 {
                at(i, j)
            } else {
                y[[i, j]]
            })
        );
        // Not packed: a broadcast row or column, an output with a gap between its rows, in place.
        let (row, col) = (y.slice(s![..1, ..]), y.slice(s![.., ..1]));
        assert_eq!(
            x.add_bcast(&row, &[]).unwrap(),
            want(&|i, j| at(i, j) + y[[0, j]])
        );
        assert_eq!(
            x.sub_bcast(&col, &[]).unwrap(),
            want(&|i, j| at(i, j) - y[[i, 0]])
        );
        let mut wide = Array2::<i64>::zeros((m, n + 5));
        x.add_bcast_into(&y, &[], &mut wide.slice_mut(s![.., 2..n + 2]))
            .unwrap();
        assert_eq!(
            wide.slice(s![.., 2..n + 2]),
            want(&|i, j| at(i, j) + y[[i, j]])
        );
        assert!(wide.slice(s![.., ..2]).iter().all(|&v| v == 0));
        assert!(wide.slice(s![.., n + 2..]).iter().all(|&v| v == 0));
        let mut acc = y.clone();
        acc.add_assign_bcast(&x, &[]).unwrap();
        assert_eq!(acc, want(&|i, j| y[[i, j]] + at(i, j)));
        // A relayout is a map with a transposed input.
        let d = x.mapv(|v| v as f64);
        let c = layout::to_buffer(&d, &Layout::row_major(2)).unwrap();
        assert_eq!(c, d.iter().copied().collect::<Vec<_>>());
    }

    // An op whose function itself runs a staging op: the thread's staging buffer is in use, so
    // the inner op takes a fresh one.
    let t = Array2::from_shape_fn((16, 16), |(i, j)| (i * 16 + j) as i64);
    let x = Array2::from_shape_fn((24, 9), |(i, j)| (i * 9 + j) as i64);
    let y = Array2::from_shape_fn((9, 24), |(i, j)| (i + j) as i64);
    let nested = x
        .t()
        .zip_bcast(&y, &[], |a, b| {
            a + b + t.t().add_bcast(&t, &[]).unwrap()[[1, 0]]
        })
        .unwrap();
    assert_eq!(
        nested,
        Array2::from_shape_fn((9, 24), |(i, j)| x[[j, i]] + y[[i, j]] + 17)
    );
}

/// A transpose flipped along its rows (a rot90 view: a step of -1 down the rows, a large
/// stride across them) is staged like a plain transpose: small walks, thin strips, tiles.
#[test]
fn flipped_transposes_are_staged() {
    fn check<T>(m: usize, n: usize, f: impl Fn(usize) -> T)
    where
        T: xla_bcast::XlaNumber + std::ops::Add<Output = T> + std::ops::Sub<Output = T>,
        T: PartialEq + std::fmt::Debug,
    {
        // x[i][j] = t[j][m - 1 - i]: strides (-1, m).
        let t = Array2::from_shape_fn((n, m), |(i, j)| f(i * 13 + j * 7));
        let mut x = t.t();
        x.invert_axis(Axis(0));
        assert_eq!(x.strides(), &[-1, m as isize]);
        let y = Array2::from_shape_fn((m, n), |(i, j)| f(i + j * 3));
        let want = |g: &dyn Fn(usize, usize) -> T| Array2::from_shape_fn((m, n), |(i, j)| g(i, j));
        let at = |i: usize, j: usize| t[[j, m - 1 - i]];
        // Packed (fresh output, contiguous partner), on either side and on both.
        assert_eq!(
            x.add_bcast(&y, &[]).unwrap(),
            want(&|i, j| at(i, j) + y[[i, j]])
        );
        assert_eq!(
            y.sub_bcast(&x, &[]).unwrap(),
            want(&|i, j| y[[i, j]] - at(i, j))
        );
        assert_eq!(
            x.sub_bcast(&x.t().t(), &[]).unwrap(),
            want(&|i, j| at(i, j) - at(i, j))
        );
        // Not packed: a broadcast row, an output with gaps between its rows; in place.
        let row = y.slice(s![..1, ..]);
        assert_eq!(
            x.add_bcast(&row, &[]).unwrap(),
            want(&|i, j| at(i, j) + y[[0, j]])
        );
        let mut wide = Array2::from_elem((m, n + 3), f(0));
        x.sub_bcast_into(&y, &[], &mut wide.slice_mut(s![.., 1..n + 1]))
            .unwrap();
        assert_eq!(
            wide.slice(s![.., 1..n + 1]),
            want(&|i, j| at(i, j) - y[[i, j]])
        );
        let mut acc = y.clone();
        acc.add_assign_bcast(&x, &[]).unwrap();
        assert_eq!(acc, want(&|i, j| y[[i, j]] + at(i, j)));
    }
    // Small walks (with edges), in every plain width.
    for (m, n) in [(8, 8), (13, 29), (64, 64), (100, 9)] {
        check(m, n, |v| (v % 101) as i8 - 50);
        check(m, n, |v| (v % 1009) as i16);
        check(m, n, |v| (v % 1009) as f32);
        check(m, n, |v| (v % 1009) as f64);
    }
    // Parallel walks (above the threshold for 8-byte elements): thin strips, tiles with edges.
    for (m, n) in [(3000, 24), (40, 1700), (520, 300)] {
        check(m, n, |v| (v % 1009) as f64);
    }
}

/// A transpose sliced with a step down its rows (`a.t().slice(s![..;2, ..])`: a large stride
/// across the rows, a step of 2 down them) is read in place (staging copies only steps of 1 or
/// -1), forwards and backwards, in small walks, in thin strips and beside a transposed partner
/// that is staged: every element is right.
#[test]
fn stepped_transposes_are_right() {
    fn check<T>(m: usize, n: usize, step: isize, f: impl Fn(usize) -> T)
    where
        T: xla_bcast::XlaNumber + std::ops::Add<Output = T> + std::ops::Sub<Output = T>,
        T: PartialEq + std::fmt::Debug,
    {
        let t = Array2::from_shape_fn((n, m * step.unsigned_abs() + 1), |(i, j)| f(i * 13 + j * 7));
        let x = t.t().slice_move(s![..;step, ..]);
        let x = x.slice(s![..m, ..]);
        assert_eq!(
            (x.shape(), x.strides()[1]),
            (&[m, n][..], t.ncols() as isize)
        );
        let y = Array2::from_shape_fn((m, n), |(i, j)| f(i + j * 3));
        let want = |g: &dyn Fn(usize, usize) -> T| Array2::from_shape_fn((m, n), |(i, j)| g(i, j));
        let at = |i: usize, j: usize| x[[i, j]];
        let case = format!("{m}x{n}, step {step}");
        // Packed (fresh output, contiguous partner), on either side and on both.
        assert_eq!(
            x.add_bcast(&y, &[]).unwrap(),
            want(&|i, j| at(i, j) + y[[i, j]]),
            "{case}"
        );
        assert_eq!(
            y.sub_bcast(&x, &[]).unwrap(),
            want(&|i, j| y[[i, j]] - at(i, j)),
            "{case}"
        );
        assert_eq!(
            x.add_bcast(&x, &[]).unwrap(),
            want(&|i, j| at(i, j) + at(i, j)),
            "{case}"
        );
        // A transposed partner (staged too; above the tile size the walk is tiled for it).
        let yt = y.t().to_owned();
        assert_eq!(
            x.sub_bcast(&yt.t(), &[]).unwrap(),
            want(&|i, j| at(i, j) - y[[i, j]]),
            "{case}"
        );
        // Read backwards across the rows too (a negative stride between the source rows).
        let mut xr = x.view();
        xr.invert_axis(Axis(1));
        assert_eq!(
            xr.add_bcast(&y, &[]).unwrap(),
            want(&|i, j| xr[[i, j]] + y[[i, j]]),
            "{case}, columns reversed"
        );
        // Not packed: a broadcast row, an output with gaps between its rows; in place.
        let row = y.slice(s![..1, ..]);
        assert_eq!(
            x.add_bcast(&row, &[]).unwrap(),
            want(&|i, j| at(i, j) + y[[0, j]]),
            "{case}"
        );
        let mut wide = Array2::from_elem((m, n + 3), f(0));
        x.sub_bcast_into(&y, &[], &mut wide.slice_mut(s![.., 1..n + 1]))
            .unwrap();
        assert_eq!(
            wide.slice(s![.., 1..n + 1]),
            want(&|i, j| at(i, j) - y[[i, j]]),
            "{case}"
        );
        assert!(wide
            .column(0)
            .iter()
            .chain(wide.column(n + 1))
            .all(|v| *v == f(0)));
        let mut acc = y.clone();
        acc.add_assign_bcast(&x, &[]).unwrap();
        assert_eq!(acc, want(&|i, j| y[[i, j]] + at(i, j)), "{case}");
    }
    // Small walks (with edges: columns not a multiple of 8 or 4), in every plain width.
    for (m, n) in [(8, 8), (13, 29), (64, 64), (100, 9), (9, 100)] {
        for step in [2, -3] {
            check(m, n, step, |v| (v % 101) as i8 - 50);
            check(m, n, step, |v| (v % 1009) as i16);
            check(m, n, step, |v| (v % 1009) as f32);
            check(m, n, step, |v| (v % 1009) as i32);
            check(m, n, step, |v| (v % 1009) as f64);
            check(m, n, step, |v| v as i64 * 0x1_0000_0001);
        }
    }
    for step in [-2, 7] {
        check(64, 64, step, |v| (v % 1009) as f32);
        check(64, 64, step, |v| (v % 1009) as f64);
    }
    // Parallel walks (a thread's range may end inside a row): thin strips, and tiles that a
    // transposed partner asks for (with edges).
    check(40, 1700, 2, |v| (v % 1009) as f64);
    check(260, 270, -3, |v| (v % 1009) as f64);
}

/// Large walks (split over threads) that read an operand across short rows, or across rows too
/// few to tile, stage it block by block; a thread's range may start and end inside a row.
#[test]
fn thin_transposes_in_large_walks() {
    // Each just above the parallel threshold for 8-byte elements (512 KiB).
    for (m, n) in [(3000, 24), (9001, 9), (40, 1700), (20, 3500)] {
        let t = Array2::from_shape_fn((n, m), |(i, j)| ((i * 13 + j * 7) % 1009) as i64);
        let x = t.t();
        let y = Array2::from_shape_fn((m, n), |(i, j)| ((i + j * 3) % 17) as i64);
        let want = Array2::from_shape_fn((m, n), |(i, j)| x[[i, j]] * 3 - y[[i, j]]);
        let x3 = x.mapv(|v| v * 3);
        assert_eq!(x3.sub_bcast(&y, &[]).unwrap(), want, "{m}x{n}");
        let (xf, yf) = (x.mapv(|v| v as f64), y.mapv(|v| v as f64));
        assert_eq!(
            xf.mul_bcast(&arr0(3.0), &[])
                .unwrap()
                .sub_bcast(&yf, &[])
                .unwrap(),
            want.mapv(|v| v as f64)
        );
        let (xu, yu) = (x.mapv(|v| v as u8), y.mapv(|v| v as u8));
        assert_eq!(
            yu.max_bcast(&xu, &[]).unwrap(),
            Array2::from_shape_fn((m, n), |(i, j)| xu[[i, j]].max(yu[[i, j]]))
        );
        let mut acc = y.clone();
        acc.add_assign_bcast(&x, &[]).unwrap();
        assert_eq!(
            acc,
            Array2::from_shape_fn((m, n), |(i, j)| y[[i, j]] + x[[i, j]])
        );
    }
}

/// Threads share a tiled walk in slabs of tile rows: at 520x520 and 240x600 (either under a
/// head dim of 3) a thread's share ends inside a tile, and every thread also takes a share of
/// the edge strips.
#[test]
fn tiles_shared_between_threads() {
    for (m, n) in [(520, 520), (240, 600)] {
        let t = Array2::from_shape_fn((n, m), |(i, j)| ((i * 13 + j * 7) % 1009) as f32);
        let x = t.t();
        let y = Array2::from_shape_fn((m, n), |(i, j)| ((i + j * 3) % 17) as f32);
        let want = Array2::from_shape_fn((m, n), |(i, j)| x[[i, j]] - y[[i, j]]);
        assert_eq!(x.sub_bcast(&y, &[]).unwrap(), want, "{m}x{n}");
        let mut out = Array2::<f32>::zeros((m, n));
        x.sub_bcast_into(&y, &[], &mut out).unwrap();
        assert_eq!(out, want, "{m}x{n} into");
        // Under a head dim: the tiles' rows run on across the head's steps.
        let x3 = x.broadcast_in_dim(&[3, m, n], &[1, 2]).unwrap();
        let k = array![0.0f32, 1.0, 2.0];
        let want3 = Array3::from_shape_fn((3, m, n), |(h, i, j)| x[[i, j]] * h as f32);
        assert_eq!(x3.mul_bcast(&k, &[0]).unwrap(), want3.into_dyn());
    }
}

#[test]
fn fresh_results_follow_the_inputs_memory_order() {
    let (m, n) = (300, 280); // above the parallel threshold: the planned walk
    let c = Array2::from_shape_fn((m, n), |(i, j)| (i * 1000 + j) as i64);
    let f = Array2::from_shape_fn((m, n).f(), |(i, j)| (i * 7 + j * 3) as i64);
    let row = Array2::from_shape_fn((1, n), |(_, j)| j as i64);
    let is_f = |a: &Array2<i64>| a.t().is_standard_layout();
    let want = |g: &dyn Fn(usize, usize) -> i64| Array2::from_shape_fn((m, n), |(i, j)| g(i, j));

    // All F (also with a broadcast row or a scalar): an F result.
    let r = f.add_bcast(&f, &[]).unwrap();
    assert!(is_f(&r));
    assert_eq!(r, want(&|i, j| 2 * f[[i, j]]));
    let r = f.sub_bcast(&row, &[]).unwrap();
    assert!(is_f(&r));
    assert_eq!(r, want(&|i, j| f[[i, j]] - j as i64));
    let r = f.mul_bcast(&arr0(3), &[]).unwrap();
    assert!(is_f(&r));
    assert_eq!(r, want(&|i, j| 3 * f[[i, j]]));
    let r = f.strict() * 2;
    assert!(is_f(&r));
    assert_eq!(r, want(&|i, j| 2 * f[[i, j]]));
    let lt = f.lt_bcast(&c, &[]).unwrap();
    assert!(lt.is_standard_layout(), "mixed inputs keep standard layout");
    let gt = f.gt_bcast(&row, &[]).unwrap();
    assert!(gt.t().is_standard_layout());
    assert!(gt
        .indexed_iter()
        .all(|((i, j), &g)| g == (f[[i, j]] > j as i64)));
    let sel = gt.select_bcast(&f, &arr0(-1)).unwrap();
    assert!(is_f(&sel));
    assert_eq!(sel, want(&|i, j| if gt[[i, j]] { f[[i, j]] } else { -1 }));

    // Mixed or C inputs: standard layout.
    for r in [f.add_bcast(&c, &[]).unwrap(), c.add_bcast(&f, &[]).unwrap()] {
        assert!(r.is_standard_layout());
        assert_eq!(r, want(&|i, j| f[[i, j]] + c[[i, j]]));
    }
    assert!(c.add_bcast(&row, &[]).unwrap().is_standard_layout());

    // Rank 3, any permutation, reversed strides; and through the NumPy wrapper.
    let x = Array3::from_shape_fn((40, 30, 50), |(i, j, k)| (i * 10_000 + j * 100 + k) as i64);
    let p = x.view().permuted_axes([1, 2, 0]); // memory order of its dims: 2, 0, 1
    let r = p.add_bcast(&p, &[]).unwrap();
    assert_eq!(r.strides(), &[50, 1, 1500]);
    assert_eq!(r, p.mapv(|v| 2 * v));
    let rev = f.slice(s![..;-1, ..;-1]);
    let r = rev.add_bcast(&arr0(1), &[]).unwrap();
    assert!(is_f(&r));
    assert_eq!(r, rev.mapv(|v| v + 1));
    let v = Array1::from_shape_fn(m, |i| i as i64);
    let r = xla_bcast::numpy::add(&f, &v.insert_axis(ndarray::Axis(1))).unwrap();
    assert!(r.t().is_standard_layout());
    assert_eq!(r, want(&|i, j| f[[i, j]] + i as i64));
}

/// Small results whose operands are contiguous in one memory order (or rank 0) are filled in
/// one run, as are small outputs written into or in place when they and their operands are;
/// every op family, element type and layout of that walk against indexing.
#[test]
fn small_results_of_contiguous_operands() {
    let is_f = |strides: &[isize], shape: &[usize]| {
        let mut step = 1;
        shape.iter().zip(strides).all(|(&n, &s)| {
            let ok = n == 1 || s == step;
            step *= n as isize;
            ok
        })
    };
    for (m, n) in [(1, 1), (1, 9), (9, 1), (2, 3), (8, 8), (17, 31), (64, 64)] {
        let c = Array2::from_shape_fn((m, n), |(i, j)| (i * 37 + j * 11) as f64 % 19.0 - 9.0);
        let f = Array2::from_shape_fn((m, n).f(), |(i, j)| (i * 5 + j * 3) as f64 % 7.0 + 1.0);
        let want =
            |g: &dyn Fn(usize, usize) -> f64| Array2::from_shape_fn((m, n), |(i, j)| g(i, j));
        for (x, y) in [(&c, &c), (&f, &f), (&c, &f), (&f, &c)] {
            let r = x.sub_bcast(y, &[0, 1]).unwrap();
            assert_eq!(r, want(&|i, j| x[[i, j]] - y[[i, j]]), "{m}x{n}");
            let both_f = is_f(x.strides(), x.shape()) && is_f(y.strides(), y.shape());
            let c_too = c.strides() == x.strides() || c.strides() == y.strides();
            if both_f && !c_too && m > 1 && n > 1 {
                assert!(r.t().is_standard_layout(), "F inputs, F result");
            } else {
                assert!(r.is_standard_layout());
            }
        }
        // Into, and in place on, a C or an F output: one run only when every operand shares
        // the output's order.
        for mut out in [Array2::zeros((m, n)), Array2::zeros((m, n).f())] {
            for (x, y) in [(&c, &c), (&f, &f), (&c, &f), (&f, &c)] {
                let d = want(&|i, j| x[[i, j]] - y[[i, j]]);
                x.sub_bcast_into(y, &[], &mut out).unwrap();
                assert_eq!(out, d, "{m}x{n} into");
                out.assign(x);
                out.sub_assign_bcast(y, &[]).unwrap();
                assert_eq!(out, d, "{m}x{n} in place");
                x.sub_bcast_into(&arr0(2.0), &[], &mut out).unwrap();
                assert_eq!(out, x.mapv(|v| v - 2.0), "{m}x{n} scalar rhs");
                arr0(2.0).sub_bcast_into(y, &[], &mut out).unwrap();
                assert_eq!(out, y.mapv(|v| 2.0 - v), "{m}x{n} scalar lhs");
            }
        }
        let r = f.div_bcast(&arr0(2.0), &[]).unwrap();
        assert_eq!(r, f.mapv(|v| v / 2.0));
        assert!(is_f(r.strides(), r.shape()));
        let r = arr0(2.0).div_bcast(&f, &[]).unwrap();
        assert_eq!(r, f.mapv(|v| 2.0 / v));
        assert_eq!(c.strict() * 3.0, c.mapv(|v| v * 3.0));
        let ge = c.ge_bcast(&f, &[]).unwrap();
        assert!(ge
            .indexed_iter()
            .all(|((i, j), &g)| g == (c[[i, j]] >= f[[i, j]])));
        // Narrow integers wrap as XLA's do, in F order too.
        let b = f.mapv(|v| (v as i8).wrapping_mul(50));
        let r = b.add_bcast(&b, &[]).unwrap();
        assert_eq!(r, b.mapv(|v| v.wrapping_add(v)));
        let r = xla_bcast::numpy::mul(&c, &c).unwrap();
        assert_eq!(r, c.mapv(|v| v * v));
    }
    // Rank 3 in F order, a dynamic-rank operand, and a size-1 dim with any stride.
    let x = Array3::from_shape_fn((3, 4, 5).f(), |(i, j, k)| (i * 20 + j * 5 + k) as i32);
    let r = x.add_bcast(&x.view().into_dyn(), &[]).unwrap();
    assert_eq!(r.strides(), &[1, 3, 12]);
    assert_eq!(r, x.mapv(|v| 2 * v).into_dyn());
    let mut o = Array3::zeros((3, 4, 5).f());
    x.add_bcast_into(&x, &[], &mut o).unwrap();
    o.add_assign_bcast(&x, &[]).unwrap();
    assert_eq!(o, x.mapv(|v| 3 * v));
    let wide = Array2::from_shape_fn((4, 6), |(i, j)| (i * 6 + j) as i32);
    let row = wide.slice(s![2..3, ..]); // shape (1, 6), stride 6 on its size-1 dim
    let r = row.mul_bcast(&row, &[]).unwrap();
    assert_eq!(r, row.mapv(|v| v * v));
}

#[test]
fn scalar_operands_on_either_side() {
    for (m, n) in [(3, 5), (300, 280)] {
        let x = Array2::from_shape_fn((m, n), |(i, j)| (i * 31 + j) as i64 % 97 + 1);
        let f = x.t().as_standard_layout().into_owned().reversed_axes(); // F order, same values
        for x in [x.view(), f.view(), x.slice(s![..;-1, ..])] {
            let s = arr0(1000i64);
            assert_eq!(x.sub_bcast(&s, &[]).unwrap(), x.mapv(|v| v - 1000));
            assert_eq!(s.sub_bcast(&x, &[]).unwrap(), x.mapv(|v| 1000 - v));
            assert_eq!(s.div_bcast(&x, &[]).unwrap(), x.mapv(|v| 1000 / v));
            assert_eq!(
                x.view().into_dyn().rem_bcast(&s, &[]).unwrap(),
                x.mapv(|v| v % 1000).into_dyn()
            );
            // A scalar maps onto no dim: broadcast_dimensions must stay empty.
            assert!(s.sub_bcast(&x, &[0]).is_err());
            assert!(x.sub_bcast(&s, &[1]).is_err());
        }
        let r = arr0(2i64).mul_bcast(&f, &[]).unwrap();
        assert!(
            r.t().is_standard_layout(),
            "the result follows the F-ordered operand"
        );
    }
    let r: Array<i64, IxDyn> = arr0(2i64).add_bcast(&arr0(3i64).into_dyn(), &[]).unwrap();
    assert_eq!(r, arr0(5).into_dyn());
}

#[test]
fn outputs_at_every_alignment() {
    // A long unit-stride run is split where its output reaches a 32-byte boundary (so that wide
    // stores stay aligned): every start of the output inside a buffer must give the same values,
    // for every element size and inner-loop kind.
    let (m, n) = (3, 2100); // runs of 2100 elements: long enough to split even for bytes
    let a = Array2::from_shape_fn((m, n), |(i, j)| ((i * 7919 + j * 31) % 1000) as f32 - 500.0);
    let b = Array2::from_shape_fn((m, n), |(i, j)| ((i + j * 13) % 97) as f32);
    let row = Array2::from_shape_fn((1, n), |(_, j)| (j % 17) as i64);
    let col = Array2::from_shape_fn((m, 1), |(i, _)| (i * 3 + 1) as u8);
    let bytes = Array2::from_shape_fn((m, n), |(i, j)| ((i * 5 + j) % 251) as u8);
    let at = a.t().to_owned(); // `at.t()` reads `a`'s values across its rows
    fn view_at<T: Clone + Default>(
        buf: &mut Array1<T>,
        off: usize,
        m: usize,
        n: usize,
    ) -> ndarray::ArrayViewMut2<'_, T> {
        buf.slice_mut(s![off..off + m * n])
            .into_shape_with_order((m, n))
            .unwrap()
    }
    for off in 0..9 {
        let mut buf = Array1::<f32>::zeros(m * n + 9);
        let mut out = view_at(&mut buf, off, m, n);
        a.add_bcast_into(&b, &[], &mut out).unwrap();
        assert_eq!(out, &a + &b, "f32 same shape, offset {off}");
        at.t().sub_bcast_into(&b, &[], &mut out).unwrap();
        assert_eq!(out, &a - &b, "f32 transposed lhs, offset {off}");
        out.assign(&a);
        out.mul_assign_bcast(&b, &[]).unwrap();
        assert_eq!(out, &a * &b, "f32 in place, offset {off}");

        let ai = a.mapv(|x| x as i64);
        let mut buf = Array1::<i64>::zeros(m * n + 9);
        let mut out = view_at(&mut buf, off, m, n);
        ai.sub_bcast_into(&row, &[], &mut out).unwrap();
        assert_eq!(out, &ai - &row, "i64 row broadcast, offset {off}");
        row.add_bcast_into(&ai, &[], &mut out).unwrap();
        assert_eq!(out, &row + &ai, "i64 broadcast lhs, offset {off}");

        let mut buf = Array1::<u8>::zeros(m * n + 9);
        let mut out = view_at(&mut buf, off, m, n);
        bytes.mul_bcast_into(&col, &[], &mut out).unwrap();
        let want = Array2::from_shape_fn((m, n), |(i, j)| bytes[[i, j]].wrapping_mul(col[[i, 0]]));
        assert_eq!(out, want, "u8 column broadcast, offset {off}");

        let mut buf = Array1::<bool>::default(m * n + 9);
        let mut out = view_at(&mut buf, off, m, n);
        a.lt_bcast_into(&b, &[], &mut out).unwrap();
        let want = Array2::from_shape_fn((m, n), |(i, j)| a[[i, j]] < b[[i, j]]);
        assert_eq!(out, want, "bool comparison, offset {off}");

        // 12-byte elements: a 32-byte boundary falls mid-element in most of them.
        let mut buf = Array1::<(f32, f32, f32)>::default(m * n + 9);
        let mut out = view_at(&mut buf, off, m, n);
        a.zip_bcast_into(&b, &[], &mut out, |x, y| (x, y, x * y))
            .unwrap();
        let want = Array2::from_shape_fn((m, n), |(i, j)| {
            (a[[i, j]], b[[i, j]], a[[i, j]] * b[[i, j]])
        });
        assert_eq!(out, want, "12-byte elements, offset {off}");
    }
}

/// Zero-sized results of large walks (48 MiB read or more, split over threads): nothing to
/// write, never a division by the output's zero bytes.
#[test]
fn zero_sized_results_of_large_walks() {
    let a = Array1::<f64>::from_elem(4 << 20, 1.5);
    let mut out = Array1::<()>::from_elem(4 << 20, ());
    a.zip_bcast_into(&a, &[], &mut out, |_, _| ()).unwrap();
    let big = Array1::<f64>::from_elem(6 << 20, 2.0);
    let mut units = Array1::<()>::from_elem(6 << 20, ());
    units.zip_assign_bcast(&big, &[], |(), _| ()).unwrap();
    assert_eq!(units.len(), 6 << 20);
}

/// `select` takes no `broadcast_dimensions` (XLA's Select has none): a lower-rank operand's
/// hint is a `broadcast_in_dim` with the dims that fit, which compiles and works.
#[test]
fn select_rank_hint_can_be_followed() {
    let mask = Array2::from_shape_fn((4, 4), |(q, k)| k <= q);
    let scores = Array::from_shape_fn((2, 3, 4, 4), |(b, h, q, k)| (b + h + q * k) as f32);
    let low = arr0(f32::NEG_INFINITY);
    let err = mask.select_bcast(&scores, &low).unwrap_err().to_string();
    assert_eq!(
        err,
        "select: operands [4, 4] and [2, 3, 4, 4] have different ranks; select takes no \
         broadcast_dimensions (XLA's Select broadcasts only rank-0 operands and size-1 dims), so \
         place the lower-rank operand with broadcast_in_dim first, e.g. \
         .broadcast_in_dim([2, 3, 4, 4], &[2, 3])"
    );
    let placed = mask.broadcast_in_dim([2, 3, 4, 4], &[2, 3]).unwrap();
    let masked = placed.select_bcast(&scores, &low).unwrap();
    assert_eq!(masked[[1, 2, 3, 0]], scores[[1, 2, 3, 0]]);
    assert_eq!(masked[[1, 2, 0, 3]], f32::NEG_INFINITY);
}

/// A size misfit between ranks suggests the dims that fit, as the rank error does.
#[test]
fn size_misfit_suggests_the_dims_that_fit() {
    let x = Array::<f32, _>::zeros((2, 5, 5, 8));
    let gamma = Array1::<f32>::ones(8);
    let err = x.add_bcast(&gamma, &[1]).unwrap_err().to_string();
    assert!(
        err.ends_with("lhs dim 1 has size 5 and rhs dim 0 has size 8; matched sizes must be equal or one of them 1; [3] fits these shapes"),
        "{err}"
    );
    assert!(x.add_bcast(&gamma, &[3]).is_ok());
    let err = x
        .add_bcast(&Array1::<f32>::ones(5), &[0])
        .unwrap_err()
        .to_string();
    assert!(err.ends_with("; [1] or [2] fit these shapes"), "{err}");
    let err = x
        .add_bcast(&Array1::<f32>::ones(7), &[0])
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("; no strictly increasing dims fit these shapes"),
        "{err}"
    );
    // Equal ranks match dim to dim: nothing to suggest.
    let err = x
        .add_bcast(&Array::<f32, _>::zeros((2, 5, 5, 7)), &[])
        .unwrap_err()
        .to_string();
    assert!(err.ends_with("one of them 1"), "{err}");
}

/// Explicit dims are checked against sizes only: where two dims have the same size, both are
/// accepted, and only one means "per row" (the docs' example).
#[test]
fn coinciding_sizes_are_accepted_either_way() {
    let scores = Array3::from_shape_fn((1, 3, 3), |(_, q, k)| (q * 3 + k) as f32);
    let row_max = array![[2.0f32, 5.0, 8.0]];
    let per_query = scores.sub_bcast(&row_max, &[0, 1]).unwrap();
    let per_key = scores.sub_bcast(&row_max, &[0, 2]).unwrap();
    assert_eq!(per_query.slice(s![0, .., 2]), array![0.0, 0.0, 0.0]);
    assert_ne!(per_query, per_key);
}
