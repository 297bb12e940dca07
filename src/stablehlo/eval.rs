//! [`Program::run`](super::Program::run)'s evaluator: each node on concrete arrays, through the
//! engine's kernel table ([`crate::engine::table`]), so that a program instantiates one small
//! loop per op and element type, never the generic engine per op and type. The element
//! functions are the crate's own ([`crate::element`]), so results are those of the array ops,
//! bit for bit.

use super::{
    Binary, Direction, ElementType, Held, Node, Op, Reduction, StableHloElement, Tensor,
    TensorView, Unary, Value,
};
use crate::element::XlaOrd;
use crate::elementwise::Elementwise;
use crate::engine::reduce::{self, table_fold, table_fold_plain, FoldFn, TableFold};
use crate::engine::table::{self, Kernel, Run};
use crate::engine::{Operand, Shared};
use crate::error::{BroadcastError, Result};
use crate::shape::{iota, reduce_in_dim_check};

use crate::elementwise as elem;
use ndarray::{ArrayD, ArrayViewD};
use std::marker::PhantomData;

/// The kernels of one element type, `None` for the ops it lacks. Made for every element type
/// (below) from the op table's rows: a type has an op where the op's element function is
/// defined for it ([`crate::elementwise`], which the recorder's kinds agree with: a test).
pub(crate) trait Kernels: Sized {
    /// A real float type: its binary arithmetic runs in the widest copy the CPU runs (in
    /// programs, its loops run in cache), and its maxima and minima fold in lanes, as sums do
    /// (the array ops' bits). Other folds are exact, and run in order.
    const FLOAT: bool;
    /// `op`'s kernel.
    fn binary(op: Binary) -> Option<Run<3>>;
    /// The comparison's kernel.
    fn compare(dir: Direction) -> Option<Run<3>>;
    /// `clamp`'s kernel (operand, min, max).
    fn clamp() -> Option<Run<4>>;
    /// `op`'s kernel.
    fn unary(op: Unary) -> Option<Run<2>>;
    /// The fold of reduction `r` (a sum, a product, a maximum, ...: its binary op's
    /// [`TableFold`]; `bool`'s sum is `or`) and its identity.
    fn fold(r: Reduction) -> Option<(FoldFn, Self)>;
    /// `argmin_in_dims` of `x` (`argmax_in_dims` with `max`) over `kept`; `None` for a type
    /// without an order.
    fn arg(
        op: &'static str,
        x: ArrayViewD<'_, Self>,
        kept: &[usize],
        max: bool,
    ) -> Option<Result<ArrayD<usize>>>;
}

/// [`Kernels::arg`]'s function.
type ArgFn<A> = fn(&'static str, ArrayViewD<'_, A>, &[usize], bool) -> Result<ArrayD<usize>>;

/// Whether element type `A` has the op of element function `F`, asked of concrete types
/// (autoref specialisation): `(&Probe::<A, F>::NEW).unary()` is `Has1`'s method where the
/// bound holds (a method of `Probe` is found before one of `&Probe`), else `Lacks`'s, `None`.
struct Probe<A, F>(PhantomData<fn() -> (A, F)>);

impl<A, F> Probe<A, F> {
    const NEW: Self = Probe(PhantomData);
}

/// Each probe: a trait whose method gives the kernel where the bound holds, and the same
/// method of [`Lacks`] (`None`) elsewhere. An `if` on a constant (`F::WIDE`, `A::FLOAT`)
/// compiles the kernel it takes only.
macro_rules! probe {
    ($($has:ident: $m:ident -> $out:ty where [$($bound:tt)*] $make:expr;)*) => {
        $(
            trait $has<A> {
                fn $m(&self) -> Option<$out>;
            }
            impl<A: Clone + Kernels, F> $has<A> for Probe<A, F> where $($bound)* {
                fn $m(&self) -> Option<$out> {
                    Some($make)
                }
            }
        )*
        // (Without complex numbers, every type has the comparisons, `clamp` and an order.)
        #[cfg_attr(not(feature = "complex"), allow(dead_code))]
        trait Lacks<A> {
            $(
                fn $m(&self) -> Option<$out> {
                    None
                }
            )*
        }
        impl<A, F> Lacks<A> for &Probe<A, F> {}
    };
}
probe! {
    Has1: unary -> Run<2> where [F: Elementwise<A, 1>]
        if F::WIDE { table::run_wide::<A, F>() } else { table::run::<A, F> };
    Has2: binary -> Run<3> where [F: Elementwise<A, 2>]
        if A::FLOAT { table::run2_wide::<A, F>() } else { table::run2::<A, F> };
    HasCmp: compare -> Run<3> where [F: Elementwise<A, 2>] table::run2::<A, F>;
    Has3: clamp -> Run<4> where [F: Elementwise<A, 3>] table::run3::<A, F>;
    HasFold: fold -> (FoldFn, A) where [F: TableFold<A>] (
        if A::FLOAT { table_fold::<A, F> } else { table_fold_plain::<A, F> },
        F::identity(),
    );
    HasArg: arg -> ArgFn<A> where [A: XlaOrd] |op, x, kept, max| match max {
        true => crate::reduce::arg_extreme::<A, true>(op, x, kept),
        false => crate::reduce::arg_extreme::<A, false>(op, x, kept),
    };
}

/// [`Kernels`] for the element types listed after the op table's rows (the unary ops', then
/// the binary ops' and the comparisons': each collects its variants and calls on).
macro_rules! unary_rows {
    ([$($types:tt)*] $($name:ident => $v:ident, $hlo:literal, [$($m:ident),*], [$($kind:ident),*],
        $what:literal, $ty:ty, $input:expr, $want:expr;)*) => {
        binary_ops!(binary_rows [$($types)*] [$($v),*]);
    };
}
macro_rules! binary_rows {
    ($types:tt $unary:tt $($name:ident, $hlo:literal, $v:ident, $bound:ident, $elem:ident,
        [$($m:ident),*], $paddle:ident, [$($std:tt)*], $t:literal, $expect:literal;)*) => {
        compare_ops!(compare_rows $types $unary [$($v),*]);
    };
}
macro_rules! compare_rows {
    ($types:tt $unary:tt $binary:tt $($name:ident, $hlo:literal, $v:ident, $bound:ident,
        $cmp:tt, [$($m:ident),*], $expect:literal;)*) => {
        kernels!($types $unary $binary [$($v),*]);
    };
}
macro_rules! kernels {
    ([$($(#[$cfg:meta])* $t:ty),*] $unary:tt $binary:tt $compare:tt) => {$(
        $(#[$cfg])*
        kernels!(@ $t; $unary $binary $compare);
    )*};
    (@ $t:ty; [$($u:ident),*] [$($b:ident),*] [$($c:ident),*]) => {
        impl Kernels for $t {
            const FLOAT: bool = matches!(<$t as StableHloElement>::TYPE.kind, super::Kind::Float);
            fn unary(op: Unary) -> Option<Run<2>> {
                match op {
                    $(Unary::$u => (&Probe::<$t, elem::$u>::NEW).unary(),)*
                }
            }
            fn binary(op: Binary) -> Option<Run<3>> {
                match op {
                    $(Binary::$b => (&Probe::<$t, elem::$b>::NEW).binary(),)*
                }
            }
            fn compare(dir: Direction) -> Option<Run<3>> {
                match dir {
                    $(Direction::$c => (&Probe::<$t, elem::$c>::NEW).compare(),)*
                }
            }
            fn clamp() -> Option<Run<4>> {
                (&Probe::<$t, elem::Clamp>::NEW).clamp()
            }
            fn fold(r: Reduction) -> Option<(FoldFn, Self)> {
                // Every type has a sum, folded in lanes (the array ops' bits), and a product,
                // folded in order (XLA's; a float product's bits depend on it).
                match r {
                    Reduction::Sum => Some((
                        table_fold::<$t, elem::Add>,
                        <elem::Add as TableFold<$t>>::identity(),
                    )),
                    Reduction::Prod => Some((
                        table_fold_plain::<$t, elem::Mul>,
                        <elem::Mul as TableFold<$t>>::identity(),
                    )),
                    Reduction::Max => (&Probe::<$t, elem::Max>::NEW).fold(),
                    Reduction::Min => (&Probe::<$t, elem::Min>::NEW).fold(),
                    Reduction::And => (&Probe::<$t, elem::And>::NEW).fold(),
                    Reduction::Or => (&Probe::<$t, elem::Or>::NEW).fold(),
                }
            }
            fn arg(
                op: &'static str,
                x: ArrayViewD<'_, Self>,
                kept: &[usize],
                max: bool,
            ) -> Option<Result<ArrayD<usize>>> {
                (&Probe::<$t, ()>::NEW).arg().map(|f| f(op, x, kept, max))
            }
        }
    };
}
unary_ops!(unary_rows [bool, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64,
    #[cfg(feature = "half")] half::f16, #[cfg(feature = "half")] half::bf16,
    #[cfg(feature = "complex")] num_complex::Complex<f32>,
    #[cfg(feature = "complex")] num_complex::Complex<f64>]);

/// A source element type of `convert` in programs: its conversion kernels.
pub(super) trait ConvertFrom: elem::Load + Clone {
    /// The conversion kernel from this type to `to` ([`convert_kernel`]).
    fn kernel(to: ElementType) -> Option<Run<2>>;
}

/// [`ConvertFrom`] for each source type: integers and `bool` (`from_int`), the others.
macro_rules! convert_from {
    ($how:ident: $($(#[$cfg:meta])* $t:ty),*) => {$(
        $(#[$cfg])*
        impl ConvertFrom for $t {
            fn kernel(to: ElementType) -> Option<Run<2>> {
                elem::Convert::$how::<Self>(to)
            }
        }
    )*};
}
convert_from!(from_int: bool, i8, i16, i32, i64, u8, u16, u32, u64);
convert_from!(from_float: f32, f64,
    #[cfg(feature = "half")] half::f16,
    #[cfg(feature = "half")] half::bf16,
    #[cfg(feature = "complex")] num_complex::Complex<f32>,
    #[cfg(feature = "complex")] num_complex::Complex<f64>);

/// `run::<$from, Convert<$u>>` for the first listed `$u` whose type is `to` (a `$u` given as
/// `$u => $as` runs `$as`'s kernel), else nothing.
macro_rules! convert_to {
    ($to:expr, $from:ty; $($(#[$cfg:meta])* $u:ty $(=> $as:ty)?),*) => {$(
        $(#[$cfg])*
        if $to == <$u as StableHloElement>::TYPE {
            return Some(table::run::<$from, elem::Convert<convert_to!(@ $u $(, $as)?)>>);
        }
    )*};
    (@ $u:ty) => { $u };
    (@ $u:ty, $as:ty) => { $as };
}

/// The conversion kernel from `T` to the element type `to`: from integers and `bool`, a
/// signed integer result takes its unsigned twin's kernel (wrapping gives the same bits).
pub(super) fn convert_kernel<T: ConvertFrom>(to: ElementType) -> Option<Run<2>> {
    T::kernel(to)
}

impl elem::Convert<()> {
    /// The kernel from `T` (not an integer) to `to`.
    fn from_float<T: ConvertFrom>(to: ElementType) -> Option<Run<2>> {
        convert_to!(to, T; bool, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64,
            #[cfg(feature = "half")] half::f16,
            #[cfg(feature = "half")] half::bf16,
            #[cfg(feature = "complex")] num_complex::Complex<f32>,
            #[cfg(feature = "complex")] num_complex::Complex<f64>);
        None
    }

    /// The kernel from `T` (an integer or `bool`) to `to`.
    fn from_int<T: ConvertFrom>(to: ElementType) -> Option<Run<2>> {
        convert_to!(to, T; bool, i8 => u8, i16 => u16, i32 => u32, i64 => u64, u8, u16, u32,
            u64, f32, f64,
            #[cfg(feature = "half")] half::f16,
            #[cfg(feature = "half")] half::bf16,
            #[cfg(feature = "complex")] num_complex::Complex<f32>,
            #[cfg(feature = "complex")] num_complex::Complex<f64>);
        None
    }
}

/// The type error of an op run on operands of other types than recorded (which `run`'s input
/// checks rule out).
pub(super) fn mismatch(op: &'static str) -> BroadcastError {
    BroadcastError::ElementType {
        op,
        types: String::new(),
        reason: "operands of other types than recorded".to_string(),
    }
}

/// Operands, each with the dims that place it at its reader's shape.
pub(super) type Placements = Vec<(Value, Vec<usize>)>;

/// Each operand of elementwise `node` with the dims that place it at the node's shape
/// (`rank_of` an operand's rank; none for other nodes): what both `Program::run` and a compiled
/// chain read.
pub(super) fn placements(node: &Node, rank_of: &dyn Fn(Value) -> usize) -> Placements {
    let own = |v: &Value| (*v, iota(rank_of(*v)).to_vec());
    match &node.op {
        Op::Binary {
            lhs, rhs, place, ..
        }
        | Op::Compare {
            lhs, rhs, place, ..
        } => {
            vec![(*lhs, place[0].clone()), (*rhs, place[1].clone())]
        }
        Op::BroadcastInDim { x, dims } => vec![(*x, dims.clone())],
        Op::Select {
            pred,
            on_true,
            on_false,
        } => vec![own(pred), own(on_true), own(on_false)],
        Op::Clamp { min, x, max } => vec![own(x), own(min), own(max)],
        Op::Unary { x, .. } | Op::Convert { x } => vec![own(x)],
        _ => Vec::new(),
    }
}

/// The table kernel of elementwise `node` (`ty_of` an operand's element type) and, for each of
/// its inputs, which of the node's [`placements`] it reads: the one map from an op to its
/// kernel, which `Program::run` and compiled chains both take. An error for operands of other
/// types than recorded.
pub(super) fn kernel(
    node: &Node,
    ty_of: &dyn Fn(Value) -> ElementType,
) -> Result<(Kernel, [usize; 3])> {
    let name = node.op.name();
    let ty = |k: usize| node.op.operands()[k].map(ty_of);
    let same = |ks: &[usize]| ks.iter().all(|&k| ty(k) == ty(ks[0]));
    let found =
        |run: Option<Kernel>, args| run.map(|run| (run, args)).ok_or_else(|| mismatch(name));
    let ty0 = ty(0).ok_or_else(|| mismatch(name))?;
    match &node.op {
        Op::Binary { op, .. } if same(&[0, 1]) => {
            found(ty0.binary_kernel(*op).map(Kernel::from), [0, 1, 0])
        }
        Op::Compare { dir, .. } if same(&[0, 1]) => {
            found(ty0.compare_kernel(*dir).map(Kernel::from), [0, 1, 0])
        }
        Op::Select { .. } if ty0 == bool::TYPE && ty(1) == ty(2) => {
            found(table::select(node.ty.size()).map(Kernel::from), [0, 1, 2])
        }
        Op::Clamp { .. } if same(&[0, 1, 2]) => {
            found(ty0.clamp_kernel().map(Kernel::from), [0, 1, 2])
        }
        Op::Unary { op, .. } => found(ty0.unary_kernel(*op).map(Kernel::from), [0; 3]),
        Op::Convert { .. } => found(ty0.convert_kernel(node.ty).map(Kernel::from), [0; 3]),
        Op::BroadcastInDim { .. } => found(table::copy(node.ty.size()).map(Kernel::from), [0; 3]),
        _ => Err(mismatch(name)),
    }
}

/// One node on concrete inputs.
pub(super) fn eval<'v, 'h>(node: &'v Node, get: &dyn Fn(&Value) -> &'v Held<'h>) -> Result<Tensor> {
    let shape = &node.shape[..];
    let name = node.op.name();
    match &node.op {
        Op::Parameter => Err(mismatch("parameter")),
        Op::Constant(t) => Ok(t.clone()),
        Op::ReduceInDim { x, dims } => {
            let x = get(x);
            reduce_in_dim_check("reduce_in_dim", shape, x.shape(), dims)?;
            let mut acc_dim = vec![None; x.shape().len()];
            for (i, &d) in dims.iter().enumerate() {
                acc_dim[d] = Some(i);
            }
            fold(Reduction::Sum, "reduce_in_dim", x, shape, &acc_dim)
        }
        Op::Iota { dim } => {
            // The indices along `dim`, placed at the shape and converted to the node's type.
            let n = shape[*dim] as u64;
            let indices = Tensor::from(ndarray::Array1::from_iter(0..n));
            converted(&indices.read(), node.ty, name, shape, &[*dim])
        }
        Op::ArgReduce { max, x, axis } => {
            let x = get(x);
            let kept: Vec<usize> = (0..x.shape().len()).filter(|d| d != axis).collect();
            let found = x
                .read()
                .arg_extreme(name, &kept, *max)
                .ok_or_else(|| mismatch(name))??;
            // A fresh standard-layout array: its vector is in row-major order.
            let dim = found.raw_dim();
            let (indices, _) = found.into_raw_vec_and_offset();
            let indices: Vec<u64> = indices.into_iter().map(|i| i as u64).collect();
            let indices =
                ndarray::ArrayD::from_shape_vec(dim, indices).map_err(|_| mismatch(name))?;
            converted(
                &Tensor::from(indices).read(),
                node.ty,
                name,
                shape,
                &iota(shape.len()),
            )
        }
        Op::Reduce { op, x, axes } => {
            let x = get(x);
            // The kept dims, numbered in order, are the result's.
            let mut acc_dim: Vec<Option<usize>> = Vec::with_capacity(x.shape().len());
            let mut kept = 0;
            for d in 0..x.shape().len() {
                acc_dim.push((!axes.contains(&d)).then_some(kept));
                kept += usize::from(!axes.contains(&d));
            }
            fold(*op, name, x, shape, &acc_dim)
        }
        _ => {
            let (kernel, args) = kernel(node, &|v| get(&v).element_type())?;
            let placed = placements(node, &|v| get(&v).shape().len());
            let mut operands = Vec::with_capacity(placed.len());
            for (v, dims) in &placed {
                operands.push(get(v).placed(name, shape, dims)?);
            }
            let inputs: Vec<&Operand<'_>> = args[..kernel.inputs()]
                .iter()
                .map(|&a| &operands[a])
                .collect();
            // SAFETY: the node's kernel for its operands' types, which `kernel` checked, into an
            // output of the node's type (the one it writes: `bool` for comparisons and
            // `is_finite`, the real type for a complex `abs`, the target of `convert`).
            unsafe { Tensor::collect_as(node.ty, name, shape, kernel, &inputs) }
        }
    }
}

/// `x` placed at `shape` by `dims`, converted to `ty`.
fn converted(
    x: &TensorView<'_>,
    ty: ElementType,
    op: &'static str,
    shape: &[usize],
    dims: &[usize],
) -> Result<Tensor> {
    let kernel = x
        .element_type()
        .convert_kernel(ty)
        .ok_or_else(|| mismatch(op))?;
    let input = x.placed(op, shape, dims)?;
    // SAFETY: the conversion kernel from `x`'s type to `ty`, into an output of `ty`.
    unsafe { Tensor::collect_as(ty, op, shape, kernel, &[&input]) }
}

/// Reduction `r` of `x` into a fresh result of `shape`, `x`'s dim `d` landing on the result's
/// dim `acc_dim[d]` (`None`: folded away; a size-1 result dim folds too).
fn fold(
    r: Reduction,
    op: &'static str,
    x: &Held<'_>,
    shape: &[usize],
    acc_dim: &[Option<usize>],
) -> Result<Tensor> {
    let ty = x.element_type();
    let run = ty.fold_kernel(r).ok_or_else(|| mismatch(op))?;
    let identity = Tensor::identity(ty, r).ok_or_else(|| mismatch(op))?;
    let fill = |shape: &[usize]| -> Result<Tensor> {
        let scalar = identity.placed(op, shape, &[])?;
        let copy = table::copy(ty.size()).ok_or_else(|| mismatch(op))?;
        // SAFETY: a copy of the identity, of `x`'s type, into an output of that type.
        unsafe { Tensor::collect_as(ty, op, shape, copy, &[&scalar]) }
    };
    let src = x.placed(op, x.shape(), &iota(x.shape().len()))?;
    let mut acc = fill(shape)?;
    let count = reduce::partials(&acc.output(), acc_dim, &src);
    let mut partials = Vec::with_capacity(count);
    for _ in 0..count {
        partials.push(fill(shape)?);
    }
    let scratch = |n: usize, k: &mut dyn FnMut(Shared)| {
        let run = fill(&[n]);
        // SAFETY: element 0 of the fresh run, from which its `n` contiguous elements count.
        run.map(|mut run| k(Shared(unsafe { run.output().at(0) })))
            .is_ok()
    };
    let mut parts: Vec<Operand<'_>> = Vec::with_capacity(count);
    for t in &mut partials {
        parts.push(t.output());
    }
    // SAFETY: the reduction's fold of `x`'s type, into a fresh accumulator and partials of that
    // type, filled with its identity, each this call's own.
    unsafe { reduce::reduce_table(&acc.output(), acc_dim, &src, run, &parts, &scratch) };
    Ok(acc)
}

/// The recorder's run-time check of each op against an element kind ([`Binary::defined_for`],
/// from the op table's element traits) and the evaluator's kernels agree on every type.
#[cfg(test)]
#[test]
fn every_type_has_a_kernel_for_exactly_the_ops_its_kind_has() {
    fn check<T: Kernels + StableHloElement>() {
        for &op in Binary::ALL {
            let want = op.defined_for(T::TYPE.kind);
            assert_eq!(T::binary(op).is_some(), want, "{op:?} on {}", T::TYPE.name);
        }
        for &op in Unary::ALL {
            let want = op.defined_for(T::TYPE.kind);
            assert_eq!(T::unary(op).is_some(), want, "{op:?} on {}", T::TYPE.name);
        }
        for &dir in Direction::ALL {
            let ordered = !matches!(dir, Direction::Eq | Direction::Ne);
            let want = !(ordered && T::TYPE.kind == super::Kind::Complex);
            assert_eq!(
                T::compare(dir).is_some(),
                want,
                "{dir:?} on {}",
                T::TYPE.name
            );
        }
    }
    check::<bool>();
    check::<i8>();
    check::<i16>();
    check::<i32>();
    check::<i64>();
    check::<u8>();
    check::<u16>();
    check::<u32>();
    check::<u64>();
    check::<f32>();
    check::<f64>();
    #[cfg(feature = "half")]
    {
        check::<half::f16>();
        check::<half::bf16>();
    }
    #[cfg(feature = "complex")]
    {
        check::<num_complex::Complex<f32>>();
        check::<num_complex::Complex<f64>>();
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::elem;
    use crate::engine::table::{self, Elementwise};

    /// `F` over `x` by each copy of the loop this CPU runs, as bits.
    fn copies<T: Clone + Default, F: Elementwise<T, 1, Out = T>>(x: &[T]) -> Vec<Vec<T>> {
        let run = |k: table::Run<2>| {
            let mut out = vec![T::default(); x.len()];
            // SAFETY: `x.len()` inputs and output slots of `T`, the kernel's types.
            unsafe {
                k(
                    [out.as_mut_ptr().cast(), x.as_ptr().cast_mut().cast()],
                    x.len(),
                )
            };
            out
        };
        // The widest copy this CPU has, then the baseline's (the engine's test switch).
        let wide = run(table::run_wide::<T, F>());
        crate::engine::WIDE_SIMD.store(false, std::sync::atomic::Ordering::Relaxed);
        let baseline = run(table::run_wide::<T, F>());
        crate::engine::WIDE_SIMD.store(true, std::sync::atomic::Ordering::Relaxed);
        vec![run(table::run::<T, F>), wide, baseline]
    }

    /// The widest copies (AVX2 and FMA here) of the transcendental kernels give the baseline's bits, on
    /// special values, both ends of each range, and the paths their selects choose between.
    #[test]
    fn wide_copies_give_the_baselines_bits() {
        let mut x: Vec<f64> = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1e-310,
        ];
        let mut v = 1e-40;
        while v < 1e40 {
            x.extend([v, -v, v * 1.37, -v * 2.9]);
            v *= 1.7;
        }
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        macro_rules! check {
            ($($v:ident),*) => {$(
                let f = copies::<f32, elem::$v>(&x32);
                let d = copies::<f64, elem::$v>(&x);
                for (copy, (a, b)) in f.iter().zip(&d).enumerate().skip(1) {
                    let bits32 = |v: &Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    let bits64 = |v: &Vec<f64>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits32(a), bits32(&f[0]), "{} f32, copy {copy}", stringify!($v));
                    assert_eq!(bits64(b), bits64(&d[0]), "{} f64, copy {copy}", stringify!($v));
                }
            )*};
        }
        check!(Exp, Expm1, Log, Log1p, Logistic, Tanh, Rsqrt, Sin, Cos, Tan);
    }

    /// The float folds (`Kernels::fold`: the AVX2 and FMA copies, maxima and minima by keys)
    /// give the baseline loop's bits (a NaN where it gives a NaN): rows of sums, maxima and
    /// minima of several lengths (a vector's worth and less, tails) with NaNs of several payloads and signs (one or more per row, first
    /// or last), both zeros and infinities among them, and accumulators that already hold a
    /// value or a NaN.
    #[test]
    fn wide_folds_give_the_baselines_bits() {
        use crate::engine::reduce::{table_fold, FoldFn};
        use crate::engine::Block;
        use crate::stablehlo::Reduction;
        /// Each row of `n` of `x` folded into its accumulator (starting at `acc`), as bits.
        fn rows<T: Copy>(fold: FoldFn, mut acc: Vec<T>, x: &[T], n: usize) -> Vec<T> {
            let blk = Block {
                n,
                inner: [0, 1],
                rows: acc.len(),
                step: [1, n as isize],
            };
            // SAFETY: one accumulator per row of `n` elements of `x`, each a `T` of the fold.
            unsafe {
                fold(
                    std::ptr::null(),
                    acc.as_mut_ptr().cast(),
                    x.as_ptr().cast(),
                    blk,
                )
            };
            acc
        }
        macro_rules! check {
            ($t:ty) => {
                let quiet = <$t>::NAN;
                let payload = <$t>::from_bits(quiet.to_bits() | 5);
                let negative = -<$t>::from_bits(quiet.to_bits() | 3);
                for n in [1, 7, 16, 64, 100, 1000] {
                    let mut x: Vec<$t> = (0..10 * n)
                        .map(|i| ((i * 7919) % 2003) as $t * 0.37 - 300.0)
                        .collect();
                    x[0] = quiet;
                    x[n + n / 2] = -0.0;
                    x[2 * n + n / 3] = <$t>::INFINITY;
                    x[3 * n + n - 1] = <$t>::NEG_INFINITY;
                    x[4 * n..5 * n].iter_mut().for_each(|v| *v = -0.0);
                    x[5 * n + n / 2] = 0.0;
                    x[6 * n + n - 1] = payload;
                    x[7 * n] = negative;
                    x[7 * n + n - 1] = payload;
                    x[8 * n..9 * n].iter_mut().for_each(|v| *v = 0.0);
                    for r in [Reduction::Sum, Reduction::Max, Reduction::Min] {
                        let (wide, identity) = <$t as super::Kernels>::fold(r).expect("folds");
                        let base = match r {
                            Reduction::Sum => table_fold::<$t, elem::Add> as FoldFn,
                            Reduction::Max => table_fold::<$t, elem::Max>,
                            _ => table_fold::<$t, elem::Min>,
                        };
                        // From the identity, and from values and NaNs already folded.
                        let mut held = vec![identity; 10];
                        held[1] = -0.0;
                        held[2] = 1e30;
                        held[3] = negative;
                        held[9] = -1e30;
                        for acc in [vec![identity; 10], held] {
                            let got = rows(wide, acc.clone(), &x, n);
                            let want = rows(base, acc, &x, n);
                            // Which of two NaNs a float op returns is the compiler's choice
                            // (Rust leaves NaN payloads open), so a NaN is matched as a NaN.
                            let bits = |v: Vec<$t>| {
                                v.iter()
                                    .map(|v| if v.is_nan() { None } else { Some(v.to_bits()) })
                                    .collect::<Vec<_>>()
                            };
                            assert_eq!(
                                bits(got),
                                bits(want),
                                "{r:?} {} rows of {n}",
                                stringify!($t)
                            );
                        }
                    }
                }
            };
        }
        check!(f32);
        check!(f64);
    }
}
