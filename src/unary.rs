//! The unary ops on arrays and views: one method per row of the op table's unary ops, each
//! with its `_into` form and, where the result has the input's type, its in-place `_assign`
//! form. Each runs the element function of [`Program`](crate::stablehlo::Program)'s op of the
//! same name, so results are `Program::run`'s bit for bit; parallel over Rayon's threads when
//! large, vectorised where the function is (the transcendental ones are: [`crate::math`]).
//!
//! Their names start with `xla_`: ndarray's own float methods (`exp`, `tanh`, `sqrt`, ...)
//! are inherent, so a trait method of the same name would never be called. Those call std's
//! functions element by element on one thread.
//!
//! ```
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//!
//! let x = array![[0.0f32, 1.0], [-1.0, 2.0]];
//! let y = x.xla_tanh().unwrap();
//! assert_eq!(y[[0, 0]], 0.0);
//! assert!((y[[1, 1]] - 2f32.tanh()).abs() <= 2.0 * f32::EPSILON);
//! ```

use ndarray::{Array, ArrayRef, Dimension};

use crate::elementwise::{self as elem, apply, Convert, Elementwise, Load, Store};
use crate::engine::{self, Src, SrcMut, ZipN};
use crate::error::Result;
use crate::front::{check_out, map_collect};
use crate::ops::sealed::Sealed;

/// `F` of each element of `a`, into a fresh array.
fn collect<F, A, D>(op: &'static str, a: &ArrayRef<A, D>) -> Result<Array<F::Out, D>>
where
    F: Elementwise<A, 1>,
    F::Out: Send,
    A: Clone + Sync,
    D: Dimension,
{
    map_collect(op, a, apply::<A, F>)
}

/// `F` of each element of `a`, into `out` of `a`'s shape.
fn into<F, A, D, O>(
    op: &'static str,
    a: &ArrayRef<A, D>,
    out: &mut ArrayRef<F::Out, O>,
) -> Result<()>
where
    F: Elementwise<A, 1>,
    F::Out: Send,
    A: Clone + Sync,
    D: Dimension,
    O: Dimension,
{
    check_out(op, a.shape(), out.shape())?;
    engine::into(out, &ZipN::new(&apply::<A, F>, (Src::of(a),)));
    Ok(())
}

/// `F` of each element of `a`, in place.
fn assign<F, A, D>(op: &'static str, a: &mut ArrayRef<A, D>)
where
    F: Elementwise<A, 1, Out = A>,
    A: Clone + Send + Sync,
    D: Dimension,
{
    let (dim, f) = (a.raw_dim(), |x: &mut A| *x = apply::<A, F>(x.clone()));
    engine::update(op, dim, &ZipN::new(&f, (SrcMut::of(a),)));
}

macro_rules! unary_methods {
    ($($name:ident => $v:ident, $hlo:literal, [$m:ident, $into:ident $(, $assign:ident)?],
       [$($kind:ident),*], $what:literal, $ty:ty, $input:expr, $want:expr;)*) => {
        /// The unary ops, on every ndarray array and view ([the module](self)).
        ///
        /// ```
        /// use ndarray::array;
        /// use xla_bcast::prelude::*;
        ///
        /// let mut x = array![[1.0f64, 4.0], [9.0, 16.0]];
        /// let mut r = x.xla_rsqrt().unwrap();
        /// x.xla_sqrt_assign();
        /// r.xla_log_assign();
        /// assert_eq!(x, array![[1.0, 2.0], [3.0, 4.0]]);
        /// assert_eq!(r[[0, 0]], 0.0);
        /// ```
        pub trait UnaryOps<A, D: Dimension>: Sealed<A, D> {
            $(
                #[doc = concat!("`", stringify!($name), "` of each element, into a fresh array: ", $what,
                    " (StableHLO's `", $hlo, "`). Defined on the element types `Program::",
                    stringify!($name), "` takes.")]
                ///
                /// # Errors
                /// [`BroadcastError::Allocation`](crate::BroadcastError::Allocation) when the
                /// result cannot be allocated.
                ///
                /// ```
                /// use ndarray::arr1;
                /// use xla_bcast::prelude::*;
                ///
                #[doc = concat!("let x = arr1(&", stringify!($input), ");")]
                #[doc = concat!("assert_eq!(x.", stringify!($m), "().unwrap(), arr1(&", stringify!($want), "));")]
                /// ```
                fn $m(&self) -> Result<Array<<elem::$v as Elementwise<A, 1>>::Out, D>>
                where
                    A: Clone + Sync,
                    elem::$v: Elementwise<A, 1>,
                    <elem::$v as Elementwise<A, 1>>::Out: Send,
                {
                    collect::<elem::$v, A, D>(stringify!($name), self.array())
                }

                #[doc = concat!("[`", stringify!($m), "`](UnaryOps::", stringify!($m),
                    ") into `out`, which must have this array's shape ([`BroadcastError::OutputShape`](crate::BroadcastError::OutputShape) otherwise, with nothing written).")]
                ///
                /// ```
                /// use ndarray::arr1;
                /// use xla_bcast::prelude::*;
                ///
                #[doc = concat!("let x = arr1(&", stringify!($input), ");")]
                #[doc = concat!("let mut out = x.", stringify!($m), "().unwrap();")]
                #[doc = concat!("x.", stringify!($into), "(&mut out).unwrap();")]
                #[doc = concat!("assert_eq!(out, arr1(&", stringify!($want), "));")]
                /// ```
                fn $into<O: Dimension>(&self, out: &mut ArrayRef<<elem::$v as Elementwise<A, 1>>::Out, O>) -> Result<()>
                where
                    A: Clone + Sync,
                    elem::$v: Elementwise<A, 1>,
                    <elem::$v as Elementwise<A, 1>>::Out: Send,
                {
                    into::<elem::$v, A, D, O>(stringify!($name), self.array(), out)
                }

                $(
                    #[doc = concat!("[`", stringify!($m), "`](UnaryOps::", stringify!($m), ") in place.")]
                    ///
                    /// ```
                    /// use ndarray::arr1;
                    /// use xla_bcast::prelude::*;
                    ///
                    #[doc = concat!("let mut x = arr1(&", stringify!($input), ");")]
                    #[doc = concat!("x.", stringify!($assign), "();")]
                    #[doc = concat!("assert_eq!(x, arr1(&", stringify!($want), "));")]
                    /// ```
                    fn $assign(&mut self)
                    where
                        A: Clone + Send + Sync,
                        elem::$v: Elementwise<A, 1, Out = A>,
                    {
                        assign::<elem::$v, A, D>(stringify!($name), self.array_mut())
                    }
                )?
            )*

            /// Each element converted to `U`, into a fresh array: `Program::convert`'s rules
            /// (XLA's: integers wrap; floats to integers truncate toward zero and saturate, NaN
            /// giving 0; to floats rounded to nearest, ties to even, once; `bool` is `!= 0`).
            ///
            /// # Errors
            /// [`BroadcastError::Allocation`](crate::BroadcastError::Allocation) when the
            /// result cannot be allocated.
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let x = array![-1.5f32, 300.0, f32::NAN, 2.0e10];
            /// assert_eq!(x.xla_convert::<u8>().unwrap(), array![0, 255, 0, 255]);
            /// assert_eq!(x.xla_convert::<i32>().unwrap(), array![-1, 300, 0, i32::MAX]);
            /// assert_eq!(array![1u32, 0].xla_convert::<bool>().unwrap(), array![true, false]);
            /// ```
            fn xla_convert<U: Store + Send>(&self) -> Result<Array<U, D>>
            where
                A: Load + Sync,
            {
                collect::<Convert<U>, A, D>("convert", self.array())
            }

            /// [`xla_convert`](UnaryOps::xla_convert) into `out`, which must have this array's
            /// shape ([`BroadcastError::OutputShape`](crate::BroadcastError::OutputShape)
            /// otherwise, with nothing written).
            ///
            /// ```
            /// use ndarray::{array, Array1};
            /// use xla_bcast::prelude::*;
            ///
            /// let mut out = Array1::<f64>::zeros(2);
            /// array![i64::MAX, -3].xla_convert_into(&mut out).unwrap();
            /// assert_eq!(out, array![9.223372036854776e18, -3.0]);
            /// ```
            fn xla_convert_into<U: Store + Send, O: Dimension>(&self, out: &mut ArrayRef<U, O>) -> Result<()>
            where
                A: Load + Sync,
            {
                into::<Convert<U>, A, D, O>("convert", self.array(), out)
            }
        }
    };
}
unary_ops!(unary_methods);

impl<A, D: Dimension> UnaryOps<A, D> for ArrayRef<A, D> {}
