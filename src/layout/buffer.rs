//! Buffers in any XLA layout: zero-copy views and relayout copies.

use ndarray::{Array, ArrayRef, ArrayView, ArrayViewMut, Dimension, IxDyn};

use super::Layout;
use crate::element::XlaOrd;
use crate::engine::{self, Fresh, Src, ZipN};
use crate::error::{BroadcastError, Result};

/// A zero-copy view of `buffer`, an array of `dims` in `layout` (padding skipped).
///
/// # Errors
/// A layout that does not fit `dims`, or a buffer shorter than
/// [`Layout::buffer_len`].
///
/// ```
/// use ndarray::array;
/// use xla_bcast::layout::{self, Layout, PaddingValue};
///
/// // a d 0 b e 0 c f 0 0 0 0 0 0 0: 2x3 in {0,1} padded to 3x5.
/// let buf = [1, 4, 0, 2, 5, 0, 3, 6, 0, 0, 0, 0, 0, 0, 0];
/// let l = Layout::col_major(2).with_padding(vec![3, 5], PaddingValue::Zero);
/// let a = layout::view(&buf, &[2, 3], &l).unwrap();
/// assert_eq!(a, array![[1, 2, 3], [4, 5, 6]].into_dyn());
/// ```
pub fn view<'a, A>(
    buffer: &'a [A],
    dims: &[usize],
    layout: &Layout,
) -> Result<ArrayView<'a, A, IxDyn>> {
    let (shape, used) = layout.stride_shape("view", dims, buffer.len())?;
    ArrayView::from_shape(shape, &buffer[..used])
        .map_err(|e| layout.error("view", dims, format!("ndarray refused the strides: {e}")))
}

/// A zero-copy mutable view of `buffer`, an array of `dims` in `layout` (padding skipped).
///
/// ```
/// use xla_bcast::layout::{self, Layout};
///
/// let mut buf = [0; 6];
/// layout::view_mut(&mut buf, &[2, 3], &Layout::col_major(2)).unwrap()[[0, 1]] = 7;
/// assert_eq!(buf, [0, 0, 7, 0, 0, 0]);
/// ```
pub fn view_mut<'a, A>(
    buffer: &'a mut [A],
    dims: &[usize],
    layout: &Layout,
) -> Result<ArrayViewMut<'a, A, IxDyn>> {
    let (shape, used) = layout.stride_shape("view_mut", dims, buffer.len())?;
    ArrayViewMut::from_shape(shape, &mut buffer[..used]).map_err(|e| {
        layout.error(
            "view_mut",
            dims,
            format!("ndarray refused the strides: {e}"),
        )
    })
}

/// A relayout copy: `array` (any ndarray array or view, any strides) written into a new buffer
/// in `layout`, padding filled with the layout's padding value. Large copies run in parallel.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::layout::{self, Layout, PaddingValue};
///
/// let a = array![[1, 2, 3], [4, 5, 6]];
/// assert_eq!(layout::to_buffer(&a, &Layout::row_major(2)).unwrap(), vec![1, 2, 3, 4, 5, 6]);
/// assert_eq!(layout::to_buffer(&a, &Layout::col_major(2)).unwrap(), vec![1, 4, 2, 5, 3, 6]);
/// let l = Layout::row_major(2).with_padding(vec![2, 4], PaddingValue::Highest);
/// assert_eq!(layout::to_buffer(&a, &l).unwrap(), vec![1, 2, 3, i32::MAX, 4, 5, 6, i32::MAX]);
/// ```
pub fn to_buffer<A: XlaOrd, D: Dimension>(
    array: &ArrayRef<A, D>,
    layout: &Layout,
) -> Result<Vec<A>> {
    let dims = array.shape();
    let len = layout.buffer_len_for("to_buffer", dims)?;
    let (shape, used) = layout.stride_shape("to_buffer", dims, len)?;
    let mut buffer: Vec<A> =
        engine::with_capacity(len).ok_or_else(|| BroadcastError::Allocation {
            op: "to_buffer",
            shape: Box::new([len]),
            bytes: len.checked_mul(std::mem::size_of::<A>()),
        })?;
    let slots = &mut buffer.spare_capacity_mut()[..len];
    let padded = layout.padded_dimensions.is_some() && len != array.len();
    if padded {
        let pad = layout.padding_value.value::<A>();
        for s in slots.iter_mut() {
            s.write(pad);
        }
    }
    let mut out = ArrayViewMut::from_shape(shape, &mut slots[..used]).map_err(|e| {
        layout.error(
            "to_buffer",
            dims,
            format!("ndarray refused the strides: {e}"),
        )
    })?;
    engine::into(&mut out, &ZipN::new(&|x: A| x, (Src::of(array),)));
    // SAFETY: without padding the layout's strides map the array's elements one-to-one onto
    // 0..len, all written by the engine pass; with padding every slot was written first.
    unsafe { buffer.set_len(len) };
    Ok(buffer)
}

/// An owned copy, in ndarray's standard (row-major) layout, of `buffer` holding an array of
/// `dims` in `layout`.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::layout::{self, Layout};
///
/// let a = layout::from_buffer(&[1, 4, 2, 5, 3, 6], &[2, 3], &Layout::col_major(2)).unwrap();
/// assert_eq!(a, array![[1, 2, 3], [4, 5, 6]].into_dyn());
/// assert!(a.is_standard_layout());
/// ```
pub fn from_buffer<A: Clone + Send + Sync>(
    buffer: &[A],
    dims: &[usize],
    layout: &Layout,
) -> Result<Array<A, IxDyn>> {
    let v = view(buffer, dims, layout).map_err(|e| rename(e, "from_buffer"))?;
    // Standard layout whatever the buffer's, as documented: no inputs to follow.
    let copy = ZipN::new(&|x: A| x, (Src::of(&v),));
    engine::collect("from_buffer", IxDyn(dims), &copy, Fresh::Standard)
}

fn rename(e: BroadcastError, op: &'static str) -> BroadcastError {
    match e {
        BroadcastError::Layout {
            layout,
            dims,
            reason,
            ..
        } => BroadcastError::Layout {
            op,
            layout,
            dims,
            reason,
        },
        BroadcastError::BufferTooShort {
            dims, needed, got, ..
        } => BroadcastError::BufferTooShort {
            op,
            dims,
            needed,
            got,
        },
        other => other,
    }
}
