//! [`StrictZip::fold_in_dims`](super::StrictZip::fold_in_dims)'s driver: the zipped elements
//! of each kept index folded in an order fixed by the shapes alone, whatever the threads.
//!
//! The reduced dims' elements of one kept index are taken in row-major order, a run at a time
//! (a run: the last reduced dim). Each run is folded in [`LANES`] lanes (element `i` into lane
//! `i % LANES`, which vectorises), the lanes combined pairwise; the runs' results are combined
//! in order, in blocks of about [`BLOCK`] elements that go to threads as units. Every grouping
//! is a function of the shapes, so one thread and many give the same bits.

use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::Range;

use ndarray::Dimension;

use super::run::{RunFold, RunMap};
use crate::engine::{parallel, widest, Operand, Shared, Widest};

/// Independent accumulators per run.
pub(super) const LANES: usize = 16;

/// Elements a unit of work folds (whole runs, at least one).
const BLOCK: usize = 1 << 15;

/// The kept dims [`fold_in_dims`](super::StrictZip::fold_in_dims) takes: an array of dims (a
/// result of that fixed rank, `[usize; N]`), or a slice (a dynamic-rank result).
///
/// ```
/// use ndarray::{array, Array1, ArrayD};
/// use xla_bcast::prelude::*;
///
/// let x = array![[1, 2], [3, 4]];
/// let rows: Array1<i32> = StrictZip::from(&x).fold_in_dims([0], 0, |s, x| s + x, |a, b| a + b).unwrap();
/// let dyn_rows: ArrayD<i32> = StrictZip::from(&x).fold_in_dims(&[0][..], 0, |s, x| s + x, |a, b| a + b).unwrap();
/// assert_eq!(rows.into_dyn(), dyn_rows);
/// ```
pub trait KeptDims {
    /// The result's dimension type.
    type Dim: Dimension;
    /// The dims.
    fn dims(&self) -> &[usize];
}

impl<const N: usize> KeptDims for [usize; N]
where
    ndarray::Dim<[usize; N]>: Dimension,
{
    type Dim = ndarray::Dim<[usize; N]>;
    fn dims(&self) -> &[usize] {
        self
    }
}

impl<const N: usize> KeptDims for &[usize; N] {
    type Dim = ndarray::IxDyn;
    fn dims(&self) -> &[usize] {
        &self[..]
    }
}

impl KeptDims for &[usize] {
    type Dim = ndarray::IxDyn;
    fn dims(&self) -> &[usize] {
        self
    }
}

/// One run of `R`, as [`widest`] runs it.
struct Call<'r, R, const N: usize> {
    run: &'r R,
    ptrs: [*mut u8; N],
    s: [isize; N],
    n: usize,
}

impl<R: RunFold<N>, const N: usize> Widest for Call<'_, R, N> {
    type Out = R::Acc;
    #[inline(always)]
    fn run(self) -> R::Acc {
        // SAFETY: made by `fold` only, for a run of valid elements.
        unsafe { self.run.run(self.ptrs, self.s, self.n) }
    }
}

/// Runs side by side ([`RunFold::run_across`]), as [`widest`] runs them.
struct Across<'r, R: RunFold<N>, const N: usize> {
    run: &'r R,
    ptrs: [*mut u8; N],
    sa: ([isize; N], [isize; N]),
    n: (usize, usize),
    lanes: &'r mut Vec<R::Acc>,
}

impl<R: RunFold<N>, const N: usize> Widest for Across<'_, R, N> {
    type Out = Vec<R::Acc>;
    #[inline(always)]
    fn run(self) -> Vec<R::Acc> {
        // SAFETY: made by `fold` only, for runs of valid elements.
        unsafe { self.run.run_across(self.ptrs, self.sa, self.n, self.lanes) }
    }
}

/// One run of a map, as [`widest`] runs it.
struct MapCall<'r, R: RunMap<N>, const N: usize> {
    mapper: &'r R,
    ptrs: [*mut u8; N],
    s: [isize; N],
    n: usize,
}

impl<R: RunMap<N>, const N: usize> Widest for MapCall<'_, R, N> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        // SAFETY: made by `GroupAt::map` only, for a run of valid elements.
        unsafe { self.mapper.map(self.ptrs, self.s, self.n) }
    }
}

/// How a fold walks the zip: per kept index, its runs (the last reduced dim, `n` elements
/// `strides[k]` apart; `runs` of them, row-major over the other reduced dims), folded in
/// blocks of `group` runs. Every grouping is a function of the shapes alone.
struct Runs<'s, const N: usize> {
    shape: &'s [usize],
    /// Each operand's first element, and its strides along each dim in bytes.
    ptrs: [Shared; N],
    by_dim: Vec<[isize; N]>,
    kept: &'s [usize],
    outer: Vec<usize>,
    n: usize,
    strides: [isize; N],
    results: usize,
    runs: usize,
    group: usize,
    traffic: usize,
    /// Each operand's stride along the last kept dim, when it is the zip's last dim and each
    /// stride is 1 or (a plain operand's) 0: its kept indices are folded [`ACROSS`] side by
    /// side.
    across: Option<[isize; N]>,
}

/// Kept indices folded side by side, along a last kept dim that is the zip's last ([`fold`]).
const ACROSS: usize = 64;

impl<'s, const N: usize> Runs<'s, N> {
    fn new(shape: &'s [usize], kept: &'s [usize], ops: &[&Operand<'_>; N]) -> Self {
        let mut outer: Vec<usize> = (0..shape.len()).filter(|d| !kept.contains(d)).collect();
        let inner = outer.pop();
        let n = inner.map_or(1, |d| shape[d]);
        let results: usize = kept.iter().map(|&d| shape[d]).product();
        let runs: usize = outer.iter().map(|&d| shape[d]).product();
        let bytes = ops.iter().map(|o| o.size).sum::<usize>();
        // An empty reduction folds nothing: one run of no elements (the fold's start).
        let (n, runs) = if n == 0 || runs == 0 {
            (0, 1)
        } else {
            (n, runs)
        };
        let last = shape.len().wrapping_sub(1);
        let along: [isize; N] = std::array::from_fn(|k| ops[k].strides.get(last).map_or(0, |&a| a));
        let read = |k: usize| along[k] == 1 || (along[k] == 0 && ops[k].plain);
        let across =
            (kept.last() == Some(&last) && inner.is_some() && (1..N).all(read)).then_some(along);
        Runs {
            across,
            // SAFETY: offset 0 of each operand.
            ptrs: ops.map(|o| Shared(unsafe { o.at(0) })),
            by_dim: (0..shape.len())
                .map(|d| ops.map(|o| o.strides[d] * o.size as isize))
                .collect(),
            shape,
            kept,
            strides: std::array::from_fn(|k| inner.map_or(0, |d| ops[k].strides[d])),
            results,
            group: (BLOCK / n.max(1)).clamp(1, runs),
            traffic: (results * runs * n).saturating_mul(bytes),
            outer,
            n,
            runs,
        }
    }

    /// The blocks of runs per kept index.
    fn blocks(&self) -> usize {
        self.runs.div_ceil(self.group)
    }

    /// The operands' byte offsets at multi-index number `i` (row-major over `dims`).
    fn offsets(&self, mut i: usize, dims: &[usize]) -> [isize; N] {
        let mut off = [0; N];
        for &d in dims.iter().rev() {
            let (x, s) = ((i % self.shape[d]) as isize, &self.by_dim[d]);
            i /= self.shape[d];
            for q in 0..N {
                off[q] += x * s[q];
            }
        }
        off
    }

    /// The operands' byte offsets at kept index `k`.
    fn base(&self, k: usize) -> [isize; N] {
        self.offsets(k, self.kept)
    }

    /// The operands' elements at run `r` of the kept index at offsets `base`.
    ///
    /// # Safety
    /// The operands are seen at the shape; `base` is a kept index's ([`base`](Runs::base)).
    #[inline(always)]
    unsafe fn at(&self, base: &[isize; N], r: usize) -> [*mut u8; N] {
        // A kept index of one run (a group's usual case) needs no run offsets.
        let off = if self.runs == 1 {
            [0; N]
        } else {
            self.offsets(r, &self.outer)
        };
        // SAFETY: the offsets of an index of the shape, an element of each operand.
        std::array::from_fn(|q| unsafe { self.ptrs[q].0.offset(base[q] + off[q]) })
    }

    /// Block `b`'s runs of the kept index at offsets `base` folded, their results combined in
    /// order.
    ///
    /// # Safety
    /// As [`fold`].
    unsafe fn block<R: RunFold<N>>(
        &self,
        (base, b): (&[isize; N], usize),
        run: &R,
        combine: &impl Fn(R::Acc, R::Acc) -> R::Acc,
    ) -> Option<R::Acc> {
        let mut acc = None;
        for r in (b * self.group)..((b + 1) * self.group).min(self.runs) {
            // SAFETY: as the caller promised.
            let (ptrs, s, n) = (unsafe { self.at(base, r) }, self.strides, self.n);
            let v = widest(Call { run, ptrs, s, n });
            acc = Some(match acc {
                None => v,
                Some(a) => combine(a, v),
            });
        }
        acc
    }
}

impl<const N: usize> Runs<'_, N> {
    /// Block `b`'s runs of kept indices `k..k + width` (side by side along the last dim),
    /// each index's folded and combined as [`block`](Runs::block) folds and combines them.
    ///
    /// # Safety
    /// As [`fold`].
    unsafe fn block_across<R: RunFold<N>>(
        &self,
        (k, width, b): (usize, usize, usize),
        run: &R,
        combine: &impl Fn(R::Acc, R::Acc) -> R::Acc,
        lanes: &mut Vec<R::Acc>,
    ) -> Vec<Option<R::Acc>> {
        let a = self.across.unwrap_or([0; N]);
        let mut acc: Vec<Option<R::Acc>> = (0..width).map(|_| None).collect();
        let base = self.base(k);
        for r in (b * self.group)..((b + 1) * self.group).min(self.runs) {
            // SAFETY: as the caller promised.
            let ptrs = unsafe { self.at(&base, r) };
            let (sa, n, lanes) = ((self.strides, a), (self.n, width), &mut *lanes);
            let runs = widest(Across {
                run,
                ptrs,
                sa,
                n,
                lanes,
            });
            for (acc, v) in acc.iter_mut().zip(runs) {
                *acc = join(acc.take(), Some(v), combine);
            }
        }
        acc
    }
}

/// `a` then `b`, combined where both are there.
fn join<Acc>(a: Option<Acc>, b: Option<Acc>, combine: &impl Fn(Acc, Acc) -> Acc) -> Option<Acc> {
    match (a, b) {
        (Some(a), Some(b)) => Some(combine(a, b)),
        (a, b) => a.or(b),
    }
}

/// One result element per index over `kept` (row-major), each run's result ([`RunFold`]: the
/// `n` elements of one run, operand `k`'s from `ptrs[k]`, `strides[k]` apart, folded from the
/// fold's start; with `n == 0`, the start) combined in order over the runs, a block of runs per
/// unit of work. `None` when the partial results could not be allocated.
///
/// # Safety
/// The operands are seen at `shape` (valid elements at every index; operand 0 is not read),
/// `kept` holds distinct dims of it, and `run` reads (or writes, each once) only the elements
/// of the run it is given.
pub(super) unsafe fn fold<Acc: Send, const N: usize>(
    shape: &[usize],
    kept: &[usize],
    ops: [&Operand<'_>; N],
    combine: &(impl Fn(Acc, Acc) -> Acc + Sync),
    run: &impl RunFold<N, Acc = Acc>,
) -> Option<Vec<Acc>> {
    let runs = Runs::new(shape, kept, &ops);
    let blocks = runs.blocks();
    let slots_len = runs.results.checked_mul(blocks)?;
    let mut partial: Vec<Option<Acc>> = Vec::new();
    partial.try_reserve_exact(slots_len).ok()?;
    partial.resize_with(slots_len, || None);
    let slots = Shared(partial.as_mut_ptr().cast());
    // A unit: a block of runs of one kept index, or of `ACROSS` side by side.
    let along = runs.across.map_or(1, |_| shape[shape.len() - 1]);
    let width = ACROSS.min(along).max(1);
    let per_row = along.div_ceil(width);
    let units = (runs.results / along.max(1)).checked_mul(per_row * blocks)?;
    let unit = |u: usize| {
        let slots: Shared = slots; // the wrapper, not its field: it is `Sync`
        let (row, b) = (u / blocks, u % blocks);
        let j = row % per_row * width;
        let (k, width) = (row / per_row * along + j, width.min(along - j));
        let write = |k: usize, acc: Option<Acc>| {
            // SAFETY: slot `k * blocks + b` of `partial`, written by this unit alone; the
            // `None` it replaces needs no drop.
            unsafe { slots.0.cast::<Option<Acc>>().add(k * blocks + b).write(acc) };
        };
        if runs.across.is_none() {
            // SAFETY: as the caller promised.
            return write(k, unsafe { runs.block((&runs.base(k), b), run, combine) });
        }
        let mut lanes = Vec::new();
        // SAFETY: as the caller promised.
        let accs = unsafe { runs.block_across((k, width, b), run, combine, &mut lanes) };
        for (j, acc) in accs.into_iter().enumerate() {
            write(k + j, acc);
        }
    };
    parallel::split(units, runs.traffic, 1, &|range: Range<usize>| {
        range.for_each(unit)
    });
    let mut parts = partial.into_iter();
    // Every unit wrote its slot, one run at least: `Some` each.
    (0..runs.results)
        .map(|_| {
            parts
                .by_ref()
                .take(blocks)
                .fold(None, |a, b| join(a, b, combine))
        })
        .collect()
}

/// A fold's [`LANES`] accumulators, stored word by word across the lanes: an accumulator
/// of up to four words of its alignment (`f32`, `(f32, f32)`, `(f64, f64)`) keeps word `w` of
/// lane `j` at word `w * LANES + j`, so that the compiler vectorises a fold across its lanes
/// (a tuple's sums eight lanes to an AVX register) rather than within one tuple; any other is
/// stored lane by lane, as an array. Either way each lane always holds a valid accumulator,
/// dropped with the lanes.
pub(super) struct Lanes<Acc> {
    store: MaybeUninit<[Acc; LANES]>,
}

impl<Acc> Lanes<Acc> {
    /// The size of a stored word and the words per accumulator.
    const WORDS: (usize, usize) = {
        let (size, align) = (size_of::<Acc>(), align_of::<Acc>());
        if align <= 8 && size <= 4 * align {
            (align, size / align)
        } else {
            (size, 1)
        }
    };

    /// A bitwise copy of lane `j`'s accumulator.
    ///
    /// # Panics
    /// If `j >= LANES` (never: lane numbers are constants or `g % LANES`; the check folds away).
    #[inline(always)]
    fn peek(&self, j: usize) -> ManuallyDrop<Acc> {
        assert!(j < LANES, "lane {j} of {LANES}");
        let (a, k) = Self::WORDS;
        let mut acc = MaybeUninit::<Acc>::uninit();
        let (from, to) = (
            self.store.as_ptr().cast::<u8>(),
            acc.as_mut_ptr().cast::<u8>(),
        );
        for w in 0..k {
            // SAFETY: word `w` of lane `j` lies inside the store (`k * a` bytes per lane,
            // `LANES` lanes), word `w` inside `acc`.
            unsafe {
                std::ptr::copy_nonoverlapping(from.add((w * LANES + j) * a), to.add(w * a), a)
            };
        }
        // SAFETY: every word of `acc` copied from lane `j`, which holds a valid accumulator.
        ManuallyDrop::new(unsafe { acc.assume_init() })
    }

    /// `acc` moved into lane `j` (`j < LANES`) over what it held, which is not dropped.
    ///
    /// # Safety
    /// Lane `j`'s old value was moved out or dropped, or was never written.
    #[inline(always)]
    unsafe fn write(&mut self, j: usize, acc: Acc) {
        assert!(j < LANES, "lane {j} of {LANES}");
        let (a, k) = Self::WORDS;
        let acc = ManuallyDrop::new(acc);
        let (from, to) = (
            (&raw const *acc).cast::<u8>(),
            self.store.as_mut_ptr().cast::<u8>(),
        );
        for w in 0..k {
            // SAFETY: as in `peek`, the other way.
            unsafe {
                std::ptr::copy_nonoverlapping(from.add(w * a), to.add((w * LANES + j) * a), a)
            };
        }
    }
}

impl<Acc: Clone> Lanes<Acc> {
    /// Every lane `init`.
    #[inline(always)]
    pub(super) fn new(init: &Acc) -> Self {
        // Not dropped until every lane is written: a panic in `clone` leaks the lanes so far.
        let mut lanes = ManuallyDrop::new(Lanes {
            store: MaybeUninit::uninit(),
        });
        for j in 0..LANES {
            // SAFETY: lane `j` is written once, before any lane is read.
            unsafe { lanes.write(j, init.clone()) };
        }
        ManuallyDrop::into_inner(lanes)
    }

    /// Lane `j` becomes `f` of (a clone of) its accumulator; the old one is dropped after `f`
    /// returns, so that a panic in `f` leaves every lane valid (and dropped with the lanes).
    #[inline(always)]
    pub(super) fn update(&mut self, j: usize, f: impl FnOnce(Acc) -> Acc) {
        let old = self.peek(j);
        let new = f(Acc::clone(&old));
        drop(ManuallyDrop::into_inner(old));
        // SAFETY: the old value was just dropped.
        unsafe { self.write(j, new) };
    }

    /// The lanes moved to a place of their own in memory, for a fold's last elements, whose
    /// lane is a computed number (`g % LANES`): only this place is kept in memory, the chunks'
    /// lanes before it stay in registers. The move stores those registers word by word across
    /// the lanes, and the vectoriser packs them as it finds them stored: a tuple's words eight
    /// lanes to an AVX register, not each tuple's words side by side, which cost a `(sum,
    /// sum of squares)` fold shuffles on every chunk (2.2x the time). `black_box` takes the
    /// new place's address: without it the compiler merges the two places, and the whole fold
    /// is kept in memory (the trial log's "Fused loops, fourth round").
    #[inline(always)]
    pub(super) fn moved(self) -> Self {
        let me = ManuallyDrop::new(self);
        let mut rest = Lanes {
            store: MaybeUninit::uninit(),
        };
        // SAFETY: a bitwise move; the old place is forgotten.
        unsafe { std::ptr::copy_nonoverlapping(&me.store, &mut rest.store, 1) };
        std::hint::black_box(&mut rest);
        rest
    }

    /// The lanes as an array.
    #[inline(always)]
    pub(super) fn into_array(self) -> [Acc; LANES] {
        let lanes = ManuallyDrop::new(self);
        std::array::from_fn(|j| ManuallyDrop::into_inner(lanes.peek(j)))
    }
}

impl<Acc> Drop for Lanes<Acc> {
    /// Reached only when a fold panics: a finished fold's lanes are moved out by `combine`.
    fn drop(&mut self) {
        for j in (0..LANES).filter(|_| std::mem::needs_drop::<Acc>()) {
            drop(ManuallyDrop::into_inner(self.peek(j)));
        }
    }
}

/// Lanes combined pairwise: `(0 1) (2 3) ...`, then `(01 23) ...`, to one.
#[inline(always)]
pub(super) fn pairwise<Acc: Clone>(
    lanes: &mut [Acc; LANES],
    combine: &impl Fn(Acc, Acc) -> Acc,
) -> Acc {
    let mut step = 1;
    while step < LANES {
        for j in (0..LANES).step_by(2 * step) {
            lanes[j] = combine(lanes[j].clone(), lanes[j + step].clone());
        }
        step *= 2;
    }
    lanes[0].clone()
}

/// The elements of one kept index of a zip (a group): each of its runs folded or mapped on
/// this thread, while they are in cache ([`groups`]).
pub(super) struct GroupAt<'g, const N: usize> {
    runs: &'g Runs<'g, N>,
    /// The operands' byte offsets at the group's kept index.
    base: [isize; N],
}

impl<const N: usize> GroupAt<'_, N> {
    /// The group's runs folded by `run`, combined as [`fold`] combines them (so with its bits);
    /// `None` for a group of no runs.
    ///
    /// # Safety
    /// As [`fold`], for one kept index.
    pub(super) unsafe fn fold<R: RunFold<N>>(
        &self,
        run: &R,
        combine: &impl Fn(R::Acc, R::Acc) -> R::Acc,
    ) -> Option<R::Acc> {
        let (runs, base) = (self.runs, &self.base);
        if runs.runs == 1 {
            // The one block's one run: its result as the blocks' loop gives it, without the loop.
            // SAFETY: as the caller promised.
            let (ptrs, s, n) = (unsafe { runs.at(base, 0) }, runs.strides, runs.n);
            return Some(widest(Call { run, ptrs, s, n }));
        }
        // SAFETY: as the caller promised.
        let blocks = (0..runs.blocks()).map(|b| unsafe { runs.block((base, b), run, combine) });
        blocks.fold(None, |a, b| join(a, b, combine))
    }

    /// [`RunMap`] over each of the group's runs.
    ///
    /// # Safety
    /// As [`groups`]: the map writes operand 0's elements, reads the others'.
    pub(super) unsafe fn map<R: RunMap<N>>(&self, mapper: &R) {
        let runs = self.runs;
        for r in (0..runs.runs).filter(|_| runs.n > 0) {
            // SAFETY: as the caller promised.
            let (ptrs, s, n) = (unsafe { runs.at(&self.base, r) }, runs.strides, runs.n);
            widest(MapCall { mapper, ptrs, s, n });
        }
    }
}

/// `each` of every group (the elements of one index over `kept`), on one thread each, a range
/// of kept indices per unit of work. The folds it runs group as [`fold`]'s do, so their
/// results are [`fold`]'s bits.
///
/// # Safety
/// As [`fold`], for `ops[1..]`; `ops[0]` is the output, seen at `shape`, whose elements `each`
/// may write (a group's elements are no other group's).
pub(super) unsafe fn groups<const N: usize>(
    shape: &[usize],
    kept: &[usize],
    ops: [&Operand<'_>; N],
    each: &(impl Fn(&GroupAt<'_, N>) + Sync),
) {
    let runs = Runs::new(shape, kept, &ops);
    let runs = &runs;
    parallel::split(runs.results, runs.traffic, 1, &|range: Range<usize>| {
        range.for_each(|k| {
            let base = runs.base(k);
            each(&GroupAt { runs, base })
        })
    });
}
