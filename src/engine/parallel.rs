//! Explicit, controllable parallelism: serial below a size threshold; above it the calling
//! thread works and pool threads join while work remains; a global setting or a per-call
//! override forces serial execution or caps the threads. The pool is the crate's own
//! ([`crate::pool`]) or, with the `rayon` feature, the current Rayon pool.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use crate::pool::Task;

/// How the engine may split an operation across threads.
///
/// The setting never changes a result: each output element is computed by the same expression
/// either way, so parallel and serial runs agree bit for bit (up to which NaN a NaN result is,
/// which neither Rust nor XLA specifies; reductions combine in a fixed order too).
///
/// ```
/// use xla_bcast::{parallelism, set_parallelism, with_parallelism, Parallelism};
///
/// // One call, serial, whatever the global setting:
/// let n = with_parallelism(Parallelism::Serial, || parallelism());
/// assert_eq!(n, Parallelism::Serial);
/// // The global default:
/// assert_eq!(parallelism(), Parallelism::Auto);
/// # set_parallelism(Parallelism::Auto);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Parallelism {
    /// Always run on the calling thread.
    Serial,
    /// Let pool threads help with large operations (the default): the calling thread starts
    /// the work, and a pool thread that is free joins it, so a busy pool costs a large
    /// operation one task hand-off, never a wait. The pool is the crate's own (a thread per
    /// core but one, asleep while idle) or, with the `rayon` feature, the current Rayon pool.
    #[default]
    Auto,
    /// Split large operations over at most this many threads, the caller's included;
    /// `Threads(0)` sets no cap (every thread of the pool, as [`Parallelism::Auto`]), as
    /// Rayon's `ThreadPoolBuilder::num_threads(0)` does. The value reads back as it was set.
    ///
    /// ```
    /// use xla_bcast::{parallelism, with_parallelism, Parallelism};
    /// assert_eq!(with_parallelism(Parallelism::Threads(0), parallelism), Parallelism::Threads(0));
    /// ```
    Threads(usize),
}

/// Operations that stream fewer bytes than this (the output and each input read in full; a
/// broadcast input's repeats hit the cache) run on the calling thread without offering work to
/// the pool. Above it, whether a pool thread helps is decided at run time by whether one is
/// free before the work is done (see [`Parallelism`]); the threshold only keeps the cost of
/// the offer, one task hand-off, under a tenth of the work, and leaves alone the sizes where a
/// helper seldom arrives in time to pay for it (the figures are in `BENCHMARKS.md`).
///
/// ```
/// assert_eq!(xla_bcast::PARALLEL_THRESHOLD_BYTES, 768 << 10);
/// ```
pub const PARALLEL_THRESHOLD_BYTES: usize = 768 << 10;

// A lock, not an atomic code: every `Threads(n)` reads back exactly as it was set, and it is
// read once per operation large enough to split, where a read costs nothing against the work.
static GLOBAL: RwLock<Parallelism> = RwLock::new(Parallelism::Auto);

thread_local! {
    static OVERRIDE: Cell<Option<Parallelism>> = const { Cell::new(None) };
}

/// Sets the process-wide parallelism (default [`Parallelism::Auto`]).
///
/// ```
/// use xla_bcast::{parallelism, set_parallelism, Parallelism};
/// set_parallelism(Parallelism::Threads(1));
/// assert_eq!(parallelism(), Parallelism::Threads(1));
/// set_parallelism(Parallelism::Auto);
/// ```
pub fn set_parallelism(p: Parallelism) {
    // A `Copy` value is written whole, so a poisoned lock still holds a valid one.
    *GLOBAL.write().unwrap_or_else(|e| e.into_inner()) = p;
}

/// The parallelism in force on this thread: a [`with_parallelism`] override, else the global one.
///
/// ```
/// use xla_bcast::{parallelism, Parallelism};
/// assert_eq!(parallelism(), Parallelism::Auto);
/// ```
pub fn parallelism() -> Parallelism {
    OVERRIDE
        .with(|o| o.get())
        .unwrap_or_else(|| *GLOBAL.read().unwrap_or_else(|e| e.into_inner()))
}

/// Runs `f` with parallelism `p` for the operations it starts on this thread.
///
/// ```
/// use ndarray::Array2;
/// use xla_bcast::prelude::*;
/// use xla_bcast::{with_parallelism, Parallelism};
///
/// let a = Array2::<f32>::ones((512, 512));
/// let b = Array2::<f32>::ones((1, 512));
/// let c = with_parallelism(Parallelism::Serial, || a.add_bcast(&b, &[])).unwrap();
/// assert_eq!(c[[511, 511]], 2.0);
/// ```
pub fn with_parallelism<R>(p: Parallelism, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Parallelism>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OVERRIDE.with(|o| o.replace(Some(p))));
    f()
}

/// Whether an operation that streams `bytes` stays serial whatever the setting.
pub(crate) fn is_small(bytes: usize) -> bool {
    bytes < PARALLEL_THRESHOLD_BYTES
}

/// How many threads may share an operation that streams `bytes` (1 = serial).
pub(crate) fn pieces(bytes: usize) -> usize {
    if is_small(bytes) {
        return 1;
    }
    let cap = match parallelism() {
        Parallelism::Serial => 1,
        Parallelism::Auto | Parallelism::Threads(0) => available_threads(),
        Parallelism::Threads(n) => n.min(available_threads()),
    };
    cap.max(1)
}

/// Threads the pool gives one operation, the caller's included.
fn available_threads() -> usize {
    #[cfg(feature = "rayon")]
    return rayon_core::current_num_threads();
    #[cfg(not(feature = "rayon"))]
    return crate::pool::global().threads();
}

/// Hands a helper task to the pool.
fn spawn(task: Task) {
    #[cfg(feature = "rayon")]
    rayon_core::spawn(task);
    #[cfg(not(feature = "rayon"))]
    crate::pool::global().spawn(task);
}

/// Runs `work(range)` over `0..len` cut into contiguous ranges, on this thread and on up to
/// `pieces - 1` pool threads that arrive while ranges remain. Inner range boundaries are
/// multiples of `align` (the engine passes 64 elements, so no two threads write the same cache
/// line of a contiguous output).
pub(crate) fn split(
    len: usize,
    pieces: usize,
    align: usize,
    work: &(impl Fn(std::ops::Range<usize>) + Sync),
) {
    if pieces <= 1 || len == 0 {
        work(0..len);
        return;
    }
    // Several ranges per thread: a helper that arrives late still finds work, and the caller
    // waits at most one range for a helper's last.
    let ranges = (pieces * RANGES_PER_THREAD).min(len.div_ceil(align.max(1)));
    for_each_index(ranges, pieces, &|i| work(share(len, ranges, align, i)));
}

/// Ranges per thread of a split.
const RANGES_PER_THREAD: usize = 8;

/// Piece `i` of `0..len` cut into `pieces` contiguous ranges whose inner boundaries are
/// multiples of `align` (as [`split`] cuts it).
pub(crate) fn share(len: usize, pieces: usize, align: usize, i: usize) -> std::ops::Range<usize> {
    let bound = |i: usize| {
        if i >= pieces {
            len
        } else {
            (len / pieces * i / align * align).min(len)
        }
    };
    bound(i)..bound(i + 1)
}

/// Runs `work(i)` for each `i` in `0..n`: on this thread, and on up to `pieces - 1` pool
/// threads that arrive while indices remain.
///
/// The caller never waits for a helper to start (Rayon's `join` from outside the pool parks
/// the caller until two pool threads wake, tens of microseconds on a VM, more than a 1 MiB op
/// takes): it claims indices itself, and a helper that comes late, or not at all because its
/// core is busy, finds none left. So whether an operation runs in parallel is decided by the
/// measured fact of a free core, and a fork costs about one task hand-off when none is.
///
/// The caller claims indices from the front and helpers from the back. Run again over the
/// same operands, the threads meet near the same index and each finds its part of them in its
/// own core's cache, where interleaved claims would scatter them over both cores
/// (`BENCHMARKS.md`: 10-40% less time on `f32` ops of 256² to 768²).
pub(crate) fn for_each_index(n: usize, pieces: usize, work: &(impl Fn(usize) + Sync)) {
    for_each_index_on(&spawn, n, pieces, work)
}

/// [`for_each_index`] with helpers handed to `spawn`.
pub(crate) fn for_each_index_on(
    spawn: &dyn Fn(Task),
    n: usize,
    pieces: usize,
    work: &(impl Fn(usize) + Sync),
) {
    let helpers = pieces.min(n).saturating_sub(1);
    // The unclaimed indices, `front..back`, packed in one word so that a claim at either end
    // is one compare-and-swap. Past 32 bits (no caller splits that finely) the caller runs all.
    let Ok(end) = u32::try_from(n) else {
        return (0..n).for_each(work);
    };
    let unclaimed = AtomicU64::new(u64::from(end) << 32);
    let claim = |from_back: bool| {
        let mut now = unclaimed.load(Ordering::Relaxed);
        loop {
            let (front, back) = (now & u64::from(u32::MAX), now >> 32);
            if front >= back {
                return;
            }
            let (next, i) = match from_back {
                true => ((back - 1) << 32 | front, back - 1),
                false => (now + 1, front),
            };
            match unclaimed.compare_exchange_weak(now, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    work(i as usize);
                    now = unclaimed.load(Ordering::Relaxed);
                }
                Err(seen) => now = seen,
            }
        }
    };
    if helpers > 0 {
        return help::with_helpers(spawn, helpers, &|| claim(false), &|| claim(true));
    }
    claim(false);
}

/// Pool threads that join a loop the calling thread runs, while it runs.
mod help {
    use super::Task;
    use std::any::Any;
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    /// What the caller and its helpers share; it outlives the call (a helper may start after
    /// the caller has returned).
    struct Shared {
        /// Bit 0: closed (the caller is done, late helpers must not start); the rest: twice the
        /// number of helpers inside the loop.
        state: AtomicUsize,
        /// A helper's panic, resumed on the caller.
        panic: Mutex<Option<Box<dyn Any + Send>>>,
    }

    const CLOSED: usize = 1;
    const HELPER: usize = 2;

    /// Runs `claim` (a loop that claims work until none is left) here and `help` (another such
    /// loop over the same work) on up to `helpers` pool threads, handed to `spawn`, and returns
    /// once every thread that entered has left; a panic in any of them is resumed here after
    /// that (a task never unwinds into the pool).
    pub(super) fn with_helpers(
        spawn: &dyn Fn(Task),
        helpers: usize,
        claim: &(dyn Fn() + Sync),
        help: &(dyn Fn() + Sync),
    ) {
        let shared = Arc::new(Shared {
            state: AtomicUsize::new(0),
            panic: Mutex::new(None),
        });
        // SAFETY: only the lifetime is erased. A helper calls the loop only after entering
        // while the state is open, and the caller neither returns nor unwinds past `Close`
        // until it has closed the state and every helper that entered has left.
        let task: &'static (dyn Fn() + Sync) = unsafe { std::mem::transmute(help) };
        for _ in 0..helpers {
            let shared = Arc::clone(&shared);
            spawn(Box::new(move || {
                let entered = shared.state.fetch_add(HELPER, Ordering::Acquire) & CLOSED == 0;
                if entered {
                    if let Err(p) = catch_unwind(AssertUnwindSafe(task)) {
                        *shared.panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
                    }
                }
                // Release: the helper's writes happen before the caller sees it leave.
                shared.state.fetch_sub(HELPER, Ordering::Release);
            }));
        }
        /// Closes the state and waits for the helpers inside, also while a panic unwinds.
        struct Close<'s>(&'s Shared);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                let mut spins = 0u32;
                let mut state = self.0.state.fetch_or(CLOSED, Ordering::Acquire);
                while state >= HELPER {
                    // A helper is finishing its last index: spin briefly, then yield the core
                    // (it may be waiting for this one on a loaded machine).
                    if spins < 1 << 12 {
                        std::hint::spin_loop();
                        spins += 1;
                    } else {
                        std::thread::yield_now();
                    }
                    state = self.0.state.load(Ordering::Acquire);
                }
            }
        }
        {
            let _close = Close(&shared);
            claim();
        }
        let panic = shared
            .panic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(p) = panic {
            resume_unwind(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Pool;

    #[test]
    fn the_threshold_counts_bytes() {
        assert!(is_small((768 << 10) - 1) && !is_small(768 << 10));
        assert_eq!(with_parallelism(Parallelism::Auto, || pieces(8000)), 1);
        let big = with_parallelism(Parallelism::Threads(2), || pieces(4 << 20));
        assert_eq!(big, available_threads().min(2));
        let one = with_parallelism(Parallelism::Threads(1), || pieces(4 << 20));
        assert_eq!(one, 1);
        let uncapped = with_parallelism(Parallelism::Threads(0), || pieces(4 << 20));
        assert_eq!(uncapped, available_threads());
    }

    /// Every index runs once, whatever the split, on the caller alone or with helpers.
    #[test]
    fn each_index_runs_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for n in [0, 1, 2, 3, 17, 100] {
            for pieces in [1, 2, 3, 8] {
                let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                for_each_index(n, pieces, &|i| {
                    seen[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1));
            }
        }
        for (len, pieces, align) in [(1000, 2, 64), (63, 2, 64), (10_000, 3, 1), (5, 8, 1)] {
            let seen: Vec<AtomicUsize> = (0..len).map(|_| AtomicUsize::new(0)).collect();
            split(len, pieces, align, &|r| {
                assert!(r.start % align == 0 || r.start == len);
                for i in r {
                    seen[i].fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1));
        }
    }

    /// A free pool thread joins a long loop; a busy pool leaves the whole loop to the caller,
    /// which returns without waiting for it.
    #[test]
    fn helpers_join_when_free_and_never_hold_up_the_caller() {
        use std::sync::{mpsc, Mutex};
        use std::thread::{self, ThreadId};
        use std::time::Duration;
        let pool = Pool::start(1);
        assert_eq!(pool.threads(), 2, "the test pool's worker did not start");
        let threads_of = |busy: bool| {
            let (release, wait) = mpsc::channel::<()>();
            if busy {
                // Occupy the pool's worker until the loop is over.
                let (started, on_start) = mpsc::channel::<()>();
                pool.spawn(Box::new(move || {
                    started.send(()).unwrap();
                    let _ = wait.recv();
                }));
                on_start.recv().unwrap();
            }
            let ran: Mutex<Vec<ThreadId>> = Mutex::new(vec![]);
            for_each_index_on(&|t| pool.spawn(t), 16, 2, &|_| {
                thread::sleep(Duration::from_millis(2));
                ran.lock().unwrap().push(thread::current().id());
            });
            drop(release);
            let ran = ran.into_inner().unwrap();
            assert_eq!(ran.len(), 16);
            ran.iter().filter(|&&t| t != thread::current().id()).count()
        };
        assert_eq!(threads_of(true), 0, "a busy pool thread took indices");
        assert!(threads_of(false) > 0, "a free pool thread never joined");
    }

    /// The caller's indices are a prefix of the loop and a helper's the rest: each thread
    /// keeps one end of the operands, so a repeated op finds its part in the same core's cache.
    #[test]
    fn the_caller_claims_the_front_and_helpers_the_back() {
        use std::sync::Mutex;
        use std::thread;
        use std::time::Duration;
        let pool = Pool::start(1);
        let mut helped = false;
        // A helper may not arrive in time on a loaded machine: try a few loops.
        for _ in 0..5 {
            let ran = Mutex::new(vec![None; 16]);
            for_each_index_on(&|t| pool.spawn(t), 16, 2, &|i| {
                thread::sleep(Duration::from_millis(2));
                ran.lock().unwrap()[i] = Some(thread::current().id());
            });
            let caller = thread::current().id();
            let by_caller: Vec<bool> = ran
                .into_inner()
                .unwrap()
                .into_iter()
                .map(|t| t.expect("every index ran") == caller)
                .collect();
            let front = by_caller.iter().take_while(|&&c| c).count();
            assert!(front > 0, "the caller did not start at the front");
            assert!(
                by_caller[front..].iter().all(|&c| !c),
                "claims interleaved: {by_caller:?}"
            );
            helped |= front < 16;
        }
        assert!(helped, "a free pool thread never joined");
    }

    /// A panic on a helper or on the caller reaches the caller, after every helper has left
    /// the loop (it borrows the caller's stack); the pool's worker survives it.
    #[test]
    fn panics_reach_the_caller_after_the_helpers_leave() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::thread;
        use std::time::Duration;
        let pool = Pool::start(1);
        for on_caller in [false, true, false] {
            let inside = AtomicUsize::new(0);
            let helped = AtomicUsize::new(0);
            let caller = thread::current().id();
            let result = catch_unwind(AssertUnwindSafe(|| {
                for_each_index_on(&|t| pool.spawn(t), 64, 2, &|i| {
                    inside.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(1));
                    let here = thread::current().id() == caller;
                    helped.fetch_add(usize::from(!here), Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    if i >= 8 && here == on_caller {
                        panic!("element function panicked");
                    }
                })
            }));
            let panicked = on_caller || helped.load(Ordering::SeqCst) > 0;
            assert_eq!(result.is_err(), panicked, "a panic was lost or made up");
            assert_eq!(
                inside.load(Ordering::SeqCst),
                0,
                "a helper outlived the call"
            );
        }
    }

    /// The crate's pool gives a large op a thread per core: its workers and the caller.
    #[cfg(not(feature = "rayon"))]
    #[test]
    fn the_pool_offers_a_thread_per_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(available_threads(), cores);
    }

    /// Each setting reads back as it was set, the global one and the per-call one.
    #[test]
    fn every_setting_reads_back() {
        use Parallelism::*;
        for p in [
            Serial,
            Auto,
            Threads(0),
            Threads(1),
            Threads(3),
            Threads(usize::MAX),
        ] {
            assert_eq!(with_parallelism(p, parallelism), p);
            set_parallelism(p);
            let global = parallelism();
            set_parallelism(Auto);
            assert_eq!(global, p);
        }
    }
}
