//! The front door of every elementwise op: XLA's rule (or an operand's own shape) turns the
//! arrays into engine inputs seen at the output shape, and one engine call runs the op into a
//! fresh array, a caller's array or in place. [`crate::ops`] and [`crate::strict`] are written
//! over these.

use ndarray::{Array, ArrayRef, DimMax, Dimension, IxDyn};

use crate::engine::{self, Fresh, Src, ZipN};
use crate::error::{BroadcastError, Result};
use crate::shape::{binary_shape, elementwise, higher, same_dims, Dims};

/// The output dimension type of a binary op on `D` and `E`: ndarray's [`DimMax`]
/// (`Ix2` with `Ix1` gives `Ix2`, anything with `IxDyn` gives `IxDyn`).
///
/// ```
/// use ndarray::{array, Array, Ix1, Ix2};
/// use xla_bcast::ops::DimMaxOf;
/// use xla_bcast::prelude::*;
///
/// let r: Array<i32, DimMaxOf<Ix2, Ix1>> = array![[1, 2]].add_bcast(&array![3, 4], &[1]).unwrap();
/// assert_eq!(r, array![[4, 6]]);
/// ```
pub type DimMaxOf<D, E> = <D as DimMax<E>>::Output;

/// Both operands of a binary op seen at its output shape. The
/// rule's two simplest cases skip it: operands at their own shapes, and a scalar with an
/// operand at its own shape ([`own`]); otherwise XLA's rule decides the shape (kept in `out`)
/// and each operand's placement.
#[inline(always)]
fn operands<'o, A, B, D: Dimension, E: Dimension>(
    op: &'static str,
    lhs: &'o ArrayRef<A, D>,
    rhs: &'o ArrayRef<B, E>,
    dims: &[usize],
    out: &'o mut Dims,
) -> Result<(Src<'o, A>, Src<'o, B>)> {
    if let Some(r) = own(rhs, lhs.shape(), dims) {
        return Ok((Src::of(lhs), r));
    }
    if let Some(l) = own(lhs, rhs.shape(), dims) {
        return Ok((l, Src::of(rhs)));
    }
    let grown = binary_shape(op, lhs.shape(), rhs.shape(), dims, out)?;
    // Unless the higher-rank operand broadcasts, its own shape is the output's: seen at it,
    // nothing freshly written is read back on the hot path of small ops.
    let shape: &'o [usize] = match grown {
        false => higher(lhs.shape(), rhs.shape()),
        true => out,
    };
    Ok((place(op, lhs, shape, dims)?, place(op, rhs, shape, dims)?))
}

/// `a` read beside an operand at its own `shape` without the rule: at `a`'s own shape when it
/// is `shape` (XLA's rule at its simplest), or as a scalar; `None` otherwise.
#[inline(always)]
fn own<'a, A, D: Dimension>(
    a: &'a ArrayRef<A, D>,
    shape: &'a [usize],
    dims: &[usize],
) -> Option<Src<'a, A>> {
    if elementwise(shape, a.shape(), dims) {
        Some(Src::of(a))
    } else if dims.is_empty() {
        Src::scalar(a, shape)
    } else {
        None
    }
}

/// An operand placed in `out` as XLA's binary rule places it: by degenerate dims at the
/// output's rank, else (the lower-rank operand) by the op's `dims`.
#[inline(always)]
fn place<'a, A, D: Dimension>(
    op: &'static str,
    a: &'a ArrayRef<A, D>,
    out: &'a [usize],
    dims: &[usize],
) -> Result<Src<'a, A>> {
    if a.ndim() == out.len() {
        Src::degenerate(op, a, out)
    } else {
        Src::placed(op, a, out, dims)
    }
}

/// The output dimension, of the type the caller's types promise, for a result of `shape`.
pub(crate) fn out_dim<O: Dimension>(op: &'static str, shape: &[usize]) -> Result<O> {
    if let Some(rank) = O::NDIM.filter(|&n| n != shape.len()) {
        return Err(BroadcastError::ResultRank {
            op,
            shape: shape.into(),
            rank,
        });
    }
    let mut dim = O::zeros(shape.len());
    dim.slice_mut().copy_from_slice(shape);
    Ok(dim)
}

/// A fresh result converted to the dimension type the caller's types promise.
pub(crate) fn into_dim<C, O: Dimension>(
    op: &'static str,
    a: Array<C, IxDyn>,
) -> Result<Array<C, O>> {
    let shape: Box<[usize]> = a.shape().into();
    a.into_dimensionality::<O>()
        .map_err(|_| BroadcastError::ResultRank {
            op,
            rank: O::NDIM.unwrap_or(shape.len()),
            shape,
        })
}

/// `Ok` when an output or in-place array of shape `got` can take a result of shape `expected`.
pub(crate) fn check_out(op: &'static str, expected: &[usize], got: &[usize]) -> Result<()> {
    if same_dims(expected, got) {
        Ok(())
    } else {
        Err(BroadcastError::OutputShape {
            op,
            expected: expected.into(),
            got: got.into(),
        })
    }
}

/// That `grad`, the gradient of a binary op's result given to the adjoint, has the result's
/// shape (the operands' shapes broadcast).
pub(crate) fn check_grad(op: &'static str, expected: &[usize], got: &[usize]) -> Result<()> {
    check_out(op, expected, got).map_err(|_| BroadcastError::ArgumentShape {
        op,
        argument: "grad, the gradient of the op's result,".to_string(),
        expected: expected.into(),
        got: got.into(),
    })
}

/// The binary op family's one implementation: fresh output.
pub(crate) fn zip_collect<A, B, C, D, E>(
    op: &'static str,
    lhs: &ArrayRef<A, D>,
    rhs: &ArrayRef<B, E>,
    dims: &[usize],
    f: impl Fn(A, B) -> C + Sync,
) -> Result<Array<C, DimMaxOf<D, E>>>
where
    A: Clone + Sync,
    B: Clone + Sync,
    C: Send,
    D: Dimension + DimMax<E>,
    E: Dimension,
{
    let mut shape = Dims::new();
    let (l, r) = operands(op, lhs, rhs, dims, &mut shape)?;
    engine::collect(
        op,
        out_dim(op, l.shape())?,
        &ZipN::new(&f, (l, r)),
        Fresh::FollowInputs,
    )
}

/// `f` over every element into a fresh array of the same shape and dimension type.
pub(crate) fn map_collect<A, C, D>(
    op: &'static str,
    a: &ArrayRef<A, D>,
    f: impl Fn(A) -> C + Sync,
) -> Result<Array<C, D>>
where
    A: Clone + Sync,
    C: Send,
    D: Dimension,
{
    engine::collect(
        op,
        a.raw_dim(),
        &ZipN::new(&f, (Src::of(a),)),
        Fresh::FollowInputs,
    )
}

/// The binary op family's one implementation: into a caller's array.
pub(crate) fn zip_into<A, B, C, D, E, O>(
    op: &'static str,
    lhs: &ArrayRef<A, D>,
    rhs: &ArrayRef<B, E>,
    dims: &[usize],
    out: &mut ArrayRef<C, O>,
    f: impl Fn(A, B) -> C + Sync,
) -> Result<()>
where
    A: Clone + Sync,
    B: Clone + Sync,
    C: Send,
    D: Dimension,
    E: Dimension,
    O: Dimension,
{
    let mut shape = Dims::new();
    let (l, r) = operands(op, lhs, rhs, dims, &mut shape)?;
    check_out(op, l.shape(), out.shape())?;
    engine::into(out, &ZipN::new(&f, (l, r)));
    Ok(())
}

/// The binary op family's one implementation: in place, `lhs` already has the result shape.
pub(crate) fn zip_assign<A, B, D, E>(
    op: &'static str,
    lhs: &mut ArrayRef<A, D>,
    rhs: &ArrayRef<B, E>,
    dims: &[usize],
    f: impl Fn(A, B) -> A + Sync,
) -> Result<()>
where
    A: Clone + Send + Sync,
    B: Clone + Sync,
    D: Dimension,
    E: Dimension,
{
    // Seen at a copy of the shape: `lhs` is borrowed to be written.
    let own_shape = Dims::from_slice(lhs.shape());
    if let Some(r) = own(rhs, &own_shape, dims) {
        engine::assign(lhs, r, &f);
        return Ok(());
    }
    let mut shape = Dims::new();
    if !binary_shape(op, lhs.shape(), rhs.shape(), dims, &mut shape)? {
        shape = Dims::from_slice(higher(lhs.shape(), rhs.shape()));
    }
    check_out(op, &shape, lhs.shape())?;
    engine::assign(lhs, place(op, rhs, &shape, dims)?, &f);
    Ok(())
}

#[cfg(test)]
mod tests {
    use ndarray::{Array, Ix2, IxDyn};

    use super::{into_dim, out_dim};
    use crate::BroadcastError;

    /// A result whose rank the dimension type cannot hold is named as such: its shape and the
    /// two ranks, never an "expected == got" output-shape error.
    #[test]
    fn a_rank_the_dimension_type_cannot_hold() {
        let err = out_dim::<Ix2>("add", &[2, 3, 4]).unwrap_err();
        assert_eq!(
            err,
            BroadcastError::ResultRank {
                op: "add",
                shape: vec![2, 3, 4].into(),
                rank: 2
            }
        );
        assert_eq!(
            err.to_string(),
            "add: the result has shape [2, 3, 4] (rank 3), but its dimension type holds rank 2"
        );
        let a = Array::<i32, _>::zeros(IxDyn(&[5]));
        let err = into_dim::<i32, Ix2>("paddle", a).unwrap_err();
        assert!(
            matches!(err, BroadcastError::ResultRank { rank: 2, .. }),
            "{err}"
        );
        assert_eq!(out_dim::<Ix2>("add", &[2, 3]).unwrap(), Ix2(2, 3));
    }
}
