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
//! together up to 16 KiB of a register (one row, however long, at the least). A chain without
//! them takes the planner's dims ([`Plan`]: size-1 dims dropped, ordered by the written
//! operands' strides, contiguous dims merged) and runs in tiles of 4 KiB of its inner dim:
//! whole rows where they fit, else a chunk of one row.
//!
//! An input whose rows are contiguous is read in place, other inputs are gathered into the
//! tile's buffer along their strides (a transpose too, a cache line per element: road 2 is
//! never the speed target); an output is written in place, or from the buffer along its
//! stride. The tiles are split over threads ([`parallel::split`]); each thread's buffers are
//! its staging buffer ([`stage::with_staging`]), kept from call to call.

use super::caches;
use super::kernel::{Block, Line};
use super::operand::{Operand, Shared, Strides};
use super::parallel;
use super::plan::Plan;
use super::reduce::FoldFn;
use super::stage::{self, copy_strided};
use super::table::Kernel;
use super::transpose::TILE;
use crate::error::{BroadcastError, Result};
use smallvec::SmallVec;

/// The most operands of a chain without per-row registers: the planner takes a fixed number.
pub(crate) const MAX_OPERANDS: usize = 16;

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
/// the elements the folds start from.
pub(crate) struct RowChain<'a> {
    pub operands: &'a [Operand<'a>],
    pub written: &'a [bool],
    pub per_row: &'a [bool],
    pub sizes: &'a [usize],
    pub steps: &'a [RowStep],
    pub identities: &'a [Shared],
}

/// Where a tile's register is: its buffer (rows `pitch` elements apart), or its operand's rows
/// in place (a full input or output with unit stride along the rows).
#[derive(Clone, Copy, PartialEq)]
enum Loc {
    Buf,
    InPlace,
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
    /// The inputs gathered into the buffer at each tile, and the outputs copied out of it.
    gathered: &'a [usize],
    copied: &'a [usize],
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
    // The bytes the chain moves.
    let mut traffic = 0usize;
    for o in chain.operands {
        traffic = traffic.saturating_add(o.traffic(m.saturating_mul(n)));
    }
    // (A row's bytes saturate: a row too long to address is refused below, never sized from a
    // wrapped product.)
    let row_bytes = n.saturating_mul(widest);
    // An input read across the rows (its rows one element apart) is gathered transposed.
    let across = |k: usize| {
        let at = [strides[k][rank - 2], strides[k][rank - 1]];
        !chain.written[k] && chain.operands[k].plain && stage::transposed(at, [8, 8])
    };
    let (pitch, rows) = match by_rows {
        true => (n, (caches::row_tile() / row_bytes).clamp(1, m)),
        false => chunk_shape((m, n), widest, rank > 1 && (0..n_ops).any(across)),
    };
    let chunks = n.div_ceil(pitch);
    // A full operand contiguous along the rows is read or written in place.
    let in_place =
        |r: usize| r < n_ops && !chain.per_row[r] && (strides[r][rank - 1] == 1 || n == 1);
    let loc: Vec<Loc> = (0..regs)
        .map(|r| if in_place(r) { Loc::InPlace } else { Loc::Buf })
        .collect();
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
    let walk = Walk {
        chain,
        outer,
        strides: &strides,
        steps: &steps,
        spans: &spans,
        n,
        pitch,
        loc: &loc,
        gathered: &gathered,
        copied: &copied,
    };
    if stage::with_staging(total, |_| ()).is_none() {
        return Err(BroadcastError::Allocation {
            op: "run",
            shape: shape.into(),
            bytes: total.checked_mul(64),
        });
    }
    // A unit is a tile: a block of `rows` rows (the last one's rest), a chunk of columns.
    let units = m.div_ceil(rows) * chunks;
    parallel::split(units, traffic, 1, &|range| {
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
            let mut offs = vec![0isize; rows * n_ops];
            for unit in range {
                let (first, c0) = (unit / chunks * rows, unit % chunks * pitch);
                let (count, width) = (rows.min(m - first), pitch.min(n - c0));
                // SAFETY: as the caller promised of the chain; the buffers are this thread's.
                unsafe { tile(&walk, first, count, c0, width, &buf, splat, &mut offs) };
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

/// Chunks of the rows (`(m, n)`) for a chain without folds, `(pitch, rows)`: 4 KiB of the
/// widest register, whole rows where they fit. With an input read `across` the rows, the
/// walk's slabs ([`stage::SLAB_BYTES`]): [`TILE`] columns, the gather transposes them.
fn chunk_shape((m, n): (usize, usize), widest: usize, across: bool) -> (usize, usize) {
    if across {
        return (TILE.min(n), (stage::SLAB_BYTES / widest).min(m));
    }
    let pitch = (caches::chunk() / widest).clamp(1, n);
    let rows = if pitch == n {
        caches::chunk() / (n * widest)
    } else {
        1
    };
    (pitch, rows.clamp(1, m))
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
        Loc::Buf => width == pitch,
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
            (Loc::Buf, false) => unsafe {
                self.buf[r].offset((row * self.walk.pitch) as isize * self.z(r))
            },
        }
    }

    /// The inputs that are not read in place, gathered: a full one's rows through
    /// [`stage::gather`], in one call where they follow one another at one step (a transposed
    /// input's, one element apart, are transposed), a per-row one's element of each row.
    ///
    /// # Safety
    /// As [`tile`].
    unsafe fn gather(&self) {
        let (walk, count, width) = (self.walk, self.count, self.width);
        let (chain, n_ops, rank) = (walk.chain, walk.chain.operands.len(), walk.outer.len() + 1);
        let off = |row: usize, k: usize| self.offs[row * n_ops + k];
        for &k in walk.gathered {
            let o = &chain.operands[k];
            let step = if count > 1 { off(1, k) - off(0, k) } else { 0 };
            let one = !chain.per_row[k] && (2..count).all(|r| off(r, k) - off(r - 1, k) == step);
            let rows = if one { count } else { 1 };
            for row in (0..count).step_by(rows) {
                // SAFETY: rows `row..row + rows` of input `k` (offsets as the caller promised;
                // a per-row one's single element) into their rows of its buffer.
                unsafe {
                    let (from, to) = (o.at(off(row, k)), self.at(k, row));
                    match chain.per_row[k] {
                        true => copy_strided(from, 0, to, 0, 1, o.size),
                        false => {
                            let at = [step, walk.strides[k][rank - 1]];
                            stage::gather(from, at, to, walk.pitch, o, [rows, width]);
                        }
                    }
                }
            }
        }
    }

    /// The chain's steps over the tile.
    ///
    /// # Safety
    /// As [`tile`].
    unsafe fn steps(&self, splat: [*mut u8; 3]) {
        let (walk, count, width, dense) = (self.walk, self.count, self.width, &self.dense);
        let chain = walk.chain;
        let at = |r: usize, row: usize| self.at(r, row);
        for st in chain.steps.iter() {
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
                        let z = self.z(a);
                        for row in 0..count as isize {
                            // SAFETY: the tile's per-row elements of `a` (contiguous in its
                            // buffer), each repeated along its row of the splat tile, room for
                            // `count` rows of `width`.
                            unsafe {
                                let to = splat[j].offset(row * width as isize * z);
                                copy_strided(
                                    self.at(a, 0).offset(row * z),
                                    0,
                                    to,
                                    z,
                                    width,
                                    z as usize,
                                )
                            };
                        }
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
                // SAFETY: output `k`'s elements of this row, this thread's alone.
                unsafe {
                    let (from, to) = (self.at(k, row), o.at(self.offs[row * n_ops + k]));
                    match chain.per_row[k] {
                        true => copy_strided(from, 0, to, 0, 1, o.size),
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
