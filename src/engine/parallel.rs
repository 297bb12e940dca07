//! Explicit, controllable parallelism: serial below a size threshold; above it the calling
//! thread works and threads of Rayon's current pool (the default `rayon` feature) join it in a
//! scope that holds the borrows (from outside the pool, the largest ops run on its threads
//! alone); a global setting or a per-call override forces serial execution or caps the
//! threads, helpers included. Without the feature every op is serial.

use std::cell::Cell;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

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
    /// Let threads of Rayon's current pool help with large operations (the default): the
    /// calling thread starts the work and pool threads join it while work remains (an op of
    /// 64 MiB or more called from outside the pool runs on the pool's threads alone). Called
    /// from inside a pool (a `par_iter`, `ThreadPool::install`), an op uses that pool and no
    /// other thread. Without the `rayon` feature, operations run serially.
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
/// the pool. The threshold keeps the cost of the offer (Rayon's task hand-off) under a tenth
/// of the work (the figures are in `docs/experiments.md`).
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
fn pieces(bytes: usize) -> usize {
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

/// Threads Rayon's current pool gives one operation, the caller's included; 1 without the
/// `rayon` feature (every op serial).
fn available_threads() -> usize {
    #[cfg(feature = "rayon")]
    return rayon_core::current_num_threads();
    #[cfg(not(feature = "rayon"))]
    return 1;
}

/// Runs `work(range)` over `0..len` cut into contiguous ranges, on the threads an op that
/// streams `bytes` takes ([`for_each_index`]). Inner range boundaries are multiples of `align`
/// (the engine passes 64: no two threads write the same cache line of a contiguous output).
pub(crate) fn split(len: usize, bytes: usize, align: usize, work: &(dyn Fn(Range<usize>) + Sync)) {
    let pieces = pieces(bytes);
    if pieces <= 1 || len == 0 {
        work(0..len);
        return;
    }
    // Several ranges per thread: a helper that starts late still finds work, and the caller
    // waits at most one range for a helper's last.
    let ranges = (pieces * RANGES_PER_THREAD).min(len.div_ceil(align.max(1)));
    for_each_index(ranges, bytes, &|i| work(share(len, ranges, align, i)));
}

/// Ranges per thread of a split.
const RANGES_PER_THREAD: usize = 8;

/// Piece `i` of `0..len` cut into `pieces` contiguous ranges whose inner boundaries are
/// multiples of `align` (as [`split`] cuts it).
pub(crate) fn share(len: usize, pieces: usize, align: usize, i: usize) -> Range<usize> {
    let bound = |i: usize| {
        if i >= pieces {
            len
        } else {
            (len / pieces * i / align * align).min(len)
        }
    };
    bound(i)..bound(i + 1)
}

/// Runs `work(i)` for each `i` in `0..n` on the threads an op that streams `bytes` takes
/// ([`pieces`]): this one and threads of Rayon's current pool, in a `rayon_core::in_place_scope`
/// (which returns only after every helper has run), or from outside the pool, for an op of
/// 64 MiB, the pool's alone. The caller starts claiming at once, so a helper that starts late
/// finds less to do, or nothing.
///
/// The caller claims indices from the front and helpers from the back. Run again over the
/// same operands, the threads meet near the same index and each finds its part of them in its
/// own core's cache, where interleaved claims would scatter them over both cores
/// (`docs/experiments.md`: 10-40% less time on `f32` ops of 256² to 768²).
///
/// The helpers run under the caller's [`Parallelism`], so an op they start splits as the
/// caller's would. A panic in `work` stops every thread's claims; the first panic is resumed
/// on the caller once all have left.
pub(crate) fn for_each_index(n: usize, bytes: usize, work: &(impl Fn(usize) + Sync)) {
    let helpers = pieces(bytes).min(n).saturating_sub(1);
    // The unclaimed indices, `front..back`, packed in one word so that a claim at either end
    // is one compare-and-swap. Past 32 bits (no caller splits that finely) the caller runs all.
    let end = match u32::try_from(n) {
        Ok(end) if helpers > 0 => end,
        _ => return (0..n).for_each(work),
    };
    let unclaimed = AtomicU64::new(u64::from(end) << 32);
    let claim = |from_back: bool| {
        /// Closes the loop if `work` unwinds: the other threads stop claiming.
        struct Stop<'a>(&'a AtomicU64);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.store(0, Ordering::Relaxed);
                }
            }
        }
        let _stop = Stop(&unclaimed);
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
    // From outside the pool, an op of 64 MiB or more runs on the pool's threads alone, as
    // Rayon's `join` runs it: a caller working beside its helper can find it queued on its own
    // core for a time slice (2-3 ms, one call in five at 4096² here); the hand-off's two
    // wake-ups (tens of microseconds) are under 1% of such an op.
    let claims = || with_helpers(helpers, &|| claim(false), &|| claim(true));
    #[cfg(feature = "rayon")]
    if bytes >= 64 << 20 && rayon_core::current_thread_index().is_none() {
        let p = parallelism();
        return rayon_core::scope(|_| with_parallelism(p, claims));
    }
    claims()
}

/// Runs `claim` here and `help` on up to `helpers` threads of Rayon's current pool, under the
/// caller's [`Parallelism`]; returns once all have returned, then resumes the first panic.
///
/// Panics are caught here, never unwound into Rayon: a second panic's payload is dropped (a
/// `Drop` that panics is caught), so no payload can take down a pool thread.
#[cfg(feature = "rayon")]
fn with_helpers(helpers: usize, claim: &(dyn Fn() + Sync), help: &(dyn Fn() + Sync)) {
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    let p = parallelism();
    let first = std::sync::Mutex::new(None);
    let guarded = |f: &(dyn Fn() + Sync)| {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
            let mut slot = first.lock().unwrap_or_else(|e| e.into_inner());
            match *slot {
                None => *slot = Some(payload),
                Some(_) => {
                    drop(slot);
                    // A payload whose drop panics is dropped in turn, and the payload of that
                    // panic too; only one deeper still is leaked.
                    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                        if let Err(deeper) = catch_unwind(AssertUnwindSafe(move || drop(again))) {
                            std::mem::forget(deeper);
                        }
                    }
                }
            }
        }
    };
    let left = std::sync::atomic::AtomicUsize::new(0);
    rayon_core::in_place_scope(|s| {
        for _ in 0..helpers {
            s.spawn(|_| {
                with_parallelism(p, || guarded(help));
                left.fetch_add(1, Ordering::Release);
            });
        }
        guarded(claim);
        // The scope's wait blocks on a lock, and a caller woken from it comes back tens of µs
        // later on a VM (as long as a 1 MiB op takes): spin for the helpers first, up to 50 µs.
        let since = std::time::Instant::now();
        while left.load(Ordering::Acquire) < helpers && since.elapsed().as_micros() <= 50 {
            std::hint::spin_loop();
        }
    });
    if let Some(payload) = first.into_inner().unwrap_or_else(|e| e.into_inner()) {
        resume_unwind(payload);
    }
}

/// Without Rayon there are no helpers: the caller runs every index.
#[cfg(not(feature = "rayon"))]
fn with_helpers(_: usize, claim: &(dyn Fn() + Sync), _: &(dyn Fn() + Sync)) {
    claim();
}

#[cfg(test)]
mod tests {
    use super::*;

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
            for (pieces, bytes) in [(1, MIB), (2, MIB), (3, MIB), (8, MIB), (2, 64 * MIB)] {
                let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                with_parallelism(Parallelism::Threads(pieces), || {
                    for_each_index(n, bytes, &|i| {
                        seen[i].fetch_add(1, Ordering::Relaxed);
                    })
                });
                assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1));
            }
        }
        for (len, pieces, align) in [(1000, 2, 64), (63, 2, 64), (10_000, 3, 1), (5, 8, 1)] {
            let seen: Vec<AtomicUsize> = (0..len).map(|_| AtomicUsize::new(0)).collect();
            with_parallelism(Parallelism::Threads(pieces), || {
                split(len, MIB, align, &|r| {
                    assert!(r.start % align == 0 || r.start == len);
                    for i in r {
                        seen[i].fetch_add(1, Ordering::Relaxed);
                    }
                })
            });
            assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1));
        }
    }

    /// Bytes that an op above the threshold streams, and under the pool-alone size.
    const MIB: usize = 1 << 20;

    /// Called from outside the pool, an op of 64 MiB runs on the pool's threads alone (the
    /// caller asleep), a smaller one on the caller too; a panic reaches the caller either way.
    #[cfg(feature = "rayon")]
    #[test]
    fn large_ops_from_outside_the_pool_run_on_the_pool_alone() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        use std::sync::Mutex;
        let caller = std::thread::current().id();
        // `Auto` on this thread (which ends with the test), whatever another test sets globally.
        let _auto = OVERRIDE.with(|o| o.replace(Some(Parallelism::Auto)));
        for (bytes, alone) in [(64 * MIB, true), (MIB, false)] {
            let ran = Mutex::new(vec![]);
            for_each_index(64, bytes, &|i| {
                std::thread::sleep(std::time::Duration::from_micros(200));
                let on_pool = rayon_core::current_thread_index().is_some();
                ran.lock()
                    .unwrap()
                    .push((i, on_pool, std::thread::current().id()));
            });
            let ran = ran.into_inner().unwrap();
            assert_eq!(ran.len(), 64);
            if pieces(bytes) > 1 {
                assert_eq!(ran.iter().all(|r| r.1), alone, "{ran:?}");
                assert_eq!(ran.iter().any(|r| r.2 == caller), !alone, "{ran:?}");
            }
            let r = catch_unwind(AssertUnwindSafe(|| {
                for_each_index(64, bytes, &|i| assert!(i != 40, "index {i}"))
            }));
            let payload = r.expect_err("the panic was lost");
            let message = payload.downcast_ref::<String>().expect("a message");
            assert!(message.contains("index 40"), "{message}");
        }
    }

    /// A private pool of `threads`, so that these tests do not depend on the global one.
    #[cfg(feature = "rayon")]
    fn pool(threads: usize) -> rayon_core::ThreadPool {
        rayon_core::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a test pool")
    }

    /// The caller's indices are a prefix of the loop and a helper's the rest: each thread
    /// keeps one end of the operands, so a repeated op finds its part in the same core's cache.
    #[cfg(feature = "rayon")]
    #[test]
    fn the_caller_claims_the_front_and_helpers_the_back() {
        use std::sync::Mutex;
        use std::thread;
        use std::time::Duration;
        let pool = pool(2);
        let mut helped = false;
        // A helper may not arrive in time on a loaded machine: try a few loops.
        for _ in 0..5 {
            let ran = Mutex::new(vec![None; 16]);
            let caller = pool.install(|| {
                for_each_index(16, MIB, &|i| {
                    thread::sleep(Duration::from_millis(2));
                    ran.lock().unwrap()[i] = Some(thread::current().id());
                });
                thread::current().id()
            });
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
    /// the loop (it borrows the caller's stack); the pool survives it.
    #[cfg(feature = "rayon")]
    #[test]
    fn panics_reach_the_caller_after_the_helpers_leave() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::thread;
        use std::time::Duration;
        let pool = pool(2);
        for on_caller in [false, true, false] {
            let inside = AtomicUsize::new(0);
            let helped = AtomicUsize::new(0);
            let result = pool.install(|| {
                let caller = thread::current().id();
                catch_unwind(AssertUnwindSafe(|| {
                    for_each_index(64, MIB, &|i| {
                        inside.fetch_add(1, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(1));
                        let here = thread::current().id() == caller;
                        helped.fetch_add(usize::from(!here), Ordering::SeqCst);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        if i >= 8 && here == on_caller {
                            panic!("element function panicked");
                        }
                    })
                }))
            });
            let panicked = on_caller || helped.load(Ordering::SeqCst) > 0;
            assert_eq!(result.is_err(), panicked, "a panic was lost or made up");
            assert_eq!(
                inside.load(Ordering::SeqCst),
                0,
                "a helper outlived the call"
            );
        }
        assert_eq!(pool.install(|| 1 + 1), 2, "the pool did not survive");
    }

    /// Panics whose payloads panic again when dropped, on several threads at once: the call
    /// returns the first to the caller, and no pool thread unwinds or hangs.
    #[cfg(feature = "rayon")]
    #[test]
    fn payloads_that_panic_on_drop_reach_the_caller() {
        use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};
        use std::sync::Barrier;
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                if !std::thread::panicking() {
                    panic!("a payload's drop panicked");
                }
            }
        }
        let pool = pool(4);
        // Every thread that claims an index panics, once all have a claim.
        let all_in = Barrier::new(4);
        let result = pool.install(|| {
            catch_unwind(AssertUnwindSafe(|| {
                for_each_index(4, MIB, &|_| {
                    all_in.wait();
                    panic_any(Bomb)
                })
            }))
        });
        let payload = result.expect_err("the panic was lost");
        assert!(payload.is::<Bomb>());
        std::mem::forget(payload);
        assert_eq!(pool.install(|| 1 + 1), 2, "the pool did not survive");
    }

    /// A helper runs under the caller's parallelism, so what it starts splits as the caller's
    /// would.
    #[cfg(feature = "rayon")]
    #[test]
    fn helpers_run_under_the_callers_parallelism() {
        use std::sync::Mutex;
        use std::thread;
        use std::time::Duration;
        let pool = pool(2);
        let seen = Mutex::new(vec![]);
        pool.install(|| {
            with_parallelism(Parallelism::Threads(7), || {
                for_each_index(32, MIB, &|_| {
                    thread::sleep(Duration::from_millis(1));
                    seen.lock()
                        .unwrap()
                        .push((thread::current().id(), parallelism()));
                })
            })
        });
        let seen = seen.into_inner().unwrap();
        assert!(
            seen.iter().all(|&(_, p)| p == Parallelism::Threads(7)),
            "{seen:?}"
        );
    }

    /// Without Rayon every op runs on the calling thread.
    #[cfg(not(feature = "rayon"))]
    #[test]
    fn without_rayon_every_op_is_serial() {
        assert_eq!(available_threads(), 1);
        assert_eq!(pieces(64 << 20), 1);
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
