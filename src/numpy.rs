//! NumPy / PyTorch implicit broadcasting, as a client-level wrapper over the strict core.
//!
//! XLA keeps implicit broadcasting out of its core; this module adds it back for code ported
//! from NumPy or PyTorch. Each function computes NumPy's shape ([`crate::shape::numpy_shape`]),
//! turns the right alignment into explicit `broadcast_dimensions` (the lower-rank operand's
//! dims map onto the trailing dims of the other) and calls the strict core: one kernel path.
//!
//! Only the broadcasting rule is NumPy's. Element semantics stay XLA's ([`crate::XlaElement`]):
//! integer ops wrap, integer division by zero does not trap, `rem` truncates like C's `fmod`
//! (NumPy's `%` floors), and `max` / `min` propagate NaN like `np.maximum` / `np.minimum`.
//!
//! ```
//! use ndarray::array;
//! use xla_bcast::numpy;
//!
//! let col = array![[0], [10], [20], [30]];
//! let row = array![1, 2, 3];
//! assert_eq!(
//!     numpy::add(&col, &row).unwrap(),
//!     array![[1, 2, 3], [11, 12, 13], [21, 22, 23], [31, 32, 33]]
//! );
//! ```

use ndarray::{Array, ArrayRef, ArrayView, CowArray, DimMax, Dimension, IxDyn};

use crate::element::{XlaBitwise, XlaElement, XlaFloat, XlaInteger, XlaNumber, XlaOrd, XlaReal};
use crate::error::{BroadcastError, Result};
use crate::front::{check_grad, into_dim, zip_collect, DimMaxOf};
use crate::ops::ClampBcast;
use crate::reduce::{borrowed_or_summed, reduce_fresh, sum_fold};
use crate::shape::{numpy_shape_for, ShapeArg};
use crate::view::broadcast_in_dim_view;

/// NumPy's `broadcast_shapes`: the common shape of any number of shapes (also
/// [`crate::shape::numpy_shape`]).
///
/// ```
/// use xla_bcast::numpy::broadcast_shapes;
/// assert_eq!(broadcast_shapes(&[&[8, 1, 6, 1], &[7, 1, 5]]).unwrap(), vec![8, 7, 6, 5]);
/// let err = broadcast_shapes(&[&[0], &[2, 2]]).unwrap_err();
/// assert!(err.to_string().contains("sizes 0 and 2"));
/// ```
pub fn broadcast_shapes(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    numpy_shape_for("broadcast_shapes", shapes)
}

/// The strict-core dims that right-align an operand of rank `rank` in an output of rank `out`.
fn trailing(rank: usize, out: usize) -> Vec<usize> {
    (out - rank..out).collect()
}

/// NumPy's `broadcast_to`: a zero-copy view of `a` at `shape` (trailing dims aligned, size-1
/// dims repeated with stride 0, new leading dims added).
///
/// ```
/// use ndarray::array;
/// use xla_bcast::numpy::broadcast_to;
///
/// let v = array![1, 2, 3];
/// let b = broadcast_to(&v, &[2, 3]).unwrap();
/// assert_eq!(b, array![[1, 2, 3], [1, 2, 3]].into_dyn());
/// assert_eq!(b.strides(), &[0, 1]);
/// assert!(broadcast_to(&v, &[3, 2]).is_err());
/// ```
pub fn broadcast_to<'a, A, D: Dimension>(
    a: &'a ArrayRef<A, D>,
    shape: &[usize],
) -> Result<ArrayView<'a, A, IxDyn>> {
    if a.ndim() > shape.len() {
        return Err(BroadcastError::InDimInvalid {
            op: "broadcast_to",
            operand: a.shape().into(),
            out_shape: shape.into(),
            dims: Box::new([]),
            reason: format!(
                "the array has {} dims, more than the target's {}",
                a.ndim(),
                shape.len()
            ),
        });
    }
    broadcast_in_dim_view(
        "broadcast_to",
        a.view(),
        shape,
        &trailing(a.ndim(), shape.len()),
    )
}

/// NumPy's `broadcast_arrays`: views of all `arrays` at their common shape, zero-copy.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::numpy::broadcast_arrays;
///
/// let a = array![[1], [2]];
/// let b = array![[10, 20, 30]];
/// let v = broadcast_arrays(&[&a, &b]).unwrap();
/// assert_eq!(v[0].shape(), &[2, 3]);
/// assert_eq!(v[1], array![[10, 20, 30], [10, 20, 30]].into_dyn());
/// ```
///
/// Arrays of different ranks (so different dimension types) go in as dynamic-rank views:
///
/// ```
/// use ndarray::array;
/// use xla_bcast::numpy::broadcast_arrays;
///
/// let m = array![[1, 2, 3], [4, 5, 6]].into_dyn();
/// let v = array![10, 20, 30].into_dyn();
/// let s = ndarray::arr0(7).into_dyn();
/// let out = broadcast_arrays(&[&m, &v, &s]).unwrap();
/// assert_eq!(out[1], array![[10, 20, 30], [10, 20, 30]].into_dyn());
/// assert_eq!(out[2].strides(), &[0, 0]);
/// ```
pub fn broadcast_arrays<'a, A, D: Dimension>(
    arrays: &[&'a ArrayRef<A, D>],
) -> Result<Vec<ArrayView<'a, A, IxDyn>>> {
    let shapes: Vec<&[usize]> = arrays.iter().map(|a| a.shape()).collect();
    let shape = numpy_shape_for("broadcast_arrays", &shapes)?;
    arrays.iter().map(|a| broadcast_to(a, &shape)).collect()
}

/// The strict-core `broadcast_dimensions` for a NumPy binary op, after checking NumPy's rule
/// (so errors speak of trailing dims, not of XLA's dims).
fn numpy_dims(op: &'static str, lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>> {
    let out = numpy_shape_for(op, &[lhs, rhs])?;
    Ok(if lhs.len() == rhs.len() {
        vec![]
    } else {
        trailing(lhs.len().min(rhs.len()), out.len())
    })
}

/// `f(a, b)` elementwise under NumPy broadcasting; the generic form of the ops below.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::numpy::zip_with;
///
/// let r = zip_with(&array![[1.0], [2.0]], &array![3.0, 4.0], |a: f64, b: f64| a.hypot(b)).unwrap();
/// assert_eq!(r.shape(), &[2, 2]);
/// assert_eq!(r[[0, 1]], 1f64.hypot(4.0));
/// ```
pub fn zip_with<A, B, C, D, E, F>(
    a: &ArrayRef<A, D>,
    b: &ArrayRef<B, E>,
    f: F,
) -> Result<Array<C, DimMaxOf<D, E>>>
where
    A: Clone + Sync,
    B: Clone + Sync,
    C: Send,
    D: Dimension + DimMax<E>,
    E: Dimension,
    F: Fn(A, B) -> C + Sync + Send,
{
    numpy_zip("zip_with", a, b, f)
}

fn numpy_zip<A, B, C, D, E>(
    op: &'static str,
    a: &ArrayRef<A, D>,
    b: &ArrayRef<B, E>,
    f: impl Fn(A, B) -> C + Sync,
) -> Result<Array<C, DimMaxOf<D, E>>>
where
    A: Clone + Sync,
    B: Clone + Sync,
    C: Send,
    D: Dimension + DimMax<E>,
    E: Dimension,
{
    let dims = numpy_dims(op, a.shape(), b.shape())?;
    zip_collect(op, a, b, &dims, f)
}

macro_rules! numpy_family {
    ($( $name:ident, $hlo:literal, $v:ident, $bound:ident, $elem:ident, [$($methods:ident),*],
        $paddle:ident, [$($std:tt)*], $t:literal, $expect:literal; )*) => {$(
        #[doc = concat!("`", stringify!($name), "` under NumPy broadcasting, with XLA's element semantics ([`", stringify!($bound), "::", stringify!($elem), "`](crate::element::", stringify!($bound), "::", stringify!($elem), ")).")]
        ///
        /// ```
        /// use ndarray::array;
        /// use xla_bcast::numpy;
        ///
        #[doc = concat!("let a = array![[1", $t, ", 2", $t, "], [3", $t, ", 4", $t, "]];")]
        #[doc = concat!("let r = numpy::", stringify!($name), "(&a, &array![2", $t, ", 3", $t, "]).unwrap();")]
        #[doc = concat!("assert_eq!(r[[1, 1]], ", $expect, "); // 4 ", stringify!($name), " 3")]
        #[doc = concat!("assert!(numpy::", stringify!($name), "(&a, &array![1", $t, ", 2", $t, ", 3", $t, "]).is_err());")]
        /// ```
        pub fn $name<A, D, E>(a: &ArrayRef<A, D>, b: &ArrayRef<A, E>) -> Result<Array<A, DimMaxOf<D, E>>>
        where
            A: $bound,
            D: Dimension + DimMax<E>,
            E: Dimension,
        {
            numpy_zip(stringify!($name), a, b, A::$elem)
        }
    )*};
}

binary_ops!(numpy_family);

macro_rules! numpy_compare {
    ($( $name:ident, $hlo:literal, $v:ident, $bound:ident, $cmp:tt, [$($methods:ident),*], $expect:literal; )*) => {$(
        #[doc = concat!("`a ", stringify!($cmp), " b` under NumPy broadcasting, as IEEE-754 compares (any comparison with NaN is false, except `ne`).")]
        ///
        /// ```
        /// use ndarray::array;
        /// use xla_bcast::numpy;
        ///
        /// let a = array![[1, 2], [3, 4]];
        #[doc = concat!("let r = numpy::", stringify!($name), "(&a, &array![2, 4]).unwrap();")]
        #[doc = concat!("assert_eq!(r, array!", $expect, ");")]
        #[doc = concat!("assert!(numpy::", stringify!($name), "(&a, &array![1, 2, 3]).is_err());")]
        /// ```
        pub fn $name<A, D, E>(a: &ArrayRef<A, D>, b: &ArrayRef<A, E>) -> Result<Array<bool, DimMaxOf<D, E>>>
        where
            A: $bound + Clone + Sync,
            D: Dimension + DimMax<E>,
            E: Dimension,
        {
            numpy_zip(stringify!($name), a, b, |x: A, y: A| x $cmp y)
        }
    )*};
}

compare_ops!(numpy_compare);

/// NumPy's `clip(a, a_min, a_max)` with XLA's `clamp` per element (`min(max(a, a_min), a_max)`,
/// NaN propagating): the three broadcast together by NumPy's rule (NumPy clips with bounds of
/// any broadcastable shape; XLA's own `clamp` takes only scalars or the operand's shape).
///
/// ```
/// use ndarray::{arr0, array};
/// use xla_bcast::numpy;
///
/// let a = array![[1, 5, 9], [-3, 4, 12]];
/// let r = numpy::clamp(&a, &array![0, 2, 4], &arr0(8)).unwrap();
/// assert_eq!(r, array![[1, 5, 8], [0, 4, 8]]);
/// assert!(numpy::clamp(&a, &array![0, 2], &arr0(8)).is_err());
/// ```
#[allow(clippy::type_complexity)]
pub fn clamp<A, D, E1, E2>(
    a: &ArrayRef<A, D>,
    min: &ArrayRef<A, E1>,
    max: &ArrayRef<A, E2>,
) -> Result<Array<A, DimMaxOf<DimMaxOf<D, E1>, E2>>>
where
    A: XlaOrd,
    D: Dimension + DimMax<E1>,
    E1: Dimension,
    E2: Dimension,
    DimMaxOf<D, E1>: DimMax<E2>,
{
    let op = "clamp";
    let shape = numpy_shape_for(op, &[a.shape(), min.shape(), max.shape()])?;
    let (a, lo, hi) = (
        broadcast_to(a, &shape)?,
        broadcast_to(min, &shape)?,
        broadcast_to(max, &shape)?,
    );
    into_dim(op, a.clamp_bcast(&lo, &hi)?)
}

/// What `eq` and `ne` need of an element (complex numbers have them, not an order).
///
/// ```
/// use xla_bcast::numpy::Equal;
/// fn same<T: Equal>(a: T, b: T) -> bool { a == b }
/// assert!(same(1.0, 1.0));
/// ```
pub trait Equal: PartialEq + Clone + Sync {}
impl<T: PartialEq + Clone + Sync> Equal for T {}

/// What the comparisons need of an element.
///
/// ```
/// use xla_bcast::numpy::Compare;
/// fn less<T: Compare>(a: T, b: T) -> bool { a < b }
/// assert!(less(1, 2));
/// ```
pub trait Compare: PartialOrd + Clone + Sync {}
impl<T: PartialOrd + Clone + Sync> Compare for T {}

/// PyTorch's `sum_to_size`: `grad` summed down to `shape`, which must broadcast to `grad`'s
/// shape under NumPy's rule (the adjoint of [`broadcast_to`]).
///
/// ```
/// use ndarray::array;
/// use xla_bcast::numpy::sum_to_shape;
///
/// let g = array![[1, 2, 3], [4, 5, 6]];
/// assert_eq!(sum_to_shape(&g, &[3]).unwrap(), array![5, 7, 9].into_dyn());
/// assert_eq!(sum_to_shape(&g, &[2, 1]).unwrap(), array![[6], [15]].into_dyn());
/// assert_eq!(sum_to_shape(&g, &[1, 1]).unwrap(), array![[21]].into_dyn());
/// assert!(sum_to_shape(&g, &[2]).is_err());
/// let typed: ndarray::Array1<i32> = sum_to_shape(&g, [3]).unwrap();
/// assert_eq!(typed, array![5, 7, 9]);
/// ```
pub fn sum_to_shape<A: XlaElement, D: Dimension, Sh: ShapeArg>(
    grad: &ArrayRef<A, D>,
    shape: Sh,
) -> Result<Array<A, Sh::Dim>> {
    let op = "sum_to_shape";
    let dim = shape.into_dim();
    let shape = dim.slice();
    if shape.len() > grad.ndim() {
        return Err(BroadcastError::InDimInvalid {
            op,
            operand: shape.into(),
            out_shape: grad.shape().into(),
            dims: Box::new([]),
            reason: format!(
                "the target has {} dims, more than the gradient's {}",
                shape.len(),
                grad.ndim()
            ),
        });
    }
    let dims = trailing(shape.len(), grad.ndim());
    let zero = A::xla_zero();
    reduce_fresh(op, grad, dim.clone(), &dims, sum_fold(&zero))
}

/// The gradients of both operands of a NumPy-broadcast `add`/`sub`-style op, given the gradient
/// of its result: [`sum_to_shape`] for each, or `grad` itself, borrowed, for an operand of the
/// result's shape (no copy).
///
/// ```
/// use ndarray::array;
/// use xla_bcast::numpy::unbroadcast_grads;
///
/// let grad = array![[1, 1, 1], [1, 1, 1]];
/// let (ga, gb) = unbroadcast_grads(&[2, 1], &[3], &grad).unwrap();
/// assert_eq!(ga, array![[3], [3]].into_dyn());
/// assert_eq!(gb, array![2, 2, 2].into_dyn());
/// let (ga, _) = unbroadcast_grads(&[2, 3], &[3], &grad).unwrap();
/// assert!(ga.is_view()); // `grad` itself
/// ```
#[allow(clippy::type_complexity)]
pub fn unbroadcast_grads<'g, A: XlaElement, D: Dimension>(
    a_shape: &[usize],
    b_shape: &[usize],
    grad: &'g ArrayRef<A, D>,
) -> Result<(CowArray<'g, A, IxDyn>, CowArray<'g, A, IxDyn>)> {
    let out = numpy_shape_for("unbroadcast_grads", &[a_shape, b_shape])?;
    check_grad("unbroadcast_grads", &out, grad.shape())?;
    let sum =
        |shape: &[usize]| borrowed_or_summed(grad, IxDyn(shape), |_| sum_to_shape(grad, shape));
    Ok((sum(a_shape)?, sum(b_shape)?))
}
