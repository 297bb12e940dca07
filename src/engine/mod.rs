//! The kernel engine: every elementwise operation of the crate runs through here, on two
//! executors: the walk (road 1, the eager ops, compiled per element function) and the row
//! executor ([`rows`]: road 2, programs, a chain of table kernels and folds a tile at a time).
//!
//! ```text
//! a shape rule  -> the output shape and the inputs seen at it ([`Src`]: stride 0 where broadcast)
//! collect       -> a small result whose inputs are dense in one memory order: one run, no plan
//!                  otherwise a fresh output in the memory order its inputs share, then `walk`
//! into, assign  -> inputs at their own shapes, small and dense in the standard layout with the
//!                  caller's array: one run, no plan; otherwise `walk` over the caller's array
//! walk          -> Plan: drop size-1 dims, order dims by the written array's strides, merge
//!                  contiguous dims; a large walk is split in contiguous ranges over Rayon's
//!                  threads ([`parallel`])
//! block         -> an input read across the block's rows is staged ([`stage`]), then the kernel
//!                  runs each run of the inner loop: slices for unit strides, a scalar for stride 0
//! ```
//!
//! The front doors (`collect`, `into`, `assign`) are generic; after them the kernel is a trait
//! object ([`BlockKernel`]) and the walk is compiled once, here ([`Walk`]). Reductions
//! ([`reduce()`]) use the same planner and the kernels' fold. Programs' kernels ([`table`]) run
//! on the row executor (a single op as a chain of one step) with the same planner, thread
//! buffer ([`stage::with_staging`]) and split; [`kernel::simd`] picks every loop's SIMD copy.

mod alloc;
#[cfg(feature = "stablehlo")]
mod caches;
mod fresh;
mod kernel;
mod operand;
pub(crate) mod parallel;
mod plan;
pub(crate) mod reduce;
#[cfg(feature = "stablehlo")]
pub(crate) mod rows;
mod stage;
#[cfg(feature = "stablehlo")]
pub(crate) mod table;
mod transpose;

use std::cell::Cell;
use std::mem::MaybeUninit;

use ndarray::{Array, ArrayRef, Dimension};

use crate::error::Result;

#[cfg(feature = "stablehlo")]
pub(crate) use alloc::Blank;
pub(crate) use alloc::{filled, refused, with_capacity};
use fresh::FreshLog;
pub(crate) use kernel::Block;
pub(crate) use kernel::{
    widest, ApplyWith, BlockKernel, Fold, FoldOrder, Part, Parts, SrcMut, Widest, Writes, ZipN,
    CHUNK,
};
pub(crate) use operand::Shared;
pub(crate) use operand::Strides;
pub(crate) use operand::{Operand, Src};
pub(crate) use plan::memory_order;
use plan::{dense_in, output_order, Order, Plan};
pub(crate) use reduce::reduce;

/// A fresh array of `shape` whose elements are `size` bytes aligned to `align`, for a writer
/// that fills every element, laid out as a result read from inputs of `strides` (at `shape`)
/// is ([`Fresh::FollowInputs`]); an error when it cannot be allocated.
#[cfg(feature = "stablehlo")]
pub(crate) fn blank_like(
    op: &'static str,
    (size, align): (usize, usize),
    shape: &[usize],
    strides: &[&[isize]],
) -> Result<Blank> {
    let order = order_like(shape, strides);
    Blank::new(op, size, align, shape, order.as_ref())
}

/// [`output_order`], apart from the element types of the generic callers.
#[inline(never)]
#[cfg(feature = "stablehlo")]
fn order_like(shape: &[usize], strides: &[&[isize]]) -> Order {
    output_order(shape, strides)
}

/// The strides of a result of `shape` read from inputs of `strides`, as [`blank_like`] lays
/// it out.
#[cfg(feature = "stablehlo")]
pub(crate) fn strides_like(shape: &[usize], strides: &[&[isize]]) -> operand::Strides {
    alloc::contiguous_strides(shape, order_like(shape, strides).as_ref())
}

/// How a fresh result is laid out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fresh {
    /// In the memory order its inputs share ([`plan::output_order`]: NumPy's `order='K'`).
    FollowInputs,
    /// In standard layout, whatever its inputs' order.
    Standard,
}

/// `kernel` into a fresh array of shape `dim` (the shape its inputs are seen at), laid out as
/// `layout` says; an error when it cannot be allocated. If the element function panics, the
/// elements written so far are dropped ([`fresh::fill`]).
///
/// The engine's generic entry points ([`collect`], [`into`], [`reduce()`]) call their bodies
/// through a function pointer. rustc's MIR inliner, optimizing each generic function of the
/// crate, walks the call graph of every callee it can resolve to rule out cycles; from each of
/// the front doors (every op's methods, operators and wrappers) that walk crossed the whole
/// engine again, most of the library's metadata time (`docs/experiments.md`, "Build cost").
/// A pointer ends the walk there, and LLVM still sees a direct call.
#[inline(always)]
pub(crate) fn collect<C, D, K, const N: usize>(
    op: &'static str,
    dim: D,
    kernel: &K,
    layout: Fresh,
) -> Result<Array<C, D>>
where
    C: Send,
    D: Dimension,
    K: BlockKernel<N> + Writes<MaybeUninit<C>>,
    Engine: Walk<N>,
{
    let body: fn(_, _, &K, _) -> _ = collect_in::<C, D, K, N>;
    body(op, dim, kernel, layout)
}

/// [`collect`]'s body.
fn collect_in<C, D, K, const N: usize>(
    op: &'static str,
    dim: D,
    kernel: &K,
    layout: Fresh,
) -> Result<Array<C, D>>
where
    C: Send,
    D: Dimension,
    K: BlockKernel<N> + Writes<MaybeUninit<C>>,
    Engine: Walk<N>,
{
    let order = match layout {
        Fresh::FollowInputs => {
            let strides: [&[isize]; N] =
                std::array::from_fn(|k| &kernel.input(k.max(1)).strides[..]);
            output_order(dim.slice(), &strides[1..])
        }
        Fresh::Standard => Order::Standard,
    };
    let out = alloc::uninit::<C, D>(op, dim, order.as_ref())?;
    // SAFETY: the fresh output is unique; the inputs are seen at its shape; `run` writes every
    // element once, each kernel call through `call_logged` with the log.
    Ok(unsafe { fresh::fill(out, |o, log| run(Operand::output(o), kernel, log)) })
}

/// `kernel` into the caller's `out` (of the shape its inputs are seen at); its body through a
/// pointer, as [`collect`]'s.
#[inline(always)]
pub(crate) fn into<S, D, K, const N: usize>(out: &mut ArrayRef<S, D>, kernel: &K)
where
    S: Send,
    D: Dimension,
    K: BlockKernel<N> + Writes<S>,
    Engine: Walk<N>,
{
    let body: fn(&mut _, &K) = into_in::<S, D, K, N>;
    body(out, kernel)
}

/// [`into`]'s body.
fn into_in<S, D, K, const N: usize>(out: &mut ArrayRef<S, D>, kernel: &K)
where
    S: Send,
    D: Dimension,
    K: BlockKernel<N> + Writes<S>,
    Engine: Walk<N>,
{
    let out = Operand::output(out);
    // SAFETY: `out` is a live array, unique (borrowed mutably), so no input overlaps it.
    unsafe { run(out, kernel, None) }
}

/// The walk into `out` ([`walk`]), or one kernel call when it is one run: small (serial, plain
/// stores, [`is_one_run`]) with `out` dense in C or F order and each input dense in the same
/// order or read at one element. Most small ops of numeric code are such a run, and skip the
/// plan; it pays at 64x64 too (docs/experiments.md, "Build cost"). Never inlined: its callers know
/// the kernel's type, and inlined there the short run's direct call would compile the kernel's
/// loops once more per op in every dependent; here the kernel is a trait object.
///
/// # Safety
/// As [`walk`].
#[inline(never)]
unsafe fn run<const N: usize>(out: Operand<'_>, kernel: &dyn BlockKernel<N>, log: Option<&FreshLog>)
where
    Engine: Walk<N>,
{
    let inputs: [&Operand<'_>; N] = std::array::from_fn(|k| kernel.input(k.max(1)));
    let order = if dense_in(out.shape, &out.strides, Order::Standard) {
        Some(Order::Standard)
    } else if dense_in(out.shape, &out.strides, Order::Reversed) {
        Some(Order::Reversed)
    } else {
        None
    };
    let len: usize = out.shape.iter().product();
    let inner = order
        .and_then(|order| run_strides(&inputs, order))
        .filter(|_| is_one_run(len, out.size, &inputs[1..]));
    let Some(inner) = inner else {
        // SAFETY: as the caller promised.
        return unsafe { Engine::walk(out, kernel, log) };
    };
    let block = Block {
        n: len,
        inner,
        rows: 1,
        step: [0; N],
    };
    let ptrs = std::array::from_fn(|k| match k {
        // SAFETY: element 0 of the output.
        0 => unsafe { out.at(0) },
        // SAFETY: element 0 of input `k`.
        _ => unsafe { inputs[k].at(0) },
    });
    // SAFETY: the run covers every element of `out`, written once, and each dense input's, in
    // the memory order they share from element 0 (their lowest address, the strides being
    // positive); a scalar input's one element is read at every index. `out` is unique, as the
    // caller promised, and the call runs on this thread.
    unsafe {
        match log {
            None => kernel.block_wide(ptrs, block, &Cell::new(0)),
            Some(_) => fresh::call_logged(kernel, ptrs, block, log),
        }
    }
}

/// The strides of one run over an output laid out densely in `order` (a memory order of its
/// dims): 1 for the output and each input dense in that order, 0 for an input read at one
/// element for every index; `None` when an input is neither.
#[inline(always)]
fn run_strides<const N: usize>(
    inputs: &[&Operand<'_>; N],
    order: Order<&[usize]>,
) -> Option<[isize; N]> {
    let mut inner = [1; N];
    for k in 1..N {
        let o = inputs[k];
        if !dense_in(o.shape, &o.strides, order) {
            if !o.is_scalar() {
                return None;
            }
            inner[k] = 0;
        }
    }
    Some(inner)
}

/// The one decision between one run and a plan ([`run`]): a walk of `len` elements whose
/// inputs are each dense in the output's memory order or read at one element is one run when
/// it is small enough to go serially with plain stores. Its traffic: the output's (elements of
/// `out_size` bytes) and the inputs'.
#[inline(always)]
fn is_one_run(len: usize, out_size: usize, inputs: &[&Operand<'_>]) -> bool {
    let traffic = len
        .saturating_mul(out_size)
        .saturating_add(operand::traffic(len, inputs));
    len > 0 && parallel::is_small(traffic)
}

/// `kernel` for its effect on its written part ([`SrcMut`]), walked into an array of `()` of
/// shape `dim`, which allocates nothing: it cannot fail for the shape of an existing array.
pub(crate) fn update<D, K, const N: usize>(op: &'static str, dim: D, kernel: &K)
where
    D: Dimension,
    K: BlockKernel<N> + Writes<MaybeUninit<()>>,
    Engine: Walk<N>,
{
    let _ = collect::<(), D, K, N>(op, dim, kernel, Fresh::FollowInputs);
}

/// `out[i] = f(out[i], b[i])`, in place ([`update`]).
pub(crate) fn assign<A, B, D>(
    out: &mut ArrayRef<A, D>,
    b: Src<'_, B>,
    f: &(impl Fn(A, B) -> A + Sync),
) where
    A: Clone + Send + Sync,
    B: Clone + Sync,
    D: Dimension,
{
    let dim = out.raw_dim();
    let g = |a: &mut A, b: B| *a = f(a.clone(), b);
    update("assign", dim, &ZipN::new(&g, (SrcMut::of(out), b)));
}

/// The walk over `N` operands, compiled once in this crate: a generic walk would be compiled
/// again in every crate that calls an op. Each op's front door names it as `Engine: Walk<N>`.
pub(crate) trait Walk<const N: usize> {
    /// [`walk`].
    ///
    /// # Safety
    /// As [`walk`].
    unsafe fn walk(out: Operand<'_>, kernel: &dyn BlockKernel<N>, log: Option<&FreshLog>);
}

/// The engine, as the implementor of [`Walk`] for each operand count its kernels have.
pub(crate) struct Engine;

macro_rules! walks {
    ($($n:literal),*) => {$(
        impl Walk<$n> for Engine {
            #[inline(never)]
            unsafe fn walk(
                out: Operand<'_>,
                kernel: &dyn BlockKernel<$n>,
                            log: Option<&FreshLog>,
            ) {
                // SAFETY: as the caller promised.
                unsafe { walk(out, kernel, log) }
            }
        }
    )*};
}
walks!(2, 3, 4, 5, 6, 7);

/// Walks the output `out` and `kernel`'s inputs: the plan, then blocks of contiguous ranges of
/// it, split across threads when large.
/// `log` is a fresh output's log ([`fresh::fill`]).
///
/// # Safety
/// `out` addresses, at every index of its shape, a distinct slot of the kernel's output type
/// that nothing else touches during the walk; the inputs are seen at that shape.
unsafe fn walk<const N: usize>(
    out: Operand<'_>,
    kernel: &dyn BlockKernel<N>,
    log: Option<&FreshLog>,
) {
    let operands: [&Operand<'_>; N] = std::array::from_fn(|k| match k {
        0 => &out,
        _ => kernel.input(k),
    });
    for input in &operands[1..] {
        operand::same_shape(out.shape, input);
    }
    let mut strides: [&[isize]; N] = [&[]; N];
    for (s, o) in strides.iter_mut().zip(&operands) {
        *s = &o.strides[..];
    }
    let len: usize = out.shape.iter().product();
    let traffic = operand::traffic(len, &operands);
    let at = |offs: [isize; N]| -> [*mut u8; N] {
        // SAFETY: the plan's offsets address elements of each operand.
        std::array::from_fn(|k| unsafe { operands[k].at(offs[k]) })
    };
    let plan = Plan::new(out.shape, strides, std::array::from_fn(|k| k));
    if plan.len == 0 {
        return;
    }
    parallel::split(plan.len, traffic, 64, &|range| {
        plan.for_each_block(range, |offs, block| {
            // SAFETY: a block of the plan addresses elements of each operand, the written ones
            // once each, and each range goes to one thread.
            unsafe { stage::run_block(at(offs), block, operands, kernel, log) }
        })
    });
}

/// The unit tests' switch to the baseline copies ([`kernel::simd`]).
#[cfg(all(test, target_arch = "x86_64", feature = "stablehlo"))]
pub(crate) use kernel::tests::WIDE_SIMD;

#[cfg(test)]
#[cfg(target_arch = "x86_64")]
mod tests {
    use std::sync::atomic::Ordering;

    use ndarray::{arr0, Array2};

    use crate::prelude::*;

    /// The AVX2 copy of the kernels gives the bits the baseline copy gives, for every op family,
    /// the special float values and integer edge cases, and every kind of inner loop.
    #[test]
    #[cfg(target_arch = "x86_64")]
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
        let (m, n) = (300, 270); // wider than a staging slab: transposed walks stage in pieces
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
        super::kernel::tests::WIDE_SIMD.store(false, Ordering::Relaxed);
        let baseline = run();
        super::kernel::tests::WIDE_SIMD.store(true, Ordering::Relaxed);
        let wide = run();
        for (i, (w, b)) in wide.iter().zip(&baseline).enumerate() {
            let first = w.iter().zip(b).position(|(w, b)| w != b);
            assert_eq!(first, None, "op {i}: {:?}", first.map(|k| (w[k], b[k])));
        }
    }
}
