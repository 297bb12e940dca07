//! PaddlePaddle's `axis` broadcasting, as a client-level wrapper over the strict core.
//!
//! Paddle's legacy elementwise ops take an `axis`: the lower-rank operand, without its trailing
//! size-1 dims, is matched against the other starting at dim `axis` (`-1`: aligned to the
//! end). That is XLA's explicit `broadcast_dimensions` `[axis, axis + 1, ...]` once the trailing
//! ones are dropped, so each function here drops them (a zero-copy view), derives those dims from
//! [`crate::shape::paddle_shape`]'s rule and calls the strict core.
//!
//! ```
//! use ndarray::{Array, Array1, Array4};
//! use xla_bcast::paddle;
//!
//! let x = Array4::<f32>::zeros((2, 3, 4, 5));
//! let y = Array1::from(vec![1.0f32, 2.0, 3.0]);
//! let r = paddle::elementwise_add(&x, &y, 1).unwrap(); // y runs along dim 1
//! assert_eq!(r.shape(), &[2, 3, 4, 5]);
//! assert_eq!(r[[1, 2, 3, 4]], 3.0);
//! ```

use ndarray::{Array, ArrayRef, ArrayView, Axis, CowArray, DimMax, Dimension, IxDyn};

use crate::element::{XlaBitwise, XlaElement, XlaFloat, XlaInteger, XlaNumber, XlaOrd, XlaReal};
use crate::error::Result;
use crate::front::{check_grad, into_dim, zip_collect, DimMaxOf};
use crate::ops::ClampBcast;
use crate::reduce::{borrowed_or_summed, reduce_fresh, sum_fold};
use crate::shape::paddle_plan;

/// `a` without its dims from `keep` on (all of size 1): a zero-copy view.
fn leading<A, D: Dimension>(a: &ArrayRef<A, D>, keep: usize) -> ArrayView<'_, A, IxDyn> {
    let mut v = a.view().into_dyn();
    while v.ndim() > keep {
        let last = Axis(v.ndim() - 1);
        v = v.index_axis_move(last, 0);
    }
    v
}

/// `f(x, y)` elementwise under Paddle's `axis` rule; the generic form of the ops below.
///
/// # Errors
/// [`crate::BroadcastError::PaddleAxis`] naming the axis and dims that failed.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::paddle;
///
/// let x = array![[[1.0, 2.0]], [[3.0, 4.0]]]; // (2, 1, 2)
/// let y = array![[10.0], [20.0], [30.0]]; // (3, 1): trailing 1 dropped, placed at axis 1
/// let r = paddle::elementwise(&x, &y, 1, |a: f64, b: f64| a * b).unwrap();
/// assert_eq!(r.shape(), &[2, 3, 2]);
/// assert_eq!(r[[1, 2, 1]], 120.0);
/// ```
pub fn elementwise<A, B, C, D, E, F>(
    x: &ArrayRef<A, D>,
    y: &ArrayRef<B, E>,
    axis: isize,
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
    paddle_zip("elementwise", x, y, axis, f)
}

fn paddle_zip<A, B, C, D, E>(
    op: &'static str,
    x: &ArrayRef<A, D>,
    y: &ArrayRef<B, E>,
    axis: isize,
    f: impl Fn(A, B) -> C + Sync,
) -> Result<Array<C, DimMaxOf<D, E>>>
where
    A: Clone + Sync,
    B: Clone + Sync,
    C: Send,
    D: Dimension + DimMax<E>,
    E: Dimension,
{
    let plan = paddle_plan(op, x.shape(), y.shape(), axis)?;
    let (xv, yv) = (leading(x, plan.x_keep), leading(y, plan.y_keep));
    into_dim(op, zip_collect(op, &xv, &yv, &plan.dims, f)?)
}

macro_rules! paddle_family {
    ($( $op:ident, $hlo:literal, $v:ident, $bound:ident, $elem:ident, [$($methods:ident),*],
        $name:ident, [$($std:tt)*], $t:literal, $expect:literal; )*) => {$(
        #[doc = concat!("Paddle's `", stringify!($name), "(x, y, axis)`, with XLA element semantics ([`", stringify!($bound), "::", stringify!($elem), "`](crate::element::", stringify!($bound), "::", stringify!($elem), ")).")]
        ///
        /// ```
        /// use ndarray::array;
        /// use xla_bcast::paddle;
        ///
        #[doc = concat!("let x = array![[1", $t, ", 2", $t, "], [3", $t, ", 4", $t, "]];")]
        #[doc = concat!("let r = paddle::", stringify!($name), "(&x, &array![2", $t, ", 3", $t, "], -1).unwrap();")]
        #[doc = concat!("assert_eq!(r[[1, 1]], ", $expect, "); // 4 and 3")]
        #[doc = concat!("assert!(paddle::", stringify!($name), "(&x, &array![2", $t, ", 3", $t, ", 4", $t, "], 1).is_err());")]
        /// ```
        pub fn $name<A, D, E>(x: &ArrayRef<A, D>, y: &ArrayRef<A, E>, axis: isize) -> Result<Array<A, DimMaxOf<D, E>>>
        where
            A: $bound,
            D: Dimension + DimMax<E>,
            E: Dimension,
        {
            paddle_zip(stringify!($name), x, y, axis, A::$elem)
        }
    )*};
}

binary_ops!(paddle_family);

/// Paddle's `clip(x, min, max)`: every element held between two scalars, with XLA's `clamp`
/// per element (`min(max(x, min), max)`, NaN propagating).
///
/// ```
/// use ndarray::array;
/// use xla_bcast::paddle;
///
/// let x = array![[-2.0, 0.5], [3.0, f64::NAN]];
/// let r = paddle::clip(&x, -1.0, 1.0).unwrap();
/// assert_eq!(r.slice(ndarray::s![.., 0]), array![-1.0, 1.0]);
/// assert!(r[[1, 1]].is_nan());
/// ```
pub fn clip<A: XlaOrd, D: Dimension>(x: &ArrayRef<A, D>, min: A, max: A) -> Result<Array<A, D>> {
    x.clamp_bcast(&ndarray::arr0(min), &ndarray::arr0(max))
}

/// The gradients of `x` and `y` of a Paddle `elementwise_add`/`_sub`-style op with `axis`,
/// given the gradient of its result: `grad` summed back to each operand's shape (trailing size-1
/// dims of the lower-rank operand included). An operand of the result's shape gets `grad`
/// itself, borrowed (no copy).
///
/// ```
/// use ndarray::{Array, Array4};
/// use xla_bcast::paddle::unbroadcast_grads;
///
/// let grad = Array4::<f32>::ones((2, 3, 4, 5));
/// let (gx, gy) = unbroadcast_grads(&[2, 3, 4, 5], &[3, 1], 1, &grad).unwrap();
/// assert_eq!(gx.shape(), &[2, 3, 4, 5]);
/// assert!(gx.is_view()); // `grad` itself
/// assert_eq!(gy, Array::from_elem(vec![3, 1], 40.0f32));
/// ```
#[allow(clippy::type_complexity)]
pub fn unbroadcast_grads<'g, A: XlaElement, D: Dimension>(
    x_shape: &[usize],
    y_shape: &[usize],
    axis: isize,
    grad: &'g ArrayRef<A, D>,
) -> Result<(CowArray<'g, A, IxDyn>, CowArray<'g, A, IxDyn>)> {
    let op = "unbroadcast_grads";
    let plan = paddle_plan(op, x_shape, y_shape, axis)?;
    check_grad(op, &plan.out, grad.shape())?;
    let identity = |n: usize| (0..n).collect::<Vec<usize>>();
    let (x_dims, y_dims) = match x_shape.len().cmp(&y_shape.len()) {
        std::cmp::Ordering::Less => (plan.dims.clone(), identity(y_shape.len())),
        std::cmp::Ordering::Greater => (identity(x_shape.len()), plan.dims.clone()),
        std::cmp::Ordering::Equal => (identity(x_shape.len()), identity(y_shape.len())),
    };
    // Reduce to the kept (trimmed) dims, then give back the trailing ones: a free reshape.
    let sum = |shape: &[usize], keep: usize, dims: &[usize]| {
        borrowed_or_summed(grad, IxDyn(shape), |_| {
            let zero = A::xla_zero();
            let g = reduce_fresh(op, grad, IxDyn(&shape[..keep]), dims, sum_fold(&zero))?;
            Ok(g.into_shape_with_order(IxDyn(shape))
                .unwrap_or_else(|_| unreachable!("only size-1 dims are added")))
        })
    };
    Ok((
        sum(x_shape, plan.x_keep, &x_dims)?,
        sum(y_shape, plan.y_keep, &y_dims)?,
    ))
}
