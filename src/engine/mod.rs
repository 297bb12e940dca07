//! The kernel engine: every elementwise operation of the crate runs through here.
//!
//! ```text
//! flat        a small fresh result of contiguous inputs in one memory order: one run, no plan
//! operands seen at the output shape (broadcast views, stride 0 where broadcast)
//!   -> small   a small walk of at most two merged dims skips planning: one block
//!   -> Plan    drop size-1 dims, order dims by the written array's strides, merge contiguous dims
//!   -> tiles   a walk that reads an operand across its rows goes tile by tile
//!   -> staging an operand read across its rows is copied transposed into a buffer first,
//!              a slab of rows at a time (plain element types), so the kernel reads it in order
//!   -> split   serial below PARALLEL_THRESHOLD_BYTES, else contiguous ranges (or whole tiles) over Rayon
//!   -> kernel  per run of the inner loop: slices for unit strides, a scalar for stride 0
//! ```

mod alloc;
pub(crate) use alloc::{filled, with_capacity};
pub(crate) mod flat;
mod fresh;
mod kernel;
pub(crate) mod parallel;
mod plan;
mod transpose;

use std::mem::MaybeUninit;

use std::marker::PhantomData;

use ndarray::{Array, ArrayRef, Dimension, IxDyn};
use smallvec::SmallVec;

use crate::error::{BroadcastError, Result};
use crate::shape::iota;
use crate::view::place_strides;

use fresh::{call_logged, FreshLog};
pub(crate) use kernel::FoldOrder;
pub(crate) use kernel::Sink;
use kernel::{Block, BlockKernel};
use parallel::{for_each_index, pieces, split};
use plan::Plan;

/// A raw pointer that may cross threads: the engine hands each thread disjoint output runs.
struct SyncPtr<T>(*mut T);
impl<T> Clone for SyncPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SyncPtr<T> {}
// SAFETY: the engine only dereferences these pointers for elements of arrays whose element
// types are Send + Sync (enforced by the bounds of the functions below), and writes each output
// element from exactly one thread.
unsafe impl<T> Send for SyncPtr<T> {}
// SAFETY: as for `Send`: shared between the threads of one walk, each touching its own elements.
unsafe impl<T> Sync for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    fn of<D: Dimension>(a: &ArrayRef<T, D>) -> Self {
        SyncPtr(a.as_ptr() as *mut T)
    }

    fn src(a: &Src<'_, T>) -> Self {
        SyncPtr(a.ptr as *mut T)
    }

    /// # Safety
    /// `off` is the offset of an element of the array this pointer came from.
    #[inline(always)]
    unsafe fn at(self, off: isize) -> *mut T {
        // SAFETY: an element of the same array, as the caller promised.
        unsafe { self.0.offset(off) }
    }
}

/// An input of the engine: an array seen at the output shape, as its first element, that
/// shape, and its strides at that shape (0 where it broadcasts). Built only from a borrowed
/// array by constructors that check the placement against the shape rule, so every output
/// index reads one of its elements; the engine checks that the shape is the output's.
pub(crate) struct Src<'a, T> {
    ptr: *const T,
    shape: &'a [usize],
    strides: SmallVec<[isize; 6]>,
    _borrow: PhantomData<&'a T>,
}

impl<'a, T> Src<'a, T> {
    /// `a` as it is, at its own shape.
    #[inline]
    pub fn of<D: Dimension>(a: &'a ArrayRef<T, D>) -> Self {
        Src {
            ptr: a.as_ptr(),
            shape: a.shape(),
            strides: SmallVec::from_slice(a.strides()),
            _borrow: PhantomData,
        }
    }

    /// `a` broadcast to `out_shape` of the same rank, where every dim of `a` is 1 or the
    /// output's (degenerate broadcasting); an error otherwise.
    #[inline(always)]
    pub fn degenerate<D: Dimension>(
        op: &'static str,
        a: &'a ArrayRef<T, D>,
        out_shape: &'a [usize],
    ) -> Result<Self> {
        let fits = a.ndim() == out_shape.len()
            && a.shape()
                .iter()
                .zip(out_shape)
                .all(|(&n, &m)| n == m || n == 1);
        if !fits {
            return Err(refused(op, a.shape(), out_shape));
        }
        let mut strides = SmallVec::from_slice(a.strides());
        for ((s, &n), &m) in strides.iter_mut().zip(a.shape()).zip(out_shape) {
            if n != m {
                *s = 0;
            }
        }
        Ok(Src {
            ptr: a.as_ptr(),
            shape: out_shape,
            strides,
            _borrow: PhantomData,
        })
    }

    /// `a` placed into `out_shape` by `broadcast_in_dim` dims (a rank-0 `a` with none: a
    /// scalar read at every index); the rule's error when they do not place it.
    pub fn placed<D: Dimension>(
        op: &'static str,
        a: &'a ArrayRef<T, D>,
        out_shape: &'a [usize],
        dims: &[usize],
    ) -> Result<Self> {
        crate::shape::in_dim_check(op, a.shape(), out_shape, dims)?;
        Ok(Src {
            ptr: a.as_ptr(),
            shape: out_shape,
            strides: place_strides(a.shape(), a.strides(), out_shape, dims),
            _borrow: PhantomData,
        })
    }

    /// The shape it is seen at.
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }

    /// Its strides at that shape.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }
}

/// The rule's error for an operand of shape `shape` that does not broadcast degenerately to
/// `out_shape`.
#[cold]
#[inline(never)]
fn refused(op: &'static str, shape: &[usize], out_shape: &[usize]) -> BroadcastError {
    match crate::shape::in_dim_check(op, shape, out_shape, &iota(shape.len())) {
        Err(e) => e,
        Ok(()) => unreachable!("a degenerate placement that in_dim_check accepts fits"),
    }
}

/// An operand of a walk, untyped: its element 0, its element size, and whether its values are
/// plain bits that a transposing walk may stage (see [`transpose`]).
#[derive(Clone, Copy)]
struct Operand {
    ptr: SyncPtr<u8>,
    size: usize,
    plain: bool,
}

impl Operand {
    /// An operand read through `ptr`.
    fn input<T>(ptr: SyncPtr<T>) -> Self {
        Operand {
            ptr: SyncPtr(ptr.0.cast()),
            size: std::mem::size_of::<T>(),
            plain: transpose::plain_size::<T>().is_some(),
        }
    }

    /// The operand written through `ptr` (never staged).
    fn output<T>(ptr: SyncPtr<T>) -> Self {
        Operand {
            plain: false,
            ..Operand::input(ptr)
        }
    }

    /// # Safety
    /// `off` is the element offset of an element of this operand's array.
    #[inline(always)]
    unsafe fn at(self, off: isize) -> *mut u8 {
        // SAFETY: the byte offset of an element of the same array, as the caller promised.
        unsafe { self.ptr.0.offset(off * self.size as isize) }
    }
}

/// Walks `shape` over `N` operands with the given strides (operand 0 is written), running
/// `kernel` on each block of runs, split across threads when large; `log` is a fresh output's
/// ([`fresh::fill`]).
///
/// # Safety
/// Operand `k` has, at every index of `shape`, an element at its strides from its pointer, of
/// the type `kernel` reads or writes there; operand 0's are distinct and nothing else touches
/// them during the walk.
unsafe fn run<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    operands: [Operand; N],
    kernel: &impl BlockKernel<N>,
    log: Option<&FreshLog>,
) {
    let width = operands.iter().map(|o| o.size).max().unwrap_or(1);
    if let Some(block) = small_block(shape, &strides, width) {
        let staged = staged(&block, operands);
        if !tiles_small(&block, &staged) {
            // SAFETY: a small block addresses elements of each operand, the written ones once
            // each, and runs on this thread.
            return unsafe {
                run_block(
                    operands.map(|o| o.ptr.0),
                    block,
                    operands,
                    &staged,
                    kernel,
                    log,
                )
            };
        }
    }
    let plan = Plan::new(shape, strides, std::array::from_fn(|k| k));
    let pieces = pieces(plan.len, width);
    // The parts of the walk, each with the unit it is split in (elements) and the alignment of
    // its split (units): tiles in slabs of their rows (a thread's share comes as one block per
    // tile, and at most one tile is shared: whole tiles left 520x520 f32 at 5 tiles against 4),
    // the tiles' edge strips and untiled walks in runs of 64 elements.
    let tiles = plan.tiled();
    let parts: SmallVec<[(&Plan<N>, usize, usize); 3]> = match &tiles {
        Some(tiles) => {
            let cols = tiles[0].dims[tiles[0].dims.len() - 1];
            std::iter::once((&tiles[0], plan::ROW_MULTIPLE * cols, 1))
                .chain(tiles[1..].iter().map(|edge| (edge, 1, 64)))
                .collect()
        }
        None => smallvec::smallvec![(&plan, 1, 64)],
    };
    // One fork for the whole walk: each thread takes its share of every part (a fork per
    // part cost more than the thin edge strips themselves).
    for_each_index(pieces, pieces, &|i| {
        for &(plan, unit, align) in &parts {
            let inner = plan.inner_strides();
            let units = parallel::share(plan.len / unit, pieces, align, i);
            let range = units.start * unit..units.end * unit;
            plan.for_each_block(range, |offs, n, rows, step| {
                // SAFETY: the plan yields offsets of elements of each operand.
                let ptrs = std::array::from_fn(|k| unsafe { operands[k].at(offs[k]) });
                let block = Block {
                    n,
                    inner,
                    rows,
                    step,
                };
                // SAFETY: a block of the plan addresses elements of each operand, the written
                // ones once each, and each range goes to one thread.
                unsafe {
                    run_block(
                        ptrs,
                        block,
                        operands,
                        &staged(&block, operands),
                        kernel,
                        log,
                    )
                }
            })
        }
    });
}

/// The operands a block stages ([`run_staged`]): inputs of plain values read across the
/// block's rows (a stride of at least 8 along them) with a step of 1 or -1 down them, or another
/// step where the stepped copy gathers ([`transpose::gathers`]), in a block at least 8 by 8.
/// (64x64 f32 transposed add: 2.9 us read in place, 1.4 us staged; the contiguous add 0.7 us.)
fn staged<const N: usize>(block: &Block<N>, operands: [Operand; N]) -> [bool; N] {
    let big = block.rows >= 8 && block.n >= 8;
    std::array::from_fn(|k| {
        let (step, inner, size) = (block.step[k], block.inner[k], operands[k].size);
        k > 0
            && big
            && operands[k].plain
            && inner.unsigned_abs() >= 8
            && (step.unsigned_abs() == 1 || (step != 0 && transpose::gathers(size, inner)))
    })
}

/// Runs one block: straight through the kernel, or slab by slab through [`run_staged`] when
/// it stages operands.
///
/// # Safety
/// Every element the block addresses from `ptrs` is an element of its operand, the written
/// ones distinct and touched by this thread only; `staged` is [`staged`] of this block.
unsafe fn run_block<const N: usize>(
    ptrs: [*mut u8; N],
    block: Block<N>,
    operands: [Operand; N],
    staged: &[bool; N],
    kernel: &impl BlockKernel<N>,
    log: Option<&FreshLog>,
) {
    if !staged.contains(&true) {
        // SAFETY: as the caller promised.
        return unsafe { call_logged(kernel, ptrs, block, log) };
    }
    let ran = with_parts(operands, staged, |parts| {
        // SAFETY: as the caller promised; `parts` are this thread's, sized by `with_parts`.
        unsafe { run_staged(ptrs, block, operands, staged, parts, kernel, log) }
    });
    if ran.is_none() {
        // No room to stage: the same block read in place.
        // SAFETY: as the caller promised.
        unsafe { call_logged(kernel, ptrs, block, log) }
    }
}

/// Runs `f` with this thread's staging buffer cut into one part per operand: room for a slab
/// of each operand with `staged[k]` (in whole cache lines), none for the others; `None`, having
/// run nothing, when the buffer cannot grow to that.
fn with_parts<const N: usize, R>(
    operands: [Operand; N],
    staged: &[bool; N],
    f: impl FnOnce([*mut Line; N]) -> R,
) -> Option<R> {
    let lines: [usize; N] = std::array::from_fn(|k| match staged[k] {
        true => (SLAB * transpose::pitch(operands[k].size) * operands[k].size).div_ceil(64),
        false => 0,
    });
    with_staging(lines.iter().sum(), |buffer| {
        let mut parts: [*mut Line; N] = [std::ptr::null_mut(); N];
        let mut at = 0;
        for k in 0..N {
            // SAFETY: the buffer holds the sum of the parts' lines.
            parts[k] = unsafe { buffer.as_mut_ptr().add(at) };
            at += lines[k];
        }
        f(parts)
    })
}

/// Rows of a block staged at a time: 16 rows of 4-byte elements are one cache line of each
/// source row, and a slab of every staged operand fits L1 with the kernel's other streams.
const SLAB: usize = 16;
const _: () = assert!(plan::ROW_MULTIPLE % SLAB == 0 && SLAB % 8 == 0);

/// A cache line of the staging buffer: each part starts on a line, and so does every staged
/// row at the padded pitch (whole lines), so wide accesses to them do not straddle two lines.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// Runs `f` with this thread's staging buffer grown to at least `lines` lines. Kept from call
/// to call (Rayon's threads live on), so a staging walk does not pay for a fresh buffer's page
/// faults: at most a slab of a tile's width per staged operand, per thread. `None`, having run
/// nothing, when the buffer cannot be allocated (the caller then reads in place: slower, never
/// an abort).
fn with_staging<R>(lines: usize, f: impl FnOnce(&mut [Line]) -> R) -> Option<R> {
    thread_local! {
        static STAGING: std::cell::RefCell<Vec<Line>> = const { std::cell::RefCell::new(Vec::new()) };
    }
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
            Some(f(&mut buffer[..lines]))
        }
        // Never nested in practice; a fresh buffer keeps it correct if it were.
        Err(_) => {
            let mut buffer = Vec::new();
            grown(&mut buffer)?;
            Some(f(&mut buffer))
        }
    })
}

/// Runs `block` (operand `k` at `ptrs[k]`) [`SLAB`] rows and at most [`plan::TILE`] columns
/// at a time, each operand with `staged[k]` first copied, transposed, into `parts[k]`, so the
/// kernel reads it with unit stride. A slab's staged rows stay in L1 from the transpose to the
/// kernel. When every other operand is contiguous across a slab's rows (or broadcast), the
/// staged rows are packed too and the slab goes to the kernel as one long run: short rows
/// would each pay for the vector loop's start and end.
///
/// # Safety
/// Every element the block addresses is an element of its operand (the written ones distinct
/// and this thread's); an operand with `staged[k]` is plain with a nonzero `block.step[k]`,
/// and `parts[k]` is this thread's, room for [`SLAB`] rows at the staging pitch of its elements.
unsafe fn run_staged<const N: usize>(
    ptrs: [*mut u8; N],
    block: Block<N>,
    operands: [Operand; N],
    staged: &[bool; N],
    parts: [*mut Line; N],
    kernel: &impl BlockKernel<N>,
    log: Option<&FreshLog>,
) {
    for first in (0..block.rows).step_by(SLAB) {
        for c0 in (0..block.n).step_by(plan::TILE) {
            let [rows, n] = [SLAB.min(block.rows - first), plan::TILE.min(block.n - c0)];
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
                // through the register transposes); other steps are gathered as they come.
                let (src, step, dst, p) = match block.step[k] {
                    // SAFETY: with a step of -1, row `rows - 1` of the piece is `rows - 1`
                    // elements before `at[k]`, an element of the block; the buffer holds SLAB
                    // rows of `pitch` elements, and `rows <= SLAB`.
                    -1 => unsafe {
                        (
                            at[k].sub((rows - 1) * size),
                            1,
                            buffer.add((rows - 1) * pitch * size),
                            -(pitch as isize),
                        )
                    },
                    step => (at[k], step, buffer, pitch as isize),
                };
                // SAFETY: the piece's elements of operand `k` are at
                // `at[k] + c * inner[k] + r * step[k]` (r < rows, c < n), all inside its array,
                // so `src + c * inner[k] + r * step` is too (for a step of -1, `src` is the
                // last row's); the buffer holds SLAB rows of its elements at the staging pitch
                // (n is at most that), and `dst` is the first row written of the `rows` the copy
                // fills; its elements are aligned (plain sizes are at most 8) and the buffer is
                // this thread's own.
                unsafe {
                    transpose::transpose_tile(src, block.inner[k], step, dst, p, size, [rows, n])
                };
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

/// Whether a small block that reads an operand across its rows goes to the planner's tiles
/// instead ([`Plan::tiled`], which needs [`plan::MIN_TILE`] a side): when its rows are wider
/// than a tile (staged a tile's width at a time, 300x300 f32 measured 2.2-2.5x the contiguous
/// add, against 1.9x in tiles), or when such an operand is not staged (tiles keep what is
/// gathered in cache).
fn tiles_small<const N: usize>(block: &Block<N>, staged: &[bool; N]) -> bool {
    let across = |k: usize| plan::reads_across(block.step[k], block.inner[k]);
    block.rows >= plan::MIN_TILE
        && block.n >= plan::MIN_TILE
        && (1..N).any(across)
        && (block.n > plan::TILE || (1..N).any(|k| across(k) && !staged[k]))
}

/// A small walk (serial: below [`parallel::PARALLEL_THRESHOLD_BYTES`], elements of at most
/// `width` bytes) as one block, when its dims merge into at most two in their own order: the
/// common small cases then skip planning altogether. The block's inner loop runs along the
/// written array's smaller stride (data this small sits in cache, but a strided inner loop
/// does not vectorise); an input read across the block's rows is staged, see [`staged`].
fn small_block<const N: usize>(
    shape: &[usize],
    strides: &[&[isize]; N],
    width: usize,
) -> Option<Block<N>> {
    let len = shape
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))?;
    if len == 0 || !parallel::is_small(len, width) {
        return None;
    }
    // (len, strides) of the inner and outer merged dims.
    let mut merged: [(usize, [isize; N]); 2] = [(1, [0; N]); 2];
    let mut used = 0;
    for d in (0..shape.len()).rev() {
        let n = shape[d];
        if n == 1 {
            continue;
        }
        let s: [isize; N] = std::array::from_fn(|k| strides[k][d]);
        if used > 0 {
            let (m, t) = merged[used - 1];
            if (0..N).all(|k| s[k] == t[k] * m as isize) {
                merged[used - 1].0 *= n;
                continue;
            }
        }
        if used == 2 {
            return None;
        }
        merged[used] = (n, s);
        used += 1;
    }
    let [(n, inner), (rows, step)] = merged;
    if rows > 1 && step[0].unsigned_abs() < inner[0].unsigned_abs() {
        // The written array runs along the outer dim (F order): walk the two the other way
        // round, as one run when every operand continues from one column into the next (all
        // F-ordered: 64x64 f32 1.26 us through the planner, ndarray 0.84 us).
        if (0..N).all(|k| inner[k] == step[k] * rows as isize) {
            return Some(Block {
                n: n * rows,
                inner: step,
                rows: 1,
                step: [0; N],
            });
        }
        return Some(Block {
            n: rows,
            inner: step,
            rows: n,
            step: inner,
        });
    }
    Some(Block {
        n,
        inner,
        rows,
        step,
    })
}

/// The engine's one precondition on its inputs, which [`Src`]'s constructors make true for
/// the shape they were built at: each is seen at the output's shape (a mismatch would be a bug
/// in the crate, never a user error, which the shape rules catch).
#[inline(always)]
fn same_shape<T>(out: &[usize], input: &Src<'_, T>) {
    #[cold]
    #[inline(never)]
    fn mismatch(out: &[usize], input: &[usize]) -> ! {
        panic!("engine: an input seen at {input:?}, not at the output shape {out:?}")
    }
    if out != input.shape() {
        mismatch(out, input.shape())
    }
}

/// `out[i] = f(a[i])`.
pub(crate) fn map<S, A, C, D>(
    out: &mut ArrayRef<S, D>,
    a: &Src<'_, A>,
    f: &(impl Fn(A) -> C + Sync),
) where
    S: Sink<C> + Send,
    A: Clone + Sync,
    D: Dimension,
{
    let ptr = out.as_mut_ptr();
    // SAFETY: `out` is a live array, unique (borrowed mutably); `a` is seen at its shape.
    unsafe { map_raw(out.shape(), ptr, out.strides(), a, f, None) }
}

/// [`map`] through raw parts of the output, with a fresh output's log.
///
/// # Safety
/// `out` with `out_strides` addresses distinct slots of `S` at every index of `shape`, which
/// nothing else touches during the walk.
unsafe fn map_raw<S, A, C>(
    shape: &[usize],
    out: *mut S,
    out_strides: &[isize],
    a: &Src<'_, A>,
    f: &(impl Fn(A) -> C + Sync),
    log: Option<&FreshLog>,
) where
    S: Sink<C> + Send,
    A: Clone + Sync,
{
    same_shape(shape, a);
    let operands = [
        Operand::output(SyncPtr(out)),
        Operand::input(SyncPtr::src(a)),
    ];
    let kernel = kernel::Map::<S, A, _>(f, PhantomData);
    // SAFETY: `a` reads one of its elements at every index of its shape, which is `shape`;
    // the output as the caller promised; the kernel's types are the operands'.
    unsafe { run(shape, [out_strides, &a.strides], operands, &kernel, log) }
}

/// `out[i] = f(a[i], b[i])`.
pub(crate) fn zip<S, A, B, C, D>(
    out: &mut ArrayRef<S, D>,
    a: &Src<'_, A>,
    b: &Src<'_, B>,
    f: &(impl Fn(A, B) -> C + Sync),
) where
    S: Sink<C> + Send,
    A: Clone + Sync,
    B: Clone + Sync,
    D: Dimension,
{
    let ptr = out.as_mut_ptr();
    // SAFETY: as in `map`.
    unsafe { zip_raw(out.shape(), ptr, out.strides(), a, b, f, None) }
}

/// [`zip`] through raw parts of the output, with a fresh output's log.
///
/// # Safety
/// As [`map_raw`].
unsafe fn zip_raw<S, A, B, C>(
    shape: &[usize],
    out: *mut S,
    out_strides: &[isize],
    a: &Src<'_, A>,
    b: &Src<'_, B>,
    f: &(impl Fn(A, B) -> C + Sync),
    log: Option<&FreshLog>,
) where
    S: Sink<C> + Send,
    A: Clone + Sync,
    B: Clone + Sync,
{
    same_shape(shape, a);
    same_shape(shape, b);
    let operands = [
        Operand::output(SyncPtr(out)),
        Operand::input(SyncPtr::src(a)),
        Operand::input(SyncPtr::src(b)),
    ];
    let strides = [out_strides, &a.strides[..], &b.strides];
    let kernel = kernel::Zip::<S, A, B, _>(f, PhantomData);
    // SAFETY: as in `map_raw`, for both inputs.
    unsafe { run(shape, strides, operands, &kernel, log) }
}

/// `out[i] = f(a[i], b[i], c[i])`.
pub(crate) fn zip3<S, A, B, C, R, D>(
    out: &mut ArrayRef<S, D>,
    a: &Src<'_, A>,
    b: &Src<'_, B>,
    c: &Src<'_, C>,
    f: &(impl Fn(A, B, C) -> R + Sync),
) where
    S: Sink<R> + Send,
    A: Clone + Sync,
    B: Clone + Sync,
    C: Clone + Sync,
    D: Dimension,
{
    let ptr = out.as_mut_ptr();
    // SAFETY: as in `map`.
    unsafe { zip3_raw(out.shape(), ptr, out.strides(), (a, b, c), f, None) }
}

/// [`zip3`] through raw parts of the output, with a fresh output's log.
///
/// # Safety
/// As [`map_raw`].
#[allow(clippy::type_complexity)]
unsafe fn zip3_raw<S, A, B, C, R>(
    shape: &[usize],
    out: *mut S,
    out_strides: &[isize],
    (a, b, c): (&Src<'_, A>, &Src<'_, B>, &Src<'_, C>),
    f: &(impl Fn(A, B, C) -> R + Sync),
    log: Option<&FreshLog>,
) where
    S: Sink<R> + Send,
    A: Clone + Sync,
    B: Clone + Sync,
    C: Clone + Sync,
{
    same_shape(shape, a);
    same_shape(shape, b);
    same_shape(shape, c);
    let operands = [
        Operand::output(SyncPtr(out)),
        Operand::input(SyncPtr::src(a)),
        Operand::input(SyncPtr::src(b)),
        Operand::input(SyncPtr::src(c)),
    ];
    let strides = [out_strides, &a.strides[..], &b.strides, &c.strides];
    let kernel = kernel::Zip3::<S, A, B, C, _>(f, PhantomData);
    // SAFETY: as in `map_raw`, for the three inputs.
    unsafe { run(shape, strides, operands, &kernel, log) }
}

/// `out[i] = f(out[i], b[i])`, in place.
pub(crate) fn update<A, B, D>(
    out: &mut ArrayRef<A, D>,
    b: &Src<'_, B>,
    f: &(impl Fn(A, B) -> A + Sync),
) where
    A: Clone + Send + Sync,
    B: Clone + Sync,
    D: Dimension,
{
    same_shape(out.shape(), b);
    let operands = [
        Operand::output(SyncPtr(out.as_mut_ptr())),
        Operand::input(SyncPtr::src(b)),
    ];
    let kernel = kernel::Update::<A, B, _>(f, PhantomData);
    // SAFETY: `out` is a live array, unique (borrowed mutably, so `b` cannot overlap it); `b`
    // reads one of its elements at every index of `out`'s shape.
    unsafe {
        run(
            out.shape(),
            [out.strides(), &b.strides],
            operands,
            &kernel,
            None,
        )
    }
}

/// `f(a[i])` into a fresh array of shape `dim` (which `a` is seen at); an error when it cannot
/// be allocated. Its memory order follows `a`'s ([`plan::output_order`]), or is the standard
/// layout with `standard`.
pub(crate) fn collect_map<A, C, D>(
    op: &'static str,
    dim: D,
    a: &Src<'_, A>,
    f: &(impl Fn(A) -> C + Sync),
    standard: bool,
) -> Result<Array<C, D>>
where
    A: Clone + Sync,
    C: Send,
    D: Dimension,
{
    let follow = [a.strides()];
    let out = alloc_for(op, dim, if standard { &[] } else { &follow })?;
    // SAFETY: `map_raw` walks every index of the fresh output once, each kernel call through
    // `call_logged` with the log; the output is unique.
    Ok(unsafe {
        fresh::fill(out, |o, log| {
            let ptr = o.as_mut_ptr();
            map_raw(o.shape(), ptr, o.strides(), a, f, log)
        })
    })
}

/// `f(a[i], b[i])` into a fresh array of shape `dim`, as [`collect_map`].
pub(crate) fn collect_zip<A, B, C, D>(
    op: &'static str,
    dim: D,
    a: &Src<'_, A>,
    b: &Src<'_, B>,
    f: &(impl Fn(A, B) -> C + Sync),
) -> Result<Array<C, D>>
where
    A: Clone + Sync,
    B: Clone + Sync,
    C: Send,
    D: Dimension,
{
    let out = alloc_for(op, dim, &[a.strides(), b.strides()])?;
    // SAFETY: as in `collect_map`.
    Ok(unsafe {
        fresh::fill(out, |o, log| {
            let ptr = o.as_mut_ptr();
            zip_raw(o.shape(), ptr, o.strides(), a, b, f, log)
        })
    })
}

/// `f(a[i], b[i], c[i])` into a fresh array of shape `dim`, as [`collect_map`].
pub(crate) fn collect_zip3<A, B, C, R, D>(
    op: &'static str,
    dim: D,
    (a, b, c): (&Src<'_, A>, &Src<'_, B>, &Src<'_, C>),
    f: &(impl Fn(A, B, C) -> R + Sync),
) -> Result<Array<R, D>>
where
    A: Clone + Sync,
    B: Clone + Sync,
    C: Clone + Sync,
    R: Send,
    D: Dimension,
{
    let out = alloc_for(op, dim, &[a.strides(), b.strides(), c.strides()])?;
    // SAFETY: as in `collect_map`.
    Ok(unsafe {
        fresh::fill(out, |o, log| {
            let ptr = o.as_mut_ptr();
            zip3_raw(o.shape(), ptr, o.strides(), (a, b, c), f, log)
        })
    })
}

/// An uninitialised output of shape `dim`, laid out in the memory order `inputs` (their
/// strides at `dim`) share ([`plan::output_order`]): standard layout unless they agree on
/// another.
fn alloc_for<C, D: Dimension>(
    op: &'static str,
    dim: D,
    inputs: &[&[isize]],
) -> Result<Array<MaybeUninit<C>, D>> {
    let order = plan::output_order(dim.slice(), inputs);
    alloc::uninit::<C, D>(op, dim, order.as_deref())
}

/// Outer dims cut into this many blocks when a large reduction folds its outermost dim: each
/// block reduces into a private accumulator and the blocks are combined in order, so the result
/// does not depend on the number of threads.
const REDUCE_BLOCKS: usize = 8;

/// A fold: its function, its identity (`f(identity, x) == x`) and the order it may combine in.
pub(crate) struct Fold<'a, A, F> {
    pub identity: &'a A,
    pub f: &'a F,
    pub order: FoldOrder,
}

/// Folds `src` into `acc` with `f`: `acc_dim[d]` names the dim of `acc` that src dim `d` maps to
/// (`None` for a dim folded away); an `acc` dim of size 1 whose src dim is larger folds too.
/// With `fill`, `acc` is first filled with `identity`; without, it must already hold it (or the
/// values to fold into). The order in which
/// each element's contributions are combined depends on the shapes only, never on the threads;
/// with [`FoldOrder::Index`] it is the source's index order (row-major), so `f` need only be
/// associative. An error, having folded nothing, when a partial accumulator of a parallel fold
/// cannot be allocated.
pub(crate) fn reduce<A, D, E, F>(
    op: &'static str,
    acc: &mut ArrayRef<A, E>,
    acc_dim: &[Option<usize>],
    src: &ArrayRef<A, D>,
    fold: Fold<'_, A, F>,
    fill: bool,
) -> crate::error::Result<()>
where
    A: Clone + Send + Sync,
    D: Dimension,
    E: Dimension,
    F: Fn(A, A) -> A + Sync,
{
    let Fold { identity, f, order } = fold;
    let strides = acc_strides(acc, acc_dim, src.shape());
    let plan_of = |acc_strides: &[isize]| match order {
        // Walk in the source's memory order: the big operand streams, the accumulator repeats.
        FoldOrder::Any => Plan::new(src.shape(), [acc_strides, src.strides()], [1, 0]),
        FoldOrder::Index => Plan::logical(src.shape(), [acc_strides, src.strides()]),
    };
    let plan = plan_of(&strides);
    let ps = SyncPtr::of(src);
    let rows = plan.dims[0];
    let row_len = plan.len.checked_div(rows).unwrap_or(0);
    /// Folds the runs of `range` of `plan` (over `src`'s shape, an accumulator at `pa` and
    /// `src` at `ps`).
    ///
    /// # Safety
    /// The plan's accumulator strides address elements of the accumulator at `pa`, which no
    /// other thread touches at the offsets `range` reaches; `ps` is `src`'s first element and the
    /// plan's source strides are `src`'s.
    #[allow(clippy::too_many_arguments)]
    unsafe fn fold_range<A: Clone>(
        pa: SyncPtr<A>,
        ps: SyncPtr<A>,
        plan: &Plan<2>,
        range: std::ops::Range<usize>,
        identity: &A,
        f: &impl Fn(A, A) -> A,
        order: FoldOrder,
    ) {
        let inner = plan.inner_strides();
        plan.for_each_run(range, |o, n| {
            // SAFETY: the plan's offsets address elements of both arrays, and the accumulator's
            // are this thread's, as the caller promised.
            unsafe { kernel::fold_row(pa.at(o[0]), ps.at(o[1]), n, inner, identity, f, order) }
        })
    }
    let folds_outer = plan.strides[0][0] == 0 && rows > 1;
    let width = std::mem::size_of::<A>();
    let serial = parallel::is_small(plan.len, width) || !folds_outer;
    // The outer dim folds in parallel: private accumulators per block, each folding a contiguous
    // range of the outer dim, combined in block order. All are allocated before `acc` is
    // touched, so a refusal leaves it as it was.
    let blocks = if serial { 0 } else { REDUCE_BLOCKS.min(rows) };
    let partials = (0..blocks)
        .map(|_| {
            let part = alloc::filled(op, IxDyn(acc.shape()), identity)?;
            Ok(std::sync::Mutex::new(part))
        })
        .collect::<crate::error::Result<Vec<_>>>()?;
    if fill {
        acc.fill(identity.clone());
    }
    // Taken after the fill: a pointer from before a later `&mut` use of `acc` would be stale.
    let pa = SyncPtr(acc.as_mut_ptr());
    if serial {
        // Each thread takes whole outer indices, which own distinct accumulator elements (or
        // the outer dim folds and the work stays on one thread).
        let pieces = if folds_outer {
            1
        } else {
            pieces(plan.len, width)
        };
        split(rows, pieces, 1, &|r| {
            let range = r.start * row_len..r.end * row_len;
            // SAFETY: the plan is over `src` and `acc` (borrowed mutably: unique); each thread
            // takes whole outer indices, which own distinct accumulator elements (or the outer
            // dim folds and the work stays on one thread).
            unsafe { fold_range(pa, ps, &plan, range, identity, f, order) }
        });
        return Ok(());
    }
    for_each_index(blocks, pieces(plan.len, width), &|b| {
        let mut part = partials[b].lock().unwrap_or_else(|e| e.into_inner());
        let part_plan = plan_of(&acc_strides(&part, acc_dim, src.shape()));
        let (r0, r1) = (rows * b / blocks, rows * (b + 1) / blocks);
        let range = r0 * row_len..r1 * row_len;
        // SAFETY: the plan is over `src` and this block's own partial accumulator.
        unsafe {
            fold_range(
                SyncPtr(part.as_mut_ptr()),
                ps,
                &part_plan,
                range,
                identity,
                f,
                order,
            )
        }
    });
    for p in partials {
        let part = p.into_inner().unwrap_or_else(|e| e.into_inner());
        update(acc, &Src::of(&part), f);
    }
    Ok(())
}

/// The strides at `src_shape` of an accumulator whose dim `acc_dim[d]` receives src dim `d`:
/// 0 where src dims fold away or broadcast (size 1 in the accumulator).
fn acc_strides<A, E: Dimension>(
    acc: &ArrayRef<A, E>,
    acc_dim: &[Option<usize>],
    src_shape: &[usize],
) -> Vec<isize> {
    (0..src_shape.len())
        .map(|d| match acc_dim[d] {
            Some(a) if acc.shape()[a] == src_shape[d] => acc.strides()[a],
            _ => 0,
        })
        .collect()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use std::sync::atomic::Ordering;

    use ndarray::{arr0, Array2};

    use crate::prelude::*;

    /// Small walks skip the planner, their inner loop along the written array's smaller stride
    /// (so it vectorises): an F-ordered output is walked down its columns.
    #[test]
    fn small_walks_keep_unit_stride_outputs() {
        let c = super::small_block(&[64, 64], &[&[64, 1], &[64, 1]], 4).expect("one block");
        assert_eq!((c.n, c.inner), (4096, [1, 1]));
        let row = super::small_block(&[64, 64], &[&[64, 1], &[0, 1]], 4).expect("one block");
        assert_eq!((row.n, row.rows, row.step), (64, 64, [64, 0]));
        let (m, n) = (48isize, 40isize);
        let (c, f) = ([n, 1], [1, m]);
        let shape = [m as usize, n as usize];
        // All F-ordered (and a scalar): one run down the columns.
        let block = super::small_block(&shape, &[&f, &f, &[0, 0]], 4).expect("one block");
        assert_eq!((block.n, block.rows, block.inner), (48 * 40, 1, [1, 1, 0]));
        // An F-ordered output with a row broadcast down it, or a C-ordered input: rows down
        // the output's columns (the C-ordered input read across them).
        let block = super::small_block(&shape, &[&f, &[0, 1], &c], 4).expect("one block");
        assert_eq!((block.n, block.rows), (48, 40));
        assert_eq!((block.inner, block.step), ([1, 0, n], [m, 1, 1]));
        // A C-ordered output: as it comes.
        let block = super::small_block(&shape, &[&c, &f, &c], 4).expect("one block");
        assert_eq!((block.n, block.rows), (40, 48));
        assert_eq!((block.inner, block.step), ([1, m, 1], [n, 1, n]));
    }

    /// Blocks stage an operand read across their rows from 8x8; small walks whose rows are
    /// wider than a tile, or that read such an operand without staging it, go to the planner.
    #[test]
    fn transposed_operands_stage_or_tile() {
        let block = |n: usize| {
            let s = n as isize;
            super::small_block(&[n, n], &[&[s, 1], &[1, s], &[s, 1]], 4).expect("small")
        };
        let f32s = |ptr: *const f32| super::Operand::input(super::SyncPtr(ptr as *mut f32));
        let x = [0f32];
        let plain = [
            super::Operand::output(super::SyncPtr(std::ptr::null_mut::<f32>())),
            f32s(x.as_ptr()),
            f32s(x.as_ptr()),
        ];
        for n in [8, 64, 200, 256] {
            let b = block(n);
            let staged = super::staged(&b, plain);
            assert_eq!(staged, [false, true, false], "{n}x{n}");
            assert!(!super::tiles_small(&b, &staged));
            // Not plain (never staged): tiles once they apply.
            let tiles = n >= super::plan::MIN_TILE;
            assert_eq!(super::tiles_small(&b, &[false; 3]), tiles, "{n}x{n}");
        }
        let wide = block(300);
        assert!(super::tiles_small(&wide, &super::staged(&wide, plain)));
        // Read backwards down the rows (a flipped transpose): staged too; other steps (a
        // transpose sliced with a step) where the copy gathers, which needs 32-bit offsets.
        let gathers = super::transpose::gathers(4, 64);
        for (step, inner, want) in [
            (-1, 64, true),
            (2, 64, gathers),
            (-3, 64, gathers),
            (0, 64, false),
            (1, 1 << 30, true),
            (2, 1 << 30, false),
        ] {
            let mut b = block(64);
            (b.step[1], b.inner[1]) = (step, inner);
            assert_eq!(
                super::staged(&b, plain),
                [false, want, false],
                "step {step}, stride {inner}"
            );
        }
        assert_eq!(super::staged(&block(7), plain), [false; 3]);
        let names = [String::new()];
        let text = super::Operand::input(super::SyncPtr(names.as_ptr() as *mut String));
        assert_eq!(
            super::staged(&block(64), [plain[0], text, plain[2]]),
            [false; 3]
        );
    }

    /// A staging buffer that cannot be allocated is refused (the block is then read in place),
    /// never an abort; one that can is this thread's, kept for the next call.
    #[test]
    fn staging_buffers_are_fallible() {
        assert!(super::with_staging(usize::MAX / 64, |_| ()).is_none());
        let first = super::with_staging(4, |b| (b.len(), b.as_ptr() as usize)).unwrap();
        let again = super::with_staging(2, |b| (b.len(), b.as_ptr() as usize)).unwrap();
        assert_eq!((first.0, again.0), (4, 2));
        assert_eq!(first.1, again.1, "the buffer is kept");
    }

    /// The AVX2 copy of the kernels gives the bits the baseline copy gives, for every op family,
    /// the special float values and integer edge cases, and every kind of inner loop.
    #[test]
    fn wide_and_baseline_kernels_agree() {
        let specials = [
            f32::NAN,
            -0.0,
            0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1.5,
            -2.25,
            7.0,
        ];
        let (m, n) = (300, 270); // above the tile size: transposed walks stage their tiles
        let x = Array2::from_shape_fn((m, n), |(i, j)| specials[(i * 3 + j) % 8] * (j % 5) as f32);
        let y = Array2::from_shape_fn((m, n), |(i, j)| specials[(i + j * 7) % 8]);
        let yt = Array2::from_shape_fn((n, m), |(j, i)| y[[i, j]]);
        let (row, col) = (y.slice(ndarray::s![..1, ..]), y.slice(ndarray::s![.., ..1]));
        let k = Array2::from_shape_fn((m, n), |(i, j)| (i as i32 - 150) * (j as i32 * 977));
        let d = Array2::from_shape_fn((m, n), |(i, j)| (i % 7) as i32 - 3 + j as i32 % 2);
        // Which NaN an operation returns is not specified (by Rust or XLA): all NaNs compare
        // equal, every other value by its bits.
        let bits = |a: Array2<f32>| {
            let canonical = |v: f32| if v.is_nan() { f32::NAN } else { v };
            a.iter()
                .map(|&v| canonical(v).to_bits())
                .collect::<Vec<u32>>()
        };
        let ints = |a: Array2<i32>| a.iter().map(|&v| v as u32).collect::<Vec<u32>>();
        let run = || {
            let mut acc = x.clone();
            acc.sub_assign_bcast(&row, &[]).unwrap();
            vec![
                bits(x.add_bcast(&y, &[]).unwrap()),
                bits(x.sub_bcast(&row, &[]).unwrap()),
                bits(x.mul_bcast(&col, &[]).unwrap()),
                bits(x.div_bcast(&yt.t(), &[]).unwrap()),
                bits(x.max_bcast(&y, &[]).unwrap()),
                bits(x.min_bcast(&arr0(-0.0), &[]).unwrap()),
                bits(x.rem_bcast(&y, &[]).unwrap()),
                bits(x.pow_bcast(&col, &[]).unwrap()),
                bits(acc),
                ints(k.add_bcast(&d, &[]).unwrap()),
                ints(k.mul_bcast(&d.t().t(), &[]).unwrap()),
                ints(k.div_bcast(&d, &[]).unwrap()),
                ints(k.rem_bcast(&d, &[]).unwrap()),
                ints(k.pow_bcast(&d, &[]).unwrap()),
                ints(k.max_bcast(&arr0(0), &[]).unwrap()),
                x.lt_bcast(&y, &[])
                    .unwrap()
                    .iter()
                    .map(|&b| b as u32)
                    .collect(),
                x.ne_bcast(&yt.t(), &[])
                    .unwrap()
                    .iter()
                    .map(|&b| b as u32)
                    .collect(),
                bits(x.gt_bcast(&y, &[]).unwrap().select_bcast(&x, &y).unwrap()),
            ]
        };
        super::kernel::WIDE_SIMD.store(false, Ordering::Relaxed);
        let baseline = run();
        super::kernel::WIDE_SIMD.store(true, Ordering::Relaxed);
        let wide = run();
        for (i, (w, b)) in wide.iter().zip(&baseline).enumerate() {
            let first = w.iter().zip(b).position(|(w, b)| w != b);
            assert_eq!(first, None, "op {i}: {:?}", first.map(|k| (w[k], b[k])));
        }
    }
}
