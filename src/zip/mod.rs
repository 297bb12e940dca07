//! [`StrictZip`]: a Rayon-parallel n-ary zip under XLA's broadcasting rule, for fused loops
//! that rustc compiles.
//!
//! The closure is inlined into the engine's one elementwise kernel, the same one every eager op
//! runs on (`zip_bcast` is its two-operand case): operands with unit strides are read as
//! slices, a broadcast or strided operand of plain numbers is copied a chunk at a time into a
//! buffer on the stack, so the loop over each chunk vectorises; large zips split over Rayon's
//! threads.
//!
//! Capture values by value (`move |x| ...`): a closure that reads a captured variable through
//! a reference reads it again for every element, since the compiler cannot tell that memory
//! from the output's, and its loop does not vectorise (a GELU with `math::tanh` and a captured
//! constant: 2.2 ms by reference, 0.19 ms with `move`, at 512²).
//!
//! ```
//! use ndarray::{array, Array2};
//! use xla_bcast::prelude::*;
//!
//! let x = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! let mean = array![2.0f32, 5.0]; // per row: dim 0 of the result
//! let g = array![[1.0f32, 10.0, 100.0]]; // a degenerate (size-1) dim broadcasts
//! let y = StrictZip::from(&x)
//!     .and_in_dims(&mean, &[0])
//!     .and(&g)
//!     .map_collect(|x, m, g| (x - m) * g)
//!     .unwrap();
//! assert_eq!(y, array![[-1.0, 0.0, 100.0], [-1.0, 0.0, 100.0]]);
//!
//! // A written operand: the closure gets `&mut` to each of its elements.
//! let mut out = Array2::<f32>::zeros((2, 3));
//! StrictZip::from(&mut out).and(&x).for_each(|o, x| *o = 2.0 * x).unwrap();
//! assert_eq!(out, &x * 2.0);
//! ```

mod fold;
mod group;
mod indexed;
mod run;

use std::marker::PhantomData;

pub use fold::KeptDims;
pub use group::Group;
pub use indexed::Indexed;
use run::Items;

use ndarray::{Array, ArrayBase, ArrayRef, Data, DataMut, Dimension};

use crate::engine::{self, Fresh, Operand, Src, SrcMut, ZipN};
use crate::error::{BroadcastError, Result};
use crate::front::{check_out, out_dim};
use crate::shape::{binary_shape, Dims};
use crate::strict::InDims;

/// The op name errors carry.
const OP: &str = "StrictZip";

/// A zip of 1 to 6 operands under XLA's rule: the first ([`from`](StrictZip::from)) sets the
/// result's rank; [`and`](StrictZip::and) adds an operand of that rank, whose size-1
/// (degenerate) dims broadcast; [`and_in_dims`](StrictZip::and_in_dims) adds a lower-rank
/// operand placed by its `broadcast_dimensions` (as `broadcast_in_dim` places it). The result's
/// shape is the equal-rank operands' sizes broadcast together; nothing is right-aligned.
///
/// Read operands reach the closure by value (a clone: a number is copied), written ones
/// (`&mut` arrays, which must have the result's shape) as `&mut`. Shapes are checked when the
/// zip runs ([`map_collect`](StrictZip::map_collect),
/// [`map_assign_into`](StrictZip::map_assign_into), [`for_each`](StrictZip::for_each)): a
/// misfit is a [`BroadcastError::ZipOperand`] naming the operand's position, and nothing runs.
/// If the closure panics, the panic propagates; a fresh result's elements written so far are
/// dropped.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let x = array![[1, 2, 3], [4, 5, 6]];
/// let err = StrictZip::from(&x).and(&array![1, 2]).map_collect(|a, b| a + b).unwrap_err();
/// assert!(err.to_string().starts_with("StrictZip operand 1:"), "{err}");
/// assert!(err.to_string().contains("and_in_dims"), "{err}");
/// ```
pub struct StrictZip<'a, P, D> {
    parts: P,
    dim: PhantomData<(D, &'a ())>,
}

/// An operand of a [`StrictZip`]: read by value ([`Read`]) or written through `&mut`
/// ([`Write`]). Sealed: made by [`IntoZipOperand`]. What the zip's closure gets for each
/// element (`Item`, from the sealed supertrait) is a value, or `&'a mut` for a written operand.
///
/// ```
/// use ndarray::{array, Dimension};
/// use xla_bcast::zip::{IntoZipOperand, ZipOperand};
///
/// fn rank<'a, Q: IntoZipOperand<'a>>(_: Q) -> Option<usize> {
///     <Q::Operand as ZipOperand<'a>>::Dim::NDIM
/// }
/// let x = array![[1, 2], [3, 4]];
/// assert_eq!(rank(&x), Some(2));
/// ```
pub trait ZipOperand<'a>: sealed::Place<'a> {
    /// The operand's dimension type.
    type Dim: Dimension;
}

/// What [`StrictZip::from`] and [`StrictZip::and`] take: `&` an array or view (read), `&mut`
/// one (written), or an [`InDims`] (a lower-rank operand with its `broadcast_dimensions`).
///
/// ```
/// use ndarray::{array, s, Array2};
/// use xla_bcast::prelude::*;
///
/// let (x, v) = (array![[1, 2], [3, 4]], array![10, 20]);
/// let mut out = Array2::zeros((2, 2));
/// let view = x.slice(s![.., ..]);
/// StrictZip::from(&mut out).and(&view).and(v.in_dims(&[1])).for_each(|o, x, v| *o = x + v).unwrap();
/// assert_eq!(out, array![[11, 22], [13, 24]]);
/// ```
pub trait IntoZipOperand<'a> {
    /// The operand.
    type Operand: ZipOperand<'a>;
    /// The operand, to zip.
    fn into_operand(self) -> Self::Operand;
}

/// A read operand: its elements reach the closure as clones (made from `&x` or an [`InDims`]).
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
/// use xla_bcast::zip::{IntoZipOperand, Read};
///
/// let x = array![1.5, 2.5];
/// let _read: Read<'_, f64, ndarray::Ix1> = (&x).into_operand();
/// ```
pub struct Read<'a, A, E> {
    array: &'a ArrayRef<A, E>,
    dims: Option<&'a [usize]>,
}

/// A written operand: its elements reach the closure as `&'a mut` (made from `&mut x`; it
/// must have the result's shape).
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let mut x = array![1, 2, 3];
/// StrictZip::from(&mut x).for_each(|x| *x *= 10).unwrap();
/// assert_eq!(x, array![10, 20, 30]);
/// ```
pub struct Write<'a, A, E> {
    array: &'a mut ArrayRef<A, E>,
}

mod sealed {
    use super::*;

    /// A read operand (not `&mut`): what a fold followed by a map over the same elements may
    /// take, since both see each element.
    pub trait ReadOnly {}
    impl<A, E> ReadOnly for Read<'_, A, E> {}

    /// How an operand is placed at the result's shape, as an engine part.
    pub trait Place<'a> {
        /// What the zip's closure gets for each element.
        type Item;
        /// The engine's part.
        type Part<'s>: engine::Part<Item = Self::Item>
        where
            'a: 's;
        fn shape(&self) -> &[usize];
        fn in_dims(&self) -> Option<&[usize]>;
        fn place<'s>(self, shape: &'s [usize]) -> Result<Self::Part<'s>>
        where
            'a: 's;
    }
}

impl<'a, A: Clone + Sync, E: Dimension> sealed::Place<'a> for Read<'a, A, E> {
    type Item = A;
    type Part<'s>
        = Src<'s, A>
    where
        'a: 's;
    fn shape(&self) -> &[usize] {
        self.array.shape()
    }
    fn in_dims(&self) -> Option<&[usize]> {
        self.dims
    }
    fn place<'s>(self, shape: &'s [usize]) -> Result<Src<'s, A>>
    where
        'a: 's,
    {
        match self.dims {
            None if self.array.ndim() == shape.len() => Src::degenerate(OP, self.array, shape),
            dims => Src::placed(OP, self.array, shape, dims.unwrap_or(&[])),
        }
    }
}

impl<'a, A: Clone + Sync, E: Dimension> ZipOperand<'a> for Read<'a, A, E> {
    type Dim = E;
}

impl<'a, A: Send + Sync, E: Dimension> sealed::Place<'a> for Write<'a, A, E> {
    type Item = &'a mut A;
    type Part<'s>
        = SrcMut<'a, A>
    where
        'a: 's;
    fn shape(&self) -> &[usize] {
        self.array.shape()
    }
    fn in_dims(&self) -> Option<&[usize]> {
        None
    }
    fn place<'s>(self, shape: &'s [usize]) -> Result<SrcMut<'a, A>>
    where
        'a: 's,
    {
        check_out(OP, shape, self.array.shape())?;
        Ok(SrcMut::of(self.array))
    }
}

impl<'a, A: Send + Sync, E: Dimension> ZipOperand<'a> for Write<'a, A, E> {
    type Dim = E;
}

impl<'a, A: Clone + Sync, E: Dimension> IntoZipOperand<'a> for &'a ArrayRef<A, E> {
    type Operand = Read<'a, A, E>;
    fn into_operand(self) -> Read<'a, A, E> {
        Read {
            array: self,
            dims: None,
        }
    }
}

impl<'a, A, S, E> IntoZipOperand<'a> for &'a ArrayBase<S, E>
where
    A: Clone + Sync,
    S: Data<Elem = A>,
    E: Dimension,
{
    type Operand = Read<'a, A, E>;
    fn into_operand(self) -> Read<'a, A, E> {
        Read {
            array: self,
            dims: None,
        }
    }
}

impl<'a, A: Clone + Sync, E: Dimension> IntoZipOperand<'a> for InDims<'a, A, E> {
    type Operand = Read<'a, A, E>;
    fn into_operand(self) -> Read<'a, A, E> {
        Read {
            array: self.operand(),
            dims: Some(self.dims()),
        }
    }
}

impl<'a, A: Send + Sync, E: Dimension> IntoZipOperand<'a> for &'a mut ArrayRef<A, E> {
    type Operand = Write<'a, A, E>;
    fn into_operand(self) -> Write<'a, A, E> {
        Write { array: self }
    }
}

impl<'a, A, S, E> IntoZipOperand<'a> for &'a mut ArrayBase<S, E>
where
    A: Send + Sync,
    S: DataMut<Elem = A>,
    E: Dimension,
{
    type Operand = Write<'a, A, E>;
    fn into_operand(self) -> Write<'a, A, E> {
        Write { array: self }
    }
}

impl<'a, P: ZipOperand<'a>> StrictZip<'a, (P,), P::Dim> {
    /// A zip whose first operand is `p`: it sets the result's rank and dimension type.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let r = StrictZip::from(&array![1, 2, 3]).map_collect(|x| x * 10).unwrap();
    /// assert_eq!(r, array![10, 20, 30]);
    /// ```
    pub fn from<Q: IntoZipOperand<'a, Operand = P>>(p: Q) -> Self {
        StrictZip {
            parts: (p.into_operand(),),
            dim: PhantomData,
        }
    }
}

/// `e` as operand `position`'s.
fn at(position: usize, e: BroadcastError) -> BroadcastError {
    BroadcastError::ZipOperand {
        position,
        source: Box::new(e),
    }
}

/// `and` and `and_in_dims` for zips of fewer than 6 operands.
macro_rules! and {
    ($(($($P:ident $p:ident),+);)*) => {$(
        impl<'a, D, $($P: ZipOperand<'a>),+> StrictZip<'a, ($($P,)+), D> {
            /// The zip with one more operand: of the result's rank (degenerate dims broadcast),
            /// or an [`InDims`] (`v.in_dims(&dims)`); `&mut` to write it.
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let x = array![[1, 2], [3, 4]];
            /// let r = StrictZip::from(&x).and(&array![[10], [20]]).map_collect(|a, b| a + b);
            /// assert_eq!(r.unwrap(), array![[11, 12], [23, 24]]);
            /// ```
            #[allow(clippy::should_implement_trait)]
            pub fn and<Q: IntoZipOperand<'a>>(self, q: Q) -> StrictZip<'a, ($($P,)+ Q::Operand,), D> {
                let ($($p,)+) = self.parts;
                StrictZip { parts: ($($p,)+ q.into_operand(),), dim: PhantomData }
            }

            /// The zip with a lower-rank operand `v`, its dim `i` on the result's dim
            /// `broadcast_dimensions[i]` (as [`BroadcastInDim`](crate::ops::BroadcastInDim)
            /// places it: sizes equal, or 1).
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let x = array![[1, 2], [3, 4]];
            /// let r = StrictZip::from(&x).and_in_dims(&array![10, 20], &[0]).map_collect(|a, b| a + b);
            /// assert_eq!(r.unwrap(), array![[11, 12], [23, 24]]);
            /// ```
            pub fn and_in_dims<A: Clone + Sync, E: Dimension>(
                self,
                v: &'a ArrayRef<A, E>,
                broadcast_dimensions: &'a [usize],
            ) -> StrictZip<'a, ($($P,)+ Read<'a, A, E>,), D> {
                self.and(InDims::new(v, broadcast_dimensions))
            }
        }
    )*};
}
and! {
    (P1 p1);
    (P1 p1, P2 p2);
    (P1 p1, P2 p2, P3 p3);
    (P1 p1, P2 p2, P3 p3, P4 p4);
    (P1 p1, P2 p2, P3 p3, P4 p4, P5 p5);
}

/// The shape every operand is seen at: the first's, broadcast with each later equal-rank one by
/// XLA's degenerate rule (an [`InDims`] operand is placed in it, not counted).
fn result_shape(operands: &[(&[usize], Option<&[usize]>)]) -> Result<Dims> {
    let mut shape = Dims::from_slice(operands[0].0);
    if let Some(dims) = operands[0].1 {
        return Err(at(
            0,
            BroadcastError::InDimInvalid {
                op: OP,
                operand: operands[0].0.into(),
                out_shape: operands[0].0.into(),
                dims: dims.into(),
                reason: "the first operand sets the result's shape, so it takes no \
                     broadcast_dimensions; zip a lower-rank operand after it"
                    .into(),
            },
        ));
    }
    for (k, &(s, dims)) in operands.iter().enumerate().skip(1) {
        let mut grown = Dims::new();
        if dims.is_none() && binary_shape(OP, &shape, s, &[], &mut grown).map_err(|e| at(k, e))? {
            shape = grown;
        }
    }
    Ok(shape)
}

/// The shape of a fold's result: the sizes of `shape` at `kept` (distinct dims of it); `op`'s
/// error naming the dim that is out of range or repeats.
pub(crate) fn kept_check(op: &'static str, shape: &[usize], kept: &[usize]) -> Result<Vec<usize>> {
    let bad = |reason: &str| BroadcastError::InDimInvalid {
        op,
        operand: shape.into(),
        out_shape: shape.into(),
        dims: kept.into(),
        reason: reason.into(),
    };
    for (i, &d) in kept.iter().enumerate() {
        if d >= shape.len() {
            return Err(bad(&format!(
                "kept dim {d} is out of range for rank {}",
                shape.len()
            )));
        }
        if kept[..i].contains(&d) {
            return Err(bad(&format!("kept dim {d} repeats")));
        }
    }
    Ok(kept.iter().map(|&d| shape[d]).collect())
}

/// The ways to run a zip of each operand count.
macro_rules! run {
    ($($n:literal: ($($P:ident $p:ident $i:tt),+);)*) => {$(
        impl<'a, D: Dimension, $($P: ZipOperand<'a>),+> StrictZip<'a, ($($P,)+), D> {
            /// The result's shape.
            fn shape(&self) -> Result<Dims> {
                result_shape(&[$((self.parts.$i.shape(), self.parts.$i.in_dims())),+])
            }

            /// `f` of each element's operands, into a fresh array of the result's shape (laid
            /// out as its inputs are, as ndarray's `map_collect`).
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let x = array![[1.0, 2.0], [3.0, 4.0]];
            /// let r = StrictZip::from(&x).and_in_dims(&array![0.5, 2.0], &[1]).map_collect(|x, s| x * s);
            /// assert_eq!(r.unwrap(), array![[0.5, 4.0], [1.5, 8.0]]);
            /// ```
            pub fn map_collect<R: Send>(self, f: impl Fn($($P::Item),+) -> R + Sync) -> Result<Array<R, D>> {
                let shape = self.shape()?;
                let dim = out_dim::<D>(OP, &shape)?;
                let ($($p,)+) = self.parts;
                let parts = ($($p.place(&shape).map_err(|e| at($i, e))?,)+);
                let kernel = ZipN::new(&f, parts);
                engine::collect(OP, dim, &kernel, Fresh::FollowInputs)
            }

            /// `f` of each element's operands, into `out`, which must have the result's shape
            /// ([`BroadcastError::OutputShape`] otherwise, with nothing written).
            ///
            /// ```
            /// use ndarray::{array, Array2};
            /// use xla_bcast::prelude::*;
            ///
            /// let mut out = Array2::zeros((2, 2));
            /// let x = array![[1, 2], [3, 4]];
            /// StrictZip::from(&x).and(&x).map_assign_into(&mut out, |a, b| a * b).unwrap();
            /// assert_eq!(out, array![[1, 4], [9, 16]]);
            /// ```
            pub fn map_assign_into<R: Send, O: Dimension>(
                self,
                out: &mut ArrayRef<R, O>,
                f: impl Fn($($P::Item),+) -> R + Sync,
            ) -> Result<()> {
                let shape = self.shape()?;
                check_out(OP, &shape, out.shape())?;
                let ($($p,)+) = self.parts;
                let parts = ($($p.place(&shape).map_err(|e| at($i, e))?,)+);
                engine::into(out, &ZipN::new(&f, parts));
                Ok(())
            }

            /// `f` of each element's operands, for its effect on the written (`&mut`) ones.
            ///
            /// ```
            /// use ndarray::{array, Array1};
            /// use xla_bcast::prelude::*;
            ///
            /// let (mut lo, mut hi) = (Array1::zeros(3), Array1::zeros(3));
            /// let x = array![3, -1, 7];
            /// StrictZip::from(&mut lo).and(&mut hi).and(&x).for_each(|lo, hi, x| {
            ///     (*lo, *hi) = (x.min(0), x.max(0));
            /// }).unwrap();
            /// assert_eq!((lo, hi), (array![0, -1, 0], array![3, 0, 7]));
            /// ```
            pub fn for_each(self, f: impl Fn($($P::Item),+) + Sync) -> Result<()> {
                self.map_collect(f).map(drop)
            }

            /// Folds the zipped elements into an array over `kept_dims` (the result's dim `i`
            /// is the zip's dim `kept_dims[i]`): each result element is `fold` of `init` and
            /// every element with its kept index, partial folds joined by `combine`. Several
            /// accumulators at once are a tuple (a layer norm's `(sum, sum of squares)` in one
            /// pass).
            ///
            /// `init` must be an identity of `combine`, and `combine` associative. The order is
            /// fixed by the shapes alone, never by the threads: a run (the last reduced dim) is
            /// folded in 16 lanes (element `i` into lane `i % 16`, so that a float fold
            /// vectorises), the lanes combined pairwise, the runs' results in order. Kept dims
            /// as an array (`[0]`) give a fixed-rank result, as a slice (`&[0][..]`) a
            /// dynamic-rank one.
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let x = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
            /// let (s, ss) = StrictZip::from(&x)
            ///     .fold_in_dims([0], (0.0f32, 0.0f32), |(s, ss), x| (s + x, ss + x * x), |a, b| (a.0 + b.0, a.1 + b.1))
            ///     .unwrap()
            ///     .into_iter()
            ///     .fold((vec![], vec![]), |(mut s, mut ss), (a, b)| { s.push(a); ss.push(b); (s, ss) });
            /// assert_eq!((s, ss), (vec![6.0, 15.0], vec![14.0, 77.0]));
            /// // Column maxima, into a fixed-rank array.
            /// let m = StrictZip::from(&x).fold_in_dims([1], f32::NEG_INFINITY, f32::xla_max, f32::xla_max).unwrap();
            /// assert_eq!(m, array![4.0, 5.0, 6.0]);
            /// ```
            ///
            /// # Errors
            /// A misfit operand, as [`map_collect`](StrictZip::map_collect);
            /// [`BroadcastError::InDimInvalid`] for kept dims that repeat or are out of range;
            /// [`BroadcastError::Allocation`] when the result cannot be allocated.
            pub fn fold_in_dims<K, Acc, F, C>(self, kept_dims: K, init: Acc, fold: F, combine: C)
                -> Result<Array<Acc, K::Dim>>
            where
                K: KeptDims,
                Acc: Clone + Send + Sync,
                F: Fn(Acc, $($P::Item),+) -> Acc + Sync,
                C: Fn(Acc, Acc) -> Acc + Sync,
            {
                let shape = self.shape()?;
                let kept = kept_dims.dims();
                let kept_shape = kept_check(OP, &shape, kept)?;
                let dim = out_dim::<K::Dim>(OP, &kept_shape)?;
                let ($($p,)+) = self.parts;
                let parts = ($($p.place(&shape).map_err(|e| at($i, e))?,)+);
                // Operand 0 is not read by a fold: the first part stands in for it.
                let ops = [engine::Part::operand(&parts.0), $(engine::Part::operand(&parts.$i)),+];
                let step = Items(fold);
                let run = run::folder(&parts, (&init, &step, &combine), ops.map(|o| o.plain));
                // SAFETY: the operands are placed at `shape`, `kept` checked; `run` reads the
                // elements of its run only (and hands a written operand's out once each).
                let out = unsafe { fold::fold(&shape, kept, ops, &combine, &run) };
                let refused = || engine::refused::<Acc, _>(OP, &ndarray::IxDyn(&kept_shape));
                Array::from_shape_vec(dim, out.ok_or_else(refused)?).map_err(|_| refused())
            }

            /// A fold into `kept_dims` ([`fold_in_dims`](StrictZip::fold_in_dims), the same
            /// bits), `finish` of each result, then `map` of the finished value and the same
            /// elements into `out` (the zip's shape): each kept index's elements are folded and
            /// mapped on one thread, while they are in cache, so the input is read from memory
            /// once. The shape of every normalisation: layer norm, RMS norm, softmax.
            ///
            /// ```
            /// use ndarray::{array, Array2};
            /// use xla_bcast::prelude::*;
            ///
            /// // Each row divided by its sum.
            /// let x = array![[1.0f32, 3.0], [2.0, 6.0]];
            /// let mut out = Array2::zeros((2, 2));
            /// StrictZip::from(&x)
            ///     .fold_map_assign_into(&mut out, [0], 0.0, |s, x| s + x, |a, b| a + b, |s| 1.0 / s, |inv, x| x * inv)
            ///     .unwrap();
            /// assert_eq!(out, array![[0.25, 0.75], [0.25, 0.75]]);
            /// ```
            ///
            /// # Errors
            /// As [`fold_in_dims`](StrictZip::fold_in_dims), and
            /// [`BroadcastError::OutputShape`] for an `out` not of the zip's shape (nothing is
            /// written). Written (`&mut`) operands are not taken: fold and map both see each
            /// element.
            #[allow(clippy::too_many_arguments)]
            pub fn fold_map_assign_into<K, Acc, St, R, O, F, C, Fin, Map>(
                self,
                out: &mut ArrayRef<R, O>,
                kept_dims: K,
                init: Acc,
                fold: F,
                combine: C,
                finish: Fin,
                map: Map,
            ) -> Result<()>
            where
                $($P: sealed::ReadOnly,)+
                K: KeptDims,
                Acc: Clone + Send + Sync,
                St: Sync,
                R: Send,
                O: Dimension,
                F: Fn(Acc, $($P::Item),+) -> Acc + Sync,
                C: Fn(Acc, Acc) -> Acc + Sync,
                Fin: Fn(Acc) -> St + Sync,
                Map: Fn(&St, $($P::Item),+) -> R + Sync,
            {
                let (fold, combine, map) = (&fold, &combine, &map);
                self.for_each_group_into(out, kept_dims, |g| {
                    let acc = g.fold(init.clone(), move |acc, _, $($p),+| fold(acc, $($p),+), combine);
                    let st = finish(acc);
                    g.for_each(move |o, $($p),+| *o = map(&st, $($p),+));
                })
            }

            /// `f` of each [`Group`]: the zip's elements of one index over `kept_dims` (a row,
            /// for `[0]` of a matrix) with `out`'s at the same indices. The groups split over
            /// Rayon's threads; each runs on one, its passes ([`Group::fold`],
            /// [`Group::for_each`]) while its elements are in cache, as a hand-written row
            /// loop runs: a softmax's maximum, `exp` written into `out` with its sum, then
            /// the scale, reading the input from memory once and taking each `exp` once.
            ///
            /// ```
            /// use ndarray::{array, Array2};
            /// use xla_bcast::{math, prelude::*};
            ///
            /// let x = array![[1.0f32, 2.0, 3.0], [0.0, 0.0, 0.0]];
            /// let mut out = Array2::zeros((2, 3));
            /// StrictZip::from(&x).for_each_group_into(&mut out, [0], |g| {
            ///     let max = g.fold(f32::MIN, |m, _, x| m.max(x), f32::max);
            ///     let sum = g.fold(0.0, move |s, o, x| { *o = math::exp(x - max); s + *o }, |a, b| a + b);
            ///     g.for_each(move |o, _| *o /= sum);
            /// }).unwrap();
            /// assert!((out[[1, 0]] - 1.0 / 3.0).abs() < 1e-6);
            /// assert!((out.sum() - 2.0).abs() < 1e-5);
            /// ```
            ///
            /// # Errors
            /// As [`fold_map_assign_into`](StrictZip::fold_map_assign_into) (nothing runs).
            pub fn for_each_group_into<K, R, O, G>(self, out: &mut ArrayRef<R, O>, kept_dims: K, f: G) -> Result<()>
            where
                $($P: sealed::ReadOnly,)+
                K: KeptDims,
                R: Send,
                O: Dimension,
                G: Fn(&mut Group<'a, '_, ($($P,)+), R, $n>) + Sync,
            {
                let shape = self.shape()?;
                let kept = kept_dims.dims();
                kept_check(OP, &shape, kept)?;
                check_out(OP, &shape, out.shape())?;
                let ($($p,)+) = self.parts;
                let parts = ($($p.place(&shape).map_err(|e| at($i, e))?,)+);
                let written = Operand::output(out);
                let ops = [&written, $(engine::Part::operand(&parts.$i)),+];
                let plain = ops.map(|o| o.plain);
                let each = |g: &fold::GroupAt<'_, $n>| f(&mut Group::new(g, plain));
                // SAFETY: the operands are placed at `shape` (the output checked to be it),
                // `kept` checked; a group reads its elements and writes its output's.
                unsafe { fold::groups(&shape, kept, ops, &each) };
                Ok(())
            }
        }
    )*};
}
run! {
    2: (P1 p1 0);
    3: (P1 p1 0, P2 p2 1);
    4: (P1 p1 0, P2 p2 1, P3 p3 2);
    5: (P1 p1 0, P2 p2 1, P3 p3 2, P4 p4 3);
    6: (P1 p1 0, P2 p2 1, P3 p3 2, P4 p4 3, P5 p5 4);
    7: (P1 p1 0, P2 p2 1, P3 p3 2, P4 p4 3, P5 p5 4, P6 p6 5);
}
