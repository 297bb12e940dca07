//! Staging: an input read across the rows of a block (a transpose) is copied, a slab of rows
//! at a time, transposed into a per-thread buffer ([`transpose`]), so the kernel reads it with
//! unit stride. Only plain element types are staged (their values are their bits).

use super::fresh::{call_logged, FreshLog};
use super::kernel::{Block, BlockKernel, Line};
use super::operand::Operand;
use super::transpose::{self, TILE};

/// The operands a block stages ([`run_staged`]): inputs of plain values read across the
/// block's rows (a stride of at least 8 along them) with a step of 1 or -1 down them, in a block
/// at least 8 by 8 (another step is read in place: copied one by one, staging gains little).
fn staged<const N: usize>(block: &Block<N>, operands: [&Operand<'_>; N]) -> [bool; N] {
    let big = block.rows >= 8 && block.n >= 8;
    std::array::from_fn(|k| {
        let (step, inner) = (block.step[k], block.inner[k]);
        k > 0 && big && operands[k].plain && inner.unsigned_abs() >= 8 && step.unsigned_abs() == 1
    })
}

/// Runs one block: straight through the kernel, or slab by slab through [`run_staged`] when
/// it stages operands.
///
/// # Safety
/// Every element the block addresses from `ptrs` is an element of its operand, the written
/// ones distinct and touched by this thread only.
#[inline(always)]
pub(super) unsafe fn run_block<const N: usize>(
    ptrs: [*mut u8; N],
    block: Block<N>,
    operands: [&Operand<'_>; N],
    kernel: &dyn BlockKernel<N>,
    log: Option<&FreshLog>,
) {
    let staged = &staged(&block, operands);
    if !staged.contains(&true) {
        // SAFETY: as the caller promised.
        return unsafe { call_logged(kernel, ptrs, block, log) };
    }
    let staging = &Staging {
        staged: *staged,
        slab: slab_rows(operands, staged),
    };
    let ran = with_parts(operands, staging, |parts| {
        // SAFETY: as the caller promised; `parts` are this thread's, sized by `with_parts` for
        // the same staging.
        unsafe { run_staged(ptrs, block, operands, staging, parts, kernel, log) }
    });
    if ran.is_none() {
        // No room to stage: the same block read in place.
        // SAFETY: as the caller promised.
        unsafe { call_logged(kernel, ptrs, block, log) }
    }
}

/// What a block stages: the operands ([`staged`]) and the rows of a slab ([`slab_rows`]).
struct Staging<const N: usize> {
    staged: [bool; N],
    slab: usize,
}

/// Runs `f` with this thread's staging buffer cut into one part per operand: room for a slab
/// of each staged operand (in whole cache lines), none for the others; `None`, having run
/// nothing, when the buffer cannot grow to that.
fn with_parts<const N: usize, R>(
    operands: [&Operand<'_>; N],
    &Staging { staged, slab }: &Staging<N>,
    f: impl FnOnce([*mut Line; N]) -> R,
) -> Option<R> {
    let lines: [usize; N] = std::array::from_fn(|k| match staged[k] {
        true => (slab * transpose::pitch(operands[k].size) * operands[k].size).div_ceil(64),
        false => 0,
    });
    with_staging(lines.iter().sum(), |buffer| {
        // One pointer to the buffer, from which every part is derived: a second `as_mut_ptr`
        // would invalidate the parts taken before it.
        let base = buffer.as_mut_ptr();
        let mut parts: [*mut Line; N] = [std::ptr::null_mut(); N];
        let mut at = 0;
        for k in 0..N {
            // SAFETY: the buffer holds the sum of the parts' lines.
            parts[k] = unsafe { base.add(at) };
            at += lines[k];
        }
        f(parts)
    })
}

/// Bytes of each source row (each staged column) that a slab reads.
const SLAB_BYTES: usize = 256;

/// Rows of a block staged at a time: [`SLAB_BYTES`] of each source row for the widest staged
/// element, a multiple of 8 (the register transposes' side). A source read across the rows has
/// its rows far apart in memory (16 KiB at 4096 f32 columns), so the lines of one column of
/// tiles fall in a few cache sets: a slab that took one line per source row found the next
/// line evicted when the next slab came for it. Four lines at once are read as runs, each line
/// used whole while it is in L1 (`docs/experiments.md`, transposed operands).
fn slab_rows<const N: usize>(operands: [&Operand<'_>; N], staged: &[bool; N]) -> usize {
    let mut widest = 1;
    for (o, &staged) in operands.iter().zip(staged) {
        if staged {
            widest = widest.max(o.size);
        }
    }
    SLAB_BYTES / widest
}
const _: () = assert!(SLAB_BYTES.is_multiple_of(8 * 8));

/// The most bytes a thread keeps in its staging buffer between calls: what the executors'
/// tiles take (a column chain's tile, 1 MiB per register), so that the walks that use it pay
/// no page faults from call to call. A call that needs more (a chain over rows of many MiB)
/// gets it, and the buffer goes back to this after the call: no thread holds a long row's
/// registers for the life of the process.
const KEEP_BYTES: usize = 4 << 20;

thread_local! {
    static STAGING: std::cell::RefCell<Vec<Line>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's staging buffer grown to at least `lines` lines. Kept from call
/// to call (Rayon's threads live on) up to [`KEEP_BYTES`], so a staging walk does not pay for a
/// fresh buffer's page faults. `None`, having run nothing, when the buffer cannot be allocated
/// (the caller then reads in place, or reports it: never an abort).
pub(super) fn with_staging<R>(lines: usize, f: impl FnOnce(&mut [Line]) -> R) -> Option<R> {
    let grown = |buffer: &mut Vec<Line>| {
        let more = lines.saturating_sub(buffer.len());
        buffer.try_reserve_exact(more).ok()?;
        // Within the capacity: no reallocation.
        buffer.resize(buffer.len().max(lines), Line([0; 64]));
        Some(())
    };
    STAGING.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            grown(&mut buffer)?;
            let r = f(&mut buffer[..lines]);
            if buffer.capacity() > KEEP_BYTES / 64 {
                buffer.truncate(KEEP_BYTES / 64);
                buffer.shrink_to(KEEP_BYTES / 64);
            }
            Some(r)
        }
        // Never nested in practice; a fresh buffer keeps it correct if it were.
        Err(_) => {
            let mut buffer = Vec::new();
            grown(&mut buffer)?;
            Some(f(&mut buffer))
        }
    })
}

/// Runs `block` (operand `k` at `ptrs[k]`) a slab of rows and at most [`TILE`] columns
/// at a time, each operand with `staged[k]` first copied, transposed, into `parts[k]`, so the
/// kernel reads it with unit stride. A slab's staged rows stay in L1 from the transpose to the
/// kernel. When every other operand is contiguous across a slab's rows (or broadcast), the
/// staged rows are packed too and the slab goes to the kernel as one long run: short rows
/// would each pay for the vector loop's start and end.
///
/// # Safety
/// Every element the block addresses is an element of its operand (the written ones distinct
/// and this thread's); an operand with `staged[k]` is plain with a nonzero `block.step[k]`,
/// and `parts[k]` is this thread's, room for `slab` rows at the staging pitch of its elements.
unsafe fn run_staged<const N: usize>(
    ptrs: [*mut u8; N],
    block: Block<N>,
    operands: [&Operand<'_>; N],
    &Staging { ref staged, slab }: &Staging<N>,
    parts: [*mut Line; N],
    kernel: &dyn BlockKernel<N>,
    log: Option<&FreshLog>,
) {
    for first in (0..block.rows).step_by(slab) {
        for c0 in (0..block.n).step_by(TILE) {
            let [rows, n] = [slab.min(block.rows - first), TILE.min(block.n - c0)];
            let packed = (0..N).all(|k| staged[k] || block.step[k] == n as isize * block.inner[k]);
            let mut piece = match packed {
                true => Block {
                    n: rows * n,
                    rows: 1,
                    ..block
                },
                false => Block { n, rows, ..block },
            };
            let mut at: [*mut u8; N] = std::array::from_fn(|k| {
                let off = first as isize * block.step[k] + c0 as isize * block.inner[k];
                // SAFETY: row `first` and column `c0` are in the block, so this is an element
                // of operand `k`, as the caller promised of the block.
                unsafe { ptrs[k].offset(off * operands[k].size as isize) }
            });
            for k in (0..N).filter(|&k| staged[k]) {
                let size = operands[k].size;
                let pitch = if packed { n } else { transpose::pitch(size) };
                let buffer = parts[k].cast::<u8>();
                // A source read backwards along the rows (step -1, e.g. a transpose flipped: a
                // rot90) is read forwards from its last row and written upwards from the
                // buffer's last row, so the staged rows come out in order either way (and go
                // through the register transposes).
                let (src, dst, p) = match block.step[k] {
                    // SAFETY: with a step of -1, row `rows - 1` of the piece is `rows - 1`
                    // elements before `at[k]`, an element of the block; the buffer holds `slab`
                    // rows of `pitch` elements, and `rows <= slab`.
                    -1 => unsafe {
                        (
                            at[k].sub((rows - 1) * size),
                            buffer.add((rows - 1) * pitch * size),
                            -(pitch as isize),
                        )
                    },
                    _ => (at[k], buffer, pitch as isize),
                };
                // SAFETY: the piece's elements of operand `k` are at
                // `at[k] + c * inner[k] + r * step[k]` (r < rows, c < n, a step of 1 or -1), all
                // inside its array, so `src + c * inner[k] + r` is too (for a step of -1, `src` is the
                // last row's); the buffer holds `slab` rows of its elements at the staging pitch
                // (n is at most that), and `dst` is the first row written of the `rows` the copy
                // fills; its elements are aligned (plain sizes are at most 8) and the buffer is
                // this thread's own.
                unsafe { transpose::transpose_tile(src, block.inner[k], dst, p, size, [rows, n]) };
                at[k] = buffer;
                piece.inner[k] = 1;
                piece.step[k] = pitch as isize;
            }
            // SAFETY: the piece addresses elements of the block (the staged ones in this
            // thread's buffer, now in order), as the caller promised of the block.
            unsafe { call_logged(kernel, at, piece, log) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::operand::Src;
    use ndarray::{arr1, Array1};

    /// Blocks stage an input of plain values read across their rows from 8x8, with a step of
    /// 1 or -1 down them; never another step, never the output, never a
    /// broadcast or a type that is not plain bits.
    #[test]
    fn which_operands_stage() {
        let x = arr1(&[0f32]);
        let (out, input) = (Src::of(&x), Src::of(&x));
        let mut o = Array1::<f32>::zeros(1);
        let out_op = Operand::output(&mut o);
        let plain = [&out_op, input.operand(), out.operand()];
        let block = |n: usize, step: isize, inner: isize| Block {
            n,
            inner: [1, inner, 1],
            rows: n,
            step: [n as isize, step, n as isize],
        };
        for (n, step, inner, want) in [
            (8, 1, 8, true),
            (64, 1, 64, true),
            (7, 1, 7, false),
            (64, -1, 64, true),
            (64, 2, 64, false),
            (64, -3, 64, false),
            (64, 0, 64, false),
            (64, 1, 4, false),
            (64, 1, 1 << 30, true),
            (64, 2, 1 << 30, false),
        ] {
            let got = staged(&block(n, step, inner), plain);
            assert_eq!(
                got,
                [false, want, false],
                "{n}x{n}, step {step}, stride {inner}"
            );
        }
        let names = arr1(&[String::new()]);
        let text = Src::of(&names);
        let got = staged(&block(64, 1, 64), [&out_op, text.operand(), out.operand()]);
        assert_eq!(got, [false; 3]);
    }

    /// A staging buffer that cannot be allocated is refused (the block is then read in place),
    /// never an abort; one that can is this thread's, kept for the next call.
    #[test]
    fn staging_buffers_are_fallible() {
        assert!(with_staging(usize::MAX / 64, |_| ()).is_none());
        let first = with_staging(4, |b| (b.len(), b.as_ptr() as usize)).unwrap();
        let again = with_staging(2, |b| (b.len(), b.as_ptr() as usize)).unwrap();
        assert_eq!((first.0, again.0), (4, 2));
        assert_eq!(first.1, again.1, "the buffer is kept");
    }

    /// A call that needs more than [`KEEP_BYTES`] gets it, and the thread keeps no more than
    /// that afterwards (on a thread of its own, whose buffer starts empty).
    #[test]
    fn staging_buffers_shrink_after_long_rows() {
        let kept = std::thread::spawn(|| {
            let long = 4 * KEEP_BYTES / 64;
            let got = with_staging(long, |b| b.len()).unwrap();
            (got, long, STAGING.with(|b| b.borrow().capacity()))
        });
        let (got, long, capacity) = kept.join().unwrap();
        assert_eq!(got, long);
        assert!(capacity <= KEEP_BYTES / 64, "{capacity} lines kept");
    }
}
