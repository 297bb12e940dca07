//! The adjoint of broadcasting: a result reduced back to an operand's shape.
//!
//! The gradient of `broadcast_in_dim(x)` is the incoming gradient summed over the dims the
//! broadcast created (new dims, and dims where `x` has size 1), with an unsorted
//! `broadcast_dimensions` transposed back. [`ReduceInDim::reduce_in_dim`] is exactly that;
//! [`unbroadcast_grads`] gives both gradients of an `add`/`sub`-style binary op, and
//! [`crate::numpy::sum_to_shape`] / [`crate::paddle::unbroadcast_grads`] do the same for the
//! wrappers' rules. Reductions run on the kernel engine, in parallel, and their result does not
//! depend on the number of threads.
//!
//! ```
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//!
//! let x = array![1.0, 2.0];
//! let y = array![[1.0, 10.0], [100.0, 1000.0], [0.5, 0.25]];
//! // <broadcast_in_dim(x), y> == <x, reduce_in_dim(y)>
//! let bx = x.broadcast_in_dim(&[3, 2], &[1]).unwrap();
//! let ry = y.reduce_in_dim(&[2], &[1]).unwrap();
//! assert_eq!((&bx * &y).sum(), (&x.clone().into_dyn() * &ry).sum());
//! assert_eq!(ry, array![101.5, 1010.25].into_dyn());
//! ```

use std::sync::Mutex;

use ndarray::{Array, ArrayD, ArrayRef, ArrayView2, ArrayViewD, Axis, CowArray, Dimension, IxDyn};

use crate::element::{XlaElement, XlaOrd};
use crate::engine::{self, Fold, FoldOrder};
use crate::error::Result;
use crate::front::check_grad;
use crate::ops::sealed::Sealed;
use crate::shape::{binary_plan, reduce_in_dim_check, ShapeArg};
use crate::zip::{kept_check, KeptDims};

/// Reductions back to an operand's shape, on every ndarray array and view.
///
/// ```
/// use ndarray::{array, Array1};
/// use xla_bcast::prelude::*;
///
/// let grad = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let bias_grad: Array1<f64> = grad.reduce_in_dim(3, &[1]).unwrap(); // a (3,) bias along dim 1
/// assert_eq!(bias_grad, array![5.0, 7.0, 9.0]);
/// ```
pub trait ReduceInDim<A, D: Dimension>: Sealed<A, D> {
    /// The adjoint of [`broadcast_in_dim`](crate::ops::BroadcastInDim::broadcast_in_dim): this
    /// array (of the broadcast's output shape) summed back to `operand_shape`.
    ///
    /// `broadcast_dimensions` are the broadcast's: the dims of this array that the result
    /// **keeps**, result dim `i` being this array's dim `broadcast_dimensions[i]`. Every other
    /// dim (and every kept dim where the result has size 1) is summed away. They are not
    /// NumPy's `axis`, which names the dims summed away:
    ///
    /// | NumPy, on a `(4, 5)` array `a` | here |
    /// |---|---|
    /// | `a.sum(axis=0)` (shape `(5,)`) | `a.reduce_in_dim(5, &[1])` |
    /// | `a.sum(axis=1)` (shape `(4,)`) | `a.reduce_in_dim(4, &[0])` |
    /// | `a.sum(axis=0, keepdims=True)` | `a.reduce_in_dim((1, 5), &[0, 1])` |
    /// | `a.sum()` | `a.reduce_in_dim((), &[])` |
    ///
    /// # Errors
    /// [`BroadcastError::ReduceInDims`](crate::BroadcastError::ReduceInDims) when
    /// `operand_shape` with `broadcast_dimensions` does not broadcast to this array's shape (the
    /// checks of `broadcast_in_dim`); its message suggests the dims that fit.
    /// [`BroadcastError::Allocation`](crate::BroadcastError::Allocation) when the result cannot
    /// be allocated.
    ///
    /// ```
    /// use ndarray::{array, Array1};
    /// use xla_bcast::prelude::*;
    ///
    /// let g = array![[1, 2, 3], [4, 5, 6]];
    /// assert_eq!(g.reduce_in_dim(&[3], &[1]).unwrap(), array![5, 7, 9].into_dyn());
    /// // NumPy's g.sum(axis=0): the result keeps dim 1.
    /// let cols: Array1<i32> = g.reduce_in_dim(3, &[1]).unwrap();
    /// assert_eq!(cols, array![5, 7, 9]);
    /// // Naming the axis summed (0) instead is an error that says so and suggests [1].
    /// let err = g.reduce_in_dim(3, &[0]).unwrap_err().to_string();
    /// assert!(err.contains("not the axes summed") && err.contains("[1] fits"), "{err}");
    /// assert_eq!(g.reduce_in_dim(&[2, 1], &[0, 1]).unwrap(), array![[6], [15]].into_dyn());
    /// assert_eq!(g.reduce_in_dim(&[3, 2], &[1, 0]).unwrap(), g.t().into_dyn()); // transpose back
    /// assert!(g.reduce_in_dim(&[2], &[1]).is_err());
    /// // A shape given as an array or tuple keeps a fixed-rank dimension type.
    /// let col: ndarray::Array2<i32> = g.reduce_in_dim([2, 1], &[0, 1]).unwrap();
    /// assert_eq!(col, array![[6], [15]]);
    /// ```
    fn reduce_in_dim<Sh: ShapeArg>(
        &self,
        operand_shape: Sh,
        broadcast_dimensions: &[usize],
    ) -> Result<Array<A, Sh::Dim>>
    where
        A: XlaElement,
    {
        let zero = A::xla_zero();
        reduce_fresh(
            "reduce_in_dim",
            self.array(),
            operand_shape.into_dim(),
            broadcast_dimensions,
            sum_fold(&zero),
        )
    }

    /// [`reduce_in_dim`](ReduceInDim::reduce_in_dim) with any associative reduction `f` and its
    /// `identity` (sum: `0` and `+`; max: [`XlaOrd::xla_lowest`](crate::element::XlaOrd) and
    /// `xla_max`; product: `1` and `*`; ...).
    ///
    /// For XLA's max and min over floats, fold with [`XlaOrd`]'s
    /// `xla_max` and `xla_min`, not `f32::max`: std's drops a NaN (`f32::max(NaN, 3.0)` is
    /// `3.0`), where XLA's `max` propagates it, as [`max_bcast`](crate::ops::ArithBcast::max_bcast) and
    /// the programs' `reduce_max` do.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let x = array![[1.0, f32::NAN, 3.0]];
    /// let xla = x.reduce_in_dim_with([1], &[0], f32::xla_lowest(), f32::xla_max).unwrap();
    /// assert!(xla[0].is_nan()); // XLA's max: NaN wins
    /// let std = x.reduce_in_dim_with([1], &[0], f32::NEG_INFINITY, f32::max).unwrap();
    /// assert_eq!(std[0], 3.0); // std's max skips it
    /// ```
    ///
    /// `f` need not be commutative: the elements that fold into one result element are combined
    /// in their row-major index order in this array (grouped differently, as associativity
    /// allows, and the same way whatever the number of threads), so string concatenation or
    /// a product of matrices comes out in order. `f(identity, x)` must be `x`. The sums of
    /// [`reduce_in_dim`](ReduceInDim::reduce_in_dim) are free to reorder (XLA's `add` is
    /// commutative), which vectorises.
    ///
    /// # Errors
    /// As [`reduce_in_dim`](ReduceInDim::reduce_in_dim), and
    /// [`BroadcastError::Allocation`](crate::BroadcastError::Allocation) when the result (or a
    /// partial result of a parallel fold) cannot be allocated.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let g = array![[1, 9, 3], [4, 5, 6]];
    /// let m = g.reduce_in_dim_with(&[3], &[1], i32::MIN, |a, b| a.max(b)).unwrap();
    /// assert_eq!(m, array![4, 9, 6].into_dyn());
    /// let p = g.reduce_in_dim_with(&[2, 1], &[0, 1], 1, |a, b| a * b).unwrap();
    /// assert_eq!(p, array![[27], [120]].into_dyn());
    /// ```
    fn reduce_in_dim_with<Sh: ShapeArg, F>(
        &self,
        operand_shape: Sh,
        broadcast_dimensions: &[usize],
        identity: A,
        f: F,
    ) -> Result<Array<A, Sh::Dim>>
    where
        A: Clone + Send + Sync,
        F: Fn(A, A) -> A + Sync + Send,
    {
        reduce_fresh(
            "reduce_in_dim",
            self.array(),
            operand_shape.into_dim(),
            broadcast_dimensions,
            Fold::new(&identity, &f, FoldOrder::Index),
        )
    }

    /// [`reduce_in_dim`](ReduceInDim::reduce_in_dim) into `out`, whose shape is the operand's.
    /// Its previous contents are overwritten; on error nothing is written.
    ///
    /// ```
    /// use ndarray::{array, Array1};
    /// use xla_bcast::prelude::*;
    ///
    /// let mut out = Array1::from_elem(3, 99);
    /// array![[1, 2, 3], [4, 5, 6]].reduce_in_dim_into(&[1], &mut out).unwrap();
    /// assert_eq!(out, array![5, 7, 9]);
    /// ```
    fn reduce_in_dim_into<E: Dimension>(
        &self,
        broadcast_dimensions: &[usize],
        out: &mut ArrayRef<A, E>,
    ) -> Result<()>
    where
        A: XlaElement,
    {
        let zero = A::xla_zero();
        reduce_checked(
            "reduce_in_dim",
            self.array(),
            broadcast_dimensions,
            sum_fold(&zero),
            out,
        )
    }

    /// [`reduce_in_dim_with`](ReduceInDim::reduce_in_dim_with) into `out`, whose shape is the
    /// operand's, combining in the same order. Its previous contents are overwritten; on error
    /// nothing is written.
    ///
    /// ```
    /// use ndarray::{array, Array1};
    /// use xla_bcast::prelude::*;
    ///
    /// let mut out = Array1::zeros(2);
    /// array![[1.0, 7.0], [3.0, 2.0]].reduce_in_dim_with_into(&[0], f64::INFINITY, f64::xla_min, &mut out).unwrap();
    /// assert_eq!(out, array![1.0, 2.0]);
    /// ```
    fn reduce_in_dim_with_into<E: Dimension, F>(
        &self,
        broadcast_dimensions: &[usize],
        identity: A,
        f: F,
        out: &mut ArrayRef<A, E>,
    ) -> Result<()>
    where
        A: Clone + Send + Sync,
        F: Fn(A, A) -> A + Sync + Send,
    {
        reduce_checked(
            "reduce_in_dim",
            self.array(),
            broadcast_dimensions,
            Fold::new(&identity, &f, FoldOrder::Index),
            out,
        )
    }

    /// The index of the smallest element for each index of `kept_dims` (the result's dims, as
    /// [`StrictZip::fold_in_dims`](crate::zip::StrictZip) keeps them): its position among the
    /// elements over the other dims, counted in row-major order over them (with one other dim,
    /// its index along it). XLA's and JAX's `argmin`: the first index of the minimum, and a NaN
    /// counts as the minimum (the first NaN's index); `-0.0` and `+0.0` tie. In parallel; the
    /// result does not depend on the number of threads.
    ///
    /// ```
    /// use ndarray::{array, Array1};
    /// use xla_bcast::prelude::*;
    ///
    /// let d = array![[4.0, 1.0, 1.0], [2.0, f32::NAN, 0.0]];
    /// let nearest: Array1<usize> = d.argmin_in_dims([0]).unwrap(); // per row
    /// assert_eq!(nearest, array![1, 1]); // the first of the ties; NaN wins
    /// assert_eq!(d.argmin_in_dims([1]).unwrap(), array![1, 1, 1]); // per column
    /// assert_eq!(d.argmin_in_dims(&[][..]).unwrap()[[]], 4); // over all, row-major
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::InDimInvalid`](crate::BroadcastError::InDimInvalid) when a kept dim
    /// is out of range or repeats, or when the other dims hold no element (an empty set has
    /// no minimum) while the result has some;
    /// [`BroadcastError::Allocation`](crate::BroadcastError::Allocation) when the result
    /// cannot be allocated.
    fn argmin_in_dims<K: KeptDims>(&self, kept_dims: K) -> Result<Array<usize, K::Dim>>
    where
        A: XlaOrd,
    {
        let found =
            arg_extreme::<A, false>("argmin", self.array().view().into_dyn(), kept_dims.dims());
        crate::front::into_dim("argmin", found?)
    }

    /// The index of the largest element for each index of `kept_dims`:
    /// [`argmin_in_dims`](ReduceInDim::argmin_in_dims) for the maximum (a NaN counts as the
    /// maximum).
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let x = array![[3, 7, 7], [9, 2, 9]];
    /// assert_eq!(x.argmax_in_dims([0]).unwrap(), array![1, 0]);
    /// ```
    ///
    /// # Errors
    /// As [`argmin_in_dims`](ReduceInDim::argmin_in_dims).
    fn argmax_in_dims<K: KeptDims>(&self, kept_dims: K) -> Result<Array<usize, K::Dim>>
    where
        A: XlaOrd,
    {
        let found =
            arg_extreme::<A, true>("argmax", self.array().view().into_dyn(), kept_dims.dims());
        crate::front::into_dim("argmax", found?)
    }
}

/// For each dim of the broadcast output, the operand dim it came from.
fn operand_dim_of(out_rank: usize, dims: &[usize]) -> Vec<Option<usize>> {
    let mut from = vec![None; out_rank];
    for (i, &d) in dims.iter().enumerate() {
        from[d] = Some(i);
    }
    from
}

fn reduce_checked<A, D, E, F, G>(
    op: &'static str,
    src: &ArrayRef<A, D>,
    dims: &[usize],
    fold: Fold<'_, A, F, G>,
    out: &mut ArrayRef<A, E>,
) -> Result<()>
where
    A: Clone + Send + Sync,
    D: Dimension,
    E: Dimension,
    F: Fn(A, A) -> A + Sync,
    G: Fn(A, A) -> A + Sync,
{
    reduce_in_dim_check(op, out.shape(), src.shape(), dims)?;
    let from = operand_dim_of(src.ndim(), dims);
    engine::reduce(op, out, &from, src, fold, true)
}

/// The sum's fold: XLA's `add` from zero in any order, its lanes with one instruction each
/// ([`XlaElement::xla_add_lanes`], a lane that ends NaN folded again with `xla_add`).
pub(crate) fn sum_fold<A: XlaElement>(
    zero: &A,
) -> Fold<'_, A, impl Fn(A, A) -> A + Sync, impl Fn(A, A) -> A + Sync> {
    Fold {
        identity: zero,
        f: &A::xla_add,
        order: FoldOrder::Any,
        lanes: &A::xla_add_lanes,
        #[allow(clippy::eq_op)] // NaN is the one value unequal to itself
        nan: |x| x != x,
    }
}

impl<A, D: Dimension> ReduceInDim<A, D> for ArrayRef<A, D> {}

/// The fresh form of [`reduce_checked`]: checks before allocating (the operand shape may be
/// absurd), and the allocation already holds the identity.
pub(crate) fn reduce_fresh<A, D, O>(
    op: &'static str,
    src: &ArrayRef<A, D>,
    operand_shape: O,
    dims: &[usize],
    fold: Fold<'_, A, impl Fn(A, A) -> A + Sync, impl Fn(A, A) -> A + Sync>,
) -> Result<Array<A, O>>
where
    A: Clone + Send + Sync,
    D: Dimension,
    O: Dimension,
{
    reduce_in_dim_check(op, operand_shape.slice(), src.shape(), dims)?;
    let mut out = engine::filled(op, operand_shape, fold.identity)?;
    let from = operand_dim_of(src.ndim(), dims);
    engine::reduce(op, &mut out, &from, src, fold, false)?;
    Ok(out)
}

/// The gradients of both operands of an `add`/`sub`-style XLA binary op (`lhs` and `rhs` with
/// `broadcast_dimensions`), given the gradient of its result: `grad` summed back to each
/// operand's shape. (For `sub`, negate the second.) An operand of the result's shape gets
/// `grad` itself, borrowed: no copy.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::reduce::unbroadcast_grads;
///
/// let grad = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let (gl, gr) = unbroadcast_grads(&[2, 3], &[3], &[1], &grad).unwrap();
/// assert_eq!(gl, grad.clone().into_dyn());
/// assert!(gl.is_view()); // `grad`, not a copy
/// assert_eq!(gr, array![5.0, 7.0, 9.0].into_dyn());
/// // Shapes as arrays or tuples: fixed-rank gradients.
/// let (gl, gr): (ndarray::CowArray<f64, ndarray::Ix2>, ndarray::CowArray<f64, ndarray::Ix1>) =
///     unbroadcast_grads((2, 3), [3], &[1], &grad).unwrap();
/// assert_eq!((gl.into_owned(), gr.into_owned()), (grad.clone(), array![5.0, 7.0, 9.0]));
/// ```
#[allow(clippy::type_complexity)]
pub fn unbroadcast_grads<'g, A, D, L, R>(
    lhs_shape: L,
    rhs_shape: R,
    broadcast_dimensions: &[usize],
    grad: &'g ArrayRef<A, D>,
) -> Result<(CowArray<'g, A, L::Dim>, CowArray<'g, A, R::Dim>)>
where
    A: XlaElement,
    D: Dimension,
    L: ShapeArg,
    R: ShapeArg,
{
    let op = "unbroadcast_grads";
    let (lhs_shape, rhs_shape) = (lhs_shape.into_dim(), rhs_shape.into_dim());
    let plan = binary_plan(
        op,
        lhs_shape.slice(),
        rhs_shape.slice(),
        broadcast_dimensions,
    )?;
    check_grad(op, &plan.out, grad.shape())?;
    fn sum<'g, A: XlaElement, D: Dimension, O: Dimension>(
        grad: &'g ArrayRef<A, D>,
        shape: O,
        dims: &[usize],
    ) -> Result<CowArray<'g, A, O>> {
        borrowed_or_summed(grad, shape, |shape| {
            let zero = A::xla_zero();
            reduce_fresh("unbroadcast_grads", grad, shape, dims, sum_fold(&zero))
        })
    }
    Ok((
        sum(grad, lhs_shape, &plan.lhs_dims)?,
        sum(grad, rhs_shape, &plan.rhs_dims)?,
    ))
}

/// `grad` as an operand's gradient of shape `shape`: `grad` itself, borrowed, when it already
/// has that shape; else `sum(shape)`, the fresh sum. Shared by every `unbroadcast_grads`.
pub(crate) fn borrowed_or_summed<'g, A, D: Dimension, O: Dimension>(
    grad: &'g ArrayRef<A, D>,
    shape: O,
    sum: impl FnOnce(O) -> Result<Array<A, O>>,
) -> Result<CowArray<'g, A, O>> {
    if grad.shape() == shape.slice() {
        if let Ok(view) = grad.view().into_dimensionality::<O>() {
            return Ok(CowArray::from(view));
        }
    }
    sum(shape).map(CowArray::from)
}

/// Whether `a` displaces `b` as the extreme so far (the maximum with `MAX`, else the minimum):
/// a NaN displaces any other value, and nothing displaces a NaN or an equal value, so a scan in
/// index order keeps the first index of the extreme. As a total order of (NaN first, value,
/// index) it is also what the programs' reduce region computes in any order.
#[inline(always)]
fn displaces<A: XlaOrd, const MAX: bool>(a: &A, b: &A) -> bool {
    #[allow(clippy::eq_op)]
    let (a_nan, b_nan) = (a != a, b != b);
    match MAX {
        true => a > b || (a_nan && !b_nan),
        false => a < b || (a_nan && !b_nan),
    }
}

/// The index of the extreme of a row (not empty).
#[inline(always)]
fn arg_of_row<'a, A: XlaOrd + 'a, const MAX: bool>(row: impl Iterator<Item = &'a A>) -> usize {
    let (mut best, mut at) = (None::<&A>, 0);
    for (j, x) in row.enumerate() {
        if best.is_none_or(|b| displaces::<A, MAX>(x, b)) {
            (best, at) = (Some(x), j);
        }
    }
    at
}

/// The index of the extreme of a contiguous row (not empty), in two passes that vectorise: the
/// extreme over 16 lanes (any order gives it: [`displaces`] is a total order), then the first
/// element equal to it (or the first NaN).
#[inline(always)]
fn arg_of_slice<A: XlaOrd, const MAX: bool>(row: &[A]) -> usize {
    let mut lanes = [row[0]; 16];
    let chunks = row.chunks_exact(16);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (b, x) in lanes.iter_mut().zip(chunk) {
            if displaces::<A, MAX>(x, b) {
                *b = *x;
            }
        }
    }
    let mut m = row[0];
    for x in lanes.iter().chain(tail) {
        if displaces::<A, MAX>(x, &m) {
            m = *x;
        }
    }
    #[allow(clippy::eq_op)]
    let nan = m != m;
    #[allow(clippy::eq_op)]
    let at = row.iter().position(|x| if nan { x != x } else { *x == m });
    at.unwrap_or(0)
}

/// `argmin_in_dims` (`argmax_in_dims` with `MAX`) of `x` at rank-free shapes: rows of the
/// kept elements read as slices where the other dims follow them in memory, columns updated
/// row by row where they precede them, else each kept element's elements in turn.
pub(crate) fn arg_extreme<A: XlaOrd, const MAX: bool>(
    op: &'static str,
    x: ArrayViewD<'_, A>,
    kept: &[usize],
) -> Result<ArrayD<usize>> {
    let out_shape = kept_check(op, x.shape(), kept)?;
    let other: Vec<usize> = (0..x.ndim()).filter(|d| !kept.contains(d)).collect();
    let (outer, inner): (usize, usize) = (
        out_shape.iter().product(),
        other.iter().map(|&d| x.shape()[d]).product(),
    );
    if inner == 0 && outer > 0 {
        return Err(crate::BroadcastError::InDimInvalid {
            op,
            operand: x.shape().into(),
            out_shape: x.shape().into(),
            dims: kept.into(),
            reason: format!("the dims {other:?} it reduces hold no element, which have no index"),
        });
    }
    let mut out = engine::with_capacity::<usize>(outer)
        .ok_or_else(|| engine::refused::<usize, _>(op, &IxDyn(&out_shape)))?;
    out.resize(outer, 0);
    let rows = x.view().permuted_axes([kept, &other[..]].concat());
    let columns = x.view().permuted_axes([&other[..], kept].concat());
    let bytes = outer.saturating_mul(inner).saturating_mul(size_of::<A>());
    if let Some(rows) = as_matrix(&rows, outer, inner) {
        by_pieces(&mut out, bytes, |at, o| {
            for (k, o) in o.iter_mut().enumerate() {
                let row = rows.row(at + k);
                *o = match row.as_slice() {
                    Some(row) => arg_of_slice::<A, MAX>(row),
                    None => arg_of_row::<A, MAX>(row.iter()),
                };
            }
        });
    } else if let Some(columns) = as_matrix(&columns, inner, outer) {
        by_pieces(&mut out, bytes, |at, o| {
            let cols = columns.slice(ndarray::s![.., at..at + o.len()]);
            let mut best: Vec<A> = cols.row(0).to_vec();
            for (i, row) in cols.outer_iter().enumerate().skip(1) {
                for ((b, o), x) in best.iter_mut().zip(o.iter_mut()).zip(row) {
                    if displaces::<A, MAX>(x, b) {
                        (*b, *o) = (*x, i);
                    }
                }
            }
        });
    } else {
        let k = kept.len();
        by_pieces(&mut out, bytes, |at, o| {
            for (i, o) in o.iter_mut().enumerate() {
                let mut at = at + i;
                let mut sub = rows.view();
                for d in (0..k).rev() {
                    let n = out_shape[d];
                    sub.collapse_axis(Axis(d), at % n);
                    at /= n;
                }
                // The kept axes now have length 1: the rest in row-major order.
                *o = arg_of_row::<A, MAX>(sub.iter());
            }
        });
    }
    Ok(ArrayD::from_shape_vec(out_shape, out).expect("one index per kept element"))
}

/// `x` (of `rows * cols` elements) as a `rows` by `cols` matrix without a copy, when its
/// elements lie in that order.
fn as_matrix<'a, A>(x: &ArrayViewD<'a, A>, rows: usize, cols: usize) -> Option<ArrayView2<'a, A>> {
    x.clone().into_shape_with_order((rows, cols)).ok()
}

/// `work(start, piece)` over `out` cut into pieces, on as many threads as an op streaming
/// `bytes` takes; the pieces depend on the length only, never on the threads.
fn by_pieces(out: &mut [usize], bytes: usize, work: impl Fn(usize, &mut [usize]) + Sync) {
    let len = out.len();
    let size = len.div_ceil(64).max(1);
    let pieces: Vec<Mutex<(usize, &mut [usize])>> = out
        .chunks_mut(size)
        .enumerate()
        .map(|(i, c)| Mutex::new((i * size, c)))
        .collect();
    engine::parallel::for_each_index(pieces.len(), bytes, &|i| {
        let mut piece = pieces[i].lock().unwrap_or_else(|e| e.into_inner());
        let (at, ref mut o) = *piece;
        work(at, o);
    });
}
