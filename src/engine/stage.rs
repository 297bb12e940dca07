//! The thread's buffer ([`with_staging`]) and the engine's one gather into it ([`gather`]).
//! The walk stages an input read across the rows of a block (a transpose): a slab of rows at
//! a time, copied transposed ([`transpose`]), so the kernel reads it with unit stride; the row
//! executor gathers its tiles' inputs. Only plain element types are transposed (their values
//! are their bits).

use super::fresh::{call_logged, FreshLog};
use super::kernel::{Block, BlockKernel, Line};
use super::operand::Operand;
use super::transpose::{self, TILE};
use std::mem::MaybeUninit;

/// The operands a block stages ([`run_staged`]): the inputs it reads [`transposed`] (another
/// input is read in place: copied one by one, staging gains little).
fn staged<const N: usize>(block: &Block<N>, operands: [&Operand<'_>; N]) -> [bool; N] {
    std::array::from_fn(|k| {
        let at = [block.step[k], block.inner[k]];
        k > 0 && operands[k].plain && transposed(at, [block.rows, block.n])
    })
}

/// Whether a `[rows, n]` piece read with `[step, inner]` (element `(r, c)` at
/// `r * step + c * inner`) of plain elements is a transpose that the register transposes copy:
/// a step of 1 or -1 down the rows and a stride of at least 8 along them, at least 8 by 8.
pub(super) fn transposed([step, inner]: [isize; 2], [rows, n]: [usize; 2]) -> bool {
    step.unsigned_abs() == 1 && inner.unsigned_abs() >= 8 && rows.min(n) >= 8
}

/// Runs one block: straight through the kernel, or slab by slab through [`run_staged`] when
/// it stages operands, each in its part of this thread's buffer: a slab of it at the staging
/// pitch, in whole cache lines.
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
    let staged = staged(&block, operands);
    let widest = (0..N)
        .filter(|&k| staged[k])
        .map(|k| operands[k].size)
        .max();
    let slab = SLAB_BYTES / widest.unwrap_or(1);
    let lines = |k: usize| match staged[k] {
        true => (slab * transpose::pitch(operands[k].size) * operands[k].size).div_ceil(64),
        false => 0,
    };
    let staging = |buffer: &mut [Line]| {
        // One pointer to the buffer, from which every part is derived: a second `as_mut_ptr`
        // would invalidate the parts taken before it.
        let (base, mut at) = (buffer.as_mut_ptr(), 0);
        let parts = std::array::from_fn(|k| {
            // SAFETY: the buffer holds the sum of the parts' lines.
            let part = unsafe { base.add(at) };
            at += lines(k);
            part
        });
        // SAFETY: as the caller promised; `parts` are this thread's, sized for `slab` rows.
        unsafe { run_staged(ptrs, block, operands, (&staged, slab), parts, kernel, log) }
    };
    if widest.is_none() || with_staging((0..N).map(lines).sum(), staging).is_none() {
        // Nothing to stage, or no room to: the block read in place.
        // SAFETY: as the caller promised.
        unsafe { call_logged(kernel, ptrs, block, log) }
    }
}

/// Bytes of each source row (each staged column) that a slab reads: the rows of a slab are
/// this many bytes of the widest staged element, a multiple of 8 (the register transposes'
/// side). A source read across the rows has its rows far apart in memory (16 KiB at 4096
/// f32 columns), so the lines of one column of tiles fall in a few cache sets: a slab that
/// took one line per source row found the next line evicted when the next slab came for it.
/// Four lines at once are read as runs, each line used whole while it is in L1
/// (`docs/experiments.md`, transposed operands).
pub(super) const SLAB_BYTES: usize = 256;
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
/// kernel.
///
/// # Safety
/// Every element the block addresses is an element of its operand (the written ones distinct
/// and this thread's); an operand with `staged[k]` is plain with a nonzero `block.step[k]`,
/// and `parts[k]` is this thread's, room for `slab` rows at the staging pitch of its elements.
unsafe fn run_staged<const N: usize>(
    ptrs: [*mut u8; N],
    block: Block<N>,
    operands: [&Operand<'_>; N],
    (staged, slab): (&[bool; N], usize),
    parts: [*mut Line; N],
    kernel: &dyn BlockKernel<N>,
    log: Option<&FreshLog>,
) {
    for first in (0..block.rows).step_by(slab) {
        for c0 in (0..block.n).step_by(TILE) {
            let [rows, n] = [slab.min(block.rows - first), TILE.min(block.n - c0)];
            let mut piece = Block { n, rows, ..block };
            let mut at: [*mut u8; N] = std::array::from_fn(|k| {
                let off = first as isize * block.step[k] + c0 as isize * block.inner[k];
                // SAFETY: row `first` and column `c0` are in the block, so this is an element
                // of operand `k`, as the caller promised of the block.
                unsafe { ptrs[k].offset(off * operands[k].size as isize) }
            });
            for k in (0..N).filter(|&k| staged[k]) {
                let pitch = transpose::pitch(operands[k].size);
                let buffer = parts[k].cast::<u8>();
                // SAFETY: the piece's elements of operand `k` are at
                // `at[k] + r * step[k] + c * inner[k]` (r < rows, c < n), all inside its array;
                // the buffer, this thread's own, holds `slab` rows of its elements at the
                // staging pitch (n is at most that, `rows` at most `slab`).
                unsafe {
                    let (step, inner) = (block.step[k], block.inner[k]);
                    gather(at[k], [step, inner], buffer, pitch, operands[k], [rows, n]);
                }
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

/// Copies a `[rows, n]` piece of input `o` into rows `pitch` elements apart at `dst`: element
/// `(r, c)` from `src + r * step + c * inner` (in elements). The one gather of the engine: the walk's staged operands and the row
/// executor's inputs come through it. A piece of plain values read [`transposed`] is copied
/// transposed ([`transpose::transpose_tile`]), any other row by row along its stride.
///
/// # Safety
/// Every element of the piece is an element of `o`'s array; `dst` has room for `rows` rows of
/// `pitch >= n` elements of its size, this thread's alone.
pub(super) unsafe fn gather(
    src: *const u8,
    [step, inner]: [isize; 2],
    dst: *mut u8,
    pitch: usize,
    o: &Operand<'_>,
    [rows, n]: [usize; 2],
) {
    let size = o.size;
    // SAFETY: as the caller promised, for each row or the piece's transpose.
    unsafe {
        if o.plain && transposed([step, inner], [rows, n]) {
            // A source read backwards along the rows (a transpose flipped: a rot90) is read
            // forwards from its last row and written upwards from the last row's slot, so the
            // rows come out in order either way.
            let (src, dst, p) = match step {
                -1 => (
                    src.sub((rows - 1) * size),
                    dst.add((rows - 1) * pitch * size),
                    -1,
                ),
                _ => (src, dst, 1),
            };
            return transpose::transpose_tile(src, inner, dst, p * pitch as isize, size, [rows, n]);
        }
        let z = size as isize;
        for r in 0..rows {
            let from = src.offset(r as isize * step * z);
            copy_strided(from, inner * z, dst.add(r * pitch * size), z, n, size);
        }
    }
}

/// Copies `n` elements of `size` bytes, `src` moving by `from` bytes and `dst` by `to`.
///
/// # Safety
/// Every element read is initialised and every element written valid for a write, each aligned
/// for its size's stand-in (those of `by_size!`); the two do not overlap.
#[inline(never)]
pub(super) unsafe fn copy_strided(
    src: *const u8,
    from: isize,
    dst: *mut u8,
    to: isize,
    n: usize,
    size: usize,
) {
    /// # Safety
    /// As `copy_strided`, for elements of `T`.
    #[inline(always)]
    unsafe fn copy<T: std::marker::Copy>(
        src: *const u8,
        from: isize,
        dst: *mut u8,
        to: isize,
        n: usize,
    ) {
        if from == 0 && to == size_of::<T>() as isize {
            // One element repeated into a run: a fill, which vectorises.
            // SAFETY: as the caller promised: one element read, `n` consecutive ones written.
            unsafe {
                let v = src.cast::<T>().read();
                std::slice::from_raw_parts_mut(dst.cast::<MaybeUninit<T>>(), n)
                    .fill(MaybeUninit::new(v));
            }
            return;
        }
        for i in 0..n as isize {
            // SAFETY: as the caller promised.
            unsafe {
                let v = src.offset(i * from).cast::<T>().read();
                dst.offset(i * to).cast::<T>().write(v);
            }
        }
    }
    // SAFETY: as the caller promised, for the stand-in of that size.
    unsafe {
        match size {
            1 => copy::<u8>(src, from, dst, to, n),
            2 => copy::<u16>(src, from, dst, to, n),
            4 => copy::<u32>(src, from, dst, to, n),
            8 => copy::<[u32; 2]>(src, from, dst, to, n),
            16 => copy::<[u64; 2]>(src, from, dst, to, n),
            _ => unreachable!("table kernels take elements of 1 to 16 bytes"),
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
