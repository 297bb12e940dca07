//! The kernel engine: every elementwise operation of the crate runs through here.
//!
//! ```text
//! operands seen at the output shape (broadcast views, stride 0 where broadcast)
//!   -> Plan    drop size-1 dims, order dims by the written array's strides, merge contiguous dims
//!   -> split   serial below PARALLEL_THRESHOLD, else contiguous ranges over Rayon
//!   -> kernel  per run of the inner loop: slices for unit strides, a scalar for stride 0
//! ```

mod alloc;
mod kernel;
pub(crate) mod parallel;
mod plan;

use std::mem::MaybeUninit;

use ndarray::{Array, ArrayRef, Dimension, IxDyn};

pub(crate) use kernel::Sink;
use parallel::{for_each_index, pieces, split};
use plan::Plan;

/// A raw pointer that may cross threads: the engine hands each thread disjoint output runs.
struct SyncPtr<T>(*mut T);
impl<T> Clone for SyncPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SyncPtr<T> {}
// SAFETY: the engine only dereferences these pointers for elements of arrays whose element
// types are Send + Sync (enforced by the bounds of the functions below), and writes each output
// element from exactly one thread.
unsafe impl<T> Send for SyncPtr<T> {}
unsafe impl<T> Sync for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    fn of<D: Dimension>(a: &ArrayRef<T, D>) -> Self {
        SyncPtr(a.as_ptr() as *mut T)
    }

    /// # Safety
    /// `off` is the offset of an element of the array this pointer came from.
    #[inline(always)]
    unsafe fn at(self, off: isize) -> *mut T {
        self.0.offset(off)
    }
}

/// Walks `shape` over `N` operands with the given strides (operand 0 is written), calling
/// `row(offsets, n, inner_strides)` for each run, split across threads when large.
fn run<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    row: &(impl Fn([isize; N], usize, [isize; N]) + Sync),
) {
    const PRIORITY: [usize; 4] = [0, 1, 2, 3];
    let plan = Plan::new(shape, strides, &PRIORITY[..N]);
    let inner = plan.inner_strides();
    split(plan.len, pieces(plan.len), 64, &|range| {
        plan.for_each_run(range, |offs, n| row(offs, n, inner))
    });
}

/// The engine's one precondition: every operand is already seen at the output's shape (a
/// mismatch would be a bug in the crate, never a user error, which the shape rules catch).
fn same_shape(out: &[usize], operand: &[usize]) {
    assert_eq!(
        out, operand,
        "engine: operands must be seen at the output shape"
    );
}

/// `out[i] = f(a[i])`. `a` must already be seen at `out`'s shape.
pub(crate) fn map<S, A, C, D, E>(
    out: &mut ArrayRef<S, D>,
    a: &ArrayRef<A, E>,
    f: &(impl Fn(A) -> C + Sync),
) where
    S: Sink<C> + Send,
    A: Clone + Sync,
    D: Dimension,
    E: Dimension,
{
    same_shape(out.shape(), a.shape());
    let (po, pa) = (SyncPtr(out.as_mut_ptr()), SyncPtr::of(a));
    run(out.shape(), [out.strides(), a.strides()], &|o, n, s| {
        // SAFETY: the plan yields offsets of elements of each operand; `out` is a unique
        // (non-overlapping) mutable array and each run goes to one thread.
        unsafe { kernel::map_row(po.at(o[0]), pa.at(o[1]), n, s, f) }
    });
}

/// `out[i] = f(a[i], b[i])`. `a` and `b` must already be seen at `out`'s shape.
pub(crate) fn zip<S, A, B, C, D, E, F>(
    out: &mut ArrayRef<S, D>,
    a: &ArrayRef<A, E>,
    b: &ArrayRef<B, F>,
    f: &(impl Fn(A, B) -> C + Sync),
) where
    S: Sink<C> + Send,
    A: Clone + Sync,
    B: Clone + Sync,
    D: Dimension,
    E: Dimension,
    F: Dimension,
{
    same_shape(out.shape(), a.shape());
    same_shape(out.shape(), b.shape());
    let (po, pa, pb) = (SyncPtr(out.as_mut_ptr()), SyncPtr::of(a), SyncPtr::of(b));
    run(
        out.shape(),
        [out.strides(), a.strides(), b.strides()],
        &|o, n, s| {
            // SAFETY: as in `map`.
            unsafe { kernel::zip_row(po.at(o[0]), pa.at(o[1]), pb.at(o[2]), n, s, f) }
        },
    );
}

/// `out[i] = f(a[i], b[i], c[i])`. The operands must already be seen at `out`'s shape.
pub(crate) fn zip3<S, A, B, C, R, D, E1, E2, E3>(
    out: &mut ArrayRef<S, D>,
    a: &ArrayRef<A, E1>,
    b: &ArrayRef<B, E2>,
    c: &ArrayRef<C, E3>,
    f: &(impl Fn(A, B, C) -> R + Sync),
) where
    S: Sink<R> + Send,
    A: Clone + Sync,
    B: Clone + Sync,
    C: Clone + Sync,
    D: Dimension,
    E1: Dimension,
    E2: Dimension,
    E3: Dimension,
{
    same_shape(out.shape(), a.shape());
    same_shape(out.shape(), b.shape());
    same_shape(out.shape(), c.shape());
    let po = SyncPtr(out.as_mut_ptr());
    let (pa, pb, pc) = (SyncPtr::of(a), SyncPtr::of(b), SyncPtr::of(c));
    let strides = [out.strides(), a.strides(), b.strides(), c.strides()];
    run(out.shape(), strides, &|o, n, s| {
        // SAFETY: as in `map`.
        unsafe { kernel::zip3_row(po.at(o[0]), pa.at(o[1]), pb.at(o[2]), pc.at(o[3]), n, s, f) }
    });
}

/// `out[i] = f(out[i], b[i])`, in place. `b` must already be seen at `out`'s shape.
pub(crate) fn update<A, B, D, E>(
    out: &mut ArrayRef<A, D>,
    b: &ArrayRef<B, E>,
    f: &(impl Fn(A, B) -> A + Sync),
) where
    A: Clone + Send + Sync,
    B: Clone + Sync,
    D: Dimension,
    E: Dimension,
{
    same_shape(out.shape(), b.shape());
    let (po, pb) = (SyncPtr(out.as_mut_ptr()), SyncPtr::of(b));
    run(out.shape(), [out.strides(), b.strides()], &|o, n, s| {
        // SAFETY: as in `map`; `out` and `b` cannot overlap since `out` is borrowed mutably.
        unsafe { kernel::update_row(po.at(o[0]), pb.at(o[1]), n, s, f) }
    });
}

/// A fresh output of `shape` in standard layout, filled by `fill` (which must write every
/// element through the engine).
pub(crate) fn fresh<C>(
    shape: &[usize],
    fill: impl FnOnce(&mut ArrayRef<MaybeUninit<C>, IxDyn>),
) -> Array<C, IxDyn> {
    let mut out = alloc::uninit::<C>(shape);
    fill(&mut out);
    // SAFETY: every caller passes a `fill` that runs one engine pass over `out`, and an engine
    // pass writes every element of its output exactly once.
    unsafe { out.assume_init() }
}

/// Outer dims cut into this many blocks when a large reduction folds its outermost dim: each
/// block reduces into a private accumulator and the blocks are combined in order, so the result
/// does not depend on the number of threads.
const REDUCE_BLOCKS: usize = 8;

/// Folds `src` into `acc` with `f`: `acc_dim[d]` names the dim of `acc` that src dim `d` maps to
/// (`None` for a dim folded away); an `acc` dim of size 1 whose src dim is larger folds too.
/// `acc` must be filled with `identity` (or hold the values to fold into). The order in which
/// each element's contributions are combined depends on the shapes only, never on the threads.
pub(crate) fn reduce<A, D, E>(
    acc: &mut ArrayRef<A, E>,
    acc_dim: &[Option<usize>],
    src: &ArrayRef<A, D>,
    identity: &A,
    f: &(impl Fn(A, A) -> A + Sync),
) where
    A: Clone + Send + Sync,
    D: Dimension,
    E: Dimension,
{
    let strides = acc_strides(acc, acc_dim, src.shape());
    // Walk in the source's memory order: the big operand streams, the accumulator repeats.
    let plan = Plan::new(src.shape(), [&strides, src.strides()], &[1, 0]);
    let (pa, ps) = (SyncPtr(acc.as_mut_ptr()), SyncPtr::of(src));
    let rows = plan.dims[0];
    let row_len = plan.len.checked_div(rows).unwrap_or(0);
    let fold = |pa: SyncPtr<A>, plan: &Plan<2>, range: std::ops::Range<usize>| {
        let inner = plan.inner_strides();
        plan.for_each_run(range, |o, n| {
            // SAFETY: offsets come from the plan over `src`'s shape; accumulator offsets stay
            // inside its array; each accumulator element is written by one thread only (callers
            // split only where the accumulator does not repeat).
            unsafe { kernel::fold_row(pa.at(o[0]), ps.at(o[1]), n, inner, identity, f) }
        })
    };
    let folds_outer = plan.strides[0][0] == 0 && rows > 1;
    if plan.len < parallel::PARALLEL_THRESHOLD || !folds_outer {
        // Each thread takes whole outer indices, which own distinct accumulator elements (or
        // the outer dim folds and the work stays on one thread).
        let pieces = if folds_outer { 1 } else { pieces(plan.len) };
        split(rows, pieces, 1, &|r| {
            fold(pa, &plan, r.start * row_len..r.end * row_len)
        });
        return;
    }
    // The outer dim folds: private accumulators per block, combined in block order.
    let blocks = REDUCE_BLOCKS.min(rows);
    let partials: Vec<std::sync::Mutex<Option<Array<A, IxDyn>>>> =
        (0..blocks).map(|_| std::sync::Mutex::new(None)).collect();
    for_each_index(blocks, pieces(plan.len), &|b| {
        let mut part = Array::from_elem(IxDyn(acc.shape()), identity.clone());
        let part_strides = acc_strides(&part, acc_dim, src.shape());
        let part_plan = Plan::new(src.shape(), [&part_strides, src.strides()], &[1, 0]);
        let (r0, r1) = (rows * b / blocks, rows * (b + 1) / blocks);
        fold(
            SyncPtr(part.as_mut_ptr()),
            &part_plan,
            r0 * row_len..r1 * row_len,
        );
        *partials[b].lock().unwrap_or_else(|e| e.into_inner()) = Some(part);
    });
    for p in partials {
        if let Some(part) = p.into_inner().unwrap_or_else(|e| e.into_inner()) {
            update(acc, &part, f);
        }
    }
}

/// The strides at `src_shape` of an accumulator whose dim `acc_dim[d]` receives src dim `d`:
/// 0 where src dims fold away or broadcast (size 1 in the accumulator).
fn acc_strides<A, E: Dimension>(
    acc: &ArrayRef<A, E>,
    acc_dim: &[Option<usize>],
    src_shape: &[usize],
) -> Vec<isize> {
    (0..src_shape.len())
        .map(|d| match acc_dim[d] {
            Some(a) if acc.shape()[a] == src_shape[d] => acc.strides()[a],
            _ => 0,
        })
        .collect()
}
