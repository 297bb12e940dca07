//! Chains whose folds run over leading dims (a softmax over the first dim, a batch norm's
//! statistics over `(N, H, W)` of an `NHWC` array). The leading dims merged are the rows, the
//! trailing dims merged the columns; a fold folds each column, and the chain reads what it
//! gives back along the rows.
//!
//! Where every row of 64 columns or more fits a tile of 1 MiB, the chain runs a tile of
//! columns at a time: each step over the tile in order, the folds among them, so the input is
//! read from memory once. Taller arrays (a batch norm's 100,000 rows) sweep their rows instead,
//! once per fold and once more for the outputs that need the last fold: each sweep computes,
//! a band of rows at a time in this thread's buffers, the full steps its fold and the outputs
//! it can write read, and folds the band into a row of per-column accumulators; the per-column
//! steps run between sweeps, once over the columns. What the folds read never reaches memory;
//! the inputs are read once per sweep, in order, and the steps that feed two folds are computed
//! twice, but for one: where the last sweep writes one output from one register the last
//! fold's sweep computes (a softmax's `exp(x - max)`, two steps or more), that sweep keeps the
//! register in the output's memory and the last one reads it there ([`Spill`]). Such chains
//! run in sweeps from 32 MiB of traffic even where a tile fits: a tile's rows, pieces of a few
//! hundred bytes far apart, come from memory more slowly than a sweep's whole rows.
//!
//! A fold folds each column row after row, in the blocks of rows [`reduce::outer_blocks`]
//! gives, each into a partial row and the partials then in order, with the table fold
//! ([`FoldFn`]): the order in which [`reduce::reduce_table`] folds a row-major array over its
//! leading dims, so the results are a reduction's run alone, bit for bit. The threads share a
//! sweep's blocks, or the tiles. `docs/experiments.md` ("Column chains") has what each way pays.

use super::caches::caches;
use super::kernel::{Block, Line};
use super::operand::Shared;
use super::parallel;
use super::reduce::{self, FoldFn};
use super::rows::{call, RowChain, RowStep};
use super::stage;
use super::stream;
use super::table::copy_strided;
use crate::error::{BroadcastError, Result};

/// A tile's columns come in multiples of this many.
const TILE_ALIGN: usize = 16;

/// The fewest columns a tile of every row takes: fewer, and bands run instead.
const TILE_MIN: usize = 64;

/// How an operand of a chain over `(m, n)` is read: `down` elements from a row to the next,
/// and along a row contiguous, or one element repeated (`splat`).
#[derive(Clone, Copy)]
struct Lay {
    down: isize,
    splat: bool,
}

/// How an operand with `strides` at `shape` (the chain's, or per column its trailing dims
/// `shape[k..]`) is read by rows, if it can be: its trailing dims contiguous in order or all
/// repeated, its leading dims one stride apart.
fn lay(shape: &[usize], k: usize, strides: &[isize], per_column: bool) -> Option<Lay> {
    let lead = if per_column { 0 } else { k };
    let (lead_shape, trail_shape) = (&shape[..lead], &shape[k..]);
    let (lead_strides, trail) = strides.split_at(lead);
    let unit = row_major(trail_shape, trail);
    let splat = trail
        .iter()
        .zip(trail_shape)
        .all(|(&s, &d)| s == 0 || d == 1);
    // The leading dims as one: each non-1 dim's stride its inner neighbour's times its size.
    let (mut down, mut inner) = (0, None);
    for (&s, &d) in lead_strides.iter().zip(lead_shape).rev() {
        match inner {
            _ if d == 1 => continue,
            None => down = s,
            Some((si, di)) if s == si * di as isize => {}
            Some(_) => return None,
        }
        inner = Some((s, d));
    }
    match (unit, splat) {
        (_, true) if down == 0 => Some(Lay { down, splat: true }),
        (true, false) => Some(Lay { down, splat: false }),
        _ => None,
    }
}

/// Whether `strides` lay out `shape` in row-major order, one element after another (dims of
/// size 1 aside): the layout a fresh array of `shape` has.
pub(crate) fn row_major(shape: &[usize], strides: &[isize]) -> bool {
    let mut expect = 1isize;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d > 1 {
            if s != expect {
                return false;
            }
            expect *= d as isize;
        }
    }
    true
}

/// Whether a chain over `shape` folding its first `k` dims can run by rows with operands of
/// these strides, each per column or not and written or not: every input read contiguously
/// along the merged trailing dims or one element, every output written contiguously along them.
pub(crate) fn fits(shape: &[usize], k: usize, operands: &[(&[isize], bool, bool)]) -> bool {
    let m: usize = shape[..k].iter().product();
    let n: usize = shape[k..].iter().product();
    m > 1
        && n > 1
        && operands.iter().all(|&(strides, per_column, written)| {
            lay(shape, k, strides, per_column).is_some_and(|l| !(written && l.splat))
        })
}

/// What every band of a chain shares.
#[derive(Clone, Copy)]
struct Sweeps<'a> {
    chain: &'a RowChain<'a>,
    lays: &'a [Lay],
    /// Each register's row of every column, where it has one: a per-column register's, a
    /// repeated input's (filled once).
    columns: &'a [Shared],
    /// Each full register's first line in a thread's buffer.
    first_line: &'a [usize],
    m: usize,
    n: usize,
    /// The rows of a band and the columns of a chunk; whether bands (not tiles of every row)
    /// run, which read the per-column registers repeated down the band.
    rows: usize,
    width: usize,
    bands: bool,
    /// The register kept in an output's memory, and how a sweep treats it ([`Spill`]).
    spill: Option<Spill>,
    /// Whether the kept register's and the output's bands are copied with non-temporal
    /// stores (a chain larger than the last-level cache).
    streamed: bool,
    store: bool,
    load: bool,
}

/// A full register `reg` written by step `by` in the last fold's sweep and read, beside values
/// per column, by the one step (`last`) that writes output `out` in the sweep after it: the
/// fold's sweep copies each band of `reg` into `out`'s memory, and the last sweep reads it
/// from there instead of computing again the steps it takes (a softmax's `exp(x - max)`). The
/// last sweep's step writes its band to this thread's buffer, and the band is copied out.
#[derive(Clone, Copy)]
struct Spill {
    reg: usize,
    by: usize,
    last: usize,
    out: usize,
}

/// Runs `chain` over `shape`, its folds over the first `k` dims, as the module says.
///
/// # Safety
/// As [`super::rows::run`] for a chain with per-row registers, a per-row register being one
/// per column (an index of `shape[k..]`) that no two registers share, each fold's source a
/// full register; and [`fits`] holds.
///
/// # Errors
/// [`BroadcastError::Allocation`], having written nothing, when the per-column rows or the
/// calling thread's buffers cannot be allocated; also, with the outputs partly written, when
/// a helper thread cannot allocate what the caller could.
pub(crate) unsafe fn run(shape: &[usize], k: usize, chain: &RowChain<'_>) -> Result<()> {
    let n_ops = chain.operands.len();
    let (m, n): (usize, usize) = (shape[..k].iter().product(), shape[k..].iter().product());
    let mut lays = Vec::with_capacity(n_ops);
    for (o, &p) in chain.operands.iter().zip(chain.per_row) {
        lays.push(lay(shape, k, &o.strides, p).expect("the caller checked `fits`"));
    }
    let regs = chain.sizes.len();
    let widest = chain.sizes.iter().copied().max().unwrap_or(1).max(1);
    let mut traffic = 0usize;
    for o in chain.operands {
        traffic = traffic.saturating_add(o.traffic(m.saturating_mul(n)));
    }
    let pieces = parallel::pieces(traffic);
    // Tiles of every row where enough columns fit, and tiles enough for every thread; else
    // bands.
    let sizes = caches();
    let fit = sizes.column_tile() / m.saturating_mul(widest) / TILE_ALIGN * TILE_ALIGN;
    let spread = n.div_ceil(2 * pieces).next_multiple_of(TILE_ALIGN);
    let (after, count) = fold_after(chain);
    let spill = spill_of(chain, &lays, &after, count);
    // A chain that keeps a register in its output runs in sweeps once it outgrows the
    // last-level cache (its outputs stream, past it): a tile's rows, pieces of a few hundred
    // bytes far apart in memory, then come from memory at a fraction of a sweep's rate.
    let streamed = stream::may_stream(traffic);
    let sweep_over = spill.is_some() && (traffic >= sizes.sweep_min() || streamed);
    let tiled = (fit >= TILE_MIN || fit >= n) && !sweep_over;
    let spill = spill.filter(|_| !tiled);
    let (rows, width) = match tiled {
        true => (m, fit.min(spread).max(TILE_ALIGN).min(n)),
        false => {
            let width = (sizes.band_row() / widest).clamp(1, n);
            ((sizes.band() / (width * widest)).clamp(1, m), width)
        }
    };
    // The rows of every column: per-column registers and repeated inputs, then each fold's
    // partial rows (blocks of them).
    // Every size below in lines, checked: a shape too large to address is refused, never
    // sized from a wrapped product (`usize::MAX` lines fail to allocate).
    let lines_of = |count: usize, size: usize| {
        count
            .checked_mul(size)
            .map_or(usize::MAX, |b| b.div_ceil(64))
    };
    let mut line_of = vec![None; regs];
    let mut lines = 0usize;
    for r in 0..regs {
        let operand = r < n_ops;
        if (chain.per_row[r] && !operand) || (operand && lays[r].splat) {
            line_of[r] = Some(lines);
            lines = lines.saturating_add(lines_of(n, chain.sizes[r]));
        }
    }
    let mut parts_line = Vec::new();
    for st in chain.steps.iter().filter(|_| !tiled) {
        if let RowStep::Fold { src, .. } = *st {
            parts_line.push(lines);
            let row = n.saturating_mul(chain.sizes[src]);
            let blocks = reduce::outer_blocks(m, m.saturating_mul(row));
            lines = lines.saturating_add(blocks.saturating_mul(lines_of(row, 1)));
        }
    }
    let refused = || BroadcastError::Allocation {
        op: "run",
        shape: shape.into(),
        bytes: lines.checked_mul(64),
    };
    let mut store: Vec<Line> = Vec::new();
    store.try_reserve_exact(lines).map_err(|_| refused())?;
    store.resize(lines, Line([0; 64]));
    let base = store.as_mut_ptr().cast::<u8>();
    let mut columns = Vec::with_capacity(regs);
    for (r, l) in line_of.iter().enumerate() {
        // SAFETY: each row is within the store.
        let at = l.map_or(std::ptr::null_mut(), |l| unsafe { base.add(l * 64) });
        if r < n_ops && lays[r].splat {
            let (o, z) = (&chain.operands[r], chain.sizes[r]);
            // SAFETY: input `r`'s one element repeated into its row of `n`.
            unsafe { copy_strided(o.at(0), 0, at, z as isize, n, z) };
        }
        columns.push(Shared(at));
    }
    // Each full register's lines in a thread's buffer: a band of it.
    let mut first_line = Vec::with_capacity(regs);
    let mut total = 0;
    for r in 0..regs {
        first_line.push(total);
        // A band's sweep also repeats each per-column register and repeated input down the
        // band, so that every step runs over the band in one call.
        let repeated = chain.per_row[r] || lays.get(r).is_some_and(|l| l.splat);
        if repeated && !tiled {
            total = lines_of(rows.saturating_mul(n), chain.sizes[r]).saturating_add(total);
        } else if (r >= n_ops && !chain.per_row[r]) || spill.is_some_and(|sp| sp.out == r) {
            total = lines_of(rows.saturating_mul(width), chain.sizes[r]).saturating_add(total);
        }
    }
    // A tile's partial row.
    let part_line = total;
    let total = lines_of(usize::from(tiled) * width, widest).saturating_add(total);
    if stage::with_staging(total.max(1), |_| ()).is_none() {
        return Err(refused());
    }
    let sweeps = Sweeps {
        chain,
        lays: &lays,
        columns: &columns,
        first_line: &first_line,
        m,
        n,
        rows,
        width,
        bands: !tiled,
        spill,
        streamed,
        store: false,
        load: false,
    };
    if tiled {
        let result = std::sync::Mutex::new(Ok(()));
        parallel::split(n.div_ceil(width), pieces, 1, &|range| {
            let work = |buffer: &mut [Line]| {
                let buf = buffer.as_mut_ptr().cast::<u8>();
                let part = buf.wrapping_add(part_line * 64);
                for t in range.clone() {
                    // SAFETY: as the caller promised of the chain; the buffers are this
                    // thread's, room for a tile of each register; the tile's columns are
                    // this thread's.
                    unsafe { sweeps.tile(t * width, buf, part) };
                }
            };
            if stage::with_staging(total.max(1), work).is_none() {
                *result.lock().unwrap_or_else(|p| p.into_inner()) = Err(refused());
            }
        });
        return result.into_inner().unwrap_or_else(|p| p.into_inner());
    }
    let mut parts = Vec::with_capacity(parts_line.len());
    for &l in &parts_line {
        // SAFETY: each fold's partial rows are within the store.
        parts.push(Shared(unsafe { base.add(l * 64) }));
    }
    // SAFETY: as the caller promised of the chain; the store holds the partial rows.
    unsafe { run_bands(sweeps, (&after, count), &parts, total, pieces) }?;
    drop(store);
    Ok(())
}

/// The sweeps over bands of a chain too tall for tiles of every row: one per fold (computing
/// the steps its source needs, and writing the outputs that need no later fold), then one for
/// the outputs that need the last fold. `after` and `count`: [`fold_after`]; `parts`: each
/// fold's partial rows (one per block of rows it folds in parallel).
///
/// # Safety
/// As [`run`], for `sweeps`' chain; `parts` within the store, this call's.
unsafe fn run_bands(
    sweeps: Sweeps<'_>,
    (after, count): (&[Option<usize>], usize),
    parts: &[Shared],
    total: usize,
    pieces: usize,
) -> Result<()> {
    let (chain, m, n, rows, spill) = (sweeps.chain, sweeps.m, sweeps.n, sweeps.rows, sweeps.spill);
    let n_ops = chain.operands.len();
    let mut unwritten: Vec<usize> = Vec::new();
    for r in 0..n_ops {
        if chain.written[r] && !chain.per_row[r] {
            unwritten.push(r);
        }
    }
    let mut folds = 0;
    for (j, st) in chain.steps.iter().enumerate() {
        match *st {
            RowStep::Fold {
                run,
                identity,
                out,
                src,
            } => {
                let z = chain.sizes[src];
                let parts = parts[folds];
                // The outputs that need no later fold are written as the source is folded.
                let now: Vec<usize> = unwritten
                    .iter()
                    .copied()
                    .filter(|&w| after[w].is_none_or(|f| f < folds))
                    .collect();
                unwritten.retain(|w| !now.contains(w));
                folds += 1;
                let acc = sweeps.at_columns(out, 0);
                let identity = chain.identities[identity];
                // SAFETY: `n` elements of `out`'s type: its row of every column.
                unsafe { copy_strided(identity.0, 0, acc, z as isize, n, z) };
                let mut steps = needed(chain, j, &[src]);
                steps.push(j);
                steps.extend(needed(chain, chain.steps.len(), &now));
                steps.sort_unstable();
                steps.dedup();
                let blocks = reduce::outer_blocks(m, m.saturating_mul(n * z));
                let sweeps = Sweeps {
                    store: folds == count,
                    ..sweeps
                };
                let fold = Folding {
                    step: j,
                    run,
                    src,
                    z,
                };
                if blocks == 0 {
                    // SAFETY: as the caller promised of the chain; one thread folds every row.
                    unsafe { sweeps.sweep(&steps, 0..m, Some((&fold, Shared(acc))), total)? };
                    continue;
                }
                let row_bytes = (n * z).div_ceil(64) * 64;
                let result = std::sync::Mutex::new(Ok(()));
                parallel::for_each_index(blocks, pieces, &|b| {
                    let (r0, r1) = (m * b / blocks, m * (b + 1) / blocks);
                    let part = Shared(parts.get().wrapping_add(b * row_bytes));
                    // SAFETY: `n` elements of block `b`'s partial row, this thread's alone.
                    unsafe { copy_strided(identity.get(), 0, part.get(), z as isize, n, z) };
                    // SAFETY: as the caller promised of the chain; the block's rows fold into
                    // its own partial row.
                    let done = unsafe { sweeps.sweep(&steps, r0..r1, Some((&fold, part)), total) };
                    if let Err(e) = done {
                        *result.lock().unwrap_or_else(|p| p.into_inner()) = Err(e);
                    }
                });
                result.into_inner().unwrap_or_else(|p| p.into_inner())?;
                for b in 0..blocks {
                    let blk = Block {
                        n,
                        inner: [1, 1],
                        rows: 1,
                        step: [0, 0],
                    };
                    // SAFETY: the accumulator's row and block `b`'s partial row, `n` elements
                    // of the fold's type each.
                    unsafe { run(std::ptr::null(), acc, parts.0.add(b * row_bytes), blk) };
                }
            }
            RowStep::Map { kernel, out, args } if chain.per_row[out] => {
                let mut ptrs = [std::ptr::null_mut(); 4];
                ptrs[0] = sweeps.at_columns(out, 0);
                for (p, &a) in ptrs[1..].iter_mut().zip(&args[..kernel.inputs()]) {
                    *p = sweeps.at_columns(a, 0);
                }
                // SAFETY: `n` elements of each register, of the kernel's types.
                unsafe { call(kernel, ptrs, n) };
            }
            RowStep::Map { .. } => {}
        }
    }
    // The outputs' sweep: those that need the last fold, with the full steps they need.
    if !unwritten.is_empty() {
        let steps = match spill {
            Some(sp) => vec![sp.last],
            None => needed(chain, chain.steps.len(), &unwritten),
        };
        let sweeps = Sweeps {
            load: spill.is_some(),
            ..sweeps
        };
        let bands = m.div_ceil(rows);
        let result = std::sync::Mutex::new(Ok(()));
        parallel::split(bands, pieces, 1, &|range| {
            let rows = range.start * rows..(range.end * rows).min(m);
            // SAFETY: as the caller promised of the chain; each thread writes its rows.
            if let Err(e) = unsafe { sweeps.sweep(&steps, rows, None, total) } {
                *result.lock().unwrap_or_else(|p| p.into_inner()) = Err(e);
            }
        });
        result.into_inner().unwrap_or_else(|p| p.into_inner())?;
    }
    Ok(())
}

/// The last fold each register needs (by its number among the folds), through the per-column
/// values it reads: an output is written by the first sweep after that fold; and the number of
/// folds.
fn fold_after(chain: &RowChain<'_>) -> (Vec<Option<usize>>, usize) {
    let mut after: Vec<Option<usize>> = vec![None; chain.sizes.len()];
    let mut count = 0;
    for st in chain.steps {
        match *st {
            RowStep::Fold { out, .. } => {
                after[out] = Some(count);
                count += 1;
            }
            RowStep::Map { kernel, out, args } => {
                after[out] = args[..kernel.inputs()]
                    .iter()
                    .map(|&a| after[a])
                    .max()
                    .flatten();
            }
        }
    }
    (after, count)
}

/// The register a chain run in sweeps keeps in an output's memory ([`Spill`]), given each
/// register's last fold and the number of folds ([`fold_after`]): one that the last fold's
/// sweep computes and the one step writing the one output of the last sweep reads
/// beside values per column, where the last sweep would otherwise compute two steps or more
/// again to make it.
fn spill_of(
    chain: &RowChain<'_>,
    lays: &[Lay],
    after: &[Option<usize>],
    count: usize,
) -> Option<Spill> {
    let (n_ops, steps) = (chain.operands.len(), chain.steps);
    let jl = steps
        .iter()
        .rposition(|st| matches!(st, RowStep::Fold { .. }))?;
    let RowStep::Fold { src, .. } = steps[jl] else {
        return None;
    };
    let mut last_outputs = (0..n_ops)
        .filter(|&r| chain.written[r] && !chain.per_row[r] && after[r] == Some(count - 1));
    let (Some(out), None) = (last_outputs.next(), last_outputs.next()) else {
        return None;
    };
    let writes = |j: usize, r: usize| matches!(steps[j], RowStep::Map { out, .. } if out == r);
    let last = (0..steps.len()).rev().find(|&j| writes(j, out))?;
    let RowStep::Map { kernel, args, .. } = steps[last] else {
        return None;
    };
    let mut full = args[..kernel.inputs()]
        .iter()
        .copied()
        .filter(|&a| !(chain.per_row[a] || (a < n_ops && lays[a].splat)));
    let (Some(reg), None) = (full.next(), full.next()) else {
        return None;
    };
    // (Elements of one byte may be `bool`s, which not every bit pattern is.)
    let z = chain.sizes[out];
    if reg < n_ops || chain.sizes[reg] != z || z < 2 {
        return None;
    }
    // The register's elements are read in the output's memory as their own type: of the
    // output's size, and here of its type too (the ops that read a full register beside
    // per-column values give their inputs' type), but memory aligned to the size serves any
    // type of that size (an `f64` where a `Complex<f32>` array may be only 4-aligned).
    // SAFETY: the output's first element (a chain with folds has no empty dim).
    if !(unsafe { chain.operands[out].at(0) } as usize).is_multiple_of(z) {
        return None;
    }
    let by = (0..last).rev().find(|&j| writes(j, reg))?;
    let fold_steps = needed(chain, jl, &[src]);
    let again = needed(chain, steps.len(), &[out]).len();
    (fold_steps.contains(&by) && again >= 3).then_some(Spill { reg, by, last, out })
}

/// The full steps before step `end` that registers `wanted` are computed by, in order.
fn needed(chain: &RowChain<'_>, end: usize, wanted: &[usize]) -> Vec<usize> {
    let n_ops = chain.operands.len();
    let mut want = vec![false; chain.sizes.len()];
    for &r in wanted {
        want[r] = true;
    }
    let mut steps = Vec::new();
    for j in (0..end).rev() {
        if let RowStep::Map { kernel, out, args } = chain.steps[j] {
            if want[out] && !chain.per_row[out] {
                want[out] = false;
                steps.push(j);
                for &a in &args[..kernel.inputs()] {
                    want[a] |= !chain.per_row[a] && (a >= n_ops || chain.written[a]);
                }
            }
        }
    }
    steps.reverse();
    steps
}

/// A fold of a sweep: its step, function, source register and element size.
struct Folding {
    step: usize,
    run: FoldFn,
    src: usize,
    z: usize,
}

impl Sweeps<'_> {
    /// Register `r`'s element at column `c` of its row of every column (a per-column register
    /// or output, or a repeated input): the same for every row.
    fn at_columns(&self, r: usize, c: usize) -> *mut u8 {
        match self.chain.operands.get(r) {
            // SAFETY: column `c` of a per-column operand, contiguous along the columns.
            Some(o) if !self.lays[r].splat => unsafe { o.at(c as isize) },
            _ => self.columns[r].0.wrapping_add(c * self.chain.sizes[r]),
        }
    }

    /// Register `r`'s element at row `row` (a band's first), column `c0`, and its move from a
    /// row to the next, in bytes; a full register in this thread's buffer holds the band.
    ///
    /// # Safety
    /// The element is one of the register's: within its operand, or its band.
    unsafe fn at(&self, r: usize, buf: *mut u8, row: usize, c0: usize) -> (*mut u8, isize) {
        let z = self.chain.sizes[r];
        let ops = self.chain.operands;
        if let Some(sp) = self.spill.filter(|_| self.load) {
            if r == sp.reg {
                let l = self.lays[sp.out];
                let off = row as isize * l.down + c0 as isize;
                // SAFETY: an element of the output the register was kept in, as the caller
                // promised of the row and column.
                return (unsafe { ops[sp.out].at(off) }, l.down * z as isize);
            }
            if r == sp.out {
                let at = buf.wrapping_add(self.first_line[r] * 64);
                return (at, (self.width * z) as isize);
            }
        }
        let repeated = self.chain.per_row[r] || ops.get(r).is_some_and(|_| self.lays[r].splat);
        match ops.get(r).map(|o| (o, self.lays[r])) {
            _ if repeated && self.bands => {
                let at = buf.wrapping_add(self.first_line[r] * 64 + c0 * z);
                (at, (self.n * z) as isize)
            }
            _ if repeated => (self.at_columns(r, c0), 0),
            Some((o, l)) => {
                let off = row as isize * l.down + c0 as isize;
                // SAFETY: an element of the operand, as the caller promised.
                (unsafe { o.at(off) }, l.down * z as isize)
            }
            None => {
                let at = buf.wrapping_add(self.first_line[r] * 64);
                (at, (self.width * z) as isize)
            }
        }
    }

    /// Map step `st` over `count` rows from `r0` (a band's first) and columns `c0..c0 + width`:
    /// a per-column one over the columns once.
    ///
    /// # Safety
    /// As [`Sweeps::sweep`]; `buf` holds the band of each full register.
    unsafe fn map(
        &self,
        st: RowStep,
        buf: *mut u8,
        r0: usize,
        count: usize,
        c0: usize,
        width: usize,
    ) {
        let RowStep::Map { kernel, out, args } = st else {
            return;
        };
        let args = &args[..kernel.inputs()];
        let mut ptrs = [std::ptr::null_mut(); 4];
        let mut moves = [0isize; 4];
        // SAFETY: the band's first row of each register, as the caller promised.
        unsafe {
            (ptrs[0], moves[0]) = self.at(out, buf, r0, c0);
            for (j, &a) in args.iter().enumerate() {
                (ptrs[j + 1], moves[j + 1]) = self.at(a, buf, r0, c0);
            }
        }
        let sizes = &self.chain.sizes;
        let rows = if self.chain.per_row[out] { 1 } else { count };
        // Every operand's rows one after another: the band in one call.
        let flat = std::iter::once(out)
            .chain(args.iter().copied())
            .zip(moves)
            .all(|(r, m)| m == (width * sizes[r]) as isize);
        let (calls, len) = if flat {
            (1, rows * width)
        } else {
            (rows, width)
        };
        for _ in 0..calls {
            // SAFETY: `len` elements of each register, of the kernel's types.
            unsafe { call(kernel, ptrs, len) };
            for (p, s) in ptrs.iter_mut().zip(moves) {
                *p = p.wrapping_offset(s);
            }
        }
    }

    /// Every step over columns `c0..` of every row, a tile: the folds fold its rows in the
    /// blocks of [`reduce::outer_blocks`], each into the partial row `part`.
    ///
    /// # Safety
    /// As [`Sweeps::sweep`], `buf` this thread's buffers holding a tile of each full register;
    /// the tile's columns of the per-column registers and outputs are this thread's.
    unsafe fn tile(&self, c0: usize, buf: *mut u8, part: *mut u8) {
        let (m, width) = (self.m, self.width.min(self.n - c0));
        for &st in self.chain.steps {
            let RowStep::Fold {
                run,
                identity,
                out,
                src,
            } = st
            else {
                // SAFETY: as the caller promised.
                unsafe { self.map(st, buf, 0, m, c0, width) };
                continue;
            };
            let z = self.chain.sizes[src];
            let identity = self.chain.identities[identity].0;
            let fold = |acc: *mut u8, s: *const u8, rows: usize, down: isize| {
                let step = [0, down / z as isize];
                let blk = Block {
                    n: width,
                    inner: [1, 1],
                    rows,
                    step,
                };
                // SAFETY: `width` elements of the accumulator's row; the source's `rows`
                // rows of them, `down` bytes apart.
                unsafe { run(std::ptr::null(), acc, s, blk) }
            };
            // SAFETY: the tile's columns of `out`'s row and of the source, `width` elements
            // of the fold's type in the partial row.
            unsafe {
                let (acc, (s, down)) = (self.at_columns(out, c0), self.at(src, buf, 0, c0));
                copy_strided(identity, 0, acc, z as isize, width, z);
                let blocks = reduce::outer_blocks(m, m.saturating_mul(self.n * z));
                if blocks == 0 {
                    fold(acc, s, m, down);
                    continue;
                }
                for b in 0..blocks {
                    let (r0, r1) = (m * b / blocks, m * (b + 1) / blocks);
                    copy_strided(identity, 0, part, z as isize, width, z);
                    fold(part, s.offset(r0 as isize * down), r1 - r0, down);
                    fold(acc, part, 1, 0);
                }
            }
        }
    }

    /// Runs `steps` (full steps and, with `fold`, its step, in order) over rows `rows`, a band
    /// and a chunk of columns at a time in this thread's buffers: the fold folds its source's
    /// rows into the row of every column at `acc`, in order.
    ///
    /// # Safety
    /// As [`run`]'s caller promised of the chain; `steps` are the steps the fold's source or
    /// the written operands need; the rows written (the outputs' and `acc`'s) are this
    /// thread's alone.
    unsafe fn sweep(
        &self,
        steps: &[usize],
        rows: std::ops::Range<usize>,
        fold: Option<(&Folding, Shared)>,
        lines: usize,
    ) -> Result<()> {
        let chain = self.chain;
        let n_ops = chain.operands.len();
        // The per-column registers and repeated inputs the steps read.
        let mut repeated: Vec<usize> = Vec::new();
        for &j in steps {
            if let RowStep::Map { kernel, args, .. } = chain.steps[j] {
                for &a in &args[..kernel.inputs()] {
                    let once = chain.per_row[a] || (a < n_ops && self.lays[a].splat);
                    if once && !repeated.contains(&a) {
                        repeated.push(a);
                    }
                }
            }
        }
        let work = |buffer: &mut [Line]| {
            let buf = buffer.as_mut_ptr().cast::<u8>();
            for &r in &repeated {
                let z = self.chain.sizes[r];
                let from = self.at_columns(r, 0);
                let to = buf.wrapping_add(self.first_line[r] * 64);
                for row in 0..self.rows {
                    // SAFETY: the columns of a computed per-column register or a repeated
                    // input, into row `row` of its band in this thread's buffer.
                    unsafe {
                        std::ptr::copy_nonoverlapping(from, to.add(row * self.n * z), self.n * z)
                    };
                }
            }
            for r0 in rows.clone().step_by(self.rows) {
                let count = self.rows.min(rows.end - r0);
                for c0 in (0..self.n).step_by(self.width) {
                    let width = self.width.min(self.n - c0);
                    for &j in steps {
                        match fold {
                            Some((f, acc)) if f.step == j => {
                                // SAFETY: the band's rows of the source, `down` bytes apart,
                                // into the chunk's columns of `acc`.
                                unsafe {
                                    let (s, down) = self.at(f.src, buf, r0, c0);
                                    let blk = Block {
                                        n: width,
                                        inner: [1, 1],
                                        rows: count,
                                        step: [0, down / f.z as isize],
                                    };
                                    (f.run)(std::ptr::null(), acc.0.add(c0 * f.z), s, blk)
                                }
                            }
                            // SAFETY: as the caller promised; `buf` holds a band.
                            _ => unsafe { self.map(chain.steps[j], buf, r0, count, c0, width) },
                        }
                        // The kept register's band to the output's memory, or (the last
                        // sweep) the output's band from the buffer to its memory.
                        let copy = match self.spill {
                            Some(sp) if self.store && j == sp.by => Some((sp.reg, sp.out)),
                            Some(sp) if self.load && j == sp.last => Some((sp.out, sp.out)),
                            _ => None,
                        };
                        if let Some((from, to)) = copy {
                            let (z, l) = (chain.sizes[to], self.lays[to]);
                            let at = buf.wrapping_add(self.first_line[from] * 64);
                            for row in 0..count {
                                let off = (r0 + row) as isize * l.down + c0 as isize;
                                // SAFETY: the band's row of a register in this thread's buffer,
                                // `width` elements, to the output's row, this thread's alone;
                                // the sweep fences its streamed stores.
                                unsafe {
                                    let (src, dst) =
                                        (at.add(row * self.width * z), chain.operands[to].at(off));
                                    match self.streamed {
                                        true => stream::copy_streaming(src, dst, width * z),
                                        false => std::ptr::copy_nonoverlapping(src, dst, width * z),
                                    }
                                };
                            }
                        }
                    }
                }
            }
            #[cfg(target_arch = "x86_64")]
            if self.spill.is_some() && self.streamed {
                // SAFETY: a store fence has no preconditions; it orders this thread's
                // non-temporal stores before the end of its part of the sweep.
                unsafe { std::arch::x86_64::_mm_sfence() };
            }
        };
        stage::with_staging(lines.max(1), work).ok_or(BroadcastError::Allocation {
            op: "run",
            shape: vec![self.m, self.n].into(),
            bytes: lines.checked_mul(64),
        })
    }
}
