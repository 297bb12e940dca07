//! Indexed zips ([`StrictZip::indexed`]): the closure also gets each element's index, as with
//! ndarray's `Zip::indexed`. The index is one more operand of the zip, whose element addresses
//! are the positions: a span of one byte per element that is reserved, never read or written
//! (no page of it is touched), walked as the other operands are; an element's offset from its
//! start is its row-major position, unravelled into the index.

use std::marker::PhantomData;

use ndarray::{Array, ArrayRef, Dimension, IxDyn};

use super::fold::KeptDims;
use super::{sealed, StrictZip, ZipOperand, OP};
use crate::engine::{self, Operand, Strides};
use crate::error::Result;
use crate::strict::InDims;

/// A [`StrictZip`] whose closures get each element's index first (the pattern of the zip's
/// dimension type: `(i, j)` for `Ix2`, `IxDyn` for a dynamic rank), made by
/// [`StrictZip::indexed`]. Its operands and rules are the zip's; it takes at most 5.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let x = array![[3, 9, 9], [7, 2, 8]];
/// // The first index of each row's maximum: a fold with the index.
/// let best = StrictZip::indexed(&x)
///     .fold_in_dims([0], (i32::MIN, 0), |(m, at), (_, j), x| if x > m { (x, j) } else { (m, at) },
///         |a, b| if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) { b } else { a })
///     .unwrap();
/// assert_eq!(best, array![(9, 1), (8, 2)]);
/// ```
pub struct Indexed<'a, P, D> {
    zip: StrictZip<'a, P, D>,
}

impl<'a, P: ZipOperand<'a>> StrictZip<'a, (P,), P::Dim> {
    /// A zip whose first operand is `p` ([`StrictZip::from`]) and whose closures also get each
    /// element's index, first (ndarray's `Zip::indexed`).
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::prelude::*;
    ///
    /// let x = array![[1, 2], [3, 4]];
    /// let r = StrictZip::indexed(&x).and_in_dims(&array![10, 20], &[1]).map_collect(|(i, j), x, v| x + v * (i + j) as i32);
    /// assert_eq!(r.unwrap(), array![[1, 22], [13, 44]]);
    /// ```
    pub fn indexed<Q: super::IntoZipOperand<'a, Operand = P>>(p: Q) -> Indexed<'a, (P,), P::Dim> {
        Indexed {
            zip: StrictZip::from(p),
        }
    }
}

/// The address of an element of the positions operand ([`Positions`]).
pub(crate) struct Addr(usize);

/// The positions of a zip's shape: a reserved span of one byte per element, its start and the
/// shape to unravel an offset into an index.
struct Positions {
    span: Vec<u8>,
    shape: Vec<usize>,
}

impl Positions {
    /// The span for `shape`; [`BroadcastError::Allocation`] when it cannot be reserved.
    fn new(shape: &[usize]) -> Result<Positions> {
        let len: usize = shape.iter().product();
        let mut span = Vec::new();
        // Reserved, never written: its pages are never touched.
        span.try_reserve_exact(len)
            .map_err(|_| engine::refused::<u8, _>(OP, &IxDyn(shape)))?;
        Ok(Positions {
            span,
            shape: shape.to_vec(),
        })
    }

    /// The index of the element at `at`, as `D`'s pattern.
    #[inline(always)]
    fn index<D: Dimension>(&self, at: Addr) -> D::Pattern {
        let mut rest = at.0 - self.span.as_ptr() as usize;
        let mut index = D::zeros(self.shape.len());
        for (i, &n) in index.slice_mut().iter_mut().zip(&self.shape).rev() {
            (*i, rest) = (rest % n, rest / n);
        }
        index.into_pattern()
    }

    /// The positions as the zip's last operand.
    fn operand(&self) -> Position {
        Position {
            start: self.span.as_ptr(),
        }
    }
}

/// The positions as an operand: placed at the zip's shape in row-major order, never counted in
/// the result's shape.
pub(crate) struct Position {
    start: *const u8,
}

// SAFETY: a start address, only offset (never dereferenced) by the walk.
unsafe impl Send for Position {}
// SAFETY: as for `Send`.
unsafe impl Sync for Position {}

/// The engine's part of the positions: each element's address.
pub(crate) struct At<'s>(Operand<'s>);

impl engine::Part for At<'_> {
    type Elem = u8;
    type Item = Addr;
    fn operand(&self) -> &Operand<'_> {
        &self.0
    }
    #[inline(always)]
    unsafe fn item(p: *mut u8) -> Addr {
        Addr(p as usize)
    }
}

impl<'a> sealed::Place<'a> for Position {
    type Item = Addr;
    type Part<'s>
        = At<'s>
    where
        'a: 's;
    fn shape(&self) -> &[usize] {
        &[]
    }
    fn in_dims(&self) -> Option<&[usize]> {
        Some(&[])
    }
    fn place<'s>(self, shape: &'s [usize]) -> Result<At<'s>>
    where
        'a: 's,
    {
        let mut strides: Strides = smallvec::smallvec![0; shape.len()];
        let mut step = 1;
        for (s, &n) in strides.iter_mut().zip(shape).rev() {
            *s = step as isize;
            step *= n;
        }
        // The span holds one byte per element of `shape` (`Positions::new`).
        Ok(At(Operand::positions(self.start, shape, strides)))
    }
}

impl ZipOperand<'_> for Position {
    type Dim = IxDyn;
}

/// `and`, `and_in_dims` and the runs of indexed zips of each operand count.
macro_rules! indexed {
    ($(($($P:ident $p:ident),+) $(and $Q:ident)?;)*) => {$(
        indexed!(@and ($($P $p),+) $($Q)?);

        impl<'a, D: Dimension, $($P: ZipOperand<'a>),+> Indexed<'a, ($($P,)+), D> {
            /// The zip's shape, and the zip with the positions of that shape last.
            fn with_positions(self) -> Result<(Positions, StrictZip<'a, ($($P,)+ Position,), D>)> {
                let positions = Positions::new(&self.zip.shape()?)?;
                let ($($p,)+) = self.zip.parts;
                let parts = ($($p,)+ positions.operand(),);
                Ok((positions, StrictZip { parts, dim: PhantomData }))
            }

            /// [`StrictZip::map_collect`], `f` getting each element's index first.
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let r = StrictZip::indexed(&array![[5usize, 5], [5, 5]]).map_collect(|(i, j), x| x * i + j);
            /// assert_eq!(r.unwrap(), array![[0, 1], [5, 6]]);
            /// ```
            pub fn map_collect<R: Send>(self, f: impl Fn(D::Pattern, $($P::Item),+) -> R + Sync) -> Result<Array<R, D>> {
                let (at, zip) = self.with_positions()?;
                zip.map_collect(|$($p,)+ a| f(at.index::<D>(a), $($p),+))
            }

            /// [`StrictZip::map_assign_into`], `f` getting each element's index first.
            ///
            /// ```
            /// use ndarray::{array, Array2};
            /// use xla_bcast::prelude::*;
            ///
            /// let mut out = Array2::zeros((2, 2));
            /// StrictZip::indexed(&array![[1usize, 1], [1, 1]]).map_assign_into(&mut out, |(i, _), x| x + i).unwrap();
            /// assert_eq!(out, array![[1, 1], [2, 2]]);
            /// ```
            pub fn map_assign_into<R: Send, O: Dimension>(
                self,
                out: &mut ArrayRef<R, O>,
                f: impl Fn(D::Pattern, $($P::Item),+) -> R + Sync,
            ) -> Result<()> {
                let (at, zip) = self.with_positions()?;
                zip.map_assign_into(out, |$($p,)+ a| f(at.index::<D>(a), $($p),+))
            }

            /// [`StrictZip::for_each`], `f` getting each element's index first.
            ///
            /// ```
            /// use ndarray::Array2;
            /// use xla_bcast::prelude::*;
            ///
            /// let mut eye = Array2::zeros((2, 2));
            /// StrictZip::indexed(&mut eye).for_each(|(i, j), e| *e = u8::from(i == j)).unwrap();
            /// assert_eq!(eye, ndarray::array![[1, 0], [0, 1]]);
            /// ```
            pub fn for_each(self, f: impl Fn(D::Pattern, $($P::Item),+) + Sync) -> Result<()> {
                self.map_collect(f).map(drop)
            }

            /// [`StrictZip::fold_in_dims`], `fold` getting each element's index after the
            /// accumulator: a first index or a masked count in a few lines. The same order, so
            /// the same result on any number of threads.
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let x = array![[1, -2, 3], [-4, 5, -6]];
            /// // Per column: how many negatives lie on the first row.
            /// let n = StrictZip::indexed(&x)
            ///     .fold_in_dims([1], 0, |n, (i, _), x| n + usize::from(i == 0 && x < 0), |a, b| a + b);
            /// assert_eq!(n.unwrap(), array![0, 1, 0]);
            /// ```
            ///
            /// # Errors
            /// As [`StrictZip::fold_in_dims`].
            pub fn fold_in_dims<K, Acc, F, C>(self, kept_dims: K, init: Acc, fold: F, combine: C)
                -> Result<Array<Acc, K::Dim>>
            where
                K: KeptDims,
                Acc: Clone + Send + Sync,
                F: Fn(Acc, D::Pattern, $($P::Item),+) -> Acc + Sync,
                C: Fn(Acc, Acc) -> Acc + Sync,
            {
                let (at, zip) = self.with_positions()?;
                zip.fold_in_dims(kept_dims, init, |acc, $($p,)+ a| fold(acc, at.index::<D>(a), $($p),+), combine)
            }
        }
    )*};
    (@and ($($P:ident $p:ident),+)) => {};
    (@and ($($P:ident $p:ident),+) $Q:ident) => {
        impl<'a, D, $($P: ZipOperand<'a>),+> Indexed<'a, ($($P,)+), D> {
            /// [`StrictZip::and`]: one more operand.
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let r = StrictZip::indexed(&array![1, 2]).and(&array![10, 20]).map_collect(|i, a, b| a + b * i as i32);
            /// assert_eq!(r.unwrap(), array![1, 22]);
            /// ```
            #[allow(clippy::should_implement_trait)]
            pub fn and<Q: super::IntoZipOperand<'a>>(self, q: Q) -> Indexed<'a, ($($P,)+ Q::Operand,), D> {
                Indexed { zip: self.zip.and(q) }
            }

            /// [`StrictZip::and_in_dims`]: one more operand, of a lower rank.
            ///
            /// ```
            /// use ndarray::array;
            /// use xla_bcast::prelude::*;
            ///
            /// let x = array![[1, 2], [3, 4]];
            /// let r = StrictZip::indexed(&x).and_in_dims(&array![1, 0], &[1]).map_collect(|(i, _), x, m| x * m + i as i32);
            /// assert_eq!(r.unwrap(), array![[1, 0], [4, 1]]);
            /// ```
            pub fn and_in_dims<A: Clone + Sync, E: Dimension>(
                self,
                v: &'a ArrayRef<A, E>,
                broadcast_dimensions: &'a [usize],
            ) -> Indexed<'a, ($($P,)+ super::Read<'a, A, E>,), D> {
                self.and(InDims::new(v, broadcast_dimensions))
            }
        }
    };
}
indexed! {
    (P1 p1) and Q;
    (P1 p1, P2 p2) and Q;
    (P1 p1, P2 p2, P3 p3) and Q;
    (P1 p1, P2 p2, P3 p3, P4 p4) and Q;
    (P1 p1, P2 p2, P3 p3, P4 p4, P5 p5);
}
