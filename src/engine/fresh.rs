//! Fresh results: allocated uninitialised, filled only by the engine's walk, and safe against a
//! panicking element function. If `f` panics part-way, the elements already written (and only
//! those) are dropped before the allocation is freed, as ndarray's `Zip::map_collect` does: no
//! leak of a `String` result, no drop of an element never written.
//!
//! Element types without drop glue (every numeric type) skip all of it: the log is never made
//! and the kernels' counting compiles out.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::sync::Mutex;

use ndarray::{Array, ArrayRef, Dimension};

use super::kernel::{Block, BlockKernel};

/// The output elements one kernel call wrote: the first `written` of its block, row by row.
#[derive(Debug, Clone, Copy)]
struct Span {
    /// Address of the block's first output element.
    first: usize,
    n: usize,
    inner: isize,
    step: isize,
    written: usize,
}

/// What a walk over a fresh output has written so far, shared by its threads.
#[derive(Default)]
pub(crate) struct FreshLog(Mutex<Vec<Span>>);

impl FreshLog {
    fn push(&self, span: Span) {
        // A poisoned lock still holds whole spans (a push cannot be interrupted half-way).
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Out of memory for the log, the span's elements would leak if the walk panicked:
        // never an abort, nor a drop of anything unwritten.
        if spans.try_reserve(1).is_ok() {
            spans.push(span);
        }
    }
}

/// Runs one kernel call; with a `log` (a fresh output of a type with drop glue) it records which
/// output elements the call wrote, also when the element function panics in it.
///
/// # Safety
/// As [`BlockKernel::block`].
#[inline(always)]
pub(super) unsafe fn call_logged<const N: usize>(
    kernel: &dyn BlockKernel<N>,
    ptrs: [*mut u8; N],
    block: Block<N>,
    log: Option<&FreshLog>,
) {
    let written = Cell::new(0);
    let Some(log) = log else {
        // SAFETY: as the caller promised.
        return unsafe { kernel.block_wide(ptrs, block, &written) };
    };
    /// Records the call's span when dropped: after the call, or while a panic unwinds from it.
    struct Record<'l, 'w, const N: usize> {
        log: &'l FreshLog,
        first: *mut u8,
        block: Block<N>,
        written: &'w Cell<usize>,
    }
    impl<const N: usize> Drop for Record<'_, '_, N> {
        fn drop(&mut self) {
            self.log.push(Span {
                first: self.first as usize,
                n: self.block.n,
                inner: self.block.inner[0],
                step: self.block.step[0],
                written: self.written.get(),
            });
        }
    }
    let _record = Record {
        log,
        first: ptrs[0],
        block,
        written: &written,
    };
    // SAFETY: as the caller promised.
    unsafe { kernel.block_wide(ptrs, block, &written) }
}

/// `out` filled by `fill`, which receives the log to pass to every [`call_logged`] of its walk
/// (`None` for element types without drop glue). If `fill` panics, the elements it wrote are
/// dropped and the allocation freed; nothing leaks and nothing unwritten is dropped.
///
/// # Safety
/// `fill` writes every element of `out` exactly once, each through [`call_logged`] with the log
/// it is given (the kernels count what they write, see [`BlockKernel::block`]), or straight
/// through the kernel when it is given none.
#[inline(always)]
pub(super) unsafe fn fill<C, D: Dimension>(
    mut out: Array<MaybeUninit<C>, D>,
    fill: impl FnOnce(&mut ArrayRef<MaybeUninit<C>, D>, Option<&FreshLog>),
) -> Array<C, D> {
    if !std::mem::needs_drop::<C>() {
        fill(&mut out, None);
        // SAFETY: `fill` wrote every element, as the caller promised.
        return unsafe { out.assume_init() };
    }
    /// Drops the logged elements if the walk unwinds; forgotten once it completes.
    struct DropWritten<'l, C>(&'l FreshLog, std::marker::PhantomData<C>);
    impl<C> Drop for DropWritten<'_, C> {
        fn drop(&mut self) {
            let spans = std::mem::take(&mut *self.0 .0.lock().unwrap_or_else(|e| e.into_inner()));
            for span in spans {
                let first = span.first as *mut C;
                for k in 0..span.written {
                    let (r, i) = ((k / span.n) as isize, (k % span.n) as isize);
                    // SAFETY: the span's first `written` elements, row by row, are elements of
                    // the fresh output that its kernel call wrote (the kernels write in that
                    // order and count each write); spans of different calls are disjoint, so
                    // each is dropped once.
                    unsafe {
                        std::ptr::drop_in_place(first.offset(r * span.step + i * span.inner))
                    };
                }
            }
        }
    }
    let log = FreshLog::default();
    let guard = DropWritten::<C>(&log, std::marker::PhantomData);
    fill(&mut out, Some(&log));
    // Complete: the elements belong to the result now.
    std::mem::forget(guard);
    // SAFETY: `fill` wrote every element, as the caller promised.
    unsafe { out.assume_init() }
}
