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
use parallel::{pieces, split};
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
    split(plan.len, pieces(plan.len), &|range| {
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
