//! Reductions: a source folded into an accumulator over the same planner and the kernels'
//! fold, in parallel, in an order that depends on the shapes only, never on the threads.
//!
//! The generic part is small: the accumulator's and partials' allocation, and one fold loop
//! per element type and function ([`kernel::fold_block`]); the driver that plans, splits and
//! combines ([`fold`]) is compiled once.

use ndarray::{ArrayRef, Dimension, IxDyn};
use smallvec::SmallVec;

use super::alloc;
use super::kernel::{self, Block, Fold, FoldOrder};
use super::operand::{Operand, Src, Strides};
use super::parallel::{self, for_each_index, pieces, split};
use super::plan::Plan;

/// Outer dims cut into this many blocks when a large reduction folds its outermost dim: each
/// block reduces into a private accumulator and the blocks are combined in order, so the result
/// does not depend on the number of threads.
const REDUCE_BLOCKS: usize = 8;

/// A fold's loop over a block of the plan, type-erased: the accumulator (operand 0) folds in
/// the source (operand 1), `f(acc, x)`.
///
/// # Safety
/// As [`kernel::fold_block`], for the element type and function of the fold at `ctx`.
type FoldFn = unsafe fn(ctx: *const (), acc: *mut u8, src: *const u8, blk: Block<2>);

/// A fold as the driver runs it: its loop and what the loop reads it from.
#[derive(Clone, Copy)]
struct Folder {
    run: FoldFn,
    ctx: *const (),
}

// SAFETY: `ctx` is a `Fold` of `Sync` elements and a `Sync` function, read by every thread.
unsafe impl Sync for Folder {}

impl Folder {
    /// Folds `blk` of the source at `src` into the accumulator at `acc`.
    ///
    /// # Safety
    /// As [`FoldFn`].
    unsafe fn call(&self, acc: *mut u8, src: *const u8, blk: Block<2>) {
        // SAFETY: as the caller promised; `ctx` is the fold `run` was made for.
        unsafe { (self.run)(self.ctx, acc, src, blk) }
    }
}

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
    /// # Safety
    /// As [`FoldFn`], `ctx` a `Fold<A, F>`.
    unsafe fn fold_run<A: Clone, F: Fn(A, A) -> A>(
        ctx: *const (),
        acc: *mut u8,
        src: *const u8,
        blk: Block<2>,
    ) {
        // SAFETY: as the caller promised.
        unsafe {
            let fold = &*ctx.cast::<Fold<'_, A, F>>();
            kernel::fold_block(acc.cast::<A>(), src.cast::<A>(), blk, fold)
        }
    }
    let folder = Folder {
        run: fold_run::<A, F>,
        ctx: (&fold as *const Fold<'_, A, F>).cast(),
    };
    let source = Src::of(src);
    let strides = acc_strides(acc.shape(), acc.strides(), acc_dim, src.shape());
    let blocks = partial_count(source.operand(), &strides, fold.order);
    // All are allocated before `acc` is touched, so a refusal leaves it as it was.
    let mut partials = (0..blocks)
        .map(|_| alloc::filled(op, IxDyn(acc.shape()), fold.identity))
        .collect::<crate::error::Result<Vec<_>>>()?;
    if fill {
        acc.fill(fold.identity.clone());
    }
    let parts: SmallVec<[Part; REDUCE_BLOCKS]> = partials
        .iter_mut()
        .map(|p| Part {
            ptr: p.as_mut_ptr().cast(),
            at_src: acc_strides(p.shape(), p.strides(), acc_dim, src.shape()),
            own: p.strides().into(),
        })
        .collect();
    // Taken after the fill: a pointer from before a later `&mut` use of `acc` would be stale.
    let target = Target {
        ptr: acc.as_mut_ptr().cast(),
        shape: acc.shape(),
        own: acc.strides(),
        at_src: strides,
    };
    // SAFETY: `acc` is borrowed mutably (unique) and each partial is this call's own, all of
    // `A`s as the fold's, seen at `src`'s shape through the strides made for it.
    unsafe { run(&target, source.operand(), fold.order, &parts, folder) };
    Ok(())
}

/// The accumulator of a fold: its elements, its shape and strides, and its strides at the
/// source's shape ([`acc_strides`]).
struct Target<'a> {
    ptr: *mut u8,
    shape: &'a [usize],
    own: &'a [isize],
    at_src: Strides,
}

/// A partial accumulator of a parallel fold: its elements (at the accumulator's shape) and its
/// strides there and at the source's shape.
struct Part {
    ptr: *mut u8,
    at_src: Strides,
    own: Strides,
}

// SAFETY: each partial is folded by one thread at a time (behind the block index it belongs to).
unsafe impl Sync for Part {}

/// The walk over `shape` of an accumulator with strides `acc` folding a source with `src`,
/// in the order the fold allows.
fn plan(shape: &[usize], acc: &[isize], src: &[isize], order: FoldOrder) -> Plan<2> {
    match order {
        // Walk in the source's memory order: the big operand streams, the accumulator repeats.
        FoldOrder::Any => Plan::new(shape, [acc, src], [1, 0]),
        FoldOrder::Index => Plan::logical(shape, [acc, src]),
    }
}

/// How many partial accumulators a fold of `src` into an accumulator with strides `acc` (at
/// `src`'s shape) takes: none when it runs serially or splits its outer dim by accumulator
/// elements, else one per block of its outermost dim.
fn partial_count(src: &Operand<'_>, acc: &[isize], order: FoldOrder) -> usize {
    let plan = plan(src.shape, acc, &src.strides, order);
    let rows = plan.dims[0];
    let folds_outer = plan.strides[0][0] == 0 && rows > 1;
    match parallel::is_small(plan.len.saturating_mul(src.size)) || !folds_outer {
        true => 0,
        false => REDUCE_BLOCKS.min(rows),
    }
}

/// Folds `src` into `target`: serially or split by outer indices when there are no `parts`,
/// else each part folding a contiguous block of the outer dim, then the parts folded into the
/// target in block order.
///
/// # Safety
/// The target and each part address, at every index of their strides at `src`'s shape, an
/// element of the fold's type (the target's and parts' distinct, and nothing else touches them
/// during the call); `parts` has [`partial_count`] parts, each at the target's shape.
unsafe fn run(target: &Target<'_>, src: &Operand<'_>, order: FoldOrder, parts: &[Part], f: Folder) {
    let plan = plan(src.shape, &target.at_src, &src.strides, order);
    let rows = plan.dims[0];
    let row_len = plan.len.checked_div(rows).unwrap_or(0);
    let traffic = plan.len.saturating_mul(src.size);
    // Folds the runs of `range` of `plan` from the source at `from` into the accumulator at
    // `acc`; every call below passes a plan whose offsets address elements of both, the
    // accumulator's this thread's alone, as this function's caller promised.
    let fold_range = |acc: *mut u8,
                      size: usize,
                      from: *const u8,
                      plan: &Plan<2>,
                      range: std::ops::Range<usize>| {
        let inner = plan.inner_strides();
        plan.for_each_block(range, |o, n, rows, step| {
            // SAFETY: as said of `fold_range`: elements of both operands, of `size` bytes,
            // the accumulator's this thread's.
            unsafe {
                let a = acc.offset(o[0] * size as isize);
                let s = from.offset(o[1] * size as isize);
                f.call(
                    a,
                    s,
                    Block {
                        n,
                        inner,
                        rows,
                        step,
                    },
                )
            }
        })
    };
    // SAFETY: element 0 of the source, from which the plan's offsets count.
    let from = SendPtr(unsafe { src.at(0) });
    let size = src.size;
    let target_ptr = SendPtr(target.ptr);
    if parts.is_empty() {
        // Each thread takes whole outer indices, which own distinct accumulator elements (or
        // the outer dim folds and the work stays on one thread).
        let folds_outer = plan.strides[0][0] == 0 && rows > 1;
        let pieces = if folds_outer { 1 } else { pieces(traffic) };
        split(rows, pieces, 1, &|r| {
            let range = r.start * row_len..r.end * row_len;
            fold_range(target_ptr.get(), size, from.get(), &plan, range)
        });
        return;
    }
    let blocks = parts.len();
    for_each_index(blocks, pieces(traffic), &|b| {
        let part = &parts[b];
        let part_plan = self::plan(src.shape, &part.at_src, &src.strides, order);
        let (r0, r1) = (rows * b / blocks, rows * (b + 1) / blocks);
        fold_range(
            part.ptr,
            size,
            from.get(),
            &part_plan,
            r0 * row_len..r1 * row_len,
        )
    });
    // Each part folded into the target in block order, over the target's own shape.
    for part in parts {
        let plan = self::plan(target.shape, target.own, &part.own, FoldOrder::Index);
        fold_range(target.ptr, size, part.ptr, &plan, 0..plan.len);
    }
}

/// A pointer shared with the threads of a split, each of which writes distinct elements.
#[derive(Clone, Copy)]
struct SendPtr(*mut u8);
// SAFETY: the threads that share it write distinct elements through it (see `run`).
unsafe impl Sync for SendPtr {}
impl SendPtr {
    fn get(self) -> *mut u8 {
        self.0
    }
}

/// The strides at `src_shape` of an accumulator of `shape` and `strides` whose dim `acc_dim[d]`
/// receives src dim `d`: 0 where src dims fold away or broadcast (size 1 in the accumulator).
fn acc_strides(
    shape: &[usize],
    strides: &[isize],
    acc_dim: &[Option<usize>],
    src_shape: &[usize],
) -> Strides {
    (0..src_shape.len())
        .map(|d| match acc_dim[d] {
            Some(a) if shape[a] == src_shape[d] => strides[a],
            _ => 0,
        })
        .collect()
}
