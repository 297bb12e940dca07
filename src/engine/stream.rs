//! How a kernel call's output reaches memory. A plain store first reads the cache line it
//! writes (write-allocate), so an output that is only written costs a read stream as well as a
//! write stream. A large output, which would not stay in cache for whoever reads it next, is
//! therefore computed 2 KiB at a time into a buffer in L1 and copied out with non-temporal
//! stores, which write whole lines without reading them: the same-shape `_into` add moves 3
//! streams instead of 4 (`docs/experiments.md` has the figures that decide where this pays).

use std::cell::Cell;
#[cfg(test)]
use std::sync::atomic::{AtomicUsize, Ordering};

use super::caches::caches;
use super::fresh::{call_logged, FreshLog};
use super::kernel::{self, Block, BlockKernel, Line, SlotInfo};
use super::operand::Operand;

/// The least traffic (bytes streamed by a walk: its output and every input read in full) for
/// which an output is written with non-temporal stores: half again the last-level cache
/// ([`super::caches::Caches::stream_min`]). Below it the output may still be in cache when it is next read (or
/// written), which streaming stores would throw away (`docs/experiments.md` has the A/B by size).
fn stream_min_bytes() -> usize {
    caches().stream_min()
}

/// The threshold in the unit tests where they set one (`usize::MAX`: none, the machine's).
#[cfg(test)]
pub(crate) static STREAM_MIN: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Whether a walk that streams `traffic` bytes is large enough to write past the cache.
#[inline(always)]
pub(super) fn may_stream(traffic: usize) -> bool {
    #[cfg(test)]
    if STREAM_MIN.load(Ordering::Relaxed) != usize::MAX {
        return traffic >= STREAM_MIN.load(Ordering::Relaxed);
    }
    traffic >= stream_min_bytes()
}

/// The bytes of output computed between two copies: short phases keep the reads and the
/// streamed writes overlapping (1-2 KiB beat 4-16 KiB by 10-15% in a plain loop), but each
/// phase pays a kernel call's fixed cost (1 KiB was 1.4x slower on one thread).
const BUFFER_BYTES: usize = 2 << 10;

/// How a walk writes its output: with plain stores, logging what it wrote (a fresh output of a
/// type with drop glue, [`crate::engine::fresh`]), or streamed past the cache.
#[derive(Clone, Copy)]
pub(super) enum Write<'l> {
    Plain,
    Logged(&'l FreshLog),
    Streamed,
}

impl<'l> Write<'l> {
    /// The way to write a walk's output of `len` slots like `slot`, streaming `traffic` bytes
    /// in all, by a kernel that `reads_output` or not; `fresh` when the output was just
    /// allocated, then `log` is its log.
    pub fn choose(
        slot: SlotInfo,
        reads_output: bool,
        len: usize,
        traffic: usize,
        fresh: bool,
        log: Option<&'l FreshLog>,
    ) -> Self {
        if let Some(log) = log {
            return Write::Logged(log);
        }
        // A fresh output's first touch faults its pages in, and the kernel's zeroing of them
        // leaves lines in cache that plain stores then hit: streaming them was slower. Below
        // the threshold (every small walk) the answer comes before any arithmetic.
        if fresh || !may_stream(traffic) {
            return Write::Plain;
        }
        // Slots are computed into a zeroed buffer and moved out by their bits: only plain
        // types (zero bytes are a value, no drop glue) that tile the buffer's lines.
        let size = slot.size;
        let fits = slot.plain && !slot.needs_drop && size > 0 && 64 % size == 0;
        // Streaming paid where two inputs or more are read in full beside the output; with one
        // (a broadcast row, column or outer product) plain stores were as fast or faster.
        // (Zero-sized slots write nothing: no reads to count, and `fits` refuses them.)
        let reads = traffic
            .saturating_sub(len.saturating_mul(size))
            .checked_div(len.saturating_mul(size))
            .unwrap_or(0);
        if cfg!(target_arch = "x86_64") && !reads_output && fits && reads >= 2 {
            Write::Streamed
        } else {
            Write::Plain
        }
    }

    /// This way, for a block that stages an input: plain stores there, as staging already
    /// interleaves its own copies with the kernel (streaming was 5-15% slower).
    pub fn staged(self) -> Self {
        match self {
            Write::Streamed => Write::Plain,
            other => other,
        }
    }

    /// Runs one kernel call, its output written this way.
    ///
    /// # Safety
    /// As [`BlockKernel::block`]; `operands[k].size` is the size of operand `k`'s elements.
    #[inline(always)]
    pub unsafe fn call<const N: usize>(
        self,
        kernel: &dyn BlockKernel<N>,
        ptrs: [*mut u8; N],
        block: Block<N>,
        operands: [&Operand<'_>; N],
    ) {
        match self {
            // SAFETY: as the caller promised.
            Write::Plain => unsafe { call_logged(kernel, ptrs, block, None) },
            // SAFETY: as the caller promised.
            Write::Logged(log) => unsafe { call_logged(kernel, ptrs, block, Some(log)) },
            // SAFETY: as the caller promised; `choose` streams only slots that tile a line.
            Write::Streamed => unsafe { streamed(kernel, ptrs, block, operands) },
        }
    }
}

/// Runs `block` piece by piece into a buffer of [`BUFFER_BYTES`], copying each piece out with
/// non-temporal stores, then fences them so that they are visible before the walk's end is.
///
/// # Safety
/// As [`BlockKernel::block`]; the kernel's slots are plain ([`SlotInfo::plain`]) and their
/// size divides 64; `operands[k].size` is the size of operand `k`'s elements.
#[inline(never)]
unsafe fn streamed<const N: usize>(
    kernel: &dyn BlockKernel<N>,
    ptrs: [*mut u8; N],
    block: Block<N>,
    operands: [&Operand<'_>; N],
) {
    let size = kernel.slot().size;
    if block.inner[0] != 1 {
        // Not a run of the output's memory: nothing to stream.
        // SAFETY: as the caller promised.
        return unsafe { call_logged(kernel, ptrs, block, None) };
    }
    // Zeroed, so that the kernel, which may write its slots as initialised values, only ever
    // overwrites values: zero bytes are a value of every plain type.
    let mut buffer = [Line([0; 64]); BUFFER_BYTES / 64];
    let buf = buffer.as_mut_ptr().cast::<u8>();
    let cap = BUFFER_BYTES / size;
    let cols = block.n.min(cap);
    let rows_per = (cap / cols).min(block.rows);
    // Rows of the output that follow one another are copied as one.
    let packed = block.step[0] == block.n as isize;
    let written = Cell::new(0);
    for r0 in (0..block.rows).step_by(rows_per) {
        let rows = rows_per.min(block.rows - r0);
        for c0 in (0..block.n).step_by(cols) {
            let n = cols.min(block.n - c0);
            let mut piece = Block { n, rows, ..block };
            piece.step[0] = n as isize;
            let at = std::array::from_fn(|k| match k {
                0 => buf,
                _ => {
                    let off = r0 as isize * block.step[k] + c0 as isize * block.inner[k];
                    // SAFETY: row `r0` and column `c0` are in the block, so this addresses an
                    // element of operand `k`, as the caller promised of the block.
                    unsafe { ptrs[k].offset(off * operands[k].size as isize) }
                }
            });
            // SAFETY: the piece's inputs are elements of the block; its output is the buffer,
            // `rows * n <= cap` slots (aligned: the buffer is aligned to 64 and the slot size
            // divides 64), this call's own, each holding a value (zero bytes) of the plain slot
            // type, which has no drop glue.
            unsafe { kernel::call(kernel, at, piece, &written) };
            let first = (r0 as isize * block.step[0] + c0 as isize) * size as isize;
            // SAFETY: the output run of each of the piece's rows is `n` slots from `first` plus
            // that row's step, elements of the block's output (this thread's alone); the buffer
            // holds the piece's `rows * n` slots, row by row.
            unsafe {
                if packed && n == block.n {
                    copy_streaming(buf, ptrs[0].offset(first), rows * n * size);
                } else {
                    for r in 0..rows {
                        let dst =
                            ptrs[0].offset(first + r as isize * block.step[0] * size as isize);
                        copy_streaming(buf.add(r * n * size), dst, n * size);
                    }
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a store fence has no preconditions; it orders the non-temporal stores above
    // before whatever this thread does next (signalling the end of its part of the walk).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// Copies `bytes` from `src` to `dst`: the aligned middle of `dst` with non-temporal stores
/// (32 bytes at a time with AVX, checked at run time, else 16 with SSE2, which every x86_64 CPU
/// has), the edges with plain ones.
///
/// # Safety
/// `src` and `dst` are valid for `bytes` bytes and do not overlap; the caller fences the
/// non-temporal stores before another thread may read them.
#[inline(always)]
pub(super) unsafe fn copy_streaming(src: *const u8, dst: *mut u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: as the caller promised; the CPU has AVX.
            unsafe { x86::copy_streaming_avx(src, dst, bytes) }
        } else {
            // SAFETY: as the caller promised.
            unsafe { x86::copy_streaming_sse2(src, dst, bytes) }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as the caller promised.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, bytes)
    };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::ptr::copy_nonoverlapping;

    /// One copy per width: `$store` of `$width`-byte vectors loaded with `$load`.
    macro_rules! streaming_copy {
        ($name:ident, $feature:literal, $width:literal, $load:ident, $store:ident, $doc:literal) => {
            #[doc = $doc]
            ///
            /// # Safety
            /// As `copy_streaming`, on a CPU with the feature.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn $name(src: *const u8, dst: *mut u8, bytes: usize) {
                // SAFETY: every access is inside the `bytes` bytes of `src` or `dst`, as the
                // caller promised; the streamed stores are to addresses aligned to their width,
                // as the instruction requires.
                unsafe {
                    let head = dst.align_offset($width).min(bytes);
                    let body = (bytes - head) / $width * $width;
                    copy_nonoverlapping(src, dst, head);
                    for i in (head..head + body).step_by($width) {
                        $store(dst.add(i).cast(), $load(src.add(i).cast()));
                    }
                    let tail = head + body;
                    copy_nonoverlapping(src.add(tail), dst.add(tail), bytes - tail);
                }
            }
        };
    }

    streaming_copy!(
        copy_streaming_avx,
        "avx",
        32,
        _mm256_loadu_si256,
        _mm256_stream_si256,
        "32-byte streamed stores: 10-20% faster than 16-byte ones (`docs/experiments.md`)."
    );
    streaming_copy!(
        copy_streaming_sse2,
        "sse2",
        16,
        _mm_loadu_si128,
        _mm_stream_si128,
        "16-byte streamed stores."
    );
}

/// Held by the tests that read or lower [`STREAM_MIN`].
#[cfg(test)]
pub(super) fn tests_lock() -> std::sync::MutexGuard<'static, ()> {
    static THRESHOLD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    THRESHOLD.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a large output, not fresh, written and not read, beside two inputs read in full.
    #[test]
    fn which_walks_stream() {
        let _held = tests_lock();
        let big = stream_min_bytes();
        let f32s = SlotInfo::of::<f32>();
        let choose = |len: usize, traffic: usize, fresh: bool| {
            Write::choose(f32s, false, len, traffic, fresh, None)
        };
        let len = big / 4;
        assert_eq!(
            cfg!(target_arch = "x86_64"),
            matches!(choose(len, 3 * big, false), Write::Streamed)
        );
        assert!(matches!(choose(len, 3 * big, true), Write::Plain), "fresh");
        assert!(
            matches!(choose(len, 2 * big, false), Write::Plain),
            "one input"
        );
        assert!(
            matches!(choose(len / 8, big - 1, false), Write::Plain),
            "small"
        );
        let update = Write::choose(f32s, true, len, 3 * big, false, None);
        assert!(matches!(update, Write::Plain), "in place");
        let text = Write::choose(SlotInfo::of::<String>(), false, len, 3 * big, false, None);
        assert!(matches!(text, Write::Plain), "drop glue");
        let refs = Write::choose(SlotInfo::of::<&u64>(), false, len, 3 * big, false, None);
        assert!(
            matches!(refs, Write::Plain),
            "not plain: zero bytes are no value"
        );
    }

    /// The streamed copy writes exactly its bytes, at every alignment of either end.
    #[test]
    fn streaming_copies_exactly() {
        let src: Vec<u8> = (0..300).map(|i| (i * 7 % 251) as u8).collect();
        for start in 0..40 {
            for bytes in [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200] {
                let mut dst = vec![0xAAu8; 300];
                // SAFETY: both ranges are inside their vectors and distinct allocations.
                unsafe { copy_streaming(src.as_ptr().add(3), dst.as_mut_ptr().add(start), bytes) };
                #[cfg(target_arch = "x86_64")]
                // SAFETY: no preconditions.
                unsafe {
                    std::arch::x86_64::_mm_sfence()
                };
                assert_eq!(&dst[start..start + bytes], &src[3..3 + bytes]);
                assert!(dst[..start]
                    .iter()
                    .chain(&dst[start + bytes..])
                    .all(|&b| b == 0xAA));
            }
        }
    }
}

#[cfg(test)]
mod walks {
    use ndarray::{s, Array2, Array3};

    use super::tests_lock as lock;
    use super::*;
    use crate::prelude::*;

    /// Streamed walks give what plain ones give: outputs at every alignment, rows that follow
    /// one another or not, runs longer and shorter than the buffer, 1- to 8-byte elements,
    /// three inputs, and a transposed input (whose staged blocks store plainly).
    #[test]
    fn streamed_walks_match_plain_ones() {
        let _held = lock();
        let (m, n) = (37, 1100);
        let x = Array2::from_shape_fn((m, n), |(i, j)| (i * 31 + j * 7) as f32 * 0.5 - 900.0);
        let y = Array2::from_shape_fn((m, n), |(i, j)| ((i + 3 * j) % 101) as f32 - 50.0);
        let yt = y.t().to_owned();
        let xw = Array2::from_shape_fn((m, 104), |(i, j)| (i * 13 + j) as f32);
        let (xd, yd) = (x.mapv(f64::from), y.mapv(f64::from));
        let (xi, yi) = (x.mapv(|v| v as i16), y.mapv(|v| v as i16));
        let x3 = Array3::from_shape_fn((5, 3, 7), |(i, j, k)| (i * 21 + j * 7 + k) as f32);
        let run = || {
            let mut got: Vec<Vec<f64>> = vec![];
            // Outputs in a wider array, at offsets 0..3: unaligned starts, rows not adjacent.
            for at in 0..3 {
                let mut wide = Array2::<f32>::zeros((m, n + 5));
                let mut out = wide.slice_mut(s![.., at..at + n]);
                x.add_bcast_into(&y, &[], &mut out).unwrap();
                got.push(wide.iter().map(|&v| v.into()).collect());
            }
            // An input in a wider array: blocks of rows whose outputs follow one another, short
            // enough that a buffer holds several.
            let mut out = Array2::<f32>::zeros((m, 100));
            let xs = xw.slice(s![.., 2..102]);
            xs.add_bcast_into(&y.slice(s![.., ..100]), &[], &mut out)
                .unwrap();
            got.push(out.iter().map(|&v| v.into()).collect());
            let mut out = Array2::<f32>::zeros((m, n));
            x.sub_bcast_into(&yt.t(), &[], &mut out).unwrap();
            got.push(out.iter().map(|&v| v.into()).collect());
            let mut out = Array2::<f64>::zeros((m, n));
            xd.mul_bcast_into(&yd, &[], &mut out).unwrap();
            got.push(out.into_iter().collect());
            let mut out = Array2::<i16>::zeros((m, n));
            xi.add_bcast_into(&yi, &[], &mut out).unwrap();
            got.push(out.iter().map(|&v| v.into()).collect());
            let mut out = Array2::<bool>::from_elem((m, n), false);
            x.lt_bcast_into(&y, &[], &mut out).unwrap();
            got.push(out.iter().map(|&v| f64::from(u8::from(v))).collect());
            let mut out = Array2::<f32>::zeros((m, n));
            x.gt_bcast(&y, &[])
                .unwrap()
                .select_bcast_into(&x, &y, &mut out)
                .unwrap();
            got.push(out.iter().map(|&v| v.into()).collect());
            // Short runs: rows of 7, many to a buffer.
            let mut out = Array3::<f32>::zeros((5, 3, 7));
            x3.add_bcast_into(&x3, &[], &mut out).unwrap();
            got.push(out.iter().map(|&v| v.into()).collect());
            got
        };
        STREAM_MIN.store(usize::MAX, Ordering::Relaxed);
        let plain = run();
        STREAM_MIN.store(0, Ordering::Relaxed);
        let streamed = run();
        STREAM_MIN.store(usize::MAX, Ordering::Relaxed);
        for (k, (s, p)) in streamed.iter().zip(&plain).enumerate() {
            assert!(s == p, "case {k}");
        }
    }
}
