//! Reductions: a source folded into an accumulator over the same planner and the kernels'
//! fold, in parallel, in an order that depends on the shapes only, never on the threads.
//!
//! The generic part is small: the accumulator's and partials' allocation, and one fold loop
//! per element type and function ([`kernel::fold_block`]); the driver that plans, splits and
//! combines (`run`) is compiled once.

use std::ops::Range;

use ndarray::{ArrayRef, Dimension, IxDyn};
use smallvec::SmallVec;

use super::alloc;
use super::kernel::{self, Block, Fold, FoldOrder};
use super::operand::{Operand, Shared, Src, Strides};
use super::parallel::{self, for_each_index, split};
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
pub(crate) type FoldFn = unsafe fn(ctx: *const (), acc: *mut u8, src: *const u8, blk: Block<2>);

/// Runs its callback on `n` fresh accumulator elements of a fold's type, contiguous and each
/// the fold's identity, then drops them; `false`, having run nothing, when they cannot be
/// allocated.
pub(crate) type Scratch<'a> = &'a (dyn Fn(usize, &mut dyn FnMut(Shared)) -> bool + Sync);

/// A fold as the driver runs it: its loop, what the loop reads it from (a `Fold` of `Sync`
/// elements and a `Sync` function, which every thread only reads), and its scratch runs.
#[derive(Clone, Copy)]
struct Folder<'a> {
    run: FoldFn,
    ctx: Shared,
    scratch: Scratch<'a>,
}

/// Folds `src` into `acc` with `f`: `acc_dim[d]` names the dim of `acc` that src dim `d` maps to
/// (`None` for a dim folded away); an `acc` dim of size 1 whose src dim is larger folds too.
/// With `fill`, `acc` is first filled with `identity`; without, it must already hold it (or the
/// values to fold into). The order in which
/// each element's contributions are combined depends on the shapes only, never on the threads;
/// with [`FoldOrder::Index`] it is the source's index order (row-major), so `f` need only be
/// associative. An error, having folded nothing, when a partial accumulator of a parallel fold
/// cannot be allocated.
#[inline(always)]
pub(crate) fn reduce<A, D, E, F, G>(
    op: &'static str,
    acc: &mut ArrayRef<A, E>,
    acc_dim: &[Option<usize>],
    src: &ArrayRef<A, D>,
    fold: Fold<'_, A, F, G>,
    fill: bool,
) -> crate::error::Result<()>
where
    A: Clone + Send + Sync,
    D: Dimension,
    E: Dimension,
    F: Fn(A, A) -> A + Sync,
    G: Fn(A, A) -> A + Sync,
{
    let body: fn(_, &mut _, _, &_, _, _) -> _ = reduce_in::<A, D, E, F, G>;
    body(op, acc, acc_dim, src, fold, fill)
}

/// [`reduce`]'s body (called through a pointer, as [`super::collect`]'s is).
fn reduce_in<A, D, E, F, G>(
    op: &'static str,
    acc: &mut ArrayRef<A, E>,
    acc_dim: &[Option<usize>],
    src: &ArrayRef<A, D>,
    fold: Fold<'_, A, F, G>,
    fill: bool,
) -> crate::error::Result<()>
where
    A: Clone + Send + Sync,
    D: Dimension,
    E: Dimension,
    F: Fn(A, A) -> A + Sync,
    G: Fn(A, A) -> A + Sync,
{
    /// # Safety
    /// As [`FoldFn`], `ctx` a `Fold<A, F, G>`.
    unsafe fn fold_run<A: Clone, F: Fn(A, A) -> A, G: Fn(A, A) -> A>(
        ctx: *const (),
        acc: *mut u8,
        src: *const u8,
        blk: Block<2>,
    ) {
        // SAFETY: as the caller promised.
        unsafe {
            let fold = &*ctx.cast::<Fold<'_, A, F, G>>();
            kernel::fold_block(acc.cast::<A>(), src.cast::<A>(), blk, fold)
        }
    }
    let scratch = |n: usize, k: &mut dyn FnMut(Shared)| {
        let run = alloc::filled(op, IxDyn(&[n]), fold.identity);
        run.map(|mut run| k(Shared(run.as_mut_ptr().cast())))
            .is_ok()
    };
    let folder = Folder {
        run: fold_run::<A, F, G>,
        ctx: Shared((&fold as *const Fold<'_, A, F, G>).cast_mut().cast()),
        scratch: &scratch,
    };
    let source = Src::of(src);
    let strides = acc_strides(acc.shape(), acc.strides(), acc_dim, src.shape());
    // All are allocated before `acc` is touched, so a refusal leaves it as it was.
    let mut partials = (0..partial_count(source.operand(), &strides, fold.order))
        .map(|_| alloc::filled(op, IxDyn(acc.shape()), fold.identity))
        .collect::<crate::error::Result<Vec<_>>>()?;
    if fill {
        acc.fill(fold.identity.clone());
    }
    let parts: SmallVec<[Operand<'_>; REDUCE_BLOCKS]> =
        partials.iter_mut().map(|p| Operand::output(p)).collect();
    // SAFETY: `acc` is borrowed mutably (unique) and each partial is this call's own, all of
    // `A`s as the fold's, at `acc`'s shape; the source is `src` at its own shape.
    unsafe {
        run(
            &Operand::output(acc),
            acc_dim,
            source.operand(),
            fold.order,
            &parts,
            folder,
        )
    };
    Ok(())
}

/// A fold of a kernel table's: the identity and the function, for elements `A`, known by the
/// type. Its function is commutative, so the fold may combine in any order.
#[cfg(feature = "stablehlo")]
pub(crate) trait TableFold<A> {
    /// `f(identity, x) == x`.
    fn identity() -> A;
    /// The function.
    fn f(acc: A, x: A) -> A;
    /// `f` as a run's lanes may compute it ([`Fold::lanes`]).
    #[inline(always)]
    fn lanes(acc: A, x: A) -> A {
        Self::f(acc, x)
    }
    /// Whether a lane's value is NaN, so that the lane is folded again with `f`.
    fn nan(_: &A) -> bool {
        false
    }
}

/// The loop of the table fold `F` over `A`s as [`reduce`] folds (sums: the same bits as the
/// array ops').
///
/// # Safety
/// As [`FoldFn`].
#[cfg(feature = "stablehlo")]
#[inline(always)]
pub(crate) unsafe fn table_fold<A: Clone, F: TableFold<A>>(
    _: *const (),
    acc: *mut u8,
    src: *const u8,
    blk: Block<2>,
) {
    let identity = F::identity();
    let fold = Fold {
        identity: &identity,
        f: &F::f,
        order: FoldOrder::Any,
        lanes: &F::lanes,
        nan: F::nan,
    };
    // SAFETY: as the caller promised.
    unsafe { kernel::fold_block(acc.cast::<A>(), src.cast::<A>(), blk, &fold) }
}

/// The loop of the table fold `F` over `A`s element by element ([`kernel::fold_plain`]): for
/// folds whose bits do not depend on the order, or that need not match [`reduce`]'s.
///
/// # Safety
/// As [`FoldFn`].
#[cfg(feature = "stablehlo")]
pub(crate) unsafe fn table_fold_plain<A: Clone, F: TableFold<A>>(
    _: *const (),
    acc: *mut u8,
    src: *const u8,
    blk: Block<2>,
) {
    // SAFETY: as the caller promised.
    unsafe { kernel::fold_plain(acc.cast::<A>(), src.cast::<A>(), blk, &F::f) }
}

/// How many partial accumulators [`reduce_table`] of `src` into `acc` (with `acc_dim`, as for
/// [`reduce`]) takes.
#[cfg(feature = "stablehlo")]
pub(crate) fn partials(acc: &Operand<'_>, acc_dim: &[Option<usize>], src: &Operand<'_>) -> usize {
    let strides = acc_strides(acc.shape, &acc.strides, acc_dim, src.shape);
    partial_count(src, &strides, FoldOrder::Any)
}

/// [`reduce`] with a table fold `run` ([`table_fold`]), on untyped operands: `src` into `acc`
/// (each at its own shape), which already holds the identity or the values to fold into, with
/// [`partials`] fresh accumulators `parts` at `acc`'s shape, filled with the identity, and
/// `scratch` giving runs of the identity.
///
/// # Safety
/// `run` folds the element type of `acc`, `src` and `parts`; `acc` and each part are unique
/// (nothing else touches them during the call); `parts` has [`partials`] of them.
#[cfg(feature = "stablehlo")]
pub(crate) unsafe fn reduce_table(
    acc: &Operand<'_>,
    acc_dim: &[Option<usize>],
    src: &Operand<'_>,
    run: FoldFn,
    parts: &[Operand<'_>],
    scratch: Scratch<'_>,
) {
    let folder = Folder {
        run,
        ctx: Shared(std::ptr::null_mut()),
        scratch,
    };
    // SAFETY: as the caller promised.
    unsafe { self::run(acc, acc_dim, src, FoldOrder::Any, parts, folder) };
}

/// The walk over `shape` of an accumulator with strides `acc` folding a source with `src`,
/// in the order the fold allows.
fn plan(shape: &[usize], acc: &[isize], src: &[isize], order: FoldOrder) -> Plan<2> {
    match order {
        // Walk in the source's memory order: the big operand streams, the accumulator repeats.
        FoldOrder::Any => Plan::folding(shape, [acc, src], [1, 0]),
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
    match folds_outer {
        true => outer_blocks(rows, plan.len.saturating_mul(src.size)),
        false => 0,
    }
}

/// How many blocks a fold of `rows` outer indices, of `bytes` of source, cuts its outermost dim
/// into, each folded into a partial accumulator and the partials then in order: none for a fold
/// small enough to run on one thread.
pub(crate) fn outer_blocks(rows: usize, bytes: usize) -> usize {
    match parallel::is_small(bytes) {
        true => 0,
        false => REDUCE_BLOCKS.min(rows),
    }
}

/// Folds `src` into `acc`: serially or split by outer indices when there are no `parts`,
/// else each part folding a contiguous block of the outer dim, then the parts folded into
/// `acc` in block order. `acc` and the parts are seen at their own shapes (the accumulator's),
/// `src` at its own, `acc_dim` mapping its dims to theirs.
///
/// # Safety
/// `acc` and each part are distinct arrays of the fold's element type, of one shape, that
/// nothing else touches during the call; `src` is one of that type too; `parts` has
/// [`partial_count`] parts.
unsafe fn run(
    acc: &Operand<'_>,
    acc_dim: &[Option<usize>],
    src: &Operand<'_>,
    order: FoldOrder,
    parts: &[Operand<'_>],
    f: Folder<'_>,
) {
    let at_src = |o: &Operand<'_>| acc_strides(o.shape, &o.strides, acc_dim, src.shape);
    let plan = plan(src.shape, &at_src(acc), &src.strides, order);
    let rows = plan.dims[0];
    let row_len = plan.len.checked_div(rows).unwrap_or(0);
    let traffic = plan.len.saturating_mul(src.size);
    // SAFETY: element 0 of each, from which the plans' offsets count.
    let first = |o: &Operand<'_>| Shared(unsafe { o.at(0) });
    let walk = Walk::new(f, first(src), src.size, &plan, order);
    // Every call below passes a plan whose offsets address elements of both operands, the
    // accumulator's this thread's alone, as this function's caller promised.
    if parts.is_empty() {
        // Each thread takes whole outer indices, which own distinct accumulator elements (or
        // the outer dim folds and the work stays on one thread).
        let folds_outer = plan.strides[0][0] == 0 && rows > 1;
        let to = first(acc);
        split(rows, if folds_outer { 0 } else { traffic }, 1, &|r| {
            // SAFETY: as said above.
            unsafe { walk.range(to, &plan, r.start * row_len..r.end * row_len) }
        });
        return;
    }
    let blocks = parts.len();
    for_each_index(blocks, traffic, &|b| {
        let part_plan = self::plan(src.shape, &at_src(&parts[b]), &src.strides, order);
        let (r0, r1) = (rows * b / blocks, rows * (b + 1) / blocks);
        // SAFETY: as said above.
        unsafe { walk.range(first(&parts[b]), &part_plan, r0 * row_len..r1 * row_len) }
    });
    // Each part folded into the accumulator in block order, over the accumulator's own shape.
    for part in parts {
        let plan = self::plan(acc.shape, &acc.strides, &part.strides, FoldOrder::Index);
        let walk = Walk::new(f, first(part), src.size, &plan, FoldOrder::Index);
        // SAFETY: as said above.
        unsafe { walk.range(first(acc), &plan, 0..plan.len) };
    }
}

/// Rows (runs of the inner dim) that [`Walk`] folds in order, before halving.
const LEAF: usize = 64;

/// One fold's walk over its plan's blocks. In any order, the rows of a group (those that fold
/// into one accumulator run: over the plan's folded outer dims, which need not merge) fold
/// pairwise, as NumPy sums: halves (cut at a whole number of [`LEAF`]s, the first the larger),
/// the second into a scratch row of the identity then that into the first's, down to a leaf,
/// folded in order. A float sum's error grows with the log of the rows, not the rows, and
/// its bits depend on the shapes only. Where the inner dim folds too, the rows fold into a
/// scratch row first, element by element, and that row into the accumulator's element.
struct Walk<'a> {
    f: Folder<'a>,
    from: Shared,
    size: isize,
    /// Plan elements in a row and in a group (0 when nothing folds pairwise).
    row: usize,
    group: usize,
    /// Whether the accumulator folds the inner dim too.
    folds_inner: bool,
}

impl<'a> Walk<'a> {
    fn new(f: Folder<'a>, from: Shared, size: usize, plan: &Plan<2>, order: FoldOrder) -> Self {
        let (outer, dims) = (plan.dims.len() - 1, &plan.dims);
        // The plan's dims are its kept outer dims, its folded ones, then the inner dim.
        let kept = plan.strides.iter().take_while(|s| s[0] != 0).count();
        let pairwise = order == FoldOrder::Any && kept < outer;
        let group = dims[kept.min(outer)..].iter().product::<usize>() * usize::from(pairwise);
        Walk {
            f,
            from,
            size: size as isize,
            row: dims[outer],
            group,
            folds_inner: plan.strides[outer][0] == 0,
        }
    }

    /// Folds `range` of `plan` (whole rows of whole groups when pairwise) into the accumulator
    /// at `to`.
    ///
    /// # Safety
    /// `plan`'s offsets from `to` and from the source address elements of each, the
    /// accumulator's this thread's alone.
    unsafe fn range(&self, to: Shared, plan: &Plan<2>, range: Range<usize>) {
        let (row, group) = (self.row, self.group);
        let Some(first) = range.start.checked_div(group) else {
            // SAFETY: as the caller promised.
            return unsafe { self.leaf(to, plan, range, false, None) };
        };
        for g in first..range.end.div_ceil(group) {
            let (a, b) = (range.start.max(g * group), range.end.min((g + 1) * group));
            // SAFETY: as the caller promised.
            unsafe { self.rows(to, plan, a / row..b / row, false) };
        }
    }

    /// Folds rows `rows` of one group pairwise into the accumulator at `to`, as [`Walk`] says,
    /// or into the scratch row at `to` (`scratch`).
    ///
    /// # Safety
    /// As [`Walk::range`], or `to` a scratch row of the fold's.
    unsafe fn rows(&self, to: Shared, plan: &Plan<2>, rows: Range<usize>, scratch: bool) {
        let row = self.row;
        let at = |r: Range<usize>| r.start * row..r.end * row;
        // SAFETY: as the caller promised; the second part into a fresh scratch row, then that
        // into the group's accumulator run, at the place of any of the group's elements.
        unsafe {
            // Where rows fold into one element, all of them into a scratch row first.
            let first = match (rows.len() <= LEAF, scratch || !self.folds_inner) {
                (true, _) => return self.leaf(to, plan, at(rows), scratch, None),
                (false, true) => rows.start + rows.len().div_ceil(2 * LEAF) * LEAF,
                (false, false) => rows.start,
            };
            if first > rows.start {
                self.rows(to, plan, rows.start..first, scratch);
            }
            let scratched = (self.f.scratch)(row, &mut |part| {
                self.rows(part, plan, first..rows.end, true);
                self.leaf(to, plan, first * row..first * row + 1, scratch, Some(part));
            });
            if !scratched {
                self.leaf(to, plan, at(first..rows.end), scratch, None);
            }
        }
    }

    /// Folds the blocks of `range` of `plan` into the accumulator at `to`, or into the scratch
    /// row at `to` (`scratch`, all of their rows into the one); from the source, or from the
    /// scratch row `part` into the run of `range`'s one element.
    ///
    /// # Safety
    /// As [`Walk::rows`], and `part` a scratch row.
    unsafe fn leaf(
        &self,
        to: Shared,
        plan: &Plan<2>,
        range: Range<usize>,
        scratch: bool,
        part: Option<Shared>,
    ) {
        let (size, ctx) = (self.size, self.f.ctx.0.cast_const().cast());
        plan.for_each_block(range, |mut o, mut blk| {
            if scratch {
                (o[0], blk.inner[0], blk.step[0]) = (0, 1, 0);
            }
            // SAFETY: as the caller promised.
            let mut src = unsafe { self.from.0.offset(o[1] * size) };
            if let Some(part) = part {
                (src, blk.n, blk.inner[1]) = (part.0, self.row, 1);
            }
            // SAFETY: as the caller promised.
            unsafe { (self.f.run)(ctx, to.0.offset(o[0] * size), src, blk) }
        })
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
