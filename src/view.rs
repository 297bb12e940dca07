//! Zero-copy broadcast views: every operand of every op is first seen at the output shape,
//! with stride 0 on new and degenerate dims and its own strides (permuted) elsewhere.

use ndarray::{ArrayView, Axis, Dimension, IxDyn, ShapeBuilder};

use smallvec::SmallVec;

use crate::error::Result;
use crate::shape::in_dim_check;

/// Strides at the output shape of an operand placed by `broadcast_in_dim` dims that a shape
/// rule has accepted: its own stride on kept dims, 0 on new and degenerate dims (operand 1,
/// output not 1), where the element repeats.
pub(crate) fn place_strides(
    shape: &[usize],
    strides: &[isize],
    out_shape: &[usize],
    dims: &[usize],
) -> SmallVec<[isize; 6]> {
    let mut placed: SmallVec<[isize; 6]> = smallvec::smallvec![0; out_shape.len()];
    for (i, &d) in dims.iter().enumerate() {
        if shape[i] == out_shape[d] {
            placed[d] = strides[i];
        }
    }
    placed
}

/// `BroadcastInDim` as a view: `v` seen at `out_shape`, operand dim `i` placed at output dim
/// `dims[i]`. Never copies.
pub(crate) fn broadcast_in_dim_view<'a, A, D: Dimension>(
    op: &'static str,
    v: ArrayView<'a, A, D>,
    out_shape: &[usize],
    dims: &[usize],
) -> Result<ArrayView<'a, A, IxDyn>> {
    in_dim_check(op, v.shape(), out_shape, dims)?;
    let mut strides = place_strides(v.shape(), v.strides(), out_shape, dims);
    // ndarray builds views from non-negative strides only: start at the lowest address of each
    // reversed axis, then reverse that axis again on the view.
    let mut ptr = v.as_ptr();
    let mut reversed: SmallVec<[usize; 6]> = SmallVec::new();
    for (d, s) in strides.iter_mut().enumerate() {
        if *s < 0 {
            let n = out_shape[d];
            if n > 0 {
                // SAFETY: (n - 1) * s is the offset of the last element along this axis of the
                // operand, so the result stays inside the operand's allocation.
                ptr = unsafe { ptr.offset(*s * (n as isize - 1)) };
                reversed.push(d);
            }
            *s = -*s;
        }
    }
    let strides: SmallVec<[usize; 6]> = strides.into_iter().map(|s| s as usize).collect();
    // SAFETY: every index of the new view maps to an index of `v` (the same index on kept dims,
    // 0 on new and degenerate dims), so every address it can reach is an element of `v`, alive
    // and not mutably aliased for 'a; `in_dim_check` bounded the element count by isize::MAX;
    // the byte span is at most `v`'s; strides are non-negative as required.
    let mut view =
        unsafe { ArrayView::from_shape_ptr(IxDyn(out_shape).strides(IxDyn(&strides)), ptr) };
    for d in reversed {
        view.invert_axis(Axis(d));
    }
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, s};

    #[test]
    fn negative_strides_survive() {
        let a = array![[1, 2, 3], [4, 5, 6]];
        let r = a.slice(s![..;-1, ..;-1]);
        let v = broadcast_in_dim_view("t", r, &[2, 2, 3], &[0, 2]).unwrap();
        assert_eq!(
            v,
            array![[[6, 5, 4], [6, 5, 4]], [[3, 2, 1], [3, 2, 1]]].into_dyn()
        );
        assert_eq!(v.strides(), &[-3, 0, -1]);
    }

    #[test]
    fn transposing_dims() {
        let a = array![[1, 2, 3], [4, 5, 6]];
        let v = broadcast_in_dim_view("t", a.view(), &[3, 2], &[1, 0]).unwrap();
        assert_eq!(v, a.t().into_dyn());
        assert_eq!(v.as_ptr(), a.as_ptr());
    }
}
