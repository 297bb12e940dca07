//! Explicit, controllable parallelism: serial below a size threshold, Rayon above it, and a
//! global setting or a per-call override to force serial execution or cap the threads.

use std::cell::Cell;
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
    /// Split large operations over the current Rayon pool (the default).
    #[default]
    Auto,
    /// Split large operations over at most this many threads of the current Rayon pool;
    /// `Threads(0)` sets no cap (every thread of the pool, as [`Parallelism::Auto`]), as
    /// Rayon's `ThreadPoolBuilder::num_threads(0)` does. The value reads back as it was set.
    ///
    /// ```
    /// use xla_bcast::{parallelism, with_parallelism, Parallelism};
    /// assert_eq!(with_parallelism(Parallelism::Threads(0), parallelism), Parallelism::Threads(0));
    /// ```
    Threads(usize),
}

/// Operations smaller than this many bytes (elements times the widest element type among the
/// operands) run serially: below it Rayon's hand-off costs more than the second core gives
/// back (on two cores a 256x256 f32 add is faster serial, a 362x362 one split). Bytes, not
/// elements, decide, since the time is in moving them.
///
/// ```
/// assert_eq!(xla_bcast::PARALLEL_THRESHOLD_BYTES, 512 << 10);
/// ```
pub const PARALLEL_THRESHOLD_BYTES: usize = 512 << 10;

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

/// Whether an operation of `len` elements, the widest `width` bytes, stays serial whatever
/// the setting.
pub(crate) fn is_small(len: usize, width: usize) -> bool {
    len.saturating_mul(width) < PARALLEL_THRESHOLD_BYTES
}

/// How many pieces to split an operation of `len` elements, the widest `width` bytes, into
/// (1 = serial).
pub(crate) fn pieces(len: usize, width: usize) -> usize {
    if is_small(len, width) {
        return 1;
    }
    let available = available_threads();
    let cap = match parallelism() {
        Parallelism::Serial => 1,
        Parallelism::Auto | Parallelism::Threads(0) => available,
        Parallelism::Threads(n) => n.min(available),
    };
    cap.max(1)
}

#[cfg(feature = "rayon")]
fn available_threads() -> usize {
    rayon::current_num_threads()
}

#[cfg(not(feature = "rayon"))]
fn available_threads() -> usize {
    1
}

/// Runs `work(range)` over `0..len` split into `pieces` contiguous ranges, in parallel when
/// `pieces > 1`. Inner range boundaries are multiples of `align` (the engine passes 64 elements,
/// so no two threads write the same cache line of a contiguous output).
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
    for_each_index(pieces, pieces, &|i| work(share(len, pieces, align, i)));
}

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

/// Runs `work(i)` for each `i` in `0..n`, spread over at most `pieces` threads.
pub(crate) fn for_each_index(n: usize, pieces: usize, work: &(impl Fn(usize) + Sync)) {
    #[cfg(feature = "rayon")]
    if pieces > 1 {
        use rayon::prelude::*;
        let per = n.div_ceil(pieces);
        (0..n).into_par_iter().with_min_len(per).for_each(work);
        return;
    }
    let _ = pieces;
    (0..n).for_each(work);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_counts_bytes() {
        // 512 KiB: 131,072 f32 or 65,536 f64 elements are the first to split.
        assert!(is_small(131_071, 4) && !is_small(131_072, 4));
        assert!(is_small(65_535, 8) && !is_small(65_536, 8));
        assert!(is_small(usize::MAX, 0), "zero-sized elements move no bytes");
        assert!(!is_small(usize::MAX, 2), "saturates instead of wrapping");
        assert_eq!(with_parallelism(Parallelism::Auto, || pieces(1000, 8)), 1);
        let big = with_parallelism(Parallelism::Threads(2), || pieces(1 << 20, 4));
        assert_eq!(big, available_threads().min(2));
        let one = with_parallelism(Parallelism::Threads(1), || pieces(1 << 20, 4));
        assert_eq!(one, 1);
        let uncapped = with_parallelism(Parallelism::Threads(0), || pieces(1 << 20, 4));
        assert_eq!(uncapped, available_threads());
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
