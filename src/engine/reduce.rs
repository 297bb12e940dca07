//! Reductions: a source folded into an accumulator over the same planner and the kernels'
//! fold, in parallel, in an order that depends on the shapes only, never on the threads.

use ndarray::{ArrayRef, Dimension, IxDyn};

use super::kernel::{self, Block, Fold, FoldOrder};
use super::operand::{Operand, Src, Strides};
use super::parallel::{self, for_each_index, pieces, split};
use super::plan::Plan;
use super::{alloc, assign, Seen};

/// Outer dims cut into this many blocks when a large reduction folds its outermost dim: each
/// block reduces into a private accumulator and the blocks are combined in order, so the result
/// does not depend on the number of threads.
const REDUCE_BLOCKS: usize = 8;

/// Folds `src` into `acc` with `f`: `acc_dim[d]` names the dim of `acc` that src dim `d` maps to
/// (`None` for a dim folded away); an `acc` dim of size 1 whose src dim is larger folds too.
/// With `fill`, `acc` is first filled with `identity`; without, it must already hold it (or the
/// values to fold into). The order in which
/// each element's contributions are combined depends on the shapes only, never on the threads;
/// with [`FoldOrder::Index`] it is the source's index order (row-major), so `f` need only be
/// associative. An error, having folded nothing, when a partial accumulator of a parallel fold
/// cannot be allocated.
pub(crate) fn reduce<A, D, E, F>(
    op: &'static str,
    acc: &mut ArrayRef<A, E>,
    acc_dim: &[Option<usize>],
    src: &ArrayRef<A, D>,
    fold: Fold<'_, A, F>,
    fill: bool,
) -> crate::error::Result<()>
where
    A: Clone + Send + Sync,
    D: Dimension,
    E: Dimension,
    F: Fn(A, A) -> A + Sync,
{
    let Fold { identity, f, order } = fold;
    let fold = &fold;
    let strides = acc_strides(acc, acc_dim, src.shape());
    let plan_of = |acc_strides: &[isize]| match order {
        // Walk in the source's memory order: the big operand streams, the accumulator repeats.
        FoldOrder::Any => Plan::new(src.shape(), [acc_strides, src.strides()], [1, 0]),
        FoldOrder::Index => Plan::logical(src.shape(), [acc_strides, src.strides()]),
    };
    let plan = plan_of(&strides);
    let source = Src::of(src);
    let source = source.operand();
    let rows = plan.dims[0];
    let row_len = plan.len.checked_div(rows).unwrap_or(0);
    /// Folds the runs of `range` of `plan` (over `src`'s shape) from `src` into `acc`.
    ///
    /// # Safety
    /// The plan's strides are `acc`'s and `src`'s, both of `A`s; no other thread touches the
    /// accumulator elements the offsets of `range` reach.
    unsafe fn fold_range<A: Clone>(
        [acc, src]: [&Operand<'_>; 2],
        plan: &Plan<2>,
        range: std::ops::Range<usize>,
        fold: &Fold<'_, A, impl Fn(A, A) -> A>,
    ) {
        let inner = plan.inner_strides();
        plan.for_each_block(range, |o, n, rows, step| {
            // SAFETY: the plan's offsets address elements of both arrays, and the accumulator's
            // are this thread's, as the caller promised.
            unsafe {
                let (a, s) = (acc.at(o[0]).cast::<A>(), src.at(o[1]).cast::<A>());
                let block = Block {
                    n,
                    inner,
                    rows,
                    step,
                };
                kernel::fold_block(a, s, block, fold)
            }
        })
    }
    let folds_outer = plan.strides[0][0] == 0 && rows > 1;
    let traffic = plan.len.saturating_mul(std::mem::size_of::<A>());
    let serial = parallel::is_small(traffic) || !folds_outer;
    // The outer dim folds in parallel: private accumulators per block, each folding a contiguous
    // range of the outer dim, combined in block order. All are allocated before `acc` is
    // touched, so a refusal leaves it as it was.
    let blocks = if serial { 0 } else { REDUCE_BLOCKS.min(rows) };
    let partials = (0..blocks)
        .map(|_| {
            let part = alloc::filled(op, IxDyn(acc.shape()), identity)?;
            Ok(std::sync::Mutex::new(part))
        })
        .collect::<crate::error::Result<Vec<_>>>()?;
    if fill {
        acc.fill(identity.clone());
    }
    // Taken after the fill: a pointer from before a later `&mut` use of `acc` would be stale.
    let acc_ptr = acc.as_mut_ptr();
    let target = Operand::raw(acc_ptr, src.shape(), strides.clone());
    if serial {
        // Each thread takes whole outer indices, which own distinct accumulator elements (or
        // the outer dim folds and the work stays on one thread).
        let pieces = if folds_outer { 1 } else { pieces(traffic) };
        split(rows, pieces, 1, &|r| {
            let range = r.start * row_len..r.end * row_len;
            // SAFETY: the plan is over `src` and `acc` (borrowed mutably: unique); each thread
            // takes whole outer indices, which own distinct accumulator elements (or the outer
            // dim folds and the work stays on one thread).
            unsafe { fold_range([&target, source], &plan, range, fold) }
        });
        return Ok(());
    }
    for_each_index(blocks, pieces(traffic), &|b| {
        let mut part = partials[b].lock().unwrap_or_else(|e| e.into_inner());
        let part_strides = acc_strides(&part, acc_dim, src.shape());
        let part_plan = plan_of(&part_strides);
        let target = Operand::raw(part.as_mut_ptr(), src.shape(), part_strides);
        let (r0, r1) = (rows * b / blocks, rows * (b + 1) / blocks);
        let range = r0 * row_len..r1 * row_len;
        // SAFETY: the plan is over `src` and this block's own partial accumulator.
        unsafe { fold_range([&target, source], &part_plan, range, fold) }
    });
    for p in partials {
        let part = p.into_inner().unwrap_or_else(|e| e.into_inner());
        assign(acc, &Src::of(&part), f, Seen::Own);
    }
    Ok(())
}

/// The strides at `src_shape` of an accumulator whose dim `acc_dim[d]` receives src dim `d`:
/// 0 where src dims fold away or broadcast (size 1 in the accumulator).
fn acc_strides<A, E: Dimension>(
    acc: &ArrayRef<A, E>,
    acc_dim: &[Option<usize>],
    src_shape: &[usize],
) -> Strides {
    (0..src_shape.len())
        .map(|d| match acc_dim[d] {
            Some(a) if acc.shape()[a] == src_shape[d] => acc.strides()[a],
            _ => 0,
        })
        .collect()
}
