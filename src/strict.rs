//! [`Strict`]: ndarray arrays behind the `std::ops` operators with XLA's rule, for a whole
//! expression.
//!
//! ndarray's `&a + &b` broadcasts NumPy's way: it right-aligns shapes and promotes ranks. A
//! [`Strict`] array's operators accept only what XLA accepts without `broadcast_dimensions`:
//! equal ranks with degenerate (size-1) dims, and rank-0 arrays or scalars against anything;
//! they compute with XLA's element semantics ([`crate::element`]) and return a [`Strict`]
//! array again, so the rule holds to the end of the expression. Everything else ndarray offers
//! is one `Deref` away, and [`Strict::into_inner`] unwraps.
//!
//! An owned array taken by value lends its buffer to the result wherever the result has its
//! shape, as ndarray's `a + &b` does: in `(x.into_strict() - &mu_col) * &g_row + &beta_row`
//! (`(M, 1)` and `(1, N)` operands) only the first op that has no owned operand allocates.
//! From a borrowed 512x512 `f32` array, that chain and a scale run in 40-54 us instead of
//! 65-67 us (13-17 ms instead of 25-29 ms at 4096x4096: `docs/experiments.md`).
//!
//! # Porting ndarray arithmetic
//!
//! Before, with ndarray's operators (the bias row is silently rank-promoted, and so would be a
//! vector of the wrong orientation):
//!
//! ```
//! use ndarray::{array, Array2};
//!
//! let x = array![[1.0, 2.0], [3.0, 4.0]];
//! let w = array![[0.5, -1.0], [2.0, 0.25]];
//! let bias = array![0.1, 0.2];
//! let h = (x.dot(&w) + &bias).mapv(|v: f64| v.max(0.0));
//! let y: Array2<f64> = -&h * 2.0 + &x;
//! assert_eq!(y.shape(), &[2, 2]);
//! ```
//!
//! After: the `use` line, `.strict()` on the first operand, and the one place that relied on
//! rank promotion, now a `(1, 2)` row spelled out. The rest of the expression is unchanged and
//! stays strict.
//!
//! ```
//! use ndarray::{array, Array2};
//! use xla_bcast::prelude::*;
//!
//! let x = array![[1.0, 2.0], [3.0, 4.0]];
//! let w = array![[0.5, -1.0], [2.0, 0.25]];
//! let bias = array![[0.1, 0.2]];
//! let h = (x.dot(&w).into_strict() + &bias).mapv(|v: f64| v.max(0.0)).into_strict();
//! let y: StrictArray<f64, _> = -&h * 2.0 + &x;
//! assert_eq!(y.shape(), &[2, 2]);
//! ```
//!
//! # Lower-rank operands: `in_dims`
//!
//! A vector or any lower-rank operand joins an expression with its `broadcast_dimensions`, as
//! the `_bcast` methods take them: [`in_dims`](crate::ops::ArithBcast::in_dims) gives an
//! [`InDims`] operand, and an owned array lends its buffer through the whole chain:
//!
//! ```
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//!
//! let x = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! let (mu, rstd) = (array![2.0, 5.0], array![1.0, 0.5]); // per row: dim 0
//! let (g, beta) = (array![1.0, 2.0, 3.0], array![0.0, 0.0, 1.0]); // per column: dim 1
//! let y = (x.into_strict() - mu.in_dims(&[0])) * rstd.in_dims(&[0]) * g.in_dims(&[1])
//!     + beta.in_dims(&[1]);
//! assert_eq!(y, array![[-1.0, 0.0, 4.0], [-0.5, 0.0, 2.5]]);
//! ```
//!
//! # What each operator needs of the element type
//!
//! Each operator exists for the element types XLA defines its op on, as the `_bcast` methods
//! do; in generic code, bound the element type by the trait of [`crate::element`] that the
//! operator needs:
//!
//! | operators | op | element trait | element types |
//! |---|---|---|---|
//! | `+`, `*` (and `+=`, `*=`) | `add`, `mul` | [`XlaElement`] | all, `bool` too (`or`, `and`) |
//! | `-`, `/`, unary `-` | `sub`, `div`, `negate` | [`XlaNumber`] | all but `bool` |
//! | `%` | `rem` | [`XlaReal`] | integers, real floats |
//! | `&`, `\|`, `^`, `!` | `and`, `or`, `xor`, `not` | [`XlaBitwise`] | integers, `bool` |
//! | `<<`, `>>` | `shift_left`, `shift_right_arithmetic` | [`XlaInteger`] | integers |
//!
//! ```
//! use ndarray::{Array2, ArrayView1};
//! use xla_bcast::prelude::*;
//!
//! /// `(x - mu) * g`, `mu` per row and `g` per column, for any element type that subtracts.
//! fn centre_and_scale<T: XlaNumber>(x: Array2<T>, mu: ArrayView1<T>, g: ArrayView1<T>) -> Array2<T> {
//!     ((x.into_strict() - mu.in_dims(&[0])) * g.in_dims(&[1])).into_inner()
//! }
//! let y = centre_and_scale(ndarray::array![[3, 4], [5, 6]], ndarray::aview1(&[1, 2]), ndarray::aview1(&[10, 1]));
//! assert_eq!(y, ndarray::array![[20, 3], [30, 4]]);
//! ```
//!
//! # Panics
//! The operators panic, as ndarray's do, where the shapes do not fit the rule; the message is the
//! [`BroadcastError`](crate::BroadcastError)'s and the location is the caller's line. The
//! `_bcast` methods ([`ArithBcast`](crate::ops::ArithBcast)) return the error instead.
//!
//! ```should_panic
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//!
//! let a = array![[1, 2, 3], [4, 5, 6]];
//! let v = array![1, 2, 3];
//! let _ = a.strict() + &v; // panics: ranks differ; give broadcast_dimensions
//! ```
//!
//! Operators an element type lacks do not compile: floats do not shift,
//!
//! ```compile_fail
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//! let a = array![1.0f32, 2.0];
//! let _ = a.strict() << &a;
//! ```
//!
//! and `bool`s do not subtract:
//!
//! ```compile_fail
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//! let a = array![true, false];
//! let _ = a.strict() - &a;
//! ```

use std::fmt;
use std::ops::{
    Add, AddAssign, BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, BitXorAssign, Deref,
    DerefMut, Div, DivAssign, Mul, MulAssign, Neg, Not, Rem, RemAssign, Shl, ShlAssign, Shr,
    ShrAssign, Sub, SubAssign,
};

use ndarray::{
    ArrayBase, ArrayRef, Data, DataMut, DimMax, Dimension, OwnedRepr, RawData, ViewRepr,
};

use crate::element::{XlaBitwise, XlaElement, XlaInteger, XlaNumber, XlaReal};
use crate::front::{map_collect, zip_assign, zip_collect, DimMaxOf};

/// An ndarray array (owned, a view, shared, ...: any storage `S`) whose operators follow XLA's
/// rule and return [`Strict`] arrays; see the [module](self).
///
/// Made by [`ArithBcast::strict`](crate::ops::ArithBcast::strict) (a view) or
/// [`IntoStrict::into_strict`] (any array, consumed); unwrapped by [`Strict::into_inner`];
/// everything else ndarray offers works through `Deref`.
///
/// ```
/// use ndarray::{arr0, array};
/// use xla_bcast::prelude::*;
///
/// let a = array![[1, 2, 3], [4, 5, 6]];
/// let col = array![[10], [20]];
/// let row = array![[1, 1, 1]];
/// // Strict through the whole expression: every step checks XLA's rule.
/// let r = a.strict() + &col - &row * 2 + &arr0(1);
/// assert_eq!(r, array![[10, 11, 12], [23, 24, 25]]);
/// assert_eq!(r.sum(), 105); // ndarray's methods, through Deref
/// let plain: ndarray::Array2<i32> = r.into_inner();
/// # let _ = plain;
/// ```
pub struct Strict<S: RawData, D>(ArrayBase<S, D>);

/// An owned [`Strict`] array: what every operator returns.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let y: StrictArray<i32, ndarray::Ix1> = array![1, 2].strict() + 1;
/// assert_eq!(y.into_inner(), array![2, 3]);
/// ```
pub type StrictArray<A, D> = Strict<OwnedRepr<A>, D>;

/// A borrowed [`Strict`] array: what [`ArithBcast::strict`](crate::ops::ArithBcast::strict)
/// returns.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let x = array![1.0, 2.0];
/// let v: StrictView<f64, ndarray::Ix1> = x.strict();
/// assert_eq!(v * 2.0, array![2.0, 4.0]);
/// ```
pub type StrictView<'a, A, D> = Strict<ViewRepr<&'a A>, D>;

impl<S: RawData, D> Strict<S, D> {
    /// `array` behind strict operators.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::strict::Strict;
    ///
    /// let s = Strict::new(array![1.0, 2.0]);
    /// assert_eq!(s * 2.0, array![2.0, 4.0]);
    /// ```
    pub fn new(array: ArrayBase<S, D>) -> Self {
        Strict(array)
    }

    /// The ndarray array inside.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let r: ndarray::Array1<i32> = (array![1, 2].strict() + 1).into_inner();
    /// assert_eq!(r, array![2, 3]);
    /// ```
    pub fn into_inner(self) -> ArrayBase<S, D> {
        self.0
    }
}

impl<S: RawData, D> Deref for Strict<S, D> {
    type Target = ArrayBase<S, D>;
    fn deref(&self) -> &ArrayBase<S, D> {
        &self.0
    }
}

impl<S: RawData, D> DerefMut for Strict<S, D> {
    fn deref_mut(&mut self) -> &mut ArrayBase<S, D> {
        &mut self.0
    }
}

impl<S: ndarray::RawDataClone, D: Clone> Clone for Strict<S, D> {
    fn clone(&self) -> Self {
        Strict(self.0.clone())
    }
}

impl<A: fmt::Debug, S: Data<Elem = A>, D: Dimension> fmt::Debug for Strict<S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Strict").field(&self.0).finish()
    }
}

/// Printed as the array inside is.
impl<A: fmt::Display, S: Data<Elem = A>, D: Dimension> fmt::Display for Strict<S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Equality of the elements inside, whichever side is [`Strict`].
macro_rules! strict_eq {
    ($($lhs:ident == $rhs:ident;)*) => {$(
        impl<A, S, S2, D> PartialEq<$rhs<S2, D>> for $lhs<S, D>
        where
            A: PartialEq,
            S: Data<Elem = A>,
            S2: Data<Elem = A>,
            D: Dimension,
        {
            fn eq(&self, other: &$rhs<S2, D>) -> bool {
                AsArray::<A, D>::array(self) == AsArray::<A, D>::array(other)
            }
        }
    )*};
}

strict_eq! {
    Strict == ArrayBase;
    Strict == Strict;
    ArrayBase == Strict;
}

/// Any ndarray array (owned, view, shared, ...) into a [`Strict`] one, consumed.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let y = array![[1, 2], [3, 4]].into_strict() * 10 + &array![[1, 2]];
/// assert_eq!(y, array![[11, 22], [31, 42]]);
/// ```
pub trait IntoStrict<S: RawData, D> {
    /// This array behind strict operators (see [`Strict`]).
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let mut acc = array![[1.0, 2.0], [3.0, 4.0]].into_strict();
    /// acc += &array![[10.0, 20.0]];
    /// assert_eq!(acc, array![[11.0, 22.0], [13.0, 24.0]]);
    /// ```
    fn into_strict(self) -> Strict<S, D>;
}

impl<S: RawData, D> IntoStrict<S, D> for ArrayBase<S, D> {
    fn into_strict(self) -> Strict<S, D> {
        Strict(self)
    }
}

/// A lower-rank operand with its `broadcast_dimensions`, standing in a strict expression:
/// made by [`ArithBcast::in_dims`](crate::ops::ArithBcast::in_dims).
///
/// The strict operators combine it with the other side by XLA's rule for a binary op with
/// explicit `broadcast_dimensions`: its dim `i` is the other side's dim `dims[i]`, and size-1
/// dims broadcast either way. It must not have a higher rank than the other side (the
/// dimensions say where *its* dims go). An owned strict array on the other side lends its
/// buffer to the result, so a chain allocates once:
///
/// ```
/// use ndarray::{array, Array2};
/// use xla_bcast::prelude::*;
///
/// let x: Array2<f64> = array![[1.0, 2.0, 3.0], [4.0, 6.0, 8.0]];
/// let mu = array![2.0, 6.0]; // one per row
/// let g = array![1.0, 10.0, 100.0]; // one per column
/// let buffer = x.as_ptr();
/// let y = (x.into_strict() - mu.in_dims(&[0])) * g.in_dims(&[1]);
/// assert_eq!(y, array![[-1.0, 0.0, 100.0], [-2.0, 0.0, 200.0]]);
/// assert_eq!(y.as_ptr(), buffer); // x's buffer, lent through the chain
/// ```
///
/// # Panics
/// As the strict operators do: where the shapes and dimensions do not fit XLA's rule (the
/// message is the [`BroadcastError`](crate::BroadcastError)'s), and where the operand given
/// with `in_dims` has the higher rank.
///
/// ```should_panic
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let x = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let _ = x.strict() - array![1.0, 2.0].in_dims(&[1]); // dim 1 has 3 elements, not 2
/// ```
pub struct InDims<'a, A, E> {
    array: &'a ArrayRef<A, E>,
    dims: &'a [usize],
}

impl<A: fmt::Debug, E: Dimension> fmt::Debug for InDims<'_, A, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InDims")
            .field("array", &self.array)
            .field("dims", &self.dims)
            .finish()
    }
}

impl<A, E> Clone for InDims<'_, A, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A, E> Copy for InDims<'_, A, E> {}

impl<'a, A, E> InDims<'a, A, E> {
    pub(crate) fn new(array: &'a ArrayRef<A, E>, dims: &'a [usize]) -> Self {
        InDims { array, dims }
    }

    /// The operand's `broadcast_dimensions`.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let v = array![1, 2];
    /// assert_eq!(v.in_dims(&[0]).dims(), &[0]);
    /// ```
    pub fn dims(&self) -> &'a [usize] {
        self.dims
    }

    /// The operand.
    pub(crate) fn operand(&self) -> &'a ArrayRef<A, E> {
        self.array
    }
}

/// Implemented by no type: the bound that refuses an [`InDims`] operand combined with a
/// scalar (`v.in_dims(&dims) * 2.0`), so that the compiler's message says what to write: an
/// `InDims` borrows its array, so there is no array to scale in place. Scale the array first,
/// `(&v * 2.0).in_dims(&dims)`, or scale the result.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let x = array![[1.0, 2.0], [3.0, 4.0]];
/// let g = array![1.0, 10.0];
/// let y = x.strict() * (&g * 2.0).in_dims(&[1]);
/// assert_eq!(y, array![[2.0, 40.0], [6.0, 80.0]]);
/// ```
///
/// ```compile_fail
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let x = array![[1.0, 2.0], [3.0, 4.0]];
/// let g = array![1.0, 10.0];
/// let y = x.strict() * (g.in_dims(&[1]) * 2.0); // scale `g` first, as above
/// ```
#[diagnostic::on_unimplemented(
    message = "an `InDims` operand cannot be combined with a scalar: it borrows its array",
    label = "scale the array before placing it",
    note = "write `(&v * 2.0).in_dims(&dims)`, or apply the scalar to the result"
)]
pub trait ScaleBeforeInDims {
    /// Never called: no type implements the trait.
    fn refused<T>(self) -> T;
}

/// The `broadcast_dimensions` of a strict op whose operands are `lhs` and `rhs`: those of the
/// side given with [`InDims`] (empty for two arrays), checked to belong to the lower-rank side.
fn dims_of<'a, A, D: Dimension, E: Dimension>(
    op: &'static str,
    lhs: &'a (impl AsArray<A, D> + ?Sized),
    rhs: &'a (impl AsArray<A, E> + ?Sized),
) -> crate::error::Result<&'a [usize]> {
    let (l, r) = (lhs.array().shape(), rhs.array().shape());
    let (given, other, dims) = match (lhs.dims(), rhs.dims()) {
        (Some(dims), _) => (l, r, dims),
        (None, Some(dims)) => (r, l, dims),
        (None, None) => return Ok(&[]),
    };
    match given.len() > other.len() {
        true => Err(crate::BroadcastError::InDimInvalid {
            op,
            operand: given.into(),
            out_shape: other.into(),
            dims: dims.into(),
            reason: format!(
                "the operand given with in_dims has rank {}, above the other side's {}; \
                 give in_dims to the lower-rank operand",
                given.len(),
                other.len()
            ),
        }),
        false => Ok(dims),
    }
}

/// `op` of two operands under the strict rule, or a panic at the caller's line.
#[track_caller]
fn binary<A, D, E, F>(
    op: &'static str,
    lhs: &impl AsArray<A, D>,
    rhs: &impl AsArray<A, E>,
    f: F,
) -> StrictArray<A, DimMaxOf<D, E>>
where
    A: XlaElement,
    D: Dimension + DimMax<E>,
    E: Dimension,
    F: Fn(A, A) -> A + Sync,
{
    // `f` is the op's function item, not a `fn` pointer: a pointer would not inline into the
    // kernel and the loop would not vectorise.
    match dims_of(op, lhs, rhs).and_then(|dims| zip_collect(op, lhs.array(), rhs.array(), dims, f))
    {
        Ok(r) => Strict(r),
        Err(e) => panic!("{e}"),
    }
}

/// `f` over every element, or a panic (the allocation) at the caller's line.
#[track_caller]
fn unary<A, D, F>(op: &'static str, a: &ArrayRef<A, D>, f: F) -> StrictArray<A, D>
where
    A: XlaElement,
    D: Dimension,
    F: Fn(A) -> A + Sync,
{
    match map_collect(op, a, f) {
        Ok(r) => Strict(r),
        Err(e) => panic!("{e}"),
    }
}

/// `lhs = op(lhs, rhs)` in place, or a panic at the caller's line (nothing written).
#[track_caller]
fn assign<A, D, E, F>(op: &'static str, lhs: &mut ArrayRef<A, D>, rhs: &impl AsArray<A, E>, f: F)
where
    A: XlaElement,
    D: Dimension,
    E: Dimension,
    F: Fn(A, A) -> A + Sync,
{
    if let Err(e) = dims_of(op, &*lhs, rhs) {
        panic!("{e}")
    }
    let dims = rhs.dims().unwrap_or(&[]);
    if let Err(e) = zip_assign(op, lhs, rhs.array(), dims, f) {
        panic!("{e}")
    }
}

/// `lhs <op> rhs` into the buffer of an owned operand (taken by value) when the result has its
/// shape, as ndarray's `a + &b` does: a chain of operators on an owned array allocates once.
/// Otherwise into a fresh array ([`binary`]).
#[track_caller]
fn binary_reusing<A, D, E, L, R, F>(
    op: &'static str,
    lhs: L,
    rhs: R,
    f: F,
) -> StrictArray<A, DimMaxOf<D, E>>
where
    A: XlaElement,
    D: Dimension + DimMax<E>,
    E: Dimension,
    L: Lhs<A, D>,
    R: Lhs<A, E>,
    F: Fn(A, A) -> A + Sync,
{
    let plan = dims_of(op, &lhs, &rhs).and_then(|dims| {
        crate::shape::binary_plan(op, lhs.array().shape(), rhs.array().shape(), dims)
    });
    let out = match plan {
        Ok(plan) => plan.out,
        Err(e) => panic!("{e}"),
    };
    // The result's rank is the owner's: the conversion of its dimension type holds.
    let strict = |a: ndarray::ArrayD<A>| match a.into_dimensionality::<DimMaxOf<D, E>>() {
        Ok(a) => Strict(a),
        Err(e) => panic!("{op}: {e}"),
    };
    let lhs = match out[..] == *lhs.array().shape() {
        true => match lhs.into_buffer() {
            Ok(mut a) => {
                assign(op, &mut a, &rhs, f);
                return strict(a.into_dyn());
            }
            Err(lhs) => lhs,
        },
        false => lhs,
    };
    let rhs = match out[..] == *rhs.array().shape() {
        true => match rhs.into_buffer() {
            Ok(mut b) => {
                // The plan above checked the shapes in the operands' order; with the roles
                // swapped nothing can fail but the op's order, which `f` keeps.
                let dims = lhs.dims().unwrap_or(&[]);
                if let Err(e) = zip_assign(op, &mut b, lhs.array(), dims, |y, x| f(x, y)) {
                    panic!("{e}")
                }
                return strict(b.into_dyn());
            }
            Err(rhs) => rhs,
        },
        false => rhs,
    };
    binary(op, &lhs, &rhs, f)
}

use operand::{AsArray, AssignRhs, Lhs, Rhs};

/// The operands of the operators, sealed: public so that the operators' bounds can name them,
/// in a private module so that no other crate can.
mod operand {
    use ndarray::{ArrayBase, ArrayRef, Data, DimMax, Dimension};

    use super::{InDims, Strict, StrictArray};
    use crate::element::XlaElement;

    /// A left operand of the operators: its array, and its buffer when it owns one.
    pub trait Lhs<A, D>: AsArray<A, D> + Sized {
        /// The owned array, without a copy; `Err` (with the operand) when it has no buffer of
        /// its own (a view, a reference, a shared array with other owners).
        fn into_buffer(self) -> Result<ndarray::Array<A, D>, Self> {
            Err(self)
        }
    }

    impl<A, S: Data<Elem = A>, D: Dimension> Lhs<A, D> for ArrayBase<S, D> {
        fn into_buffer(self) -> Result<ndarray::Array<A, D>, Self> {
            self.try_into_owned_nocopy()
        }
    }

    impl<A, S: Data<Elem = A>, D: Dimension> Lhs<A, D> for Strict<S, D> {
        fn into_buffer(self) -> Result<ndarray::Array<A, D>, Self> {
            self.0.into_buffer().map_err(Strict)
        }
    }

    impl<A, S: Data<Elem = A>, D> Lhs<A, D> for &Strict<S, D> {}
    impl<A, S: Data<Elem = A>, D> Lhs<A, D> for &ArrayBase<S, D> {}
    impl<A, D> Lhs<A, D> for &ArrayRef<A, D> {}
    impl<A, D> Lhs<A, D> for InDims<'_, A, D> {}
    impl<A, D> Lhs<A, D> for &InDims<'_, A, D> {}

    /// How an operand of the operators reaches its array: an ndarray array or view, a strict
    /// one, or a reference to either.
    pub trait AsArray<A, E> {
        fn array(&self) -> &ArrayRef<A, E>;
        /// The `broadcast_dimensions` an [`InDims`] operand carries; `None` for an array.
        fn dims(&self) -> Option<&[usize]> {
            None
        }
    }

    impl<A, E> AsArray<A, E> for InDims<'_, A, E> {
        fn array(&self) -> &ArrayRef<A, E> {
            self.array
        }
        fn dims(&self) -> Option<&[usize]> {
            Some(self.dims)
        }
    }

    impl<A, E, S: Data<Elem = A>> AsArray<A, E> for ArrayBase<S, E> {
        fn array(&self) -> &ArrayRef<A, E> {
            self
        }
    }

    impl<A, E> AsArray<A, E> for ArrayRef<A, E> {
        fn array(&self) -> &ArrayRef<A, E> {
            self
        }
    }

    impl<A, E, S: Data<Elem = A>> AsArray<A, E> for Strict<S, E> {
        fn array(&self) -> &ArrayRef<A, E> {
            &self.0
        }
    }

    impl<A, E, T: AsArray<A, E> + ?Sized> AsArray<A, E> for &T {
        fn array(&self) -> &ArrayRef<A, E> {
            (**self).array()
        }
        fn dims(&self) -> Option<&[usize]> {
            (**self).dims()
        }
    }

    /// A right operand of a strict left side of elements `A` and dimension `D`: a scalar, or an
    /// array in any form, with the result's dimension. One impl of each operator covers them
    /// all; the scalar's impl and the arrays' do not overlap, as no array form is an element.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a right operand of a strict operator on `{A}` elements",
        label = "not a right operand of a strict array of `{A}`",
        note = "a right operand is a scalar of the element type, an ndarray array or view (owned or \
                borrowed), a strict array, or `v.in_dims(&dims)` (owned or borrowed), of the same \
                element type"
    )]
    pub trait Rhs<A, D>: Sized {
        /// The result's dimension.
        type Out;
        /// `lhs <op> self`.
        fn binary<L: Lhs<A, D>, F: Fn(A, A) -> A + Sync>(
            self,
            op: &'static str,
            lhs: L,
            f: F,
        ) -> StrictArray<A, Self::Out>;
    }

    /// A right operand of `<op>=`: a scalar, or an array in any form.
    pub trait AssignRhs<A>: Sized {
        /// `lhs = lhs <op> self`.
        fn assign<D: Dimension, F: Fn(A, A) -> A + Sync>(
            self,
            op: &'static str,
            lhs: &mut ArrayRef<A, D>,
            f: F,
        );
    }

    impl<A: XlaElement, D: Dimension> Rhs<A, D> for A {
        type Out = D;
        #[track_caller]
        fn binary<L: Lhs<A, D>, F: Fn(A, A) -> A + Sync>(
            self,
            op: &'static str,
            lhs: L,
            f: F,
        ) -> StrictArray<A, D> {
            // A scalar broadcasts to anything: no shape rule can fail, only the allocation,
            // which an owned array spares.
            match lhs.into_buffer() {
                Ok(mut a) => {
                    super::assign(op, &mut a, &ndarray::arr0(self), f);
                    Strict(a)
                }
                Err(lhs) => super::unary(op, lhs.array(), move |x| f(x, self)),
            }
        }
    }

    impl<A: XlaElement> AssignRhs<A> for A {
        #[track_caller]
        fn assign<D: Dimension, F: Fn(A, A) -> A + Sync>(
            self,
            op: &'static str,
            lhs: &mut ArrayRef<A, D>,
            f: F,
        ) {
            super::assign(op, lhs, &ndarray::arr0(self), f)
        }
    }

    /// [`Rhs`] and [`AssignRhs`] for each array form.
    macro_rules! array_rhs {
        ($([$($g:tt)*] $form:ty, $a:ty, $e:ty;)*) => {$(
            impl<$($g)* D: Dimension + DimMax<$e>> Rhs<$a, D> for $form
            where
                $a: XlaElement,
            {
                type Out = <D as DimMax<$e>>::Output;
                #[track_caller]
                fn binary<L: Lhs<$a, D>, F: Fn($a, $a) -> $a + Sync>(
                    self,
                    op: &'static str,
                    lhs: L,
                    f: F,
                ) -> StrictArray<$a, Self::Out> {
                    super::binary_reusing(op, lhs, self, f)
                }
            }

            impl<$($g)*> AssignRhs<$a> for $form
            where
                $a: XlaElement,
            {
                #[track_caller]
                fn assign<D: Dimension, F: Fn($a, $a) -> $a + Sync>(
                    self,
                    op: &'static str,
                    lhs: &mut ArrayRef<$a, D>,
                    f: F,
                ) {
                    super::assign(op, lhs, &self, f)
                }
            }
        )*};
    }

    array_rhs! {
        ['r, S: Data, E: Dimension,] &'r ArrayBase<S, E>, S::Elem, E;
        ['r, A, E: Dimension,] &'r ArrayRef<A, E>, A, E;
        [S: Data, E: Dimension,] ArrayBase<S, E>, S::Elem, E;
        ['r, S: Data, E: Dimension,] &'r Strict<S, E>, S::Elem, E;
        [S: Data, E: Dimension,] Strict<S, E>, S::Elem, E;
        ['r, A, E: Dimension,] InDims<'r, A, E>, A, E;
        ['r, 'q, A, E: Dimension,] &'q InDims<'r, A, E>, A, E;
    }
}

/// Calls `$m!` once for each right-hand side of an [`InDims`] left side: a strict array, owned
/// or borrowed (a plain array becomes one with `.strict()`; two operands with dimensions would
/// leave the result's rank open). Each form is an impl per op, which every build compiles.
macro_rules! each_in_dims_rhs {
    ($m:ident!($($args:tt)*)) => {
        $m!($($args)* ['r, S2,] [&'r Strict<S2, E>] [S2: Data<Elem = A>,]);
        $m!($($args)* [S2,] [Strict<S2, E>] [S2: Data<Elem = A>,]);
    };
}

/// `lhs <op> rhs` under the strict rule, for one form of each side: the lhs's lifetimes, type,
/// type parameters and their bounds; the rhs's generics, type and bounds.
macro_rules! binary_impl {
    ($trait:ident, $method:ident, $op:expr, $bound:ident, $elem:ident,
     [$($lg:tt)*] [$($lhs:tt)*] [$($lt:tt)*] [$($lb:tt)*] [$($rg:tt)*] [$($rhs:tt)*] [$($rb:tt)*]) => {
        impl<$($lg)* $($rg)* $($lt)* A, D, E> $trait<$($rhs)*> for $($lhs)*
        where
            A: $bound,
            $($lb)*
            $($rb)*
            D: Dimension + DimMax<E>,
            E: Dimension,
        {
            type Output = StrictArray<A, DimMaxOf<D, E>>;
            #[track_caller]
            fn $method(self, rhs: $($rhs)*) -> Self::Output {
                binary_reusing($op, self, rhs, A::$elem)
            }
        }
    };
}

/// `lhs <op> rhs` for one strict form of the lhs (owned or borrowed) and every right side, a
/// scalar or an array in any form ([`Rhs`]).
macro_rules! strict_lhs_impl {
    ($trait:ident, $method:ident, $op:expr, $bound:ident, $elem:ident, [$($lg:tt)*] [$($lhs:tt)*]) => {
        impl<$($lg)* A, S, D, R> $trait<R> for $($lhs)*
        where
            A: $bound,
            S: Data<Elem = A>,
            D: Dimension,
            R: Rhs<A, D>,
        {
            type Output = StrictArray<A, R::Out>;
            #[track_caller]
            fn $method(self, rhs: R) -> Self::Output {
                rhs.binary($op, self, A::$elem)
            }
        }
    };
}

/// The operators of one op: a strict lhs (owned or borrowed) with every rhs form, in place
/// too; and a plain ndarray lhs with a strict rhs, whose result is strict (ndarray's own
/// operators take every other rhs of a plain array).
macro_rules! binary_operator {
    ($trait:ident, $method:ident, $assign_trait:ident, $assign:ident, $op:expr, $bound:ident, $elem:ident) => {
        strict_lhs_impl!($trait, $method, $op, $bound, $elem, [] [Strict<S, D>]);
        strict_lhs_impl!($trait, $method, $op, $bound, $elem, ['l,] [&'l Strict<S, D>]);
        binary_operator!(@plain $trait, $method, $op, $bound, $elem, [] [ArrayBase<S, D>]);
        binary_operator!(@plain $trait, $method, $op, $bound, $elem, ['l,] [&'l ArrayBase<S, D>]);
        impl<A, S, D, R> $assign_trait<R> for Strict<S, D>
        where
            A: $bound,
            S: DataMut<Elem = A>,
            D: Dimension,
            R: AssignRhs<A>,
        {
            #[track_caller]
            fn $assign(&mut self, rhs: R) {
                rhs.assign($op, &mut self.0, A::$elem)
            }
        }
        each_in_dims_rhs!(binary_impl!($trait, $method, $op, $bound, $elem, ['l,] [InDims<'l, A, D>] [] []));
        // `v.in_dims(&dims) <op> scalar`: refused with a message that says what to write.
        impl<'l, A: $bound, D: Dimension> $trait<A> for InDims<'l, A, D>
        where
            Self: ScaleBeforeInDims,
        {
            type Output = StrictArray<A, D>;
            fn $method(self, _: A) -> Self::Output {
                self.refused()
            }
        }
    };
    (@plain $trait:ident, $method:ident, $op:expr, $bound:ident, $elem:ident, [$($lg:tt)*] [$($lhs:tt)*]) => {
        binary_impl!($trait, $method, $op, $bound, $elem, [$($lg)*] [$($lhs)*] [S,] [S: Data<Elem = A>,]
            [S2,] [Strict<S2, E>] [S2: Data<Elem = A>,]);
        binary_impl!($trait, $method, $op, $bound, $elem, [$($lg)*] [$($lhs)*] [S,] [S: Data<Elem = A>,]
            ['r, S2,] [&'r Strict<S2, E>] [S2: Data<Elem = A>,]);
        binary_impl!($trait, $method, $op, $bound, $elem, [$($lg)*] [$($lhs)*] [S,] [S: Data<Elem = A>,]
            ['r,] [InDims<'r, A, E>] []);
    };
}

/// The operators of the ops that have one in `std::ops` (the table's rows with one).
macro_rules! strict_operators {
    ($( $name:ident, $hlo:literal, $v:ident, $bound:ident, $elem:ident, [$($methods:ident),*],
        $paddle:ident, [$($std:tt)*], $t:literal, $expect:literal; )*) => {
        $(strict_operators!(@row [$($std)*] $name, $bound, $elem);)*
    };
    (@row [] $($rest:tt)*) => {};
    (@row [$trait:ident, $method:ident, $assign_trait:ident, $assign:ident] $name:ident, $bound:ident, $elem:ident) => {
        binary_operator!($trait, $method, $assign_trait, $assign, stringify!($name), $bound, $elem);
    };
}

binary_ops!(strict_operators);

/// Scalars on the left (`2.0 * a.strict()`), one impl per element type (a generic one would
/// break the orphan rule) and strict form.
macro_rules! scalar_lhs {
    ($trait:ident, $method:ident, $op:expr, $elem:ident: $($t:ty),*) => {$(
        scalar_lhs!(@form $trait, $method, $op, $elem, $t, [] [Strict<S, D>]);
        scalar_lhs!(@form $trait, $method, $op, $elem, $t, ['r,] [&'r Strict<S, D>]);
    )*};
    (@form $trait:ident, $method:ident, $op:expr, $elem:ident, $t:ty, [$($g:tt)*] [$($form:tt)*]) => {
        impl<$($g)* S, D> $trait<$($form)*> for $t
        where
            S: Data<Elem = $t>,
            D: Dimension,
        {
            type Output = StrictArray<$t, D>;
            #[track_caller]
            fn $method(self, rhs: $($form)*) -> Self::Output {
                unary($op, AsArray::<$t, D>::array(&rhs), move |x| <$t>::$elem(self, x))
            }
        }
    };
}

macro_rules! scalar_lhs_numbers {
    ($($t:ty),*) => {
        scalar_lhs!(Add, add, "add", xla_add: $($t),*);
        scalar_lhs!(Sub, sub, "sub", xla_sub: $($t),*);
        scalar_lhs!(Mul, mul, "mul", xla_mul: $($t),*);
        scalar_lhs!(Div, div, "div", xla_div: $($t),*);
    };
}

scalar_lhs_numbers!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);
#[cfg(feature = "half")]
scalar_lhs_numbers!(half::f16, half::bf16);
#[cfg(feature = "complex")]
scalar_lhs_numbers!(num_complex::Complex<f32>, num_complex::Complex<f64>);
scalar_lhs!(Rem, rem, "rem", xla_rem: i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);
#[cfg(feature = "half")]
scalar_lhs!(Rem, rem, "rem", xla_rem: half::f16, half::bf16);
scalar_lhs!(BitAnd, bitand, "and", xla_and: i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, bool);
scalar_lhs!(BitOr, bitor, "or", xla_or: i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, bool);
scalar_lhs!(BitXor, bitxor, "xor", xla_xor: i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, bool);
scalar_lhs!(Shl, shl, "shift_left", xla_shift_left: i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);
scalar_lhs!(
    Shr, shr, "shift_right_arithmetic", xla_shift_right_arithmetic:
    i8, i16, i32, i64, isize, u8, u16, u32, u64, usize
);

/// The unary operators, on owned and borrowed strict arrays.
macro_rules! unary_operator {
    ($trait:ident, $method:ident, $op:expr, $bound:ident, $elem:ident) => {
        unary_operator!(@form $trait, $method, $op, $bound, $elem, [] [Strict<S, D>]);
        unary_operator!(@form $trait, $method, $op, $bound, $elem, ['l,] [&'l Strict<S, D>]);
    };
    (@form $trait:ident, $method:ident, $op:expr, $bound:ident, $elem:ident, [$($g:tt)*] [$($form:tt)*]) => {
        impl<$($g)* A, S, D> $trait for $($form)*
        where
            A: $bound,
            S: Data<Elem = A>,
            D: Dimension,
        {
            type Output = StrictArray<A, D>;
            #[track_caller]
            fn $method(self) -> Self::Output {
                unary($op, AsArray::<A, D>::array(&self), A::$elem)
            }
        }
    };
}

unary_operator!(Neg, neg, "negate", XlaNumber, xla_neg);
unary_operator!(Not, not, "not", XlaBitwise, xla_not);
