//! [`StrictZip::fold_in_dims`](super::StrictZip::fold_in_dims)'s driver: the zipped elements
//! of each kept index folded in an order fixed by the shapes alone, whatever the threads.
//!
//! The reduced dims' elements of one kept index are taken in row-major order, a run at a time
//! (a run: the last reduced dim). Each run is folded in [`LANES`] lanes (element `i` into lane
//! `i % LANES`, which vectorises), the lanes combined pairwise; the runs' results are combined
//! in order, in blocks of about [`BLOCK`] elements that go to threads as units. Every grouping
//! is a function of the shapes, so one thread and many give the same bits.

use std::ops::Range;

use ndarray::Dimension;

use super::{RunFold, RunMap};
use crate::engine::{parallel, widest, Operand, Shared, Widest};

/// Independent accumulators per run.
pub(super) const LANES: usize = 16;

/// Elements a unit of work folds (whole runs, at least one).
const BLOCK: usize = 1 << 15;

/// The kept dims [`fold_in_dims`](super::StrictZip::fold_in_dims) takes: an array of dims (a
/// result of that fixed rank, `[usize; N]`), or a slice (a dynamic-rank result).
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

/// The element offsets of multi-index number `i` (row-major over `dims` of `shape`) in each
/// operand.
fn offsets<const M: usize>(
    mut i: usize,
    dims: &[usize],
    shape: &[usize],
    ops: &[&Operand<'_>; M],
) -> [isize; M] {
    let mut off = [0; M];
    for &d in dims.iter().rev() {
        let x = (i % shape[d]) as isize;
        i /= shape[d];
        for (o, op) in off.iter_mut().zip(ops) {
            *o += x * op.strides[d];
        }
    }
    off
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

/// One run of a map, as [`widest`] runs it.
struct MapCall<'r, R: RunMap<N>, const N: usize> {
    mapper: &'r R,
    st: &'r R::St,
    ptrs: [*mut u8; N],
    s: [isize; N],
    n: usize,
}

impl<R: RunMap<N>, const N: usize> Widest for MapCall<'_, R, N> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        // SAFETY: made by `fold_map` only, for a run of valid elements.
        unsafe { self.mapper.map(self.st, self.ptrs, self.s, self.n) }
    }
}

/// One result element per index over `kept` (row-major), each run's result ([`RunFold`]: the
/// `n` elements of one run, operand `k`'s from `ptrs[k]`, `strides[k]` apart, folded from the
/// fold's start; with `n == 0`, the start) combined in order over the runs. `None` when the
/// partial results could not be allocated.
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
    let reduced: Vec<usize> = (0..shape.len()).filter(|d| !kept.contains(d)).collect();
    let (inner, outer) = match reduced.split_last() {
        Some((&d, rest)) => (Some(d), rest),
        None => (None, &[][..]),
    };
    let n = inner.map_or(1, |d| shape[d]);
    let strides: [isize; N] = std::array::from_fn(|k| inner.map_or(0, |d| ops[k].strides[d]));
    let results: usize = kept.iter().map(|&d| shape[d]).product();
    let runs: usize = outer.iter().map(|&d| shape[d]).product();
    let (n, runs) = if n == 0 || runs == 0 {
        (0, 1)
    } else {
        (n, runs)
    };
    let group = (BLOCK / n.max(1)).clamp(1, runs);
    let blocks = runs.div_ceil(group);
    let units = results.checked_mul(blocks)?;
    let mut partial: Vec<Option<Acc>> = Vec::new();
    partial.try_reserve_exact(units).ok()?;
    partial.resize_with(units, || None);
    let slots = Shared(partial.as_mut_ptr().cast());
    let bytes = ops.iter().map(|o| o.size).sum::<usize>();
    let traffic = (results * runs * n).saturating_mul(bytes);
    let unit = |u: usize| {
        let slots: Shared = slots; // the wrapper, not its field: it is `Sync`
        let (k, b) = (u / blocks, u % blocks);
        let base = offsets(k, kept, shape, &ops);
        let mut acc: Option<Acc> = None;
        for r in (b * group)..((b + 1) * group).min(runs) {
            let off = offsets(r, outer, shape, &ops);
            // SAFETY: the offsets of an index of `shape`, an element of each operand.
            let ptrs = std::array::from_fn(|q| unsafe { ops[q].at(base[q] + off[q]) });
            let v = widest(Call {
                run,
                ptrs,
                s: strides,
                n,
            });
            acc = Some(match acc {
                None => v,
                Some(a) => combine(a, v),
            });
        }
        // SAFETY: slot `u` of `partial` (`u < units`), written by this unit alone; the `None`
        // it replaces needs no drop.
        unsafe { slots.0.cast::<Option<Acc>>().add(u).write(acc) };
    };
    parallel::split(units, parallel::pieces(traffic), 1, &|range: Range<
        usize,
    >| {
        range.for_each(unit)
    });
    let mut parts = partial.into_iter();
    let out = (0..results)
        .map(|_| {
            let mut acc = parts.next().flatten();
            for _ in 1..blocks {
                if let Some(v) = parts.next().flatten() {
                    acc = Some(match acc {
                        None => v,
                        Some(a) => combine(a, v),
                    });
                }
            }
            acc
        })
        .collect::<Option<Vec<Acc>>>();
    // Every unit wrote its slot (one run at least, so `Some`): `out` is `Some`.
    out
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

/// [`fold`] of each kept index, then `finish` of its result, then [`RunMap`] of it over each
/// of its runs again (operand 0 the output, the others the zip's), on the thread that folded
/// them, while they are in cache. The folds group as [`fold`]'s do, so their results are
/// [`fold`]'s bits.
///
/// # Safety
/// As [`fold`], for `ops[1..]`; `ops[0]` is the output, seen at `shape`, each of its elements
/// written once by the map, which reads the zip's operands only.
pub(super) unsafe fn fold_map<Acc: Send, St: Sync, const N: usize>(
    shape: &[usize],
    kept: &[usize],
    ops: [&Operand<'_>; N],
    combine: &(impl Fn(Acc, Acc) -> Acc + Sync),
    run: &impl RunFold<N, Acc = Acc>,
    finish: &(impl Fn(Acc) -> St + Sync),
    mapper: &impl RunMap<N, St = St>,
) {
    let reduced: Vec<usize> = (0..shape.len()).filter(|d| !kept.contains(d)).collect();
    let (inner, outer) = match reduced.split_last() {
        Some((&d, rest)) => (Some(d), rest),
        None => (None, &[][..]),
    };
    let n = inner.map_or(1, |d| shape[d]);
    let strides: [isize; N] = std::array::from_fn(|k| inner.map_or(0, |d| ops[k].strides[d]));
    let results: usize = kept.iter().map(|&d| shape[d]).product();
    let runs: usize = outer.iter().map(|&d| shape[d]).product();
    let (fold_n, fold_runs) = if n == 0 || runs == 0 {
        (0, 1)
    } else {
        (n, runs)
    };
    let group = (BLOCK / fold_n.max(1)).clamp(1, fold_runs);
    let bytes = ops.iter().map(|o| o.size).sum::<usize>();
    let traffic = (results * runs * n).saturating_mul(bytes);
    let at = |base: &[isize; N], r: usize| -> [*mut u8; N] {
        let off = offsets(r, outer, shape, &ops);
        // SAFETY: the offsets of an index of `shape`, an element of each operand.
        std::array::from_fn(|q| unsafe { ops[q].at(base[q] + off[q]) })
    };
    let unit = |k: usize| {
        let base = offsets(k, kept, shape, &ops);
        let mut acc: Option<Acc> = None;
        for b in 0..fold_runs.div_ceil(group) {
            let mut block: Option<Acc> = None;
            for r in (b * group)..((b + 1) * group).min(fold_runs) {
                let v = widest(Call {
                    run,
                    ptrs: at(&base, r),
                    s: strides,
                    n: fold_n,
                });
                block = Some(match block {
                    None => v,
                    Some(a) => combine(a, v),
                });
            }
            acc = match (acc, block) {
                (Some(a), Some(v)) => Some(combine(a, v)),
                (a, v) => a.or(v),
            };
        }
        let Some(acc) = acc else { return };
        let finished = finish(acc);
        for r in (0..runs).filter(|_| n > 0) {
            widest(MapCall {
                mapper,
                st: &finished,
                ptrs: at(&base, r),
                s: strides,
                n,
            });
        }
    };
    parallel::split(results, parallel::pieces(traffic), 1, &|range: Range<
        usize,
    >| {
        range.for_each(unit)
    });
}
