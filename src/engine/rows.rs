//! A chain with reductions over the contiguous (last) dim, run a tile of rows at a time: the
//! tile goes through every step while it is in cache (the elementwise kernels, the folds of
//! its rows, the reduced values read back along the rows), as PyTorch's CPU softmax and layer
//! norm do, so each input is read from memory once and each output written once.
//!
//! Registers are full (`n` elements per row, the last dim) or per row (one element per row, a
//! reduced value). A full step reads a per-row register as a splat of the row's element. A
//! fold runs the table fold ([`FoldFn`]) once per row over the row's `n` contiguous elements,
//! which is how [`super::reduce::reduce_table`] folds a row that is contiguous in memory: the
//! results are those of a reduction run alone, bit for bit.
//!
//! The tiles are split over threads ([`parallel::split`]); each thread's registers live in its
//! staging buffer ([`stage::with_staging`]), kept from call to call.

use super::kernel::Block;
use super::operand::{self, Operand};
use super::parallel;
use super::reduce::FoldFn;
use super::stage::{self, Line};
use super::stream;
use super::table::{copy_strided, Kernel};

/// Bytes of the widest register's tile: rows are taken together until a register holds this
/// much (one row at least), so a tile's registers stay in L1/L2 between steps.
const TILE_BYTES: usize = 16 << 10;

/// One step of a row chain.
#[derive(Clone, Copy)]
pub(crate) enum RowStep {
    /// `kernel` into register `out` from registers `args` (as many as it has inputs). A full
    /// `out` may read per-row registers (splatted along the row); a per-row `out` reads
    /// per-row registers only.
    Map {
        kernel: Kernel,
        out: usize,
        args: [usize; 3],
    },
    /// Per-row register `out` is the fold `run` of each row of full register `src`, starting
    /// from the element at `identity`.
    Fold {
        run: FoldFn,
        identity: *const u8,
        out: usize,
        src: usize,
    },
}

/// A chain over `shape` (its last dim the rows' length). Registers `0..operands.len()` are the
/// operands' (an input's is read from it; an output's, `written`, is stored to it); the others
/// are intermediates. A full operand is seen at `shape`, a per-row one at `shape` without its
/// last dim. `per_row` and `sizes` give every register's kind and element size.
pub(crate) struct RowChain<'a> {
    pub operands: &'a [Operand<'a>],
    pub written: &'a [bool],
    pub per_row: &'a [bool],
    pub sizes: &'a [usize],
    pub steps: &'a [RowStep],
}

// SAFETY: the identities a chain's folds point to are elements that are only read, by any
// thread; everything else in it is `Sync` already.
unsafe impl Sync for RowStep {}

/// Where a tile's register is: its buffer (rows `n` elements apart), its operand's rows in
/// place (a full input or output whose rows are contiguous), or one row of its buffer that
/// every row reads (a full input that is the same for every row and not contiguous, such as
/// a scalar: gathered once per range of tiles).
#[derive(Clone, Copy, PartialEq)]
enum Loc {
    Buf,
    InPlace,
    Once,
}

/// Runs `chain` over `shape` (rank 1 or more, no dim of size 0).
///
/// # Safety
/// Each step's kernel or fold is a table one for its registers' element types (an output's of
/// `sizes[out]` bytes, with no drop glue), each identity an element of its fold's type; every
/// register a step reads is an input operand or written by an earlier step; each written
/// operand addresses, at every index of its shape, a distinct slot of its type that nothing
/// else touches, and is written by exactly one step; the inputs are seen at their shapes.
pub(crate) unsafe fn run(shape: &[usize], chain: &RowChain<'_>) {
    let rank = shape.len();
    let (outer, n) = (&shape[..rank - 1], shape[rank - 1]);
    let m: usize = outer.iter().product();
    assert!(m > 0 && n > 0, "a row chain over an empty shape");
    let regs = chain.sizes.len();
    let n_ops = chain.operands.len();
    let widest = chain.sizes.iter().copied().max().unwrap_or(1).max(1);
    let rows = (TILE_BYTES / (n * widest)).clamp(1, m);
    // Each register's lines in a thread's buffer, then three splat rows.
    let lines_of = |r: usize| match chain.per_row[r] {
        true => (rows * chain.sizes[r]).div_ceil(64),
        false => (rows * n * chain.sizes[r]).div_ceil(64),
    };
    let splat_lines = (n * widest).div_ceil(64);
    let mut first_line = Vec::with_capacity(regs + 1);
    let mut total = 0;
    for r in 0..regs {
        first_line.push(total);
        total += lines_of(r);
    }
    let total = total + 3 * splat_lines;
    // Where each operand is, per tile: in place for full ones with unit stride along the rows.
    let last = |k: usize| match chain.per_row[k] {
        true => None,
        false => Some(chain.operands[k].strides[rank - 1]),
    };
    let same_rows = |k: usize| {
        chain.operands[k].strides[..rank - 1]
            .iter()
            .all(|&s| s == 0)
    };
    let refs: Vec<&Operand<'_>> = chain.operands.iter().collect();
    let traffic = operand::traffic(m.saturating_mul(n), &refs);
    // A large chain's contiguous outputs are computed in the tile's buffer and copied out
    // with non-temporal stores ([`stream`]): no read of the lines they overwrite.
    let streamed = stream::may_stream(traffic);
    let contiguous = |k: usize| last(k) == Some(1) || (n == 1 && last(k).is_some());
    let stream_out: Vec<bool> = (0..n_ops)
        .map(|k| streamed && chain.written[k] && contiguous(k))
        .collect();
    let loc: Vec<Loc> = (0..regs)
        .map(|r| {
            let full = r < n_ops && last(r).is_some();
            match full && contiguous(r) && !stream_out[r] {
                true => Loc::InPlace,
                false if full && !chain.written[r] && same_rows(r) => Loc::Once,
                false => Loc::Buf,
            }
        })
        .collect();
    let pieces = parallel::pieces(traffic);
    parallel::split(m, pieces, rows, &|range| {
        let work = |buffer: &mut [Line]| {
            let base = buffer.as_mut_ptr().cast::<u8>();
            // SAFETY: each register's lines and the splat rows are within the buffer.
            let buf: Vec<*mut u8> = first_line
                .iter()
                .map(|&l| unsafe { base.add(l * 64) })
                .collect();
            // SAFETY: as above.
            let splat: [*mut u8; 3] =
                std::array::from_fn(|j| unsafe { base.add((total - (3 - j) * splat_lines) * 64) });
            let mut offs = vec![0isize; rows * n_ops];
            // The inputs every row reads alike, gathered once for the range.
            for k in (0..n_ops).filter(|&k| loc[k] == Loc::Once) {
                let o = &chain.operands[k];
                // SAFETY: one row of input `k` (its first element, along its stride) into its
                // buffer, room for a row at least.
                unsafe {
                    let s = o.strides[rank - 1] * o.size as isize;
                    copy_strided(o.at(0), s, buf[k], o.size as isize, n, o.size)
                };
            }
            let mut at = range.start;
            while at < range.end {
                let count = rows.min(range.end - at);
                // SAFETY: as the caller promised of the chain; the buffers are this thread's.
                unsafe {
                    tile(
                        chain,
                        n,
                        outer,
                        at,
                        count,
                        &loc,
                        &stream_out,
                        &buf,
                        splat,
                        &mut offs,
                    )
                };
                at += count;
            }
            #[cfg(target_arch = "x86_64")]
            if streamed {
                // SAFETY: a store fence has no preconditions; it orders this thread's
                // non-temporal stores before the end of its part of the chain.
                unsafe { std::arch::x86_64::_mm_sfence() };
            }
        };
        if stage::with_staging(total, work).is_none() {
            // No memory for the buffers: an abort is not an option, nor is a wrong result.
            panic!("a row chain's buffers ({total} cache lines) could not be allocated");
        }
    });
}

/// The element offset of row `row` (a flat index over `outer`) in an operand whose strides
/// over the outer dims are `strides`.
fn row_offset(outer: &[usize], strides: &[isize], mut row: usize) -> isize {
    let mut off = 0isize;
    for d in (0..outer.len()).rev() {
        let i = row % outer[d];
        row /= outer[d];
        off += i as isize * strides[d];
    }
    off
}

/// Runs the chain over rows `first..first + count`.
///
/// # Safety
/// As [`run`]; `stream_out[k]` only for a contiguous full output kept in its buffer (the caller
/// fences the streamed stores); `buf` and `splat` are this thread's, each register's room for `count` rows of
/// its kind and each splat for `n` of the widest elements; `offs` has room for `count` rows of
/// every operand.
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    chain: &RowChain<'_>,
    n: usize,
    outer: &[usize],
    first: usize,
    count: usize,
    loc: &[Loc],
    stream_out: &[bool],
    buf: &[*mut u8],
    splat: [*mut u8; 3],
    offs: &mut [isize],
) {
    let n_ops = chain.operands.len();
    let rank = outer.len() + 1;
    for row in 0..count {
        for (k, o) in chain.operands.iter().enumerate() {
            offs[row * n_ops + k] = row_offset(outer, &o.strides[..rank - 1], first + row);
        }
    }
    let z = |r: usize| chain.sizes[r] as isize;
    // Whether an in-place register's rows of this tile follow one another in memory.
    let dense = |r: usize| match loc[r] {
        Loc::Buf => true,
        Loc::Once => count == 1,
        Loc::InPlace => (0..count).all(|row| offs[row * n_ops + r] == offs[r] + (row * n) as isize),
    };
    let row_ptr = |r: usize, row: usize| -> *mut u8 {
        match (loc[r], chain.per_row[r]) {
            // SAFETY: the offset of an element of the operand, as the caller promised.
            (Loc::InPlace, _) => unsafe { chain.operands[r].at(offs[row * n_ops + r]) },
            (Loc::Once, _) => buf[r],
            // SAFETY: within the register's buffer, room for `count` rows of its kind.
            (Loc::Buf, true) => unsafe { buf[r].offset(row as isize * z(r)) },
            // SAFETY: as above.
            (Loc::Buf, false) => unsafe { buf[r].offset((row * n) as isize * z(r)) },
        }
    };
    // The inputs that are not read in place, gathered: a full one's rows along its stride, a
    // per-row one's element of each row.
    for (k, o) in chain.operands.iter().enumerate() {
        if chain.written[k] || loc[k] != Loc::Buf {
            continue;
        }
        for row in 0..count {
            // SAFETY: the offset of an element of input `k`, as the caller promised.
            let from = unsafe { o.at(offs[row * n_ops + k]) };
            match chain.per_row[k] {
                // SAFETY: one element of input `k` into its row's slot of the buffer.
                true => unsafe { copy_strided(from, 0, row_ptr(k, row), z(k), 1, o.size) },
                // SAFETY: the row's `n` elements of input `k` along its stride (0: one element
                // repeated) into the buffer's row.
                false => unsafe {
                    let s = o.strides[rank - 1] * z(k);
                    copy_strided(from, s, row_ptr(k, row), z(k), n, o.size)
                },
            }
        }
    }
    for st in chain.steps {
        match *st {
            RowStep::Fold {
                run,
                identity,
                out,
                src,
            } => {
                // SAFETY: `count` slots of the per-row register, filled with the identity; then
                // each row's `n` contiguous elements of `src` folded into its slot.
                unsafe {
                    copy_strided(identity, 0, buf[out], z(out), count, chain.sizes[out]);
                    for row in 0..count {
                        let blk = Block {
                            n,
                            inner: [0, 1],
                            rows: 1,
                            step: [0, 0],
                        };
                        run(std::ptr::null(), row_ptr(out, row), row_ptr(src, row), blk);
                    }
                }
            }
            RowStep::Map { kernel, out, args } => {
                let args = &args[..kernel.inputs()];
                let whole = chain.per_row[out]
                    || (dense(out) && args.iter().all(|&a| !chain.per_row[a] && dense(a)));
                if whole {
                    // Every operand's rows are contiguous: one call over the tile.
                    let len = if chain.per_row[out] { count } else { count * n };
                    let mut ptrs = [std::ptr::null_mut(); 4];
                    ptrs[0] = row_ptr(out, 0);
                    for (j, &a) in args.iter().enumerate() {
                        ptrs[j + 1] = row_ptr(a, 0);
                    }
                    // SAFETY: `len` elements of each register, of the kernel's types.
                    unsafe { call(kernel, ptrs, len) };
                    continue;
                }
                for row in 0..count {
                    let mut ptrs = [std::ptr::null_mut(); 4];
                    ptrs[0] = row_ptr(out, row);
                    for (j, &a) in args.iter().enumerate() {
                        ptrs[j + 1] = match chain.per_row[a] {
                            false => row_ptr(a, row),
                            true => {
                                // SAFETY: the row's element of `a` repeated into a splat row.
                                unsafe {
                                    copy_strided(
                                        row_ptr(a, row),
                                        0,
                                        splat[j],
                                        z(a),
                                        n,
                                        z(a) as usize,
                                    )
                                };
                                splat[j]
                            }
                        };
                    }
                    // SAFETY: `n` elements of each operand, of the kernel's types.
                    unsafe { call(kernel, ptrs, n) };
                }
            }
        }
    }
    // The outputs kept in buffers, to their places.
    for (k, o) in chain.operands.iter().enumerate() {
        if !chain.written[k] || loc[k] == Loc::InPlace {
            continue;
        }
        for row in 0..count {
            // SAFETY: output `k`'s elements of this row, this thread's alone.
            unsafe {
                let to = o.at(offs[row * n_ops + k]);
                match chain.per_row[k] {
                    true => copy_strided(row_ptr(k, row), 0, to, 0, 1, o.size),
                    false if stream_out[k] => {
                        stream::copy_streaming(row_ptr(k, row), to, n * o.size)
                    }
                    false => {
                        let s = o.strides[rank - 1] * z(k);
                        copy_strided(row_ptr(k, row), z(k), to, s, n, o.size)
                    }
                }
            }
        }
    }
}

/// One kernel call over `len` elements: `ptrs[0]` the output, then the inputs.
///
/// # Safety
/// As [`super::table::Run`].
unsafe fn call(kernel: Kernel, p: [*mut u8; 4], len: usize) {
    // SAFETY: as the caller promised.
    unsafe {
        match kernel {
            Kernel::Map(run) => run([p[0], p[1]], len),
            Kernel::Zip(run) => run([p[0], p[1], p[2]], len),
            Kernel::Zip3(run) => run(p, len),
        }
    }
}
