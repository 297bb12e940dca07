//! The extension traits: broadcast views, the strict binary op family (generated once over the
//! engine), comparisons, `select`, and the `strict()` operators.
//!
//! Every method here follows the same road: a shape rule from [`crate::shape`], zero-copy views
//! of the operands at the output shape, then one pass of the kernel engine.
//!
//! A fresh result is contiguous, laid out in the memory order its inputs share (NumPy's
//! `order='K'`; ndarray's own arithmetic keeps F order the same way): standard layout for
//! C-ordered or mixed inputs, F order for F-ordered ones, so the pass reads every input with
//! unit stride.
//!
//! ```
//! use ndarray::{Array2, ShapeBuilder};
//! use xla_bcast::prelude::*;
//!
//! let f = Array2::from_shape_fn((3, 4).f(), |(i, j)| (10 * i + j) as f32);
//! let sum = f.add_bcast(&f, &[]).unwrap();
//! assert_eq!(sum, &f * 2.0);
//! assert!(sum.t().is_standard_layout()); // F order, like `f`
//! assert!(f.t().add_bcast(&f.t(), &[]).unwrap().is_standard_layout());
//! ```

use ndarray::{Array, ArrayRef, ArrayView, DimMax, Dimension, IxDyn};

use crate::element::{XlaBitwise, XlaElement, XlaFloat, XlaInteger, XlaNumber, XlaOrd, XlaReal};
use crate::engine::{self, Fresh, Src, ZipN};
use crate::error::{BroadcastError, Result};
use crate::shape::{clamp_shape, iota, select_shape, Dims, ShapeArg};
use crate::strict::{InDims, Strict, StrictView};
use crate::view::broadcast_in_dim_view;
use sealed::Sealed;

pub use crate::front::DimMaxOf;
use crate::front::{check_out, out_dim, zip_assign, zip_collect, zip_into};

/// The extension traits are sealed: their one implementor is ndarray's `ArrayRef`, which every
/// array and view derefs to, so each method is written once, in its trait, against it.
pub(crate) mod sealed {
    use ndarray::ArrayRef;

    pub trait Sealed<A, D> {
        fn array(&self) -> &ArrayRef<A, D>;
        fn array_mut(&mut self) -> &mut ArrayRef<A, D>;
    }

    impl<A, D> Sealed<A, D> for ArrayRef<A, D> {
        fn array(&self) -> &ArrayRef<A, D> {
            self
        }
        fn array_mut(&mut self) -> &mut ArrayRef<A, D> {
            self
        }
    }
}

/// Zero-copy broadcast views, on every ndarray array and view.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let v = array![1, 2, 3];
/// let b = v.broadcast_in_dim([2, 3], &[1]).unwrap(); // a view: v repeated down the rows
/// assert_eq!(b, array![[1, 2, 3], [1, 2, 3]]);
/// ```
pub trait BroadcastInDim<A, D: Dimension>: Sealed<A, D> {
    /// XLA / StableHLO `BroadcastInDim`: this array seen at `out_shape`, its dim `i` placed at
    /// output dim `broadcast_dimensions[i]`.
    ///
    /// Never copies: new dims and degenerate dims (size 1 here, larger in `out_shape`) get
    /// stride 0, kept dims keep their stride, and an unsorted `broadcast_dimensions` permutes the
    /// strides (a transpose).
    ///
    /// # Errors
    /// [`BroadcastError::InDimInvalid`] when `broadcast_dimensions` is not one distinct,
    /// in-range output dim per operand dim; [`BroadcastError::InDimSize`] when an operand dim is
    /// neither 1 nor the size of its output dim; [`BroadcastError::SizeOverflow`].
    ///
    /// ```
    /// use ndarray::{array, Array3};
    /// use xla_bcast::prelude::*;
    ///
    /// let v = array![1, 2, 3];
    /// let b = v.broadcast_in_dim(&[2, 3, 4], &[1]).unwrap();
    /// assert_eq!(b.shape(), &[2, 3, 4]);
    /// assert_eq!(b[[1, 2, 0]], 3);
    /// assert_eq!(b.strides(), &[0, 1, 0]);
    /// assert_eq!(b.as_ptr(), v.as_ptr()); // zero-copy
    ///
    /// // An unsorted list transposes.
    /// let m = array![[1, 2, 3], [4, 5, 6]];
    /// assert_eq!(m.broadcast_in_dim(&[3, 2], &[1, 0]).unwrap(), m.t().into_dyn());
    /// // A shape given as an array or tuple keeps a fixed-rank dimension type.
    /// let typed: ndarray::ArrayView3<i32> = v.broadcast_in_dim([2, 3, 4], &[1]).unwrap();
    /// assert_eq!(typed.into_dyn(), b);
    /// ```
    fn broadcast_in_dim<'a, Sh: ShapeArg>(
        &'a self,
        out_shape: Sh,
        broadcast_dimensions: &[usize],
    ) -> Result<ArrayView<'a, A, Sh::Dim>>
    where
        D: 'a,
    {
        let op = "broadcast_in_dim";
        let out = out_shape.into_dim();
        let view =
            broadcast_in_dim_view(op, self.array().view(), out.slice(), broadcast_dimensions)?;
        into_view_dim(op, view)
    }

    /// XLA `Broadcast`: new major dims of the given sizes prepended, zero-copy (stride 0).
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let v = array![1, 2];
    /// let b = v.broadcast_leading(&[3]).unwrap();
    /// assert_eq!(b, array![[1, 2], [1, 2], [1, 2]].into_dyn());
    /// assert_eq!(b.strides(), &[0, 1]);
    /// // Sizes as an array or tuple, on an array of fixed rank: a fixed-rank result.
    /// let typed: ndarray::ArrayView3<i32> = v.broadcast_leading([4, 3]).unwrap();
    /// assert_eq!(typed.shape(), &[4, 3, 2]);
    /// ```
    fn broadcast_leading<'a, Sh>(&'a self, sizes: Sh) -> Result<ArrayView<'a, A, LeadingDim<Sh, D>>>
    where
        D: 'a,
        Sh: ShapeArg,
        Sh::Dim: DimConcat<D>,
    {
        let op = "broadcast_leading";
        let sizes = sizes.into_dim();
        let out: Vec<usize> = sizes
            .slice()
            .iter()
            .chain(self.array().shape())
            .copied()
            .collect();
        let dims: Vec<usize> = (sizes.ndim()..out.len()).collect();
        into_view_dim(
            op,
            broadcast_in_dim_view(op, self.array().view(), &out, &dims)?,
        )
    }
}

/// The dimension type of `sizes` of type `Sh` prepended to an array of dimension type `D`.
///
/// ```
/// use ndarray::{array, ArrayView3};
/// use xla_bcast::ops::LeadingDim;
/// use xla_bcast::prelude::*;
///
/// let x = array![[1, 2], [3, 4]];
/// let b: ArrayView3<i32> = x.broadcast_leading([5]).unwrap(); // LeadingDim<[usize; 1], Ix2> is Ix3
/// let _: LeadingDim<[usize; 1], ndarray::Ix2> = b.raw_dim();
/// assert_eq!(b.shape(), &[5, 2, 2]);
/// ```
pub type LeadingDim<Sh, D> = <<Sh as ShapeArg>::Dim as DimConcat<D>>::Output;

impl<A, D: Dimension> BroadcastInDim<A, D> for ArrayRef<A, D> {}

/// A view converted to the dimension type the caller's types promise.
fn into_view_dim<'a, A, O: Dimension>(
    op: &'static str,
    v: ArrayView<'a, A, IxDyn>,
) -> Result<ArrayView<'a, A, O>> {
    let shape: Box<[usize]> = v.shape().into();
    v.into_dimensionality::<O>()
        .map_err(|_| BroadcastError::ResultRank {
            op,
            rank: O::NDIM.unwrap_or(shape.len()),
            shape,
        })
}

/// The dimension type of two dimension types laid end to end (`Ix1` then `Ix2` is `Ix3`;
/// `IxDyn` with anything, or a rank past 6, is `IxDyn`).
///
/// ```
/// use ndarray::{Ix1, Ix2, Ix3};
/// use xla_bcast::ops::DimConcat;
///
/// let _: <Ix1 as DimConcat<Ix2>>::Output = Ix3(4, 2, 3);
/// ```
pub trait DimConcat<D: Dimension>: Dimension {
    /// The concatenated dimension type.
    type Output: Dimension;
}

impl<D: Dimension> DimConcat<D> for IxDyn {
    type Output = IxDyn;
}

macro_rules! dim_concat {
    ($($n:literal: [$($m:literal => $o:literal),*]),*) => {$(
        impl DimConcat<IxDyn> for ndarray::Dim<[usize; $n]> {
            type Output = IxDyn;
        }
        $(
            impl DimConcat<ndarray::Dim<[usize; $m]>> for ndarray::Dim<[usize; $n]> {
                type Output = ndarray::Dim<[usize; $o]>;
            }
        )*
    )*};
}
dim_concat!(
    0: [0 => 0, 1 => 1, 2 => 2, 3 => 3, 4 => 4, 5 => 5, 6 => 6],
    1: [0 => 1, 1 => 2, 2 => 3, 3 => 4, 4 => 5, 5 => 6],
    2: [0 => 2, 1 => 3, 2 => 4, 3 => 5, 4 => 6],
    3: [0 => 3, 1 => 4, 2 => 5, 3 => 6],
    4: [0 => 4, 1 => 5, 2 => 6],
    5: [0 => 5, 1 => 6],
    6: [0 => 6]
);

/// A generic binary op under XLA's broadcasting rule, on every ndarray array and view.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let names = array!["a", "b"];
/// let counts = array![[1usize], [2], [3]];
/// let r = counts.zip_bcast(&names, &[1], |n, s: &str| s.repeat(n)).unwrap();
/// assert_eq!(r, array![["a", "b"], ["aa", "bb"], ["aaa", "bbb"]].mapv(String::from));
/// ```
pub trait ZipBcast<A, D: Dimension>: Sealed<A, D> {
    /// `f(lhs, rhs)` elementwise, `rhs` broadcast by XLA's rule with explicit
    /// `broadcast_dimensions` (see [`crate::shape::binary_op_shape`]).
    ///
    /// If `f` panics, the panic propagates once the elements of the result already written are
    /// dropped (those, and only those): nothing leaks.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let a = array![[1, 2, 3], [4, 5, 6]];
    /// let v = array![10, 20];
    /// let c = a.zip_bcast(&v, &[0], |x, y| (x * y) as f64 / 10.0).unwrap();
    /// assert_eq!(c, array![[1.0, 2.0, 3.0], [8.0, 10.0, 12.0]]);
    /// ```
    fn zip_bcast<B, C, E, F>(
        &self,
        rhs: &ArrayRef<B, E>,
        broadcast_dimensions: &[usize],
        f: F,
    ) -> Result<Array<C, DimMaxOf<D, E>>>
    where
        A: Clone + Sync,
        B: Clone + Sync,
        C: Send,
        D: DimMax<E>,
        E: Dimension,
        F: Fn(A, B) -> C + Sync + Send,
    {
        zip_collect("zip", self.array(), rhs, broadcast_dimensions, f)
    }

    /// [`zip_bcast`](ZipBcast::zip_bcast) into `out`, which must have the result's shape
    /// (otherwise [`BroadcastError::OutputShape`] and nothing is written).
    ///
    /// ```
    /// use ndarray::{array, Array2};
    /// use xla_bcast::prelude::*;
    ///
    /// let mut out = Array2::<i32>::zeros((2, 2));
    /// array![[1, 2], [3, 4]].zip_bcast_into(&array![1, 0], &[1], &mut out, |a, b| a * b).unwrap();
    /// assert_eq!(out, array![[1, 0], [3, 0]]);
    /// ```
    fn zip_bcast_into<B, C, E, O, F>(
        &self,
        rhs: &ArrayRef<B, E>,
        broadcast_dimensions: &[usize],
        out: &mut ArrayRef<C, O>,
        f: F,
    ) -> Result<()>
    where
        A: Clone + Sync,
        B: Clone + Sync,
        C: Send,
        E: Dimension,
        O: Dimension,
        F: Fn(A, B) -> C + Sync + Send,
    {
        zip_into("zip", self.array(), rhs, broadcast_dimensions, out, f)
    }

    /// `self = f(self, rhs)` in place; `self` must already have the result's shape (otherwise
    /// [`BroadcastError::OutputShape`] and `self` is unchanged).
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let mut a = array![[1, 2], [3, 4]];
    /// a.zip_assign_bcast(&array![10, 20], &[0], |x, y| x + y).unwrap();
    /// assert_eq!(a, array![[11, 12], [23, 24]]);
    /// ```
    fn zip_assign_bcast<B, E, F>(
        &mut self,
        rhs: &ArrayRef<B, E>,
        broadcast_dimensions: &[usize],
        f: F,
    ) -> Result<()>
    where
        A: Clone + Send + Sync,
        B: Clone + Sync,
        E: Dimension,
        F: Fn(A, B) -> A + Sync + Send,
    {
        zip_assign("zip", self.array_mut(), rhs, broadcast_dimensions, f)
    }
}

impl<A, D: Dimension> ZipBcast<A, D> for ArrayRef<A, D> {}

/// Generates the arithmetic family: for each op, the allocating method, `_into` and the in-place
/// `_assign` form, all over the same three implementations above.
macro_rules! arith_family {
    ($( $op:ident, $hlo:literal, $v:ident, $bound:ident, $elem:ident, [$name:ident, $into:ident, $assign:ident],
        $paddle:ident, [$($std:tt)*], $t:literal, $expect:literal; )*) => {
        /// The strict XLA elementwise binary ops, on every ndarray array and view.
        ///
        /// Each op takes the rhs and its explicit `broadcast_dimensions` (XLA's rule, see
        /// [`crate::shape::binary_op_shape`]), computes with XLA's element semantics (see
        /// [`crate::element`]: each op exists for the element types XLA defines it on, checked at
        /// compile time) and comes in three forms: `op_bcast` (a fresh array whose dimension
        /// type is ndarray's `DimMax` of the operands'), `op_bcast_into` (into a caller's array of
        /// the result shape) and `op_assign_bcast` (in place, `self` already has the result shape).
        ///
        /// ```
        /// use ndarray::array;
        /// use xla_bcast::prelude::*;
        ///
        /// let x = array![[1.0, 2.0], [3.0, 4.0]];
        /// let col = array![10.0, 20.0]; // one per row: dim 0
        /// assert_eq!(x.add_bcast(&col, &[0]).unwrap(), array![[11.0, 12.0], [23.0, 24.0]]);
        /// assert_eq!(x.max_bcast(&ndarray::arr0(2.5), &[]).unwrap(), array![[2.5, 2.5], [3.0, 4.0]]);
        /// ```
        ///
        /// The rule checks sizes, not meaning: where two dims of the higher-rank operand have
        /// the same size, `broadcast_dimensions` naming the wrong one is accepted, as XLA accepts
        /// it. In attention scores of shape `(B, H, T, T)`, a per-query maximum of shape
        /// `(B, H, T)` goes back with `[0, 1, 2]` (its dim 2 is the query dim); `[0, 1, 3]` also
        /// fits, and subtracts each query's maximum down a key column instead. Explicit dims
        /// are the place to say which: a square input cannot.
        ///
        /// ```
        /// use ndarray::{array, Array3};
        /// use xla_bcast::prelude::*;
        ///
        /// let scores = Array3::from_shape_vec((1, 2, 2), vec![1.0, 5.0, 2.0, 3.0]).unwrap();
        /// let max = array![[5.0, 3.0]]; // per row (query) of the 2x2 block
        /// let right = scores.sub_bcast(&max, &[0, 1]).unwrap();
        /// assert_eq!(right, Array3::from_shape_vec((1, 2, 2), vec![-4.0, 0.0, -1.0, 0.0]).unwrap());
        /// let wrong = scores.sub_bcast(&max, &[0, 2]).unwrap(); // accepted: 2 == 2
        /// assert_ne!(wrong, right);
        /// ```
        pub trait ArithBcast<A: XlaElement, D: Dimension>: Sealed<A, D> {
            $(
                #[doc = concat!("Elementwise `", stringify!($op), "` with XLA broadcasting ([`", stringify!($bound), "::", stringify!($elem), "`](crate::element::", stringify!($bound), "::", stringify!($elem), ")).")]
                ///
                /// # Errors
                /// Any [`BroadcastError`] of [`crate::shape::binary_op_shape`].
                ///
                /// ```
                /// use ndarray::array;
                /// use xla_bcast::prelude::*;
                ///
                #[doc = concat!("let a = array![[1", $t, ", 2", $t, "], [3", $t, ", 4", $t, "]];")]
                #[doc = concat!("let v = array![2", $t, ", 3", $t, "];")]
                #[doc = concat!("let c = a.", stringify!($name), "(&v, &[1]).unwrap();")]
                #[doc = concat!("assert_eq!(c[[1, 1]], ", $expect, "); // 4 ", stringify!($op), " 3")]
                #[doc = concat!("assert!(a.", stringify!($name), "(&v, &[]).is_err()); // no implicit rank promotion")]
                /// ```
                fn $name<E>(&self, rhs: &ArrayRef<A, E>, broadcast_dimensions: &[usize]) -> Result<Array<A, DimMaxOf<D, E>>>
                where
                    A: $bound,
                    D: DimMax<E>,
                    E: Dimension,
                {
                    zip_collect(stringify!($op), self.array(), rhs, broadcast_dimensions, A::$elem)
                }

                #[doc = concat!("[`", stringify!($name), "`](ArithBcast::", stringify!($name), ") into `out`, which must have the result's shape (otherwise [`BroadcastError::OutputShape`] and nothing is written).")]
                ///
                /// ```
                /// use ndarray::{array, Array2};
                /// use xla_bcast::prelude::*;
                ///
                #[doc = concat!("let mut out = Array2::from_elem((2, 2), 0", $t, ");")]
                #[doc = concat!("array![[1", $t, ", 2", $t, "], [3", $t, ", 4", $t, "]].", stringify!($into), "(&array![2", $t, ", 3", $t, "], &[1], &mut out).unwrap();")]
                #[doc = concat!("assert_eq!(out[[1, 1]], ", $expect, ");")]
                /// ```
                fn $into<E, O>(&self, rhs: &ArrayRef<A, E>, broadcast_dimensions: &[usize], out: &mut ArrayRef<A, O>) -> Result<()>
                where
                    A: $bound,
                    E: Dimension,
                    O: Dimension,
                {
                    zip_into(stringify!($op), self.array(), rhs, broadcast_dimensions, out, A::$elem)
                }

                #[doc = concat!("In-place [`", stringify!($name), "`](ArithBcast::", stringify!($name), "): `self` must already have the result's shape (otherwise [`BroadcastError::OutputShape`] and `self` is unchanged).")]
                ///
                /// ```
                /// use ndarray::array;
                /// use xla_bcast::prelude::*;
                ///
                #[doc = concat!("let mut a = array![[1", $t, ", 2", $t, "], [3", $t, ", 4", $t, "]];")]
                #[doc = concat!("a.", stringify!($assign), "(&array![2", $t, ", 3", $t, "], &[1]).unwrap();")]
                #[doc = concat!("assert_eq!(a[[1, 1]], ", $expect, ");")]
                /// ```
                fn $assign<E>(&mut self, rhs: &ArrayRef<A, E>, broadcast_dimensions: &[usize]) -> Result<()>
                where
                    A: $bound,
                    E: Dimension,
                {
                    zip_assign(stringify!($op), self.array_mut(), rhs, broadcast_dimensions, A::$elem)
                }
            )*

            /// This array as a lower-rank operand of the strict operators, with its
            /// `broadcast_dimensions`: dim `i` of `self` is dim `broadcast_dimensions[i]` of the
            /// other side, as in the `_bcast` methods. See [`InDims`].
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let x = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
            /// let mu = array![1.5, 3.5, 5.5]; // one per row: dim 0
            /// let beta = array![10.0, 20.0]; // one per column: dim 1
            /// let y = x.into_strict() - mu.in_dims(&[0]) + beta.in_dims(&[1]);
            /// assert_eq!(y, array![[9.5, 20.5], [9.5, 20.5], [9.5, 20.5]]);
            /// ```
            fn in_dims<'a>(&'a self, broadcast_dimensions: &'a [usize]) -> InDims<'a, A, D> {
                InDims::new(self.array(), broadcast_dimensions)
            }

            /// A view of this array behind the `std::ops` operators with strict XLA semantics:
            /// equal ranks with degenerate (size-1) broadcasting, rank-0 arrays and scalars
            /// broadcast, no rank promotion, and every result strict again. See
            /// [`Strict`](crate::strict::Strict).
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let a = array![[1, 2, 3], [4, 5, 6]];
            /// let col = array![[10], [20]];
            /// assert_eq!(a.strict() + &col, array![[11, 12, 13], [24, 25, 26]]);
            /// ```
            fn strict<'a>(&'a self) -> StrictView<'a, A, D>
            where
                D: 'a,
            {
                Strict::new(self.array().view())
            }
        }

        impl<A: XlaElement, D: Dimension> ArithBcast<A, D> for ArrayRef<A, D> {}
    };
}

binary_ops!(arith_family);

/// Generates the comparison family over the same implementation.
macro_rules! compare_family {
    ($( $op:ident, $hlo:literal, $v:ident, $bound:ident, $cmp:tt, [$name:ident, $into:ident], $expect:literal; )*) => {
        /// XLA `Compare` with broadcasting, giving `bool` arrays, on every ndarray array and view.
        ///
        /// Floats compare as IEEE-754 does (any comparison with NaN is false, except `ne`);
        /// `bool` orders `false < true`. `eq` and `ne` need only `PartialEq` (complex numbers
        /// have them), the orderings `PartialOrd`.
        ///
        /// ```
        /// use ndarray::array;
        /// use xla_bcast::prelude::*;
        ///
        /// let x = array![[1, 5], [7, 2]];
        /// let limit = array![4, 6]; // one per row
        /// assert_eq!(x.gt_bcast(&limit, &[0]).unwrap(), array![[false, true], [true, false]]);
        /// ```
        pub trait CompareBcast<A: Clone + Sync, D: Dimension>: Sealed<A, D> {
            $(
                #[doc = concat!("`self ", stringify!($cmp), " rhs` elementwise with XLA broadcasting.")]
                ///
                /// ```
                /// use ndarray::array;
                /// use xla_bcast::prelude::*;
                ///
                /// let a = array![[1, 2], [3, 4]];
                #[doc = concat!("let c = a.", stringify!($name), "(&array![2, 4], &[1]).unwrap();")]
                #[doc = concat!("assert_eq!(c, array!", $expect, ");")]
                /// ```
                fn $name<E>(&self, rhs: &ArrayRef<A, E>, broadcast_dimensions: &[usize]) -> Result<Array<bool, DimMaxOf<D, E>>>
                where
                    A: $bound,
                    D: DimMax<E>,
                    E: Dimension,
                {
                    zip_collect(stringify!($op), self.array(), rhs, broadcast_dimensions, |a: A, b: A| a $cmp b)
                }

                #[doc = concat!("[`", stringify!($name), "`](CompareBcast::", stringify!($name), ") into a `bool` array of the result's shape.")]
                ///
                /// ```
                /// use ndarray::{array, Array2};
                /// use xla_bcast::prelude::*;
                ///
                /// let mut out = Array2::from_elem((2, 2), false);
                #[doc = concat!("array![[1, 2], [3, 4]].", stringify!($into), "(&array![2, 4], &[1], &mut out).unwrap();")]
                #[doc = concat!("assert_eq!(out, array!", $expect, ");")]
                /// ```
                fn $into<E, O>(&self, rhs: &ArrayRef<A, E>, broadcast_dimensions: &[usize], out: &mut ArrayRef<bool, O>) -> Result<()>
                where
                    A: $bound,
                    E: Dimension,
                    O: Dimension,
                {
                    zip_into(stringify!($op), self.array(), rhs, broadcast_dimensions, out, |a: A, b: A| a $cmp b)
                }
            )*
        }

        impl<A: Clone + Sync, D: Dimension> CompareBcast<A, D> for ArrayRef<A, D> {}
    };
}

compare_ops!(compare_family);

/// `select`'s three operands as engine inputs at their common shape, kept in `out`.
#[allow(clippy::type_complexity)]
fn select_inputs<'p, 't, 'f, 'o, T, D, E1, E2>(
    pred: &'p ArrayRef<bool, D>,
    on_true: &'t ArrayRef<T, E1>,
    on_false: &'f ArrayRef<T, E2>,
    out: &'o mut Vec<usize>,
) -> Result<(Src<'p, bool>, Src<'t, T>, Src<'f, T>)>
where
    'o: 'p + 't + 'f,
    D: Dimension,
    E1: Dimension,
    E2: Dimension,
{
    *out = select_shape(pred.shape(), on_true.shape(), on_false.shape())?;
    let shape: &'o [usize] = out;
    // Each operand has the output's rank (degenerate dims) or rank 0 (a scalar).
    let op = "select";
    Ok((
        Src::placed(op, pred, shape, &iota(pred.ndim()))?,
        Src::placed(op, on_true, shape, &iota(on_true.ndim()))?,
        Src::placed(op, on_false, shape, &iota(on_false.ndim()))?,
    ))
}

/// `clamp`'s bounds as engine inputs at the operand's shape, kept in `out`; the rule's error
/// when a bound is neither a scalar nor of that shape.
fn clamp_bounds<'m, 'n, 'o: 'm + 'n, A, E1: Dimension, E2: Dimension>(
    min: &'m ArrayRef<A, E1>,
    operand: &[usize],
    max: &'n ArrayRef<A, E2>,
    out: &'o mut Dims,
) -> Result<(Src<'m, A>, Src<'n, A>)> {
    *out = Dims::from_slice(&clamp_shape(min.shape(), operand, max.shape())?);
    let out: &'o Dims = out;
    let place = |rank: usize| iota(rank);
    Ok((
        Src::placed("clamp", min, out, &place(min.ndim()))?,
        Src::placed("clamp", max, out, &place(max.ndim()))?,
    ))
}

/// XLA `Clamp(min, operand, max)` on every ndarray array and view (the operand): each element
/// held between its bounds, `min(max(x, min), max)` with XLA's `max` and `min` (NaN propagates;
/// `bool`: `(x | min) & max`). Each bound is a scalar (rank 0) or has the operand's shape.
///
/// ```
/// use ndarray::{arr0, array};
/// use xla_bcast::prelude::*;
///
/// let x = array![-3.0, 0.5, 9.0];
/// assert_eq!(x.clamp_bcast(&arr0(0.0), &arr0(1.0)).unwrap(), array![0.0, 0.5, 1.0]);
/// ```
pub trait ClampBcast<A, D: Dimension>: Sealed<A, D> {
    /// `self` clamped between `min` and `max`, into a fresh array of `self`'s shape.
    ///
    /// # Errors
    /// [`BroadcastError::ClampShape`] when a bound is neither rank 0 nor of `self`'s shape.
    ///
    /// ```
    /// use ndarray::{arr0, array};
    /// use xla_bcast::prelude::*;
    ///
    /// // StableHLO's `clamp_op_test_si64_min_scalar`.
    /// let x = array![2i64, 3, -1];
    /// assert_eq!(x.clamp_bcast(&array![0, 0, -2], &arr0(1)).unwrap(), array![1, 1, -1]);
    /// assert!(x.clamp_bcast(&array![0, 0], &arr0(1)).is_err());
    /// ```
    fn clamp_bcast<E1: Dimension, E2: Dimension>(
        &self,
        min: &ArrayRef<A, E1>,
        max: &ArrayRef<A, E2>,
    ) -> Result<Array<A, D>>
    where
        A: XlaOrd,
    {
        let mut shape = Dims::new();
        let x = self.array();
        let (lo, hi) = clamp_bounds(min, x.shape(), max, &mut shape)?;
        let kernel = ZipN::new(&A::xla_clamp, (Src::of(x), lo, hi));
        engine::collect("clamp", x.raw_dim(), &kernel, Fresh::FollowInputs)
    }

    /// [`clamp_bcast`](ClampBcast::clamp_bcast) into `out`, which must have `self`'s shape
    /// (otherwise [`BroadcastError::OutputShape`] and nothing is written).
    ///
    /// ```
    /// use ndarray::{arr0, array, Array1};
    /// use xla_bcast::prelude::*;
    ///
    /// let mut out = Array1::zeros(3);
    /// array![0.5, -3.0, 9.0].clamp_bcast_into(&arr0(-1.0), &arr0(1.0), &mut out).unwrap();
    /// assert_eq!(out, array![0.5, -1.0, 1.0]);
    /// ```
    fn clamp_bcast_into<E1: Dimension, E2: Dimension, O: Dimension>(
        &self,
        min: &ArrayRef<A, E1>,
        max: &ArrayRef<A, E2>,
        out: &mut ArrayRef<A, O>,
    ) -> Result<()>
    where
        A: XlaOrd,
    {
        let mut shape = Dims::new();
        let x = self.array();
        let (lo, hi) = clamp_bounds(min, x.shape(), max, &mut shape)?;
        check_out("clamp", x.shape(), out.shape())?;
        engine::into(out, &ZipN::new(&A::xla_clamp, (Src::of(x), lo, hi)));
        Ok(())
    }

    /// `self` clamped in place (on error, `self` is unchanged).
    ///
    /// ```
    /// use ndarray::{arr0, array};
    /// use xla_bcast::prelude::*;
    ///
    /// let mut x = array![[1u8, 200], [7, 90]];
    /// x.clamp_assign_bcast(&arr0(5), &array![[100, 100], [6, 100]]).unwrap();
    /// assert_eq!(x, array![[5, 100], [6, 90]]);
    /// ```
    fn clamp_assign_bcast<E1: Dimension, E2: Dimension>(
        &mut self,
        min: &ArrayRef<A, E1>,
        max: &ArrayRef<A, E2>,
    ) -> Result<()>
    where
        A: XlaOrd,
    {
        let mut shape = Dims::new();
        let (lo, hi) = clamp_bounds(min, self.array().shape(), max, &mut shape)?;
        // min(max(x, lo), hi) as two passes in place: the same values as one.
        engine::assign(self.array_mut(), lo, &A::xla_max);
        engine::assign(self.array_mut(), hi, &A::xla_min);
        Ok(())
    }
}

impl<A, D: Dimension> ClampBcast<A, D> for ArrayRef<A, D> {}

/// `Select`'s element function.
fn choose<T>(p: bool, on_true: T, on_false: T) -> T {
    if p {
        on_true
    } else {
        on_false
    }
}

/// XLA `Select` on a `bool` predicate array or view.
///
/// ```
/// use ndarray::{arr0, array};
/// use xla_bcast::prelude::*;
///
/// let x = array![-1.0, 2.0, -3.0];
/// let keep = x.gt_bcast(&arr0(0.0), &[]).unwrap();
/// assert_eq!(keep.select_bcast(&x, &arr0(0.0)).unwrap(), array![0.0, 2.0, 0.0]);
/// ```
pub trait SelectBcast<D: Dimension>: Sealed<bool, D> {
    /// `pred ? on_true : on_false` elementwise. The three operands have equal ranks and
    /// broadcast degenerate (size-1) dims, or are rank 0 and broadcast to anything (XLA's rule
    /// for `Select`, see [`crate::shape::select_shape`]).
    ///
    /// ```
    /// use ndarray::{arr0, array};
    /// use xla_bcast::prelude::*;
    ///
    /// let pred = array![[true], [false]];
    /// let a = array![[1, 2, 3], [4, 5, 6]];
    /// let r = pred.select_bcast(&a, &arr0(0)).unwrap();
    /// assert_eq!(r, array![[1, 2, 3], [0, 0, 0]]);
    /// ```
    #[allow(clippy::type_complexity)]
    fn select_bcast<T, E1, E2>(
        &self,
        on_true: &ArrayRef<T, E1>,
        on_false: &ArrayRef<T, E2>,
    ) -> Result<Array<T, DimMaxOf<DimMaxOf<D, E1>, E2>>>
    where
        T: Clone + Send + Sync,
        D: DimMax<E1>,
        DimMaxOf<D, E1>: DimMax<E2>,
        E1: Dimension,
        E2: Dimension,
    {
        let mut shape = Vec::new();
        let (p, t, f) = select_inputs(self.array(), on_true, on_false, &mut shape)?;
        let dim = out_dim("select", p.shape())?;
        let kernel = ZipN::new(&choose, (p, t, f));
        engine::collect("select", dim, &kernel, Fresh::FollowInputs)
    }

    /// [`select_bcast`](SelectBcast::select_bcast) into `out`, which must have the result's shape.
    ///
    /// ```
    /// use ndarray::{arr0, array, Array1};
    /// use xla_bcast::prelude::*;
    ///
    /// let mut out = Array1::zeros(3);
    /// array![true, false, true].select_bcast_into(&arr0(1), &arr0(-1), &mut out).unwrap();
    /// assert_eq!(out, array![1, -1, 1]);
    /// ```
    fn select_bcast_into<T, E1, E2, O>(
        &self,
        on_true: &ArrayRef<T, E1>,
        on_false: &ArrayRef<T, E2>,
        out: &mut ArrayRef<T, O>,
    ) -> Result<()>
    where
        T: Clone + Send + Sync,
        E1: Dimension,
        E2: Dimension,
        O: Dimension,
    {
        let mut shape = Vec::new();
        let (p, t, f) = select_inputs(self.array(), on_true, on_false, &mut shape)?;
        check_out("select", p.shape(), out.shape())?;
        engine::into(out, &ZipN::new(&choose, (p, t, f)));
        Ok(())
    }
}

impl<D: Dimension> SelectBcast<D> for ArrayRef<bool, D> {}
