//! A fused loop: a chain of table kernels ([`super::table`]) run chunk by chunk over one shape,
//! as numexpr runs an expression: each chunk's intermediates live in this thread's buffers
//! (a few KiB each, so they stay in L1/L2), inputs are read in place at any strides (a
//! broadcast one is a stride-0 read, splatted into a buffer a chunk at a time), and each
//! output is written once. The walk over the shape is the engine's: the planner orders and
//! merges the dims ([`Plan`]), the parallel split cuts it into ranges ([`parallel::split`]).

use std::mem::MaybeUninit;

use super::operand::{self, Operand};
use super::parallel;
use super::plan::Plan;
use super::stage::Line;
use super::table::{copy_strided, Kernel};

/// The most operands (inputs and outputs) one fused loop reads and writes.
pub(crate) const MAX_OPERANDS: usize = 16;

/// The bytes of one register's chunk: 1,024 `f32`s, 256 complex `f64`s.
const CHUNK_BYTES: usize = 4096;

/// One kernel call of the chain: `kernel` into register `out` from registers `args` (as many as
/// the kernel has inputs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    pub kernel: Kernel,
    pub out: usize,
    pub args: [usize; 3],
}

/// A chain over one shape. Registers `0..operands.len()` are the operands' (an input's is read
/// from it; an output's, `written`, is stored to it); the others are intermediates. `sizes`
/// gives every register's element size.
pub(crate) struct Chain<'a> {
    pub operands: &'a [Operand<'a>],
    pub written: &'a [bool],
    pub sizes: &'a [usize],
    pub steps: &'a [Step],
}

/// Runs `chain` over `shape`, the operands seen at it.
///
/// # Safety
/// Each step's kernel is a table kernel for its registers' element types (an output's of
/// `sizes[out]` bytes, with no drop glue); every register a step reads is an input operand or
/// written by an earlier step; each written operand addresses, at every index of `shape`, a
/// distinct slot of its type that nothing else touches, and is written by exactly one step;
/// the inputs are seen at `shape`; at most [`MAX_OPERANDS`] operands.
pub(crate) unsafe fn run(shape: &[usize], chain: &Chain<'_>) {
    let n_ops = chain.operands.len();
    assert!(n_ops <= MAX_OPERANDS, "at most {MAX_OPERANDS} operands");
    let zeros = vec![0isize; shape.len()];
    let strides: [&[isize]; MAX_OPERANDS] = std::array::from_fn(|k| match chain.operands.get(k) {
        Some(o) => &o.strides[..],
        None => &zeros[..],
    });
    // The written operands decide the loop order: they are walked in memory order.
    let mut priority = [0; MAX_OPERANDS];
    let order = (0..MAX_OPERANDS).filter(|&k| chain.written.get(k) == Some(&true));
    let rest = (0..MAX_OPERANDS).filter(|&k| chain.written.get(k) != Some(&true));
    for (slot, k) in order.chain(rest).enumerate() {
        priority[slot] = k;
    }
    let plan = Plan::new(shape, strides, priority);
    if plan.len == 0 {
        return;
    }
    let refs: Vec<&Operand<'_>> = chain.operands.iter().collect();
    let pieces = parallel::pieces(operand::traffic(plan.len, &refs));
    let widest = chain.sizes.iter().copied().max().unwrap_or(1).max(1);
    let chunk = (CHUNK_BYTES / widest).max(1);
    let lines = CHUNK_BYTES.div_ceil(64);
    let inner = plan.inner_strides();
    parallel::split(plan.len, pieces, 64, &|range| {
        let mut buffers = vec![MaybeUninit::<Line>::uninit(); lines * chain.sizes.len()];
        // Every register's pointer derived from one pointer to the buffers: a second
        // `as_mut_ptr` would invalidate those taken before it.
        let base = buffers.as_mut_ptr();
        // SAFETY: register `r`'s lines are within the buffers.
        let buf: Vec<*mut u8> = (0..chain.sizes.len())
            .map(|r| unsafe { base.add(r * lines) }.cast())
            .collect();
        let mut at = vec![std::ptr::null_mut::<u8>(); chain.sizes.len()];
        // A broadcast input's buffer holds a chunk of one element: filled again only when the
        // element changes (a rank-0 constant's never does).
        let mut splat: Vec<(*const u8, usize)> = vec![(std::ptr::null(), 0); n_ops];
        plan.for_each_block(range, |offs, n, rows, step| {
            for r in 0..rows as isize {
                for first in (0..n).step_by(chunk) {
                    let m = chunk.min(n - first);
                    for (k, o) in chain.operands.iter().enumerate() {
                        let (s, z) = (inner[k], o.size as isize);
                        let off = offs[k] + r * step[k] + first as isize * s;
                        // SAFETY: element `off` of operand `k`, within the block.
                        let from = unsafe { o.at(off) };
                        at[k] = match (s, chain.written[k]) {
                            (1, _) => from,
                            (_, true) => buf[k],
                            (0, false) => {
                                if splat[k].0 != from.cast_const() || splat[k].1 < m {
                                    // As many as the block's longest chunk.
                                    let fill = chunk.min(n);
                                    // SAFETY: `from` is an element of input `k`; the buffer
                                    // holds a chunk of its elements.
                                    unsafe { copy_strided(from, 0, buf[k], z, fill, o.size) };
                                    splat[k] = (from, fill);
                                }
                                buf[k]
                            }
                            // SAFETY: `m` elements of input `k` along its stride (0: one
                            // element, repeated); the buffer holds a chunk of them.
                            (_, false) => unsafe {
                                copy_strided(from, s * z, buf[k], z, m, o.size);
                                buf[k]
                            },
                        };
                    }
                    at[n_ops..].copy_from_slice(&buf[n_ops..]);
                    for st in chain.steps {
                        let [a, b, c] = st.args.map(|i| at[i]);
                        // SAFETY: each register holds `m` elements of its type: an operand's
                        // run in place, or a buffer (inputs copied in, outputs and
                        // intermediates written by their step before any later step reads
                        // them), as the caller promised of the chain.
                        unsafe {
                            match st.kernel {
                                Kernel::Map(run) => run([at[st.out], a], m),
                                Kernel::Zip(run) => run([at[st.out], a, b], m),
                                Kernel::Zip3(run) => run([at[st.out], a, b, c], m),
                            }
                        }
                    }
                    for (k, o) in chain.operands.iter().enumerate() {
                        let s = inner[k];
                        if chain.written[k] && s != 1 {
                            let z = o.size as isize;
                            let off = offs[k] + r * step[k] + first as isize * s;
                            // SAFETY: the chunk's `m` results, from the buffer to their places
                            // in output `k` (distinct: an output is never broadcast), this
                            // thread's alone.
                            unsafe { copy_strided(buf[k], z, o.at(off), s * z, m, o.size) };
                        }
                    }
                }
            }
        })
    });
}
