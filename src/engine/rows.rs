//! The executor of compiled programs: a chain of table kernels, and of folds over the last
//! dim, run a tile at a time, as numexpr runs an expression over blocks and PyTorch's CPU
//! softmax and layer norm run over rows. Each tile goes through every step while it is in
//! cache, so each input is read from memory once and each output written once; intermediates
//! live in this thread's buffers.
//!
//! Registers are full (an element per index of the shape) or per row (one element per row of
//! the last dim: a reduced value). A chain with per-row registers runs over its shape as it
//! is, whole rows at a time: a full step reads a per-row register as a splat along the row,
//! and a fold runs the table fold ([`FoldFn`]) once per row over the row's `n` contiguous
//! elements, which is how [`super::reduce::reduce_table`] folds a row that is contiguous in
//! memory, so its results are a reduction's run alone, bit for bit. Its tiles are rows taken
//! together up to 16 KiB of a register; a large one's over rows of half a chunk or more run a
//! row at a time, each register's place found once per row, its registers in L1
//! ([`rows_in_line`]). A chain without them
//! takes the planner's dims ([`Plan`]: size-1 dims dropped, ordered by the written operands'
//! strides, contiguous dims merged) and runs in chunks of its inner dim; over one or two dims
//! with rows of more than half a chunk and no transpose, a chunk of one row at a time, each
//! step's pointers found from the row and the column ([`chunks_in_line`]).
//!
//! An input whose rows are contiguous is read in place, other inputs are gathered into the
//! tile's buffer (one that is the same for every row once per range; one read across its rows,
//! a transpose, in a chain without folds, by the register transposes ([`transpose_tile`]), a
//! tile of 32 rows by a few hundred columns at a time); an output is written in
//! place, or from the buffer: along its stride, or, for a large chain, with non-temporal
//! stores ([`stream`]). In a large chain (with folds, or without and with two steps or more
//! per input it reads in full), each tile or chunk asks for the next one's inputs read in
//! place a part before each of its steps, so that memory streams while the steps compute
//! ([`ask_ahead`]; a chain run a row at a time asks into L2). The tiles are split over
//! threads ([`parallel::split`]); each thread's buffers are its staging buffer
//! ([`stage::with_staging`]), kept from call to call.

use super::caches::caches;
use super::kernel::{Block, Line};
use super::operand::{Operand, Shared, Strides};
use super::parallel;
use super::plan::Plan;
use super::reduce::FoldFn;
use super::stage;
use super::stream;
use super::table::{copy_strided, splat_rows, Kernel};
use super::transpose::transpose_tile;
use crate::error::{BroadcastError, Result};
use smallvec::SmallVec;

/// The most operands (inputs and outputs) of a chain without per-row registers: the planner
/// takes a fixed number.
pub(crate) const MAX_OPERANDS: usize = 16;

/// The steps per input read in full from which a chain without folds fetches ahead: with fewer,
/// its inputs' streams keep memory busy, and the requests only cost (`docs/experiments.md`).
const PREFETCH_STEPS: usize = 2;

/// Rows of a tile in a chain without folds that reads an input across its rows (a transpose):
/// the rows of a register transpose's reads, each a cache line or more of the source.
const ACROSS_ROWS: usize = 32;

/// One step of a chain.
#[derive(Clone, Copy, Debug)]
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
    /// from the chain's identity number `identity`.
    Fold {
        run: FoldFn,
        identity: usize,
        out: usize,
        src: usize,
    },
}

/// A chain over `shape` (its last dim the rows'). Registers `0..operands.len()` are the
/// operands' (an input's is read from it; an output's, `written`, is stored to it); the others
/// are intermediates. A full operand is seen at `shape`, a per-row one at `shape` without its
/// last dim. `per_row` and `sizes` give every register's kind and element size; `identities`
/// the elements the folds start from. An output with
/// `final_output` is read by nothing after the chain: a large chain may stream it past the
/// cache (one that is read next is better left to the cache's way).
pub(crate) struct RowChain<'a> {
    pub operands: &'a [Operand<'a>],
    pub written: &'a [bool],
    pub final_output: &'a [bool],
    pub per_row: &'a [bool],
    pub sizes: &'a [usize],
    pub steps: &'a [RowStep],
    pub identities: &'a [Shared],
}

/// Where a tile's register is: its buffer (rows `pitch` elements apart), its operand's rows in
/// place (a full input or output with unit stride along the rows), or its buffer filled once
/// per range (an input that is the same for every row).
#[derive(Clone, Copy, PartialEq)]
enum Loc {
    Buf,
    InPlace,
    Once,
}

/// What every tile of a walk shares.
struct Walk<'a> {
    chain: &'a RowChain<'a>,
    /// The dims of the rows, and each operand's strides at the walk's dims (a per-row one's at
    /// the outer dims).
    outer: &'a [usize],
    strides: &'a [Strides],
    /// Operand `k`'s move from a row to the next when the outer index carries into dim `d`
    /// (the dims after it back to 0): `steps[d * operands + k]`.
    steps: &'a [isize],
    /// How many rows of each operand, from a multiple of that many, follow one another in
    /// memory (`n` elements apart).
    spans: &'a [usize],
    /// The rows' length, and a full buffer row's (whole rows, or a chunk of one).
    n: usize,
    pitch: usize,
    loc: &'a [Loc],
    /// The inputs gathered by register transposes.
    across: &'a [bool],
    /// The outputs kept in the buffer and copied out with non-temporal stores.
    stream_out: &'a [bool],
    /// The inputs gathered into the buffer at each tile, and the outputs copied out of it.
    gathered: &'a [usize],
    copied: &'a [usize],
    /// Whether each tile fetches the next tile of its inputs read in place, a part before each
    /// step, while the step computes ([`ask_ahead`]).
    prefetch: bool,
}

/// Runs `chain` over `shape`.
///
/// # Safety
/// Each step's kernel or fold is a table one for its registers' element types (an output's of
/// `sizes[out]` bytes, with no drop glue), each fold's identity an element of its type; every
/// register a step reads is an input operand or written by an earlier step; each written
/// operand addresses, at every index of its shape, a distinct slot of its type that nothing
/// else touches, and is written by exactly one step; the inputs are seen at their shapes. A
/// chain with per-row registers has rank 1 or more; one without has at most [`MAX_OPERANDS`]
/// operands.
///
/// # Errors
/// [`BroadcastError::Allocation`], having written nothing, when the calling thread's buffers
/// for a tile cannot be allocated (rows of hundreds of MiB). A pool thread that cannot allocate
/// what the caller could panics.
pub(crate) unsafe fn run(shape: &[usize], chain: &RowChain<'_>) -> Result<()> {
    let n_ops = chain.operands.len();
    let sizes = caches();
    let by_rows = chain.per_row.iter().any(|&p| p);
    let (dims, strides) = loop_dims(shape, chain, by_rows);
    let rank = dims.len();
    assert!(rank > 0, "a chain over rows of some length");
    let (outer, n) = (&dims[..rank - 1], dims[rank - 1]);
    let m: usize = outer.iter().product();
    if m == 0 || n == 0 {
        assert!(!by_rows, "a chain with folds over an empty shape");
        return Ok(());
    }
    let regs = chain.sizes.len();
    let widest = chain.sizes.iter().copied().max().unwrap_or(1).max(1);
    // The inputs read across their rows (a unit stride from row to row, a long one along
    // them), of plain elements: gathered a tile of rows at a time by register transposes.
    let mut across = vec![false; n_ops];
    if !by_rows && rank >= 2 {
        for (k, o) in chain.operands.iter().enumerate() {
            let (down, along) = (strides[k][rank - 2], strides[k][rank - 1]);
            across[k] = !chain.written[k] && o.plain && down == 1 && along.unsigned_abs() >= 8;
        }
    }
    // The bytes the chain moves, and how many of its inputs it reads in full (streams).
    let (mut traffic, mut streams) = (0usize, 0usize);
    for (o, &written) in chain.operands.iter().zip(chain.written) {
        let bytes = o.traffic(m.saturating_mul(n));
        traffic = traffic.saturating_add(bytes);
        streams += usize::from(!written && bytes > 0);
    }
    // A large chain's contiguous outputs are computed in the buffer and copied out with
    // non-temporal stores: no read of the lines they overwrite.
    let streamed = stream::may_stream(traffic);
    // A chain with folds whose inputs come from memory (one larger than a core's caches) over
    // rows of half a chunk or more: a row at a time, its registers in L1 ([`rows_in_line`]).
    // (A row's bytes saturate: a row too long to address is refused below, never sized from a
    // wrapped product.)
    let row_bytes = n.saturating_mul(widest);
    let one_row =
        by_rows && row_bytes >= sizes.chunk() / 2 && (streamed || traffic >= sizes.prefetch_min());
    let (pitch, rows) = match by_rows {
        true if one_row => (n, 1),
        true => (n, (sizes.row_tile() / row_bytes).clamp(1, m)),
        false => chunk_shape(across.contains(&true), (m, n), widest),
    };
    let chunks = n.div_ceil(pitch);
    let (loc, stream_out) = locations(chain, &strides, (rank, n, chunks), streamed);
    let Some((first_line, total, splat_lines)) = buffer_lines(chain, rows, pitch, widest) else {
        return Err(BroadcastError::Allocation {
            op: "run",
            shape: shape.into(),
            bytes: None,
        });
    };
    let (mut gathered, mut copied) = (Vec::new(), Vec::new());
    for k in (0..n_ops).filter(|&k| loc[k] == Loc::Buf) {
        match chain.written[k] {
            false => gathered.push(k),
            true => copied.push(k),
        }
    }
    let (steps, spans) = outer_steps(outer, n, &strides);
    // Chains without folds fetch ahead where their traffic passes the last-level cache (their
    // outputs stream) and they compute long enough per input stream to leave memory idle.
    let prefetch = match by_rows {
        true => streamed || traffic >= sizes.prefetch_min(),
        false => streamed && chain.steps.len() >= PREFETCH_STEPS * streams,
    };
    let walk = Walk {
        chain,
        outer,
        strides: &strides,
        steps: &steps,
        spans: &spans,
        n,
        pitch,
        loc: &loc,
        across: &across,
        stream_out: &stream_out,
        gathered: &gathered,
        copied: &copied,
        prefetch,
    };
    if stage::with_staging(total, |_| ()).is_none() {
        return Err(BroadcastError::Allocation {
            op: "run",
            shape: shape.into(),
            bytes: total.checked_mul(64),
        });
    }
    // No folds, one outer dim at most, a chunk per unit and no input read across its rows:
    // chunks in a line, no tile bookkeeping.
    let in_line = !by_rows && outer.len() <= 1 && rows == 1 && !across.contains(&true);
    // A unit is a tile: a block of `rows` rows (the last one's rest), a chunk of columns.
    let units = m.div_ceil(rows) * chunks;
    parallel::split(units, parallel::pieces(traffic), 1, &|range| {
        let work = |buffer: &mut [Line]| {
            let base = buffer.as_mut_ptr().cast::<u8>();
            let mut buf: Vec<*mut u8> = Vec::with_capacity(regs);
            for &l in &first_line {
                // SAFETY: each register's lines are within the buffer.
                buf.push(unsafe { base.add(l * 64) });
            }
            // SAFETY: as above.
            let splat: [*mut u8; 3] =
                std::array::from_fn(|j| unsafe { base.add((total - (3 - j) * splat_lines) * 64) });
            // SAFETY: each register's buffer holds `rows` rows at the pitch.
            unsafe { fill_once(&walk, &buf, rows) };
            if in_line {
                // SAFETY: as the caller promised of the chain; the buffers are this thread's,
                // the inputs read once filled.
                unsafe { chunks_in_line(&walk, &buf, range) };
            } else if one_row {
                // SAFETY: as above.
                unsafe { rows_in_line(&walk, &buf, splat, range) };
            } else {
                let mut offs = vec![0isize; rows * n_ops];
                for unit in range {
                    let (first, c0) = (unit / chunks * rows, unit % chunks * pitch);
                    let (count, width) = (rows.min(m - first), pitch.min(n - c0));
                    // SAFETY: as the caller promised of the chain; the buffers are this
                    // thread's.
                    unsafe { tile(&walk, first, count, c0, width, &buf, splat, &mut offs) };
                }
            }
            #[cfg(target_arch = "x86_64")]
            if streamed {
                // SAFETY: a store fence has no preconditions; it orders this thread's
                // non-temporal stores before the end of its part of the chain.
                unsafe { std::arch::x86_64::_mm_sfence() };
            }
        };
        if stage::with_staging(total, work).is_none() {
            // No memory on a pool thread for what the caller's thread could allocate: an abort
            // is not an option, nor is a wrong result.
            panic!("a chain's buffers ({total} cache lines) could not be allocated");
        }
    });
    Ok(())
}

/// Where each register lives ([`Loc`]), and which outputs stream from the buffer (`streamed`
/// chains' final outputs, contiguous along the rows): over rows of `n` in `chunks` chunks, the
/// walk's dims `rank`.
fn locations(
    chain: &RowChain<'_>,
    strides: &[Strides],
    (rank, n, chunks): (usize, usize, usize),
    streamed: bool,
) -> (Vec<Loc>, Vec<bool>) {
    let n_ops = chain.operands.len();
    let last = |k: usize| match chain.per_row[k] {
        true => None,
        false => Some(strides[k][rank - 1]),
    };
    let contiguous = |k: usize| last(k) == Some(1) || (n == 1 && last(k).is_some());
    let mut stream_out = Vec::with_capacity(n_ops);
    for k in 0..n_ops {
        stream_out.push(streamed && chain.written[k] && chain.final_output[k] && contiguous(k));
    }
    // The same for every row: no outer stride, and the same in every chunk of a row.
    let same_rows = |k: usize| {
        strides[k][..rank - 1].iter().all(|&s| s == 0) && (chunks == 1 || last(k) == Some(0))
    };
    let mut loc = Vec::with_capacity(chain.sizes.len());
    for r in 0..chain.sizes.len() {
        let full = r < n_ops && last(r).is_some();
        loc.push(
            match full && contiguous(r) && stream_out.get(r) == Some(&false) {
                true => Loc::InPlace,
                false if full && !chain.written[r] && same_rows(r) => Loc::Once,
                false => Loc::Buf,
            },
        );
    }
    (loc, stream_out)
}

/// Chunks of the rows (`(m, n)`) for a chain without folds, `(pitch, rows)`: 4 KiB of the
/// widest register, whole rows where they fit; tiles of rows and columns where an input is
/// read across its rows (`across`), to gather with register transposes.
fn chunk_shape(across: bool, (m, n): (usize, usize), widest: usize) -> (usize, usize) {
    let sizes = caches();
    if across {
        let rows = ACROSS_ROWS.min(m);
        return ((sizes.across_tile() / (rows * widest)).clamp(1, n), rows);
    }
    let pitch = (sizes.chunk() / widest).clamp(1, n);
    let rows = if pitch == n {
        sizes.chunk() / (n * widest)
    } else {
        1
    };
    (pitch, rows.clamp(1, m))
}

/// Fills the buffers of the inputs every row reads alike ([`Loc::Once`]) for a thread's range:
/// `rows` rows, so that a tile's kernels read them as they read the others.
///
/// # Safety
/// `buf[k]` has room for `rows` rows of input `k` at the walk's pitch.
unsafe fn fill_once(walk: &Walk<'_>, buf: &[*mut u8], rows: usize) {
    let rank = walk.outer.len() + 1;
    for k in (0..walk.chain.operands.len()).filter(|&k| walk.loc[k] == Loc::Once) {
        let (o, s) = (&walk.chain.operands[k], walk.strides[k][rank - 1]);
        let z = o.size as isize;
        for row in 0..rows {
            // SAFETY: a buffer row of input `k` from its first element along its stride (the
            // same in every chunk when there are several) into its buffer, as the caller
            // promised room for.
            unsafe {
                let to = buf[k].offset((row * walk.pitch) as isize * z);
                copy_strided(o.at(0), s * z, to, z, walk.pitch, o.size)
            };
        }
    }
}

/// The dims a chain loops over and each operand's strides there: the chain's own shape where
/// it has per-row registers (its folds need its rows), else the engine planner's merged and
/// ordered dims, the written operands walked in memory order.
fn loop_dims(shape: &[usize], chain: &RowChain<'_>, by_rows: bool) -> (Vec<usize>, Vec<Strides>) {
    let n_ops = chain.operands.len();
    let mut strides: Vec<Strides> = Vec::with_capacity(n_ops);
    if by_rows {
        for o in chain.operands {
            strides.push(Strides::from_slice(&o.strides));
        }
        return (shape.to_vec(), strides);
    }
    assert!(n_ops <= MAX_OPERANDS, "at most {MAX_OPERANDS} operands");
    let zeros = vec![0isize; shape.len()];
    let at: [&[isize]; MAX_OPERANDS] =
        std::array::from_fn(|k| chain.operands.get(k).map_or(&zeros[..], |o| &o.strides[..]));
    let mut priority = [0; MAX_OPERANDS];
    let mut slot = 0;
    for first in [true, false] {
        for k in 0..MAX_OPERANDS {
            if (chain.written.get(k) == Some(&true)) == first {
                priority[slot] = k;
                slot += 1;
            }
        }
    }
    let plan = Plan::new(shape, at, priority);
    for k in 0..n_ops {
        strides.push(plan.strides.iter().map(|s| s[k]).collect());
    }
    (plan.dims.to_vec(), strides)
}

/// Each register's first line in a thread's buffer (`rows` rows of `pitch` elements, one a
/// row for a per-row register), the buffer's lines with three splat rows of the `widest`
/// element after them, and a splat row's lines; `None` where the sizes overflow.
fn buffer_lines(
    chain: &RowChain<'_>,
    rows: usize,
    pitch: usize,
    widest: usize,
) -> Option<(Vec<usize>, usize, usize)> {
    let lines = |elements: usize, size: usize| {
        let bytes = rows.checked_mul(elements)?.checked_mul(size)?;
        Some(bytes.div_ceil(64))
    };
    let mut first_line = Vec::with_capacity(chain.sizes.len());
    let mut total = 0usize;
    for (r, &size) in chain.sizes.iter().enumerate() {
        first_line.push(total);
        let per_row = if chain.per_row[r] { 1 } else { pitch };
        total = total.checked_add(lines(per_row, size)?)?;
    }
    let splat_lines = lines(pitch, widest)?;
    let total = total.checked_add(splat_lines.checked_mul(3)?)?;
    Some((first_line, total, splat_lines))
}

/// Each operand's move from one row to the next where the outer index carries into dim `d`
/// (`steps[d * operands + k]`: a carry into `d` wraps every dim after it), and how many rows
/// of each follow one another in memory from its first (`spans`; a dim of one row never
/// moves).
fn outer_steps(outer: &[usize], n: usize, strides: &[Strides]) -> (Vec<isize>, Vec<usize>) {
    let n_ops = strides.len();
    let mut steps = vec![0isize; outer.len() * n_ops];
    let mut spans = vec![1usize; n_ops];
    for k in 0..n_ops {
        let mut wrapped = 0;
        for d in (0..outer.len()).rev() {
            steps[d * n_ops + k] = strides[k][d] - wrapped;
            wrapped += (outer[d] as isize - 1) * strides[k][d];
        }
        for d in (0..outer.len()).rev() {
            if outer[d] > 1 && strides[k][d] != (spans[k] * n) as isize {
                break;
            }
            spans[k] *= outer[d];
        }
    }
    (steps, spans)
}

/// A register's first element and its moves, in bytes, by a row and by an element of a row (0
/// and 0 for a buffer).
type Place = (*mut u8, isize, isize);

/// A kernel, and its operands' registers (output first).
type Call = (Kernel, [Place; 4]);

/// The chain over units `range`, a chunk of `pitch` elements of one row each, when it has no
/// folds, at most one outer dim, a chunk per unit and no input read across its rows: each
/// step's operands are found from the unit's row and first column by their strides, so a unit
/// costs a kernel call per step, the copies its gathered inputs and buffered outputs need, and
/// none of a tile's bookkeeping.
///
/// # Safety
/// As [`run`], for such a chain; `buf` is this thread's buffers, each register's room for a
/// chunk, the inputs read once filled.
unsafe fn chunks_in_line(walk: &Walk<'_>, buf: &[*mut u8], range: std::ops::Range<usize>) {
    let Walk {
        chain,
        outer,
        strides,
        n,
        pitch,
        loc,
        stream_out,
        gathered,
        copied,
        prefetch,
        ..
    } = *walk;
    let rank = outer.len() + 1;
    let chunks = n.div_ceil(pitch);
    // Operand `k`'s first element and its moves by a row and along a row, in bytes.
    let place = |k: usize| -> Place {
        let (o, s) = (&chain.operands[k], &strides[k]);
        let z = o.size as isize;
        let by_row = if rank == 2 { s[0] * z } else { 0 };
        // SAFETY: offset 0 is the operand's first element.
        (unsafe { o.at(0) }, by_row, s[rank - 1] * z)
    };
    // The inputs gathered and the outputs copied out, with their places.
    let gathered: SmallVec<[(usize, Place); 4]> = gathered.iter().map(|&k| (k, place(k))).collect();
    let copied: SmallVec<[(usize, Place); 4]> = copied.iter().map(|&k| (k, place(k))).collect();
    let mut steps: SmallVec<[Call; 16]> = SmallVec::new();
    for st in chain.steps {
        let RowStep::Map { kernel, out, args } = *st else {
            unreachable!("a chain with folds runs by rows")
        };
        let mut regs = [(std::ptr::null_mut(), 0, 0); 4];
        for (j, &r) in [out, args[0], args[1], args[2]].iter().enumerate() {
            regs[j] = match loc[r] {
                Loc::InPlace => place(r),
                Loc::Buf | Loc::Once => (buf[r], 0, 0),
            };
        }
        steps.push((kernel, regs));
    }
    // The inputs read in place, where the chain fetches ahead: each unit asks for the next
    // unit's piece of each along its steps (past the array after the last unit: a prefetch
    // never faults).
    let ahead: SmallVec<[(Place, usize); 4]> = (0..chain.operands.len())
        .filter(|&k| prefetch && !chain.written[k] && loc[k] == Loc::InPlace)
        .map(|k| (place(k), pitch * chain.operands[k].size))
        .collect();
    let mut next: SmallVec<[(*const u8, usize); 4]> = SmallVec::new();
    for unit in range {
        let (row, c0) = ((unit / chunks) as isize, unit % chunks * pitch);
        let (width, col) = (pitch.min(n - c0), c0 as isize);
        let elem = |(p, by_row, along): Place| {
            // SAFETY: element `(row, c0)` of an operand, the unit's first (every unit's row and
            // first column are in the shape), or a buffer's first.
            unsafe { p.offset(row * by_row + col * along) }
        };
        for &(k, reg) in &gathered {
            let z = chain.operands[k].size;
            // SAFETY: the unit's `width` elements of input `k` along its stride into its
            // buffer, room for a chunk.
            unsafe { copy_strided(elem(reg), reg.2, buf[k], z as isize, width, z) };
        }
        next.clear();
        let (nrow, ncol) = (
            ((unit + 1) / chunks) as isize,
            ((unit + 1) % chunks * pitch) as isize,
        );
        for &((p, by_row, along), bytes) in &ahead {
            next.push((
                p.wrapping_offset(nrow * by_row + ncol * along).cast_const(),
                bytes,
            ));
        }
        for (j, (kernel, regs)) in steps.iter().enumerate() {
            ask_ahead(&next, j, steps.len());
            let ptrs = regs.map(elem);
            // SAFETY: `width` elements of each register from there, of the kernel's types: an
            // operand's piece of the unit's row, or a buffer's room for a chunk.
            unsafe { call(*kernel, ptrs, width) };
        }
        for &(k, reg) in &copied {
            let z = chain.operands[k].size;
            // SAFETY: the unit's `width` elements of output `k`, this thread's alone, from its
            // buffer; a streamed one's are contiguous.
            unsafe {
                match stream_out[k] {
                    true => stream::copy_streaming(buf[k], elem(reg), width * z),
                    false => copy_strided(buf[k], z as isize, elem(reg), reg.2, width, z),
                }
            }
        }
    }
}

/// The chain over rows `range`, a row at a time, when it folds, its rows are half a chunk or
/// more and its inputs come from memory: each register's place in the row is found once per
/// row (an operand's by the move of the dim the outer index carries into), and each step is
/// one kernel or fold call, its registers in L1. Tiles of 16 KiB pay their bookkeeping once
/// for several rows but keep their registers in L2 only: on rows of 512 `f32`s or more this
/// loop is faster, on shorter ones the tiles are (`docs/experiments.md`).
///
/// # Safety
/// As [`run`], for a chain with folds; `buf` and `splat` are this thread's, each register's
/// room for a row of its kind and each splat for a row of the widest elements, the inputs read
/// once filled.
unsafe fn rows_in_line(
    walk: &Walk<'_>,
    buf: &[*mut u8],
    splat: [*mut u8; 3],
    range: std::ops::Range<usize>,
) {
    let Walk {
        chain,
        outer,
        strides,
        steps: moves,
        n,
        loc,
        stream_out,
        gathered,
        copied,
        ..
    } = *walk;
    let n_ops = chain.operands.len();
    let rank = outer.len() + 1;
    let per_row = chain.per_row;
    // The first row's outer index and each operand's offset; each next row's by the move of
    // the dim its outer index carries into.
    let mut index = outer_index(outer, range.start);
    let mut offs: SmallVec<[isize; 16]> = (0..n_ops).map(|k| offset(&index, &strides[k])).collect();
    let mut next = offs.clone();
    let in_place: SmallVec<[usize; 16]> = (0..n_ops).filter(|&k| loc[k] == Loc::InPlace).collect();
    // The inputs read in place whose rows move (one whose rows are all one stays in cache):
    // each row asks for the next row's into L2, a part before each step, so that memory streams
    // while the steps compute (into L1, the requests stall the steps: `docs/experiments.md`);
    // `cuts` gives the lines of each asked for before each step.
    let moves_on = |k: usize| strides[k][..rank - 1].iter().any(|&s| s != 0);
    let ahead_of: SmallVec<[usize; 16]> = in_place
        .iter()
        .copied()
        .filter(|&k| !chain.written[k] && moves_on(k))
        .collect();
    let parts = chain.steps.len();
    let mut cuts: SmallVec<[std::ops::Range<usize>; 64]> = SmallVec::new();
    for &k in &ahead_of {
        let lines = (n * chain.operands[k].size).div_ceil(64);
        cuts.extend((0..parts).map(|j| lines * j / parts..lines * (j + 1) / parts));
    }
    let mut ahead: SmallVec<[*const u8; 4]> = smallvec::smallvec![std::ptr::null(); ahead_of.len()];
    let mut p: SmallVec<[*mut u8; 32]> = buf.iter().copied().collect();
    let (p, ahead, cuts, offs, next) = (
        &mut p[..],
        &mut ahead[..],
        &cuts[..],
        &mut offs[..],
        &mut next[..],
    );
    for _ in range {
        // The next row's offsets (past the shape after its last row: only asked for).
        let d = next_row(&mut index, outer);
        for k in 0..n_ops {
            next[k] = offs[k] + moves.get(d * n_ops + k).copied().unwrap_or(0);
        }
        for &k in &in_place {
            // SAFETY: the offset of the row's first element of operand `k`, in the shape.
            p[k] = unsafe { chain.operands[k].at(offs[k]) };
        }
        for (i, &k) in ahead_of.iter().enumerate() {
            let o = &chain.operands[k];
            // SAFETY: offset 0 is the operand's first element; the next row's place is only
            // asked for (past the operand after the last row).
            let at = unsafe { o.at(0) }.wrapping_offset(next[k] * o.size as isize);
            ahead[i] = at.cast_const();
        }
        for &k in gathered {
            let o = &chain.operands[k];
            let z = o.size;
            // SAFETY: the row's element of a per-row input, or its `n` elements along its
            // stride (0: one repeated), into its buffer, room for a row.
            unsafe {
                let from = o.at(offs[k]);
                match per_row[k] {
                    true => copy_strided(from, 0, buf[k], z as isize, 1, z),
                    false => {
                        let s = strides[k][rank - 1] * z as isize;
                        copy_strided(from, s, buf[k], z as isize, n, z)
                    }
                }
            }
        }
        for (j, st) in chain.steps.iter().enumerate() {
            for (i, &from) in ahead.iter().enumerate() {
                let lines = &cuts[i * parts + j];
                let mut at = from.wrapping_add(lines.start * 64);
                for _ in lines.clone() {
                    prefetch_to_l2(at);
                    at = at.wrapping_add(64);
                }
            }
            // SAFETY: as the caller promised, for this row's registers.
            unsafe { row_step(chain, st, p, splat, n) };
        }
        for &k in copied {
            let o = &chain.operands[k];
            let z = o.size;
            // SAFETY: output `k`'s elements of this row, this thread's alone; a streamed
            // one's are contiguous.
            unsafe {
                let to = o.at(offs[k]);
                match (per_row[k], stream_out[k]) {
                    (true, _) => copy_strided(buf[k], 0, to, 0, 1, z),
                    (false, true) => stream::copy_streaming(buf[k], to, n * z),
                    (false, false) => {
                        let s = strides[k][rank - 1] * z as isize;
                        copy_strided(buf[k], z as isize, to, s, n, z)
                    }
                }
            }
        }
        offs.copy_from_slice(next);
    }
}

/// One step of a chain over one row of `n` ([`rows_in_line`]), `p` each register's place in
/// the row, a per-row value repeated along a splat row where a kernel reads it beside a row.
///
/// # Safety
/// As [`rows_in_line`]: `p` addresses each register's row (a per-row register's slot), the
/// splat rows this thread's, room for `n` of the widest elements.
unsafe fn row_step(
    chain: &RowChain<'_>,
    st: &RowStep,
    p: &[*mut u8],
    splat: [*mut u8; 3],
    n: usize,
) {
    let per_row = chain.per_row;
    match *st {
        RowStep::Fold {
            run,
            identity,
            out,
            src,
        } => {
            // SAFETY: the per-row register's slot, set to the identity, then the row's
            // `n` contiguous elements of `src` folded into it.
            unsafe {
                let z = chain.sizes[out];
                std::ptr::copy_nonoverlapping(chain.identities[identity].0, p[out], z);
                let blk = Block {
                    n,
                    inner: [0, 1],
                    rows: 1,
                    step: [1, 0],
                };
                run(std::ptr::null(), p[out], p[src], blk);
            }
        }
        RowStep::Map { kernel, out, args } => {
            let args = &args[..kernel.inputs()];
            if let Kernel::ZipByRow(_, by_row) = kernel {
                let [a, b] = [args[0], args[1]];
                if !per_row[out] && !per_row[a] && per_row[b] {
                    // SAFETY: the row of `out` and `a` and its value of `b`, of the
                    // kernel's types.
                    unsafe { by_row([p[out], p[a], p[b]], 1, n) };
                    return;
                }
            }
            let mut ptrs = [p[out]; 4];
            for (j, &a) in args.iter().enumerate() {
                ptrs[j + 1] = match per_row[a] && !per_row[out] {
                    false => p[a],
                    true => {
                        // SAFETY: the row's value of `a` repeated into a splat row.
                        unsafe {
                            let z = chain.sizes[a];
                            copy_strided(p[a], 0, splat[j], z as isize, n, z)
                        };
                        splat[j]
                    }
                };
            }
            let len = if per_row[out] { 1 } else { n };
            // SAFETY: `len` elements of each register, of the kernel's types.
            unsafe { call(kernel, ptrs, len) };
        }
    }
}

/// Runs the chain over rows `first..first + count`, columns `c0..c0 + width`.
///
/// # Safety
/// As [`run`]; `buf` and `splat` are this thread's, each register's room for `count` rows of
/// its kind at the walk's pitch and each splat for as many of the widest elements; `offs` has
/// room for `count` rows of every operand.
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    walk: &Walk<'_>,
    first: usize,
    count: usize,
    c0: usize,
    width: usize,
    buf: &[*mut u8],
    splat: [*mut u8; 3],
    offs: &mut [isize],
) {
    let Walk {
        chain,
        outer,
        strides,
        steps,
        spans,
        n,
        pitch,
        loc,
        ..
    } = *walk;
    let n_ops = chain.operands.len();
    let rank = outer.len() + 1;
    // The first row's outer index and offsets, then each next row's by the step of the dim its
    // outer index carries into (no division per row).
    let mut index = outer_index(outer, first);
    for k in 0..n_ops {
        let at = offset(&index, &strides[k]);
        offs[k] = match chain.per_row[k] {
            true => at,
            false => at + c0 as isize * strides[k][rank - 1],
        };
    }
    // (Several rows only over outer dims: one row is all there is without them.)
    for row in 1..count {
        let d = next_row(&mut index, outer);
        for k in 0..n_ops {
            offs[row * n_ops + k] = offs[(row - 1) * n_ops + k] + steps[d * n_ops + k];
        }
    }
    // Whether a register's rows of this tile follow one another in memory (whole rows only;
    // a tile of one row is, in every register).
    let dense = |r: usize| match loc[r] {
        Loc::Buf | Loc::Once => width == pitch,
        Loc::InPlace => width == n && first / spans[r] == (first + count - 1) / spans[r],
    };
    let regs = chain.sizes.len();
    let t = Tile {
        walk,
        count,
        width,
        buf,
        offs,
        dense: (0..regs).map(|r| count == 1 || dense(r)).collect(),
    };
    // SAFETY: as the caller promised, for every part of the tile.
    unsafe {
        t.gather();
        t.steps(splat);
        t.copy_out();
    }
}

/// A tile's rows of every operand: where each register's rows start ([`Tile::at`]), and
/// whether they follow one another. Made only by [`tile`], whose caller promised that the
/// operands' offsets and the buffers are as it says.
struct Tile<'t> {
    walk: &'t Walk<'t>,
    count: usize,
    width: usize,
    buf: &'t [*mut u8],
    /// Each row's offset of each operand (`offs[row * operands + k]`).
    offs: &'t [isize],
    dense: SmallVec<[bool; 16]>,
}

impl Tile<'_> {
    fn z(&self, r: usize) -> isize {
        self.walk.chain.sizes[r] as isize
    }

    /// Register `r`'s first element in the tile's row `row`.
    fn at(&self, r: usize, row: usize) -> *mut u8 {
        let (chain, n_ops) = (self.walk.chain, self.walk.chain.operands.len());
        match (self.walk.loc[r], chain.per_row[r]) {
            // SAFETY: the offset of an element of the operand, as `tile`'s caller promised.
            (Loc::InPlace, _) => unsafe { chain.operands[r].at(self.offs[row * n_ops + r]) },
            // SAFETY: within the register's buffer, room for `count` rows of its kind.
            (Loc::Buf, true) => unsafe { self.buf[r].offset(row as isize * self.z(r)) },
            // SAFETY: as above.
            (Loc::Buf | Loc::Once, false) => unsafe {
                self.buf[r].offset((row * self.walk.pitch) as isize * self.z(r))
            },
            (Loc::Once, true) => unreachable!("a per-row register is not an input read once"),
        }
    }

    /// The inputs that are not read in place, gathered: a full one's rows along its stride
    /// (rows one element apart through register transposes), a per-row one's element of each
    /// row.
    ///
    /// # Safety
    /// As [`tile`].
    unsafe fn gather(&self) {
        let (walk, count, width) = (self.walk, self.count, self.width);
        let (chain, n_ops, rank) = (walk.chain, walk.chain.operands.len(), walk.outer.len() + 1);
        let offs = self.offs;
        for &k in walk.gathered {
            let o = &chain.operands[k];
            if walk.across[k] {
                let mut row = 0;
                while row < count {
                    let mut end = row + 1;
                    while end < count && offs[end * n_ops + k] == offs[(end - 1) * n_ops + k] + 1 {
                        end += 1;
                    }
                    // SAFETY: rows `row..end` of input `k` start one element apart, each with
                    // `width` elements along its stride, all elements of the input, as the
                    // caller promised; the buffer holds them at the pitch (`width <= pitch`),
                    // this thread's; the input's elements are plain, of a size `plain_size`
                    // gives.
                    unsafe {
                        let (from, along) =
                            (o.at(offs[row * n_ops + k]), walk.strides[k][rank - 1]);
                        let (to, pitch) = (self.at(k, row), walk.pitch as isize);
                        transpose_tile(from, along, 1, to, pitch, o.size, [end - row, width])
                    };
                    row = end;
                }
                continue;
            }
            for row in 0..count {
                // SAFETY: the offset of an element of input `k`, as the caller promised.
                let from = unsafe { o.at(offs[row * n_ops + k]) };
                let (to, z) = (self.at(k, row), self.z(k));
                match chain.per_row[k] {
                    // SAFETY: one element of input `k` into its row's slot of the buffer.
                    true => unsafe { copy_strided(from, 0, to, z, 1, o.size) },
                    // SAFETY: the row's `width` elements of input `k` along its stride (0: one
                    // element repeated) into the buffer's row.
                    false => unsafe {
                        let s = walk.strides[k][rank - 1] * z;
                        copy_strided(from, s, to, z, width, o.size)
                    },
                }
            }
        }
    }

    /// The chain's steps over the tile, the next tile of the inputs read in place asked for a
    /// part before each.
    ///
    /// # Safety
    /// As [`tile`].
    unsafe fn steps(&self, splat: [*mut u8; 3]) {
        let (walk, count, width, dense) = (self.walk, self.count, self.width, &self.dense);
        let (chain, n) = (walk.chain, walk.n);
        // The next tile of the inputs read in place whose tile is one piece of memory (a tile
        // of whole rows that follow one another, or a chunk of one row): it follows this one,
        // the next unit of the thread's range.
        let mut ahead: SmallVec<[(*const u8, usize); 4]> = SmallVec::new();
        if walk.prefetch && (count == 1 || width == n) {
            let read_in_place =
                |k: usize| !chain.written[k] && walk.loc[k] == Loc::InPlace && dense[k];
            for k in (0..chain.operands.len()).filter(|&k| read_in_place(k)) {
                let bytes = count * width * chain.sizes[k];
                ahead.push((self.at(k, 0).cast_const().wrapping_add(bytes), bytes));
            }
        }
        let at = |r: usize, row: usize| self.at(r, row);
        for (j, st) in chain.steps.iter().enumerate() {
            ask_ahead(&ahead, j, chain.steps.len());
            match *st {
                RowStep::Fold {
                    run,
                    identity,
                    out,
                    src,
                } => {
                    // SAFETY: `count` slots of the per-row register, filled with the identity;
                    // then each row's `n` contiguous elements of `src` (whole rows: a chain with
                    // folds is not cut in chunks) folded into its slot.
                    unsafe {
                        let identity = chain.identities[identity].0;
                        copy_strided(
                            identity,
                            0,
                            self.buf[out],
                            self.z(out),
                            count,
                            chain.sizes[out],
                        );
                        // The tile's rows in one call where they are `pitch` apart, else one by
                        // one: each row is folded alone either way.
                        let (rows, step) = if dense[src] {
                            (count, walk.pitch)
                        } else {
                            (1, 0)
                        };
                        for row in (0..count).step_by(rows) {
                            let blk = Block {
                                n: width,
                                inner: [0, 1],
                                rows,
                                step: [1, step as isize],
                            };
                            run(std::ptr::null(), at(out, row), at(src, row), blk);
                        }
                    }
                }
                RowStep::Map { kernel, out, args } => {
                    let args = &args[..kernel.inputs()];
                    let whole = chain.per_row[out]
                        || (dense[out] && args.iter().all(|&a| chain.per_row[a] || dense[a]));
                    if let Kernel::ZipByRow(_, by_row) = kernel {
                        let [a, b] = [args[0], args[1]];
                        if !chain.per_row[out] && !chain.per_row[a] && chain.per_row[b] {
                            // A value per row as the second input, read along its row: the
                            // tile in one call where its rows are contiguous, else row by row.
                            let rows = if whole { count } else { 1 };
                            for row in (0..count).step_by(rows) {
                                // SAFETY: `rows` rows of `out` and `a` from row `row`,
                                // contiguous, and their elements of `b`, of the kernel's types.
                                unsafe {
                                    by_row([at(out, row), at(a, row), at(b, row)], rows, width)
                                };
                            }
                            continue;
                        }
                    }
                    // SAFETY: as the caller promised.
                    unsafe { self.map(kernel, out, args, whole, splat) };
                }
            }
        }
    }

    /// One map step over the tile: in one call where every operand's rows are contiguous
    /// (`whole`; a per-row one's expanded along the rows into a splat tile), else row by row.
    ///
    /// # Safety
    /// As [`tile`]; `kernel` of the registers' types.
    unsafe fn map(
        &self,
        kernel: Kernel,
        out: usize,
        args: &[usize],
        whole: bool,
        splat: [*mut u8; 3],
    ) {
        let (chain, count, width) = (self.walk.chain, self.count, self.width);
        if whole {
            let len = if chain.per_row[out] {
                count
            } else {
                count * width
            };
            let mut ptrs = [std::ptr::null_mut(); 4];
            ptrs[0] = self.at(out, 0);
            for (j, &a) in args.iter().enumerate() {
                ptrs[j + 1] = match chain.per_row[a] && !chain.per_row[out] {
                    false => self.at(a, 0),
                    true => {
                        // SAFETY: the tile's per-row elements of `a` (contiguous in its buffer),
                        // each repeated along its row of the splat tile, room for `count` rows
                        // of `width`.
                        unsafe {
                            splat_rows(self.at(a, 0), splat[j], width, count, self.z(a) as usize)
                        };
                        splat[j]
                    }
                };
            }
            // SAFETY: `len` elements of each register, of the kernel's types.
            unsafe { call(kernel, ptrs, len) };
            return;
        }
        for row in 0..count {
            let mut ptrs = [std::ptr::null_mut(); 4];
            ptrs[0] = self.at(out, row);
            for (j, &a) in args.iter().enumerate() {
                ptrs[j + 1] = match chain.per_row[a] {
                    false => self.at(a, row),
                    true => {
                        // SAFETY: the row's element of `a` repeated into a splat row.
                        unsafe {
                            let (from, z) = (self.at(a, row), self.z(a));
                            copy_strided(from, 0, splat[j], z, width, z as usize)
                        };
                        splat[j]
                    }
                };
            }
            // SAFETY: `width` elements of each operand, of the kernel's types.
            unsafe { call(kernel, ptrs, width) };
        }
    }

    /// The outputs kept in buffers, to their places.
    ///
    /// # Safety
    /// As [`tile`].
    unsafe fn copy_out(&self) {
        let walk = self.walk;
        let (chain, n_ops, rank) = (walk.chain, walk.chain.operands.len(), walk.outer.len() + 1);
        for &k in walk.copied {
            let o = &chain.operands[k];
            for row in 0..self.count {
                // SAFETY: output `k`'s elements of this row, this thread's alone; a streamed
                // one's are contiguous.
                unsafe {
                    let (from, to) = (self.at(k, row), o.at(self.offs[row * n_ops + k]));
                    match chain.per_row[k] {
                        true => copy_strided(from, 0, to, 0, 1, o.size),
                        false if walk.stream_out[k] => {
                            stream::copy_streaming(from, to, self.width * o.size)
                        }
                        false => {
                            let s = walk.strides[k][rank - 1] * self.z(k);
                            copy_strided(from, self.z(k), to, s, self.width, o.size)
                        }
                    }
                }
            }
        }
    }
}

/// The outer index of row `row` over the outer dims `outer` (the last one fastest).
fn outer_index(outer: &[usize], mut row: usize) -> Strides {
    let mut index: Strides = smallvec::smallvec![0; outer.len()];
    for d in (0..outer.len()).rev() {
        index[d] = (row % outer[d]) as isize;
        row /= outer[d];
    }
    index
}

/// An operand's offset at outer index `index`, from its `strides` (the outer dims' first).
fn offset(index: &[isize], strides: &[isize]) -> isize {
    index.iter().zip(strides).map(|(&i, &s)| i * s).sum()
}

/// Moves `index` on to the next row and gives the dim its outer index carries into (0 past
/// the last row, and with no outer dims).
fn next_row(index: &mut [isize], outer: &[usize]) -> usize {
    let mut d = outer.len();
    while d > 0 {
        d -= 1;
        index[d] += 1;
        if index[d] < outer[d] as isize || d == 0 {
            break;
        }
        index[d] = 0;
    }
    d
}

/// Asks for part `j` of `parts` of each of the pieces of memory `ahead` (first byte, length):
/// a tile fetches the next one a part before each of its `parts` steps, so that memory streams
/// while the steps compute (past the array for the last tile: a prefetch never faults).
#[inline(always)]
fn ask_ahead(ahead: &[(*const u8, usize)], j: usize, parts: usize) {
    for &(from, bytes) in ahead {
        let lines = bytes.div_ceil(64);
        for line in lines * j / parts..lines * (j + 1) / parts {
            prefetch_line(from.wrapping_add(line * 64));
        }
    }
}

/// Asks for the cache line at `p` (any address: a prefetch never faults).
#[inline(always)]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and faults on no address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the cache line at `p` into L2 (any address: a prefetch never faults).
#[inline(always)]
fn prefetch_to_l2(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and faults on no address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// One kernel call over `len` elements: `ptrs[0]` the output, then the inputs.
///
/// # Safety
/// As [`super::table::Run`].
pub(super) unsafe fn call(kernel: Kernel, p: [*mut u8; 4], len: usize) {
    // SAFETY: as the caller promised.
    unsafe {
        match kernel {
            Kernel::Map(run) => run([p[0], p[1]], len),
            Kernel::Zip(run) | Kernel::ZipByRow(run, _) => run([p[0], p[1], p[2]], len),
            Kernel::Zip3(run) => run(p, len),
        }
    }
}
