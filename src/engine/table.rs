//! Kernels chosen at run time: one small loop per element function and element type, over one
//! contiguous run of type-erased operands ([`Run`]), driven by the engine's one walk.
//!
//! A generic op instantiates the whole walk for its element function and types; a kernel from
//! a table instantiates one loop, and every table kernel shares one walk per operand count. The
//! walk hands [`TableKernel`] blocks of runs: a run where every operand has unit stride goes to
//! the kernel as it is; otherwise the run goes in pieces of at most [`PIECE`] elements, each
//! input that is not unit-stride copied (gathered, or for a broadcast one repeated) into a
//! buffer on the stack, and an output that is not unit-stride written to a buffer and copied
//! out. The copies depend on the element size only.
//!
//! Element functions are types ([`Elementwise`]), so a kernel is a plain function with no state
//! and its loop is compiled (and vectorised) for that function.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::slice;

use super::kernel::{Block, BlockKernel, Line, SlotInfo};
use super::operand::Operand;
use super::plan::output_order;
use super::{alloc, Engine, Walk};
use crate::error::Result;

/// A kernel over one contiguous run of `n` elements: `ptrs[0]` the output's first slot
/// (written, never read), `ptrs[1..]` the inputs' first elements.
///
/// # Safety
/// Each pointer addresses `n` consecutive elements of the type the kernel was made for (the
/// output's possibly uninitialised), the output's distinct from the inputs', and no other thread
/// touches the output's.
pub(crate) type Run<const N: usize> = unsafe fn([*mut u8; N], usize);

/// A binary kernel whose second input holds a value per row: over `rows` rows of `width`
/// elements, `ptrs[0]` the output's and `ptrs[1]` the first input's rows one after another,
/// `ptrs[2]` the `rows` values, each read along its row (a row chain's per-row register, with
/// no tile of it repeated). Its results are the two-input kernel's over each value repeated,
/// bit for bit but for which NaN comes out where both operands are NaN: LLVM may put a sum's
/// or product's operands in either order, and x86 gives the first one's NaN (as the kernels'
/// copies for different vector widths may differ there too).
///
/// # Safety
/// As [`Run`], with `rows * width` elements at `ptrs[0]` and `ptrs[1]` and `rows` at `ptrs[2]`.
pub(crate) type RowRun = unsafe fn([*mut u8; 3], usize, usize);

/// An element function of `ARITY` inputs, known by its type: `f` on the inputs `A`
/// (one type for all of them) gives an `Out`.
pub(crate) trait Elementwise<A, const ARITY: usize> {
    /// The result's type.
    type Out;
    /// The function.
    fn f(x: [A; ARITY]) -> Self::Out;
    /// Whether `f` is a fast form that leaves some inputs to [`Elementwise::exact`]: the loop
    /// then runs `f` branch-free over the whole run, and a second pass puts `exact`'s results
    /// where it has them.
    const EXACT: bool = false;
    /// The result for inputs `f` does not cover, `None` for the others.
    #[inline(always)]
    fn exact(_x: &[A; ARITY]) -> Option<Self::Out> {
        None
    }
}

/// The kernel of `F` over one run, `ARITY + 1` operands: the output, then the inputs. The loops
/// index slices of one length (the checks fold away), which compiles faster than zipped
/// iterators and vectorises the same.
///
/// # Safety
/// As [`Run`], for an output of `F::Out` and inputs of `A`.
#[inline(always)]
pub(crate) unsafe fn run<A: Clone, F: Elementwise<A, 1>>(p: [*mut u8; 2], n: usize) {
    // SAFETY: as the caller promised: `n` slots of the output (written through `MaybeUninit`,
    // so they need not be initialised) and `n` elements of the input.
    let (o, a) = unsafe {
        (
            slice::from_raw_parts_mut(p[0].cast::<MaybeUninit<F::Out>>(), n),
            slice::from_raw_parts(p[1].cast::<A>(), n),
        )
    };
    each1::<A, F>(o, a);
    // The fix-up runs only where a test pass finds inputs that need it: fused into one loop,
    // LLVM computes the exact form (a call into the platform's library) for every element and
    // keeps the few it needs.
    if F::EXACT && (0..n).fold(false, |any, i| any | F::exact(&[a[i].clone()]).is_some()) {
        for i in 0..n {
            if let Some(v) = F::exact(&[a[i].clone()]) {
                // Only element types without drop glue have an `exact`: the value replaced
                // needs no drop.
                o[i].write(v);
            }
        }
    }
}

/// The widest copy of a kernel this CPU runs: AVX-512, else AVX2 (with FMA), else the
/// baseline's.
macro_rules! widest {
    ($avx512:expr, $avx2:expr, $baseline:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return $avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return $avx2;
            }
        }
        $baseline
    }};
}

/// [`run`] compiled for the widest vectors this CPU has (AVX-512, else AVX2, else the
/// baseline's): for element functions whose arithmetic, not memory, bounds them (the
/// transcendental ones), 16 `f32` lanes do 3-4x the work of the baseline's 4. Every copy gives
/// the same bits: the operations are IEEE's, Rust contracts none into fused multiply-adds, and
/// the ones an element function asks for (`mul_add`) are correctly rounded in every copy (the
/// AVX2 copy needs FMA for them).
pub(crate) fn run_wide<A: Clone, F: Elementwise<A, 1>>() -> Run<2> {
    widest!(wide::avx512::<A, F>, wide::avx2::<A, F>, run::<A, F>)
}

/// [`run2`] compiled for the widest vectors this CPU has, as [`run_wide`] is: for the float
/// arithmetic of fused chains, whose loops run in cache.
pub(crate) fn run2_wide<A: Clone, F: Elementwise<A, 2>>() -> Run<3> {
    widest!(wide::avx512_2::<A, F>, wide::avx2_2::<A, F>, run2::<A, F>)
}

/// [`run2_rows`] compiled for the widest vectors this CPU has, as [`run_wide`] is.
pub(crate) fn run2_rows_wide<A: Clone, F: Elementwise<A, 2>>() -> RowRun {
    widest!(
        wide::avx512_rows::<A, F>,
        wide::avx2_rows::<A, F>,
        run2_rows::<A, F>
    )
}

/// [`run`], [`run2`] and [`run2_rows`] compiled for AVX2 and AVX-512.
#[cfg(target_arch = "x86_64")]
pub(crate) mod wide {
    use super::{run, run2, run2_rows, Elementwise};

    /// Each `$name`: the kernel `$inner` of `$arity` inputs compiled with `$feature` (`$cpu`).
    macro_rules! copies {
        ($($name:ident, $feature:literal, $cpu:literal:
            $inner:ident<$arity:literal>($($arg:ident: $ty:ty),*);)*) => {$(
            #[doc = concat!("[`", stringify!($inner), "`](super::", stringify!($inner), ") for ", $cpu, ".")]
            ///
            /// # Safety
            #[doc = concat!("As [`", stringify!($inner), "`](super::", stringify!($inner), "), on a CPU with ", $cpu, ".")]
            #[target_feature(enable = $feature)]
            pub(crate) unsafe fn $name<A: Clone, F: Elementwise<A, $arity>>($($arg: $ty),*) {
                // SAFETY: as the caller promised.
                unsafe { $inner::<A, F>($($arg),*) }
            }
        )*};
    }
    copies! {
        avx2, "avx2,fma", "AVX2 and FMA": run<1>(p: [*mut u8; 2], n: usize);
        avx512, "avx512f", "AVX-512F": run<1>(p: [*mut u8; 2], n: usize);
        avx2_2, "avx2,fma", "AVX2 and FMA": run2<2>(p: [*mut u8; 3], n: usize);
        avx512_2, "avx512f", "AVX-512F": run2<2>(p: [*mut u8; 3], n: usize);
        avx2_rows, "avx2,fma", "AVX2 and FMA": run2_rows<2>(p: [*mut u8; 3], rows: usize, width: usize);
        avx512_rows, "avx512f", "AVX-512F": run2_rows<2>(p: [*mut u8; 3], rows: usize, width: usize);
    }
}

/// [`run`] for two inputs.
///
/// # Safety
/// As [`Run`], for an output of `F::Out` and inputs of `A`.
#[inline(always)]
pub(crate) unsafe fn run2<A: Clone, F: Elementwise<A, 2>>(p: [*mut u8; 3], n: usize) {
    // SAFETY: as in `run`.
    let (o, a, b) = unsafe {
        (
            slice::from_raw_parts_mut(p[0].cast::<MaybeUninit<F::Out>>(), n),
            slice::from_raw_parts(p[1].cast::<A>(), n),
            slice::from_raw_parts(p[2].cast::<A>(), n),
        )
    };
    each2::<A, F>(o, a, b);
}

/// [`run2`] with a value per row as the second input ([`RowRun`]).
///
/// # Safety
/// As [`RowRun`], for an output of `F::Out` and inputs of `A`.
#[inline(always)]
pub(crate) unsafe fn run2_rows<A: Clone, F: Elementwise<A, 2>>(
    p: [*mut u8; 3],
    rows: usize,
    width: usize,
) {
    // SAFETY: as the caller promised: `rows * width` slots of the output and elements of the
    // first input, `rows` elements of the second.
    let (o, a, b) = unsafe {
        (
            slice::from_raw_parts_mut(p[0].cast::<MaybeUninit<F::Out>>(), rows * width),
            slice::from_raw_parts(p[1].cast::<A>(), rows * width),
            slice::from_raw_parts(p[2].cast::<A>(), rows),
        )
    };
    for (r, v) in b.iter().enumerate() {
        let at = r * width..(r + 1) * width;
        each2_splat::<A, F>(&mut o[at.clone()], &a[at], v.clone());
    }
}

/// The loop of [`run2_rows`] over one row, as [`each1`].
#[inline(always)]
fn each2_splat<A: Clone, F: Elementwise<A, 2>>(o: &mut [MaybeUninit<F::Out>], a: &[A], b: A) {
    let n = o.len().min(a.len());
    for i in 0..n {
        o[i].write(F::f([a[i].clone(), b.clone()]));
    }
}

/// The loop of [`run`]. The slices are arguments, which Rust marks `noalias`, so that LLVM
/// knows the output overlaps no input: no run-time overlap checks, no scalar copy of the loop.
#[inline(always)]
fn each1<A: Clone, F: Elementwise<A, 1>>(o: &mut [MaybeUninit<F::Out>], a: &[A]) {
    let n = o.len().min(a.len());
    for i in 0..n {
        o[i].write(F::f([a[i].clone()]));
    }
}

/// The loop of [`run2`], as [`each1`].
#[inline(always)]
fn each2<A: Clone, F: Elementwise<A, 2>>(o: &mut [MaybeUninit<F::Out>], a: &[A], b: &[A]) {
    let n = o.len().min(a.len()).min(b.len());
    for i in 0..n {
        o[i].write(F::f([a[i].clone(), b[i].clone()]));
    }
}

/// [`run`] for three inputs.
///
/// # Safety
/// As [`Run`], for an output of `F::Out` and inputs of `A`.
pub(crate) unsafe fn run3<A: Clone, F: Elementwise<A, 3>>(p: [*mut u8; 4], n: usize) {
    // SAFETY: as in `run`.
    let (o, a, b, c) = unsafe {
        (
            slice::from_raw_parts_mut(p[0].cast::<MaybeUninit<F::Out>>(), n),
            slice::from_raw_parts(p[1].cast::<A>(), n),
            slice::from_raw_parts(p[2].cast::<A>(), n),
            slice::from_raw_parts(p[3].cast::<A>(), n),
        )
    };
    each3::<A, F>(o, a, b, c);
}

/// The loop of [`run3`], as [`each1`].
#[inline(always)]
fn each3<A: Clone, F: Elementwise<A, 3>>(o: &mut [MaybeUninit<F::Out>], a: &[A], b: &[A], c: &[A]) {
    let n = o.len().min(a.len()).min(b.len()).min(c.len());
    for i in 0..n {
        o[i].write(F::f([a[i].clone(), b[i].clone(), c[i].clone()]));
    }
}

/// Stand-ins for the element types of each size: copies and selects move bits, so one kernel
/// serves every type of a size. A stand-in's alignment is the least of its size's types (8
/// bytes: `[u32; 2]`, as `Complex<f32>` is aligned to 4; 16 bytes: `[u64; 2]`, as
/// `Complex<f64>`), so no element is read at an alignment it does not have.
macro_rules! by_size {
    ($size:expr, $kernel:ident) => {
        match $size {
            1 => Some($kernel::<u8> as _),
            2 => Some($kernel::<u16> as _),
            4 => Some($kernel::<u32> as _),
            8 => Some($kernel::<[u32; 2]> as _),
            16 => Some($kernel::<[u64; 2]> as _),
            _ => None,
        }
    };
}

/// The identity on bits: a copy.
struct Copy;
impl<A> Elementwise<A, 1> for Copy {
    type Out = A;
    #[inline(always)]
    fn f([a]: [A; 1]) -> A {
        a
    }
}

/// A copy of elements of `size` bytes (`broadcast_in_dim` made real); `None` for a size with
/// no stand-in.
pub(crate) fn copy(size: usize) -> Option<Run<2>> {
    unsafe fn copy_run<A: Clone>(p: [*mut u8; 2], n: usize) {
        // SAFETY: as the caller promised.
        unsafe { run::<A, Copy>(p, n) }
    }
    by_size!(size, copy_run)
}

/// `F`, a function of bytes that gives each byte of its result from the same byte of its
/// inputs (`and`, `or`, `xor`), over elements of `size` bytes: a run of `n` elements is
/// `n * size` bytes, so one loop serves every width.
pub(crate) fn bytewise<F: Elementwise<u8, 2, Out = u8>>(size: usize) -> Option<Run<3>> {
    /// # Safety
    /// As [`Run`], for operands of `W`-byte elements.
    unsafe fn wide<F: Elementwise<u8, 2, Out = u8>, const W: usize>(p: [*mut u8; 3], n: usize) {
        // SAFETY: `n` consecutive elements of `W` bytes are `n * W` consecutive bytes.
        unsafe { bytes::<F>(p, n * W) }
    }
    /// # Safety
    /// As [`Run`], for operands of bytes.
    #[inline(never)]
    unsafe fn bytes<F: Elementwise<u8, 2, Out = u8>>(p: [*mut u8; 3], n: usize) {
        // SAFETY: as the caller promised.
        unsafe { run2::<u8, F>(p, n) }
    }
    match size {
        1 => Some(bytes::<F>),
        2 => Some(wide::<F, 2>),
        4 => Some(wide::<F, 4>),
        8 => Some(wide::<F, 8>),
        _ => None,
    }
}

/// `pred ? on_true : on_false` on elements of `size` bytes (the predicate's are `bool`).
pub(crate) fn select(size: usize) -> Option<Run<4>> {
    /// # Safety
    /// As [`Run`]: a `bool` predicate and branches of `A`.
    unsafe fn select_run<A: Blend>(p: [*mut u8; 4], n: usize) {
        // SAFETY: as the caller promised.
        let (o, c, a, b) = unsafe {
            (
                slice::from_raw_parts_mut(p[0].cast::<MaybeUninit<A>>(), n),
                slice::from_raw_parts(p[1].cast::<bool>(), n),
                slice::from_raw_parts(p[2].cast::<A>(), n),
                slice::from_raw_parts(p[3].cast::<A>(), n),
            )
        };
        choose(o, c, a, b);
    }
    /// The loop of `select_run`, as [`each1`].
    #[inline(always)]
    fn choose<A: Blend>(o: &mut [MaybeUninit<A>], c: &[bool], a: &[A], b: &[A]) {
        let n = o.len().min(c.len()).min(a.len()).min(b.len());
        for i in 0..n {
            o[i].write(A::blend(c[i], a[i], b[i]));
        }
    }
    by_size!(size, select_run)
}

/// A stand-in's pick between two values by a mask of its width: branch-free, so that a select
/// vectorises (`if c { a } else { b }` compiled to a choice of address and a scalar load per
/// element). The bits moved are the chosen value's, as a copy moves them.
trait Blend: std::marker::Copy {
    fn blend(c: bool, a: Self, b: Self) -> Self;
}

macro_rules! blend_bits {
    ($($t:ty),*) => {$(
        impl Blend for $t {
            #[inline(always)]
            fn blend(c: bool, a: Self, b: Self) -> Self {
                let m = <$t>::from(c).wrapping_neg();
                (a & m) | (b & !m)
            }
        }
    )*};
}
blend_bits!(u8, u16, u32, u64);

impl<T: Blend, const N: usize> Blend for [T; N] {
    #[inline(always)]
    fn blend(c: bool, a: Self, b: Self) -> Self {
        std::array::from_fn(|k| T::blend(c, a[k], b[k]))
    }
}

/// The most elements of a run staged at once when an operand is not unit-stride: 8 KiB of
/// 16-byte elements, a few KiB of the usual ones, so a piece's buffers stay in L1.
pub(super) const PIECE: usize = 512;

const PIECE_LINES: usize = PIECE * 16 / 64;

/// A table kernel as the walk sees it: `run` over the inputs `inputs` (operands `1..N`), into
/// an output of elements of `out.size` bytes, written and never read.
pub(crate) struct TableKernel<'a, const N: usize> {
    run: Run<N>,
    inputs: &'a [&'a Operand<'a>],
    out: SlotInfo,
}

impl<'a, const N: usize> TableKernel<'a, N> {
    /// `run` over `inputs` (`N - 1` of them), into slots like `out`'s.
    ///
    /// # Safety
    /// `run` is a kernel for the inputs' element types and an output of `out`'s, which has no
    /// drop glue.
    pub unsafe fn new(run: Run<N>, inputs: &'a [&'a Operand<'a>], out: SlotInfo) -> Self {
        assert_eq!(inputs.len() + 1, N, "one operand per input of the kernel");
        TableKernel { run, inputs, out }
    }
}

impl<const N: usize> BlockKernel<N> for TableKernel<'_, N> {
    fn input(&self, k: usize) -> &Operand<'_> {
        self.inputs[k - 1]
    }

    fn slot(&self) -> SlotInfo {
        self.out
    }

    #[inline(always)]
    unsafe fn block(&self, ptrs: [*mut u8; N], blk: Block<N>, _: &Cell<usize>) {
        let size: [usize; N] = std::array::from_fn(|k| match k {
            0 => self.out.size,
            _ => self.inputs[k - 1].size,
        });
        let row = |r: usize| -> [*mut u8; N] {
            // SAFETY: run `r < blk.rows` of the block starts at these elements, as the caller
            // promised of the block.
            std::array::from_fn(|k| unsafe {
                ptrs[k].offset(r as isize * blk.step[k] * size[k] as isize)
            })
        };
        if blk.inner.iter().all(|&s| s == 1) {
            for r in 0..blk.rows {
                // SAFETY: every operand's run is `blk.n` consecutive elements of its type.
                unsafe { (self.run)(row(r), blk.n) };
            }
            return;
        }
        let mut buffers = [[MaybeUninit::<Line>::uninit(); PIECE_LINES]; N];
        let buf: [*mut u8; N] = std::array::from_fn(|k| buffers[k].as_mut_ptr().cast());
        for r in 0..blk.rows {
            let start = row(r);
            for first in (0..blk.n).step_by(PIECE) {
                let m = PIECE.min(blk.n - first);
                let mut at = [std::ptr::null_mut(); N];
                for k in 0..N {
                    let (s, z) = (blk.inner[k], size[k] as isize);
                    // SAFETY: element `first` of run `r` of operand `k`.
                    let from = unsafe { start[k].offset(first as isize * s * z) };
                    at[k] = match s {
                        1 => from,
                        // A broadcast input's run repeats one element: the buffer is filled once
                        // per run, as long as its longest piece.
                        0 if k > 0 => {
                            if first == 0 {
                                // SAFETY: `from` is an element of input `k`; the buffer holds
                                // `PIECE` elements of its size.
                                unsafe {
                                    copy_strided(from, 0, buf[k], z, blk.n.min(PIECE), size[k])
                                };
                            }
                            buf[k]
                        }
                        _ if k > 0 => {
                            // SAFETY: the piece's `m` elements of input `k` are elements of its
                            // run; the buffer holds `PIECE >= m` of them.
                            unsafe { copy_strided(from, s * z, buf[k], z, m, size[k]) };
                            buf[k]
                        }
                        // The output, written to the buffer and copied out below.
                        _ => buf[0],
                    };
                }
                // SAFETY: each pointer addresses `m` consecutive elements of its operand's type:
                // in place, or in this call's buffers (the inputs' copied in, so initialised).
                unsafe { (self.run)(at, m) };
                if blk.inner[0] != 1 {
                    let (s, z) = (blk.inner[0], size[0] as isize);
                    // SAFETY: the kernel wrote the piece's `m` output elements to the buffer;
                    // their places are elements of the output's run, this thread's alone.
                    unsafe {
                        let to = start[0].offset(first as isize * s * z);
                        copy_strided(buf[0], z, to, s * z, m, size[0]);
                    }
                }
            }
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

/// Repeats element `r` of the `rows` consecutive elements at `src` into row `r` of `width`
/// elements at `dst` (a value per row, broadcast along the rows), elements of `size` bytes.
///
/// # Safety
/// `src` holds `rows` initialised elements and `dst` room for `rows * width`, each aligned for
/// its size's stand-in; the two do not overlap.
pub(super) unsafe fn splat_rows(
    src: *const u8,
    dst: *mut u8,
    width: usize,
    rows: usize,
    size: usize,
) {
    /// # Safety
    /// As `splat_rows`, for elements of `T`.
    #[inline(always)]
    unsafe fn splat<T: std::marker::Copy>(src: *const u8, dst: *mut u8, width: usize, rows: usize) {
        // SAFETY: as the caller promised: `rows` elements read, `rows * width` slots written.
        unsafe {
            let out = std::slice::from_raw_parts_mut(dst.cast::<MaybeUninit<T>>(), rows * width);
            for (r, row) in out.chunks_exact_mut(width.max(1)).enumerate() {
                row.fill(MaybeUninit::new(src.cast::<T>().add(r).read()));
            }
        }
    }
    // SAFETY: as the caller promised, for the stand-in of that size.
    unsafe {
        match size {
            1 => splat::<u8>(src, dst, width, rows),
            2 => splat::<u16>(src, dst, width, rows),
            4 => splat::<u32>(src, dst, width, rows),
            8 => splat::<[u32; 2]>(src, dst, width, rows),
            16 => splat::<[u64; 2]>(src, dst, width, rows),
            _ => unreachable!("table kernels take elements of 1 to 16 bytes"),
        }
    }
}

/// A table kernel of any operand count.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kernel {
    /// One input.
    Map(Run<2>),
    /// Two inputs.
    Zip(Run<3>),
    /// Two inputs, and the same function with a value per row as the second ([`RowRun`]).
    ZipByRow(Run<3>, RowRun),
    /// Three inputs.
    Zip3(Run<4>),
}

impl Kernel {
    /// How many inputs it reads.
    pub(crate) fn inputs(self) -> usize {
        match self {
            Kernel::Map(_) => 1,
            Kernel::Zip(_) | Kernel::ZipByRow(..) => 2,
            Kernel::Zip3(_) => 3,
        }
    }
}

impl From<Run<2>> for Kernel {
    fn from(run: Run<2>) -> Self {
        Kernel::Map(run)
    }
}

impl From<Run<3>> for Kernel {
    fn from(run: Run<3>) -> Self {
        Kernel::Zip(run)
    }
}

impl From<Run<4>> for Kernel {
    fn from(run: Run<4>) -> Self {
        Kernel::Zip3(run)
    }
}

/// `kernel` over `inputs`, seen at `shape`, into a fresh array of elements of `size` bytes
/// aligned to `align`, in the memory order the inputs share (as [`super::collect`] lays out
/// its results); an error when it cannot be allocated.
///
/// # Safety
/// `kernel` is a kernel for the inputs' element types and an output of plain elements (no drop
/// glue) of that size and alignment; the inputs are seen at `shape`, one per input of the
/// kernel. The result is written in full.
#[cfg(feature = "stablehlo")]
pub(crate) unsafe fn collect(
    op: &'static str,
    (size, align): (usize, usize),
    shape: &[usize],
    kernel: Kernel,
    inputs: &[&Operand<'_>],
) -> Result<alloc::Blank> {
    let order = fresh_order(shape, inputs);
    let mut out = alloc::Blank::new(op, size, align, shape, order.as_ref())?;
    let slot = SlotInfo {
        size,
        needs_drop: false,
        plain: true,
    };
    // SAFETY: as the caller promised of the kernel and the inputs; the output is fresh and
    // unique, of the elements the kernel writes, each of which the walk writes.
    unsafe { write(out.operand(), slot, kernel, inputs, true) };
    Ok(out)
}

/// `kernel` over `inputs` into `out` (slots like `slot`; `fresh` when just allocated), every
/// element written once.
///
/// # Safety
/// `kernel` is a kernel for the inputs' element types and `out`'s, which has no drop glue;
/// `out` is unique and the inputs are seen at its shape, one per input of the kernel.
#[inline(never)]
pub(crate) unsafe fn write(
    out: Operand<'_>,
    slot: SlotInfo,
    kernel: Kernel,
    inputs: &[&Operand<'_>],
    fresh: bool,
) {
    // SAFETY: as the caller promised.
    unsafe {
        match kernel {
            Kernel::Map(run) => {
                Engine::walk(out, &TableKernel::new(run, inputs, slot), fresh, None)
            }
            Kernel::Zip(run) | Kernel::ZipByRow(run, _) => {
                Engine::walk(out, &TableKernel::new(run, inputs, slot), fresh, None)
            }
            Kernel::Zip3(run) => {
                Engine::walk(out, &TableKernel::new(run, inputs, slot), fresh, None)
            }
        }
    }
}

/// The memory order of a fresh output over `inputs` at `shape`.
#[inline(never)]
fn fresh_order(shape: &[usize], inputs: &[&Operand<'_>]) -> super::plan::Order {
    let strides: smallvec::SmallVec<[&[isize]; 4]> =
        inputs.iter().map(|o| &o.strides[..]).collect();
    output_order(shape, &strides)
}

#[cfg(test)]
mod tests {
    use ndarray::{s, Array2, Array3, ShapeBuilder};

    use super::*;
    use crate::engine::Src;

    struct Sub;
    impl Elementwise<i64, 2> for Sub {
        type Out = i64;
        fn f([a, b]: [i64; 2]) -> i64 {
            a.wrapping_sub(b)
        }
    }

    /// `a - b` through a table kernel into `out`, every operand at `out`'s shape.
    fn sub_into(a: &Src<'_, i64>, b: &Src<'_, i64>, out: &mut ndarray::ArrayViewMut2<'_, i64>) {
        let inputs = [a.operand(), b.operand()];
        let kernel = Kernel::from(run2::<i64, Sub> as Run<3>);
        // SAFETY: a kernel of `i64`s over `i64` inputs seen at the output's shape, into a
        // unique view of `i64`s (written through `MaybeUninit`, which they need not be).
        unsafe {
            write(
                Operand::output(out),
                SlotInfo::of::<i64>(),
                kernel,
                &inputs,
                false,
            )
        }
    }

    /// Runs whose operands are not all unit-stride go in pieces through the buffers: inputs
    /// gathered (a transpose too small to stage, a stepped slice), repeated (a broadcast column)
    /// or read in place, outputs written in place or scattered (a stepped view), over runs
    /// shorter and longer than a piece.
    #[test]
    fn strided_runs_match_elementwise() {
        for (m, n) in [(3, 5), (2, PIECE + 3), (7, 2 * PIECE)] {
            let x = Array2::from_shape_fn((m, n), |(i, j)| (i * 1000 + j) as i64);
            let xt = Array2::from_shape_fn((n, m).f(), |(j, i)| (i * 7 + j * 3) as i64);
            let col = Array2::from_shape_fn((m, 1), |(i, _)| 5 - i as i64);
            let wide = Array2::from_shape_fn((m, 2 * n), |(i, j)| (i + 11 * j) as i64);
            let stepped = wide.slice(s![.., ..;2]);
            let shape = [m, n];
            let cases: [(&str, Src<'_, i64>, Src<'_, i64>); 4] = [
                ("dense", Src::of(&x), Src::of(&x)),
                (
                    "transposed",
                    Src::of(&x),
                    Src::placed("t", &xt, &shape, &[1, 0]).unwrap(),
                ),
                (
                    "column",
                    Src::degenerate("c", &col, &shape).unwrap(),
                    Src::of(&x),
                ),
                ("stepped", Src::of(&stepped), Src::of(&x)),
            ];
            let want = |k: usize, i: usize, j: usize| match k {
                0 => 0,
                1 => x[[i, j]] - xt[[j, i]],
                2 => col[[i, 0]] - x[[i, j]],
                _ => stepped[[i, j]] - x[[i, j]],
            };
            for (k, (name, a, b)) in cases.iter().enumerate() {
                let mut dense = Array2::<i64>::zeros((m, n));
                sub_into(a, b, &mut dense.view_mut());
                let mut wide_out = Array3::<i64>::from_elem((m, n, 2), -1);
                sub_into(a, b, &mut wide_out.slice_mut(s![.., .., 0]));
                for i in 0..m {
                    for j in 0..n {
                        assert_eq!(dense[[i, j]], want(k, i, j), "{name} {m}x{n} at {i},{j}");
                        assert_eq!(wide_out[[i, j, 0]], want(k, i, j), "{name}, stepped output");
                        assert_eq!(wide_out[[i, j, 1]], -1, "{name}: nothing else written");
                    }
                }
            }
        }
    }

    /// A select moves the chosen branch's bits, at every size, in vector bodies and their
    /// tails (a NaN's payload and a negative zero's sign are bits like any other).
    #[test]
    fn selects_move_the_chosen_bits() {
        fn check<A: std::marker::Copy + PartialEq + std::fmt::Debug>(f: impl Fn(usize) -> A) {
            for n in [1, 7, 37, 64] {
                let a: Vec<A> = (0..n).map(&f).collect();
                let b: Vec<A> = (0..n).map(|i| f(i + 1000)).collect();
                let c: Vec<bool> = (0..n).map(|i| i % 3 == 1).collect();
                let mut o = vec![MaybeUninit::<A>::uninit(); n];
                let run = select(size_of::<A>()).unwrap();
                let ptrs = [
                    o.as_mut_ptr().cast(),
                    c.as_ptr().cast_mut().cast(),
                    a.as_ptr().cast_mut().cast(),
                    b.as_ptr().cast_mut().cast(),
                ];
                // SAFETY: `n` elements each: the output's slots, a `bool` predicate and two
                // branches of `A`, which the kernel only reads.
                unsafe { run(ptrs, n) };
                for i in 0..n {
                    // SAFETY: the kernel wrote every slot.
                    let got = unsafe { o[i].assume_init() };
                    assert_eq!(got, if c[i] { a[i] } else { b[i] }, "{n} elements, at {i}");
                }
            }
        }
        let bits = |i: usize| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        check(|i| bits(i) as u8);
        check(|i| bits(i) as u16);
        check(|i| [0x7fc0_1234, 0x8000_0000, 0xffff_ffff][i % 3] ^ (bits(i) as u32 & 0xff));
        check(|i| [bits(i) as u32, (bits(i) >> 32) as u32]);
        check(|i| [bits(i), !bits(i)]);
    }

    /// A value per row read along its row ([`run2_rows`], each copy this CPU runs) gives the
    /// bits of the same copy of the function over that value repeated along the row ([`run2`]),
    /// for the functions programs give it: rows of one element, of a vector's worth and with
    /// tails; NaNs (a NaN where it gives a NaN), zeros of both signs and infinities on both
    /// sides.
    #[test]
    fn values_per_row_match_repeated_rows() {
        macro_rules! function {
            ($name:ident, $op:tt) => {
                struct $name;
                impl Elementwise<f32, 2> for $name {
                    type Out = f32;
                    fn f([a, b]: [f32; 2]) -> f32 {
                        a $op b
                    }
                }
            };
        }
        function!(Add, +);
        function!(Sub, -);
        function!(Mul, *);
        function!(Div, /);
        fn check<F: Elementwise<f32, 2, Out = f32>>() {
            // (Only x86-64 adds its wide copies.)
            #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
            let (mut by_rows, mut repeats): (Vec<RowRun>, Vec<Run<3>>) =
                (vec![run2_rows::<f32, F>], vec![run2::<f32, F>]);
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    by_rows.push(wide::avx2_rows::<f32, F>);
                    repeats.push(wide::avx2_2::<f32, F>);
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    by_rows.push(wide::avx512_rows::<f32, F>);
                    repeats.push(wide::avx512_2::<f32, F>);
                }
            }
            let nan = |payload: u32| f32::from_bits(0x7fc0_0000 | payload);
            let special = [nan(1), -0.0, 0.0, f32::INFINITY, -1.5];
            let per_row = [3.0, -0.0, f32::NEG_INFINITY, 0.5, 0.0, -nan(2)];
            for (rows, width) in [(1, 1), (3, 7), (4, 16), (5, 33), (2, 100), (6, 20)] {
                let a: Vec<f32> = (0..rows * width)
                    .map(|i| match i % 11 {
                        0..5 => special[i % 11],
                        _ => i as f32 * 0.37 - 9.0,
                    })
                    .collect();
                let b: Vec<f32> = (0..rows).map(|r| per_row[r % 6]).collect();
                let repeated: Vec<f32> = (0..rows * width).map(|i| b[i / width]).collect();
                let bits = |v: &[f32]| {
                    let bits = |x: &f32| if x.is_nan() { 1 } else { x.to_bits() };
                    v.iter().map(bits).collect::<Vec<_>>()
                };
                let ptrs = |out: &mut Vec<f32>, b: &[f32]| {
                    [
                        out.as_mut_ptr().cast(),
                        a.as_ptr().cast_mut().cast(),
                        b.as_ptr().cast_mut().cast(),
                    ]
                };
                for (copy, (by_row, repeat)) in by_rows.iter().zip(&repeats).enumerate() {
                    let (mut got, mut want) = (vec![1f32; rows * width], vec![1f32; rows * width]);
                    // SAFETY: `rows * width` elements of the outputs, `a` and `repeated`; `rows`
                    // of `b`; the kernels' types.
                    unsafe {
                        repeat(ptrs(&mut want, &repeated), rows * width);
                        by_row(ptrs(&mut got, &b), rows, width);
                    }
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "copy {copy}, {rows} rows of {width}"
                    );
                }
            }
        }
        check::<Add>();
        check::<Sub>();
        check::<Mul>();
        check::<Div>();
    }

    /// The copies and selects move elements of every size by their bits.
    #[cfg(feature = "stablehlo")]
    #[test]
    fn copies_and_selects_by_size() {
        for size in [1, 2, 4, 8, 16] {
            assert!(copy(size).is_some() && select(size).is_some());
        }
        assert!(copy(3).is_none() && select(32).is_none());
        let src = Array2::from_shape_fn((4, 3), |(i, j)| [i as u64, j as u64 + 100]);
        let inputs = [Src::placed("t", &src, &[3, 4], &[1, 0]).unwrap()];
        let inputs = [inputs[0].operand()];
        // SAFETY: a copy of 16-byte elements into 16-byte slots, the input seen at the shape.
        let out = unsafe {
            collect("copy", (16, 8), &[3, 4], copy(16).unwrap().into(), &inputs)
                .unwrap()
                .assume_init::<[u64; 2]>()
        };
        assert_eq!(out, src.t().into_dyn());
    }
}
