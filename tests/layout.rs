//! XLA's *Shapes and layout* document, and round trips between ndarray and XLA layouts.

use ndarray::{array, s, Array, ArrayD, IxDyn, ShapeBuilder};
use proptest::prelude::*;
use xla_bcast::index::{bump_indices, linear_index, multi_index, normalize_dim};
use xla_bcast::layout::{
    self, from_buffer, layout_of, to_buffer, ElementType, Layout, PaddingValue, Shape,
};
use xla_bcast::BroadcastError;

// a b c / d e f, as 1..=6.
fn abc_def() -> Array<i32, ndarray::Ix2> {
    array![[1, 2, 3], [4, 5, 6]]
}

#[test]
fn document_examples() {
    let a = abc_def();
    // minor_to_major [0, 1]: a d b e c f.
    let col = Layout::new(vec![0, 1]).unwrap();
    assert_eq!(to_buffer(&a, &col).unwrap(), vec![1, 4, 2, 5, 3, 6]);
    // [1, 0]: a b c d e f.
    let row = Layout::new(vec![1, 0]).unwrap();
    assert_eq!(to_buffer(&a, &row).unwrap(), vec![1, 2, 3, 4, 5, 6]);
    // Padded to 3x5 with zeros, [0, 1]: a d 0 b e 0 c f 0 0 0 0 0 0 0.
    let padded = col.clone().with_padding(vec![3, 5], PaddingValue::Zero);
    let buf = to_buffer(&a, &padded).unwrap();
    assert_eq!(buf, vec![1, 4, 0, 2, 5, 0, 3, 6, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(buf.len(), 15);
    // The equivalent padded 3x5 array: a b c 0 0 / d e f 0 0 / 0 0 0 0 0.
    let full = from_buffer(&buf, &[3, 5], &col).unwrap();
    assert_eq!(
        full,
        array![[1, 2, 3, 0, 0], [4, 5, 6, 0, 0], [0, 0, 0, 0, 0]].into_dyn()
    );
    // And the padded buffer viewed back as 2x3.
    assert_eq!(layout::view(&buf, &[2, 3], &padded).unwrap(), a.into_dyn());
}

#[test]
fn padding_values() {
    let a = array![[1.5f32]];
    let l = |v| Layout::row_major(2).with_padding(vec![1, 2], v);
    assert_eq!(
        to_buffer(&a, &l(PaddingValue::Lowest)).unwrap(),
        vec![1.5, f32::NEG_INFINITY]
    );
    assert_eq!(
        to_buffer(&a, &l(PaddingValue::Highest)).unwrap(),
        vec![1.5, f32::INFINITY]
    );
    assert_eq!(
        to_buffer(&a, &l(PaddingValue::One)).unwrap(),
        vec![1.5, 1.0]
    );
    let b = array![[7i8]];
    assert_eq!(
        to_buffer(&b, &l(PaddingValue::Lowest)).unwrap(),
        vec![7, i8::MIN]
    );
}

#[test]
fn column_major_zero_copy_and_back() {
    let fortran = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0];
    let v = layout::view(&fortran, &[2, 3], &Layout::col_major(2)).unwrap();
    assert_eq!(v.as_ptr(), fortran.as_ptr());
    assert_eq!(v.strides(), &[1, 2]);
    assert_eq!(layout_of(&v), Some(Layout::col_major(2)));
    let mut buf = vec![0.0; 6];
    layout::view_mut(&mut buf, &[2, 3], &Layout::col_major(2))
        .unwrap()
        .assign(&abc_def().mapv(f64::from));
    assert_eq!(buf, fortran);
}

#[test]
fn relayout_from_strided_views() {
    let base = Array::from_shape_fn((4, 6), |(i, j)| (10 * i + j) as i64);
    let v = base.slice(s![1..;2, ..;-2]);
    let buf = to_buffer(&v, &Layout::col_major(2)).unwrap();
    let back = layout::view(&buf, &[2, 3], &Layout::col_major(2)).unwrap();
    assert_eq!(back, v.into_dyn());
    assert_eq!(layout_of(&v), None); // reversed
    assert_eq!(layout_of(&base.slice(s![.., ..;2])), None); // stepped innermost
    let bc = array![1, 2, 3];
    assert_eq!(layout_of(&bc.broadcast((2, 3)).unwrap()), None); // stride 0
}

#[test]
fn layout_of_ndarray_layouts() {
    assert_eq!(
        layout_of(&Array::<u8, _>::zeros((2, 3, 4))),
        Some(Layout::row_major(3))
    );
    assert_eq!(
        layout_of(&Array::<u8, _>::zeros((2, 3, 4).f())),
        Some(Layout::col_major(3))
    );
    let p = Array::<u8, _>::zeros((2, 3, 4)).permuted_axes([1, 2, 0]);
    assert_eq!(layout_of(&p), Some(Layout::new(vec![1, 0, 2]).unwrap()));
    assert_eq!(layout_of(&ndarray::arr0(1.0)), Some(Layout::row_major(0)));
    // Padded windows.
    let big = Array::<u8, _>::zeros((5, 7));
    let w = big.slice(s![1..3, 2..5]);
    assert_eq!(
        layout_of(&w),
        Some(Layout::row_major(2).with_padding(vec![2, 7], PaddingValue::Zero))
    );
}

#[test]
fn bad_input_is_an_error() {
    assert!(matches!(
        Layout::new(vec![0, 2]),
        Err(BroadcastError::Layout { .. })
    ));
    assert!(Layout::from_major_to_minor(&[1, 1]).is_err());
    let l = Layout::row_major(2);
    assert!(l.strides(&[2, 3, 4]).is_err()); // rank mismatch
    let short = l.clone().with_padding(vec![1, 3], PaddingValue::Zero);
    let e = short.strides(&[2, 3]).unwrap_err();
    assert!(e.to_string().contains("padded to only 1"), "{e}");
    assert!(l
        .clone()
        .with_padding(vec![2], PaddingValue::Zero)
        .buffer_len(&[2, 3])
        .is_err());
    let e = layout::view(&[1, 2, 3], &[2, 3], &l).unwrap_err();
    assert!(matches!(
        e,
        BroadcastError::BufferTooShort {
            needed: 6,
            got: 3,
            ..
        }
    ));
    assert!(layout::view::<i32>(&[], &[1], &Layout::row_major(1)).is_err());
    assert!(layout::view_mut(&mut [0; 5], &[2, 3], &l).is_err());
    assert!(from_buffer(&[0; 5], &[2, 3], &l).is_err());
    let huge = [usize::MAX / 2, 3];
    assert!(matches!(
        l.buffer_len(&huge),
        Err(BroadcastError::SizeOverflow { .. })
    ));
    assert!(layout::view(&[0u8; 4], &huge, &l).is_err());
    assert!(linear_index(&[2, 3], &l, &[0]).is_err());
    assert!(linear_index(&[2, 3], &l, &[0, 3]).is_err());
    assert!(multi_index(&[2, 3], &l, 99).is_err());
    assert!(multi_index(&huge, &l, 0).is_err());
    assert!(normalize_dim(isize::MIN, 3).is_err());
    assert!(l.dimension_stride(&[2, 3], 5).is_err());
    assert!(!bump_indices(&[2, 3], &mut [0]));
    assert!(!bump_indices(&[2, 3], &mut [5, 0]));
    assert!(!bump_indices(&[], &mut []));
}

#[test]
fn shape_text() {
    for text in [
        "f32[2,3]{1,0}",
        "s8[]",
        "pred[4]{0}",
        "bf16[2,3,4]{0,2,1}",
        "u64[2,3]",
        "f64[2,3]{0,1:pad(3,5)=zero}",
    ] {
        let s: Shape = text.parse().unwrap();
        assert_eq!(s.to_string(), text);
    }
    let s: Shape = " f16[1,5,1] ".parse().unwrap();
    assert_eq!((s.element_type, s.true_rank()), (ElementType::F16, 1));
    let p: Shape = "s32[2,3]{0,1:pad(3,5)=lowest}".parse().unwrap();
    assert_eq!(p.layout.unwrap().padding_value(), PaddingValue::Lowest);
    for bad in [
        "f32",
        "f33[2]",
        "f32[2,x]",
        "f32[2,3]{1}",
        "f32[2,3]{1,1}",
        "f32[2,3]{1,0",
        "f32[2,3]{0,1:pad(1,5)=zero}",
        "f32[2]{0:pad(3)=nan}",
        "]f32[",
    ] {
        let e = bad.parse::<Shape>().unwrap_err();
        assert!(matches!(e, BroadcastError::ParseShape { .. }), "{bad}: {e}");
    }
}

#[test]
fn bump_visits_row_major_order() {
    let dims = [2, 3, 2];
    let mut i = vec![0; 3];
    let mut n = 1;
    let l = Layout::row_major(3);
    while bump_indices(&dims, &mut i) {
        assert_eq!(linear_index(&dims, &l, &i).unwrap(), n);
        n += 1;
    }
    assert_eq!(n, 12);
}

fn shape_and_layout() -> impl Strategy<Value = (Vec<usize>, Layout, Option<Vec<usize>>)> {
    prop::collection::vec(0usize..5, 0..=5).prop_flat_map(|dims| {
        let n = dims.len();
        let perm = Just((0..n).collect::<Vec<usize>>()).prop_shuffle();
        let pads = prop::collection::vec(0usize..3, n);
        (Just(dims), perm, prop::option::of(pads)).prop_map(|(dims, perm, pads)| {
            let padded = pads.map(|p| dims.iter().zip(p).map(|(d, p)| d + p).collect::<Vec<_>>());
            (dims, Layout::new(perm).unwrap(), padded)
        })
    })
}

proptest! {
    #[test]
    fn round_trips((dims, layout, padded) in shape_and_layout()) {
        let layout = match padded {
            Some(p) => layout.with_padding(p, PaddingValue::Highest),
            None => layout,
        };
        let n: usize = dims.iter().product();
        let x = ArrayD::from_shape_vec(IxDyn(&dims), (0..n as i32).collect()).unwrap();
        let buf = to_buffer(&x, &layout).unwrap();
        prop_assert_eq!(buf.len(), layout.buffer_len(&dims).unwrap());
        let v = layout::view(&buf, &dims, &layout).unwrap();
        prop_assert_eq!(&v, &x);
        prop_assert_eq!(from_buffer(&buf, &dims, &layout).unwrap(), x.clone());
        // Padding holds the padding value, and every element sits where IndexUtil says.
        let mut data = 0;
        for (pos, &value) in buf.iter().enumerate() {
            match multi_index(&dims, &layout, pos) {
                Ok(idx) => {
                    prop_assert_eq!(value, x[idx.as_slice()]);
                    prop_assert_eq!(linear_index(&dims, &layout, &idx).unwrap(), pos);
                    data += 1;
                }
                Err(_) => prop_assert_eq!(value, i32::MAX),
            }
        }
        prop_assert_eq!(data, n);
        // layout_of gives an equivalent layout back: the same strides for every dim that
        // matters (size > 1), the same buffer.
        if n > 0 {
            let got = layout_of(&v).expect("a layout");
            let (want_s, got_s) = (layout.strides(&dims).unwrap(), got.strides(&dims).unwrap());
            for d in 0..dims.len() {
                if dims[d] > 1 {
                    prop_assert_eq!(want_s[d], got_s[d]);
                }
            }
            if dims.iter().all(|&d| d > 1) && layout.padded_dimensions().is_none() {
                prop_assert_eq!(got, layout);
            }
        }
    }
}

/// All permutations of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = vec![];
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
fn every_permutation_layout_round_trips() {
    for rank in 0..=5usize {
        // Sizes 2..=4 (distinct where possible) so that no dim is degenerate.
        let dims: Vec<usize> = (0..rank).map(|d| 2 + (d * 2) % 3).collect();
        let n: usize = dims.iter().product();
        let x = ArrayD::from_shape_vec(IxDyn(&dims), (0..n as u16).collect()).unwrap();
        let perms = permutations(rank);
        assert_eq!(perms.len(), (1..=rank).product::<usize>());
        for m2m in perms {
            let l = Layout::new(m2m).unwrap();
            let buf = to_buffer(&x, &l).unwrap();
            let v = layout::view(&buf, &dims, &l).unwrap();
            assert_eq!(v, x, "{l}");
            assert_eq!(layout_of(&v), Some(l.clone()), "{l}");
            let mut idx = vec![0; rank];
            loop {
                let lin = linear_index(&dims, &l, &idx).unwrap();
                assert_eq!(multi_index(&dims, &l, lin).unwrap(), idx);
                assert_eq!(buf[lin], x[idx.as_slice()]);
                if !bump_indices(&dims, &mut idx) {
                    break;
                }
            }
        }
    }
}
