//! XLA's IndexUtil: linear <-> multi-dimensional indices under a layout, index bumping, and
//! Python-style dim normalisation.
//!
//! ```
//! use xla_bcast::index::{linear_index, multi_index};
//! use xla_bcast::layout::Layout;
//!
//! let col_major = Layout::col_major(2);
//! assert_eq!(linear_index(&[2, 3], &col_major, &[1, 2]).unwrap(), 5);
//! assert_eq!(multi_index(&[2, 3], &col_major, 5).unwrap(), vec![1, 2]);
//! ```

use crate::error::{BroadcastError, Result};
use crate::layout::Layout;

fn out_of_range(op: &'static str, dims: &[usize], what: String) -> BroadcastError {
    BroadcastError::IndexOutOfRange {
        op,
        dims: dims.into(),
        what,
    }
}

/// The position in a buffer of `dims` in `layout` (padding included) of `multi_index`.
///
/// ```
/// use xla_bcast::index::linear_index;
/// use xla_bcast::layout::Layout;
///
/// assert_eq!(linear_index(&[2, 3], &Layout::row_major(2), &[1, 2]).unwrap(), 5);
/// assert_eq!(linear_index(&[2, 3], &Layout::col_major(2), &[1, 2]).unwrap(), 5);
/// assert_eq!(linear_index(&[2, 3], &Layout::col_major(2), &[0, 1]).unwrap(), 2);
/// assert!(linear_index(&[2, 3], &Layout::row_major(2), &[2, 0]).is_err());
/// ```
pub fn linear_index(dims: &[usize], layout: &Layout, multi_index: &[usize]) -> Result<usize> {
    let strides = layout.strides(dims)?;
    if multi_index.len() != dims.len() || multi_index.iter().zip(dims).any(|(i, n)| i >= n) {
        return Err(out_of_range(
            "linear_index",
            dims,
            format!("index {multi_index:?}"),
        ));
    }
    // Each term is below the buffer length, which `strides` checked fits isize.
    Ok(multi_index.iter().zip(&strides).map(|(i, s)| i * s).sum())
}

/// The multi-dimensional index at position `linear` of a buffer of `dims` in `layout`; an
/// error when `linear` is past the end or lands on padding.
///
/// ```
/// use xla_bcast::index::multi_index;
/// use xla_bcast::layout::{Layout, PaddingValue};
///
/// assert_eq!(multi_index(&[2, 3], &Layout::col_major(2), 2).unwrap(), vec![0, 1]);
/// let padded = Layout::col_major(2).with_padding(vec![3, 5], PaddingValue::Zero);
/// assert_eq!(multi_index(&[2, 3], &padded, 3).unwrap(), vec![0, 1]);
/// assert!(multi_index(&[2, 3], &padded, 2).is_err()); // padding
/// assert!(multi_index(&[2, 3], &Layout::row_major(2), 6).is_err());
/// ```
pub fn multi_index(dims: &[usize], layout: &Layout, linear: usize) -> Result<Vec<usize>> {
    let strides = layout.strides(dims)?;
    let len = layout.buffer_len(dims)?;
    if linear >= len {
        return Err(out_of_range(
            "multi_index",
            dims,
            format!("linear index {linear} (buffer of {len})"),
        ));
    }
    let mut index = vec![0; dims.len()];
    let mut rest = linear;
    for &d in layout.minor_to_major().iter().rev() {
        index[d] = rest / strides[d];
        rest %= strides[d];
        if index[d] >= dims[d] {
            return Err(out_of_range(
                "multi_index",
                dims,
                format!("linear index {linear} (it lies in the padding of dim {d})"),
            ));
        }
    }
    Ok(index)
}

/// Advances `indices` to the next index of `dims`, last index fastest (row-major order);
/// `false` once past the last index (or when `indices` does not fit `dims`).
///
/// ```
/// use xla_bcast::index::bump_indices;
///
/// let mut i = [0, 2];
/// assert!(bump_indices(&[2, 3], &mut i));
/// assert_eq!(i, [1, 0]);
/// let mut last = [1, 2];
/// assert!(!bump_indices(&[2, 3], &mut last));
/// ```
pub fn bump_indices(dims: &[usize], indices: &mut [usize]) -> bool {
    if indices.len() != dims.len() || indices.iter().zip(dims).any(|(i, n)| i >= n) {
        return false;
    }
    for d in (0..dims.len()).rev() {
        indices[d] += 1;
        if indices[d] < dims[d] {
            return true;
        }
        indices[d] = 0;
    }
    false
}

/// A Python-style dim (`-1` is the last) as an index below `rank`.
///
/// ```
/// use xla_bcast::index::normalize_dim;
/// assert_eq!(normalize_dim(-1, 3).unwrap(), 2);
/// assert_eq!(normalize_dim(0, 3).unwrap(), 0);
/// assert!(normalize_dim(3, 3).is_err());
/// assert!(normalize_dim(-4, 3).is_err());
/// ```
pub fn normalize_dim(dim: isize, rank: usize) -> Result<usize> {
    let d = if dim >= 0 {
        Some(dim as usize).filter(|&d| d < rank)
    } else {
        rank.checked_sub(dim.unsigned_abs())
    };
    d.ok_or_else(|| BroadcastError::IndexOutOfRange {
        op: "normalize_dim",
        dims: Box::new([]),
        what: format!("dim {dim} for rank {rank}"),
    })
}
