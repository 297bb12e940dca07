//! Kernels chosen at run time: one small loop per element function and element type, over one
//! contiguous run of type-erased operands ([`Run`]), run by the row executor ([`rows`]), which
//! hands every kernel contiguous runs (inputs that are not gathered into its tile's buffers).
//! A generic op instantiates the whole walk for its element function and types; a kernel from
//! a table instantiates one loop, and every table kernel shares the one executor.
//!
//! Element functions are types ([`Elementwise`]), so a kernel is a plain function with no state
//! and its loop is compiled (and vectorised) for that function.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::slice;

use super::kernel::{widest, Widest};
use super::operand::Operand;
use super::{alloc, rows};
use crate::error::Result;

/// A kernel over one contiguous run of `n` elements: `ptrs[0]` the output's first slot
/// (written, never read), `ptrs[1..]` the inputs' first elements.
///
/// # Safety
/// Each pointer addresses `n` consecutive elements of the type the kernel was made for (the
/// output's possibly uninitialised), the output's distinct from the inputs', and no other thread
/// touches the output's.
pub(crate) type Run<const N: usize> = unsafe fn([*mut u8; N], usize);

pub(crate) use crate::elementwise::Elementwise;

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

/// [`run`] in the widest copy this CPU runs ([`super::kernel::widest`]: AVX2 and FMA, else
/// the baseline's): for element functions whose arithmetic, not memory, bounds them (the
/// transcendental ones), 8 `f32` lanes do 2-3x the work of the baseline's 4. Every copy gives
/// the same bits: the operations are IEEE's, Rust contracts none into fused multiply-adds, and
/// the ones an element function asks for (`mul_add`) are correctly rounded in every copy.
pub(crate) fn run_wide<A: Clone, F: Elementwise<A, 1>>() -> Run<2> {
    in_widest::<A, F, 2>
}

/// [`run2`] in the widest copy, as [`run_wide`]: for the float arithmetic of programs, whose
/// loops run in cache.
pub(crate) fn run2_wide<A: Clone, F: Elementwise<A, 2>>() -> Run<3> {
    in_widest::<A, F, 3>
}

/// A table kernel's call ([`run`] with `P == 2`, [`run2`] with 3), for [`widest`]: made only
/// by [`in_widest`], from its caller's promise.
struct Wide<A, F, const P: usize>([*mut u8; P], usize, PhantomData<fn() -> (A, F)>);

impl<A: Clone, F: Elementwise<A, 1>> Widest for Wide<A, F, 2> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        // SAFETY: as `in_widest`'s caller promised.
        unsafe { run::<A, F>(self.0, self.1) }
    }
}

impl<A: Clone, F: Elementwise<A, 2>> Widest for Wide<A, F, 3> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        // SAFETY: as `in_widest`'s caller promised.
        unsafe { run2::<A, F>(self.0, self.1) }
    }
}

/// The kernel of [`Wide`] in [`widest`]'s copy.
///
/// # Safety
/// As [`Run`], for its kernel's types.
unsafe fn in_widest<A, F, const P: usize>(p: [*mut u8; P], n: usize)
where
    Wide<A, F, P>: Widest<Out = ()>,
{
    widest(Wide(p, n, PhantomData))
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

/// A table kernel of any operand count.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kernel {
    /// One input.
    Map(Run<2>),
    /// Two inputs.
    Zip(Run<3>),
    /// Three inputs.
    Zip3(Run<4>),
}

impl Kernel {
    /// How many inputs it reads.
    pub(crate) fn inputs(self) -> usize {
        match self {
            Kernel::Map(_) => 1,
            Kernel::Zip(_) => 2,
            Kernel::Zip3(_) => 3,
        }
    }
}

/// Each kernel of `N` operands is its variant.
macro_rules! from_run {
    ($($n:literal => $v:ident),*) => {$(
        impl From<Run<$n>> for Kernel {
            fn from(run: Run<$n>) -> Self {
                Kernel::$v(run)
            }
        }
    )*};
}
from_run!(2 => Map, 3 => Zip, 4 => Zip3);

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
    let strides: smallvec::SmallVec<[&[isize]; 4]> =
        inputs.iter().map(|o| &o.strides[..]).collect();
    let mut out = super::blank_like(op, (size, align), shape, &strides)?;
    // SAFETY: as the caller promised of the kernel and the inputs; the output is fresh and
    // unique, of the elements the kernel writes, each of which the chain writes.
    unsafe { write(out.operand(), kernel, inputs) }?;
    Ok(out)
}

/// `kernel` over `inputs` into `out`, every element written once: a chain of one step on the
/// row executor ([`rows::run`]), road 2's one executor.
///
/// # Errors
/// [`crate::error::BroadcastError::Allocation`], having written nothing, when this thread's
/// buffers for a tile cannot be allocated.
///
/// # Safety
/// `kernel` is a kernel for the inputs' element types and `out`'s, which has no drop glue;
/// `out` is unique and the inputs are seen at its shape, one per input of the kernel.
#[inline(never)]
pub(crate) unsafe fn write(
    out: Operand<'_>,
    kernel: Kernel,
    inputs: &[&Operand<'_>],
) -> Result<()> {
    let shape = out.shape;
    let mut operands: Vec<Operand<'_>> = inputs.iter().map(|o| o.reborrow()).collect();
    operands.push(out);
    let n = inputs.len();
    let sizes: Vec<usize> = operands.iter().map(|o| o.size).collect();
    let (mut written, per_row) = (vec![false; n + 1], vec![false; n + 1]);
    written[n] = true;
    let steps = [rows::RowStep::Map {
        kernel,
        out: n,
        args: [0, 1, 2], // a kernel reads the first `inputs()` of them
    }];
    let chain = rows::RowChain {
        operands: &operands,
        written: &written,
        per_row: &per_row,
        sizes: &sizes,
        steps: &steps,
        identities: &[],
    };
    // SAFETY: as the caller promised: one step, the kernel of its registers' types, reading
    // the inputs and writing the one output, which nothing else touches; at most four operands.
    unsafe { rows::run(shape, &chain) }
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
        unsafe { write(Operand::output(out), kernel, &inputs) }.unwrap();
    }

    /// Operands that are not all unit-stride go through the tile's buffers: inputs gathered (a
    /// transpose, a stepped slice), repeated (a broadcast column) or read in place, outputs
    /// written in place or scattered (a stepped view), over rows shorter and longer than a
    /// chunk (512 `i64`s).
    #[test]
    fn strided_runs_match_elementwise() {
        for (m, n) in [(3, 5), (2, 515), (7, 1024), (40, 33)] {
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
