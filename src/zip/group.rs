//! [`Group`]: the elements of one kept index of a zip, for
//! [`StrictZip::for_each_group_into`](super::StrictZip::for_each_group_into): the user's
//! passes over them (folds, writes into the output) run on one thread, while they are in
//! cache, as a hand-written row loop runs.

use std::marker::PhantomData;

use super::fold::GroupAt;
use super::run::{RunFolder, RunMapper, Update, WithOut};
use super::ZipOperand;

/// The zip's operand types and the output's element type, unowned.
type Types<'a, Z, R> = PhantomData<fn() -> (&'a (), Z, R)>;

/// The elements of one index over the kept dims of a zip (a row, for a fold over the last dim),
/// and the output's elements at the same indices: what the closure of
/// [`StrictZip::for_each_group_into`](super::StrictZip::for_each_group_into) gets, once per
/// kept index. Its passes ([`fold`](Group::fold), [`for_each`](Group::for_each)) run on this
/// thread, in the AVX2 and FMA copy where the CPU has it, while the group is in cache.
///
/// ```
/// use ndarray::{array, Array2};
/// use xla_bcast::prelude::*;
///
/// // Each row minus its mean.
/// let x = array![[1.0f32, 3.0], [2.0, 6.0]];
/// let mut out = Array2::zeros((2, 2));
/// StrictZip::from(&x)
///     .for_each_group_into(&mut out, [0], |g| {
///         let mean = g.fold(0.0, |s, _, x| s + x, |a, b| a + b) / 2.0;
///         g.for_each(move |o, x| *o = x - mean);
///     })
///     .unwrap();
/// assert_eq!(out, array![[-1.0, 1.0], [-2.0, 2.0]]);
/// ```
pub struct Group<'a, 'g, Z, R, const N: usize> {
    at: &'g GroupAt<'g, N>,
    plain: [bool; N],
    _types: Types<'a, Z, R>,
}

impl<'a, 'g, Z, R, const N: usize> Group<'a, 'g, Z, R, N> {
    /// The group at `at`, of a zip whose operands (output first) are plain as `plain` says.
    pub(super) fn new(at: &'g GroupAt<'g, N>, plain: [bool; N]) -> Self {
        let _types = PhantomData;
        Group { at, plain, _types }
    }
}

/// [`Group`]'s passes for each operand count.
macro_rules! group {
    ($($n:literal: ($($P:ident),+);)*) => {$(
        impl<'a, R: Send, $($P: ZipOperand<'a>),+> Group<'a, '_, ($($P,)+), R, $n> {
            /// The group's elements folded, as
            /// [`fold_in_dims`](super::StrictZip::fold_in_dims) folds one kept index (the
            /// same order, so the same bits on any number of threads); `fold` also gets the
            /// output's element, to read what an earlier pass wrote or to write it.
            ///
            /// ```
            /// use ndarray::{array, Array1};
            /// use xla_bcast::prelude::*;
            ///
            /// // A running sum's last value per row, with the row's cumulative sums written.
            /// let x = array![[1, 2, 3], [4, 5, 6]];
            /// let mut out = ndarray::Array2::zeros((2, 3));
            /// StrictZip::from(&x).for_each_group_into(&mut out, [0], |g| {
            ///     let total = g.fold(0, |s, o, x| { *o = x * 10; s + x }, |a, b| a + b);
            ///     g.for_each(move |o, _| *o += total);
            /// }).unwrap();
            /// assert_eq!(out, array![[16, 26, 36], [55, 65, 75]]);
            /// ```
            pub fn fold<Acc, F, C>(&mut self, init: Acc, fold: F, combine: C) -> Acc
            where
                Acc: Clone + Send + Sync,
                F: Fn(Acc, &mut R, $($P::Item),+) -> Acc + Sync,
                C: Fn(Acc, Acc) -> Acc + Sync,
            {
                let step = WithOut(fold, PhantomData);
                let run = RunFolder::<_, _, _, ($($P::Part<'a>,)+), $n>::new((&init, &step, &combine), self.plain);
                // SAFETY: the group's elements, as `for_each_group_into` placed them; the
                // output's are this thread's alone (no other group has them), each handed to
                // `fold` for the length of one call.
                unsafe { self.at.fold(&run, &combine) }.unwrap_or(init)
            }

            /// `f` of each of the group's elements: the output's (`&mut`), then each
            /// operand's.
            ///
            /// ```
            /// use ndarray::{array, Array2};
            /// use xla_bcast::prelude::*;
            ///
            /// let x = array![[1, 2], [3, 4]];
            /// let mut out = Array2::zeros((2, 2));
            /// StrictZip::from(&x).for_each_group_into(&mut out, [1], |g| g.for_each(|o, x| *o = -x)).unwrap();
            /// assert_eq!(out, -x);
            /// ```
            pub fn for_each<F>(&mut self, f: F)
            where
                F: Fn(&mut R, $($P::Item),+) + Sync,
            {
                let step = Update(f);
                let mapper = RunMapper::<R, _, ($($P::Part<'a>,)+), $n>::new(&step, self.plain);
                // SAFETY: as in `fold`.
                unsafe { self.at.map(&mapper) };
            }
        }
    )*};
}
group! {
    2: (P1);
    3: (P1, P2);
    4: (P1, P2, P3);
    5: (P1, P2, P3, P4);
    6: (P1, P2, P3, P4, P5);
    7: (P1, P2, P3, P4, P5, P6);
}
