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

use ndarray::{Array, ArrayRef, Dimension};

use crate::element::XlaElement;
use crate::engine::{self, Fold, FoldOrder};
use crate::error::Result;
use crate::front::check_grad;
use crate::ops::sealed::Sealed;
use crate::shape::{binary_plan, reduce_in_dim_check, ShapeArg};

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
    /// `identity` (sum: `0` and `+`; max: lowest and `max`; product: `1` and `*`; ...).
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
    /// array![[1.0, 7.0], [3.0, 2.0]].reduce_in_dim_with_into(&[0], f64::INFINITY, f64::min, &mut out).unwrap();
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
/// operand's shape. (For `sub`, negate the second.)
///
/// ```
/// use ndarray::array;
/// use xla_bcast::reduce::unbroadcast_grads;
///
/// let grad = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let (gl, gr) = unbroadcast_grads(&[2, 3], &[3], &[1], &grad).unwrap();
/// assert_eq!(gl, grad.clone().into_dyn());
/// assert_eq!(gr, array![5.0, 7.0, 9.0].into_dyn());
/// // Shapes as arrays or tuples: fixed-rank gradients.
/// let (gl, gr): (ndarray::Array2<f64>, ndarray::Array1<f64>) =
///     unbroadcast_grads((2, 3), [3], &[1], &grad).unwrap();
/// assert_eq!((gl, gr), (grad.clone(), array![5.0, 7.0, 9.0]));
/// ```
#[allow(clippy::type_complexity)]
pub fn unbroadcast_grads<A, D, L, R>(
    lhs_shape: L,
    rhs_shape: R,
    broadcast_dimensions: &[usize],
    grad: &ArrayRef<A, D>,
) -> Result<(Array<A, L::Dim>, Array<A, R::Dim>)>
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
    fn sum<A: XlaElement, D: Dimension, O: Dimension>(
        grad: &ArrayRef<A, D>,
        shape: O,
        dims: &[usize],
    ) -> Result<Array<A, O>> {
        let zero = A::xla_zero();
        reduce_fresh("unbroadcast_grads", grad, shape, dims, sum_fold(&zero))
    }
    Ok((
        sum(grad, lhs_shape, &plan.lhs_dims)?,
        sum(grad, rhs_shape, &plan.rhs_dims)?,
    ))
}
