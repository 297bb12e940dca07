//! Shape rules: pure functions from shapes and dims to an output shape or a [`BroadcastError`].
//!
//! No data is touched here. Every operation of the crate asks one of these rules first, so a
//! shape is accepted or refused the same way everywhere:
//!
//! | rule | source | function |
//! |---|---|---|
//! | XLA elementwise binary op, explicit `broadcast_dimensions` | XLA *Broadcasting semantics* | [`binary_op_shape`] |
//! | degenerate (size-1) broadcasting between equal ranks | XLA | [`degenerate_shape`] |
//! | `BroadcastInDim` (any order of dims: a permutation transposes) | StableHLO, JAX | [`broadcast_in_dim_shape`] |
//! | NumPy / PyTorch implicit broadcasting | NumPy | [`numpy_shape`] |
//! | Paddle's `axis` rule | PaddlePaddle | [`paddle_shape`] |
//! | XLA `Select` and `Clamp` (three operands) | XLA, StableHLO | [`select_shape`], [`clamp_shape`] |
//!
//! ```
//! use xla_bcast::shape::{binary_op_shape, numpy_shape};
//!
//! // XLA: the (3,) operand placed on dim 0 of the (3, 4) one.
//! assert_eq!(binary_op_shape(&[3, 4], &[3], &[0]).unwrap(), vec![3, 4]);
//! // NumPy aligns trailing dims instead, so the same shapes do not broadcast.
//! assert!(numpy_shape(&[&[3, 4], &[3]]).is_err());
//! ```

use smallvec::SmallVec;

use crate::error::{BroadcastError, Result};

/// A shape given to an op that makes a result of that shape ([`broadcast_in_dim`], the
/// reductions): it decides the result's dimension type as ndarray's constructors do. Every
/// shape ndarray's constructors take is one: a bare `usize` gives `Ix1`; an array `[usize; N]`,
/// a tuple or a fixed `Dim` (an `Array2`'s `raw_dim()`) gives that rank's type (`Ix2`, `Ix3`,
/// ...), so a program keeps its ndarray dimension types through these ops; `IxDyn` (an
/// `ArrayD`'s `raw_dim()`), a slice, a `Vec<usize>` (or a reference to one) and `&[usize; N]`
/// give `IxDyn`.
///
/// [`broadcast_in_dim`]: crate::ops::BroadcastInDim::broadcast_in_dim
///
/// ```
/// use ndarray::{array, ArrayView2, ArrayViewD};
/// use xla_bcast::prelude::*;
///
/// let v = array![1, 2, 3];
/// let d: ArrayViewD<i32> = v.broadcast_in_dim(&[2, 3], &[1]).unwrap();
/// let t: ArrayView2<i32> = v.broadcast_in_dim([2, 3], &[1]).unwrap();
/// let u: ArrayView2<i32> = v.broadcast_in_dim((2, 3), &[1]).unwrap();
/// assert_eq!(d, t.into_dyn());
/// assert_eq!(t, u);
/// // Another array's dimension, and a bare size, as ndarray's constructors take them.
/// let m = ndarray::Array2::<i32>::zeros((2, 3));
/// let w: ArrayView2<i32> = v.broadcast_in_dim(m.raw_dim(), &[1]).unwrap();
/// assert_eq!(w, t);
/// let sums: ndarray::Array1<i32> = m.reduce_in_dim(3, &[1]).unwrap();
/// assert_eq!(sums, array![0, 0, 0]);
/// ```
pub trait ShapeArg {
    /// The dimension type of a result of this shape.
    type Dim: ndarray::Dimension;
    /// The shape as that dimension type.
    fn into_dim(self) -> Self::Dim;
}

impl ShapeArg for &[usize] {
    type Dim = ndarray::IxDyn;
    fn into_dim(self) -> ndarray::IxDyn {
        ndarray::IxDyn(self)
    }
}

impl<const N: usize> ShapeArg for &[usize; N] {
    type Dim = ndarray::IxDyn;
    fn into_dim(self) -> ndarray::IxDyn {
        ndarray::IxDyn(self)
    }
}

impl ShapeArg for &Vec<usize> {
    type Dim = ndarray::IxDyn;
    fn into_dim(self) -> ndarray::IxDyn {
        ndarray::IxDyn(self)
    }
}

/// Fixed ranks, as arrays and as tuples (what ndarray's `IntoDimension` takes).
macro_rules! fixed_shape_arg {
    ($($n:literal: $tuple:ty),*) => {$(
        impl ShapeArg for [usize; $n] {
            type Dim = ndarray::Dim<[usize; $n]>;
            fn into_dim(self) -> Self::Dim {
                ndarray::IntoDimension::into_dimension(self)
            }
        }
        impl ShapeArg for $tuple {
            type Dim = ndarray::Dim<[usize; $n]>;
            fn into_dim(self) -> Self::Dim {
                ndarray::IntoDimension::into_dimension(self)
            }
        }
        impl ShapeArg for ndarray::Dim<[usize; $n]> {
            type Dim = ndarray::Dim<[usize; $n]>;
            fn into_dim(self) -> Self::Dim {
                self
            }
        }
    )*};
}

/// A bare size is a rank-1 shape, as in ndarray's constructors.
impl ShapeArg for usize {
    type Dim = ndarray::Ix1;
    fn into_dim(self) -> ndarray::Ix1 {
        ndarray::Ix1(self)
    }
}

/// A dynamic-rank dimension (`IxDyn`, what `raw_dim()` of an `ArrayD` gives).
impl ShapeArg for ndarray::IxDyn {
    type Dim = ndarray::IxDyn;
    fn into_dim(self) -> ndarray::IxDyn {
        self
    }
}

impl ShapeArg for &ndarray::IxDyn {
    type Dim = ndarray::IxDyn;
    fn into_dim(self) -> ndarray::IxDyn {
        self.clone()
    }
}

impl ShapeArg for Vec<usize> {
    type Dim = ndarray::IxDyn;
    fn into_dim(self) -> ndarray::IxDyn {
        ndarray::IxDyn(&self)
    }
}
fixed_shape_arg!(
    0: (),
    1: (usize,),
    2: (usize, usize),
    3: (usize, usize, usize),
    4: (usize, usize, usize, usize),
    5: (usize, usize, usize, usize, usize),
    6: (usize, usize, usize, usize, usize, usize)
);

/// A shape or dim list, inline up to rank 6 so the hot path of small ops does not allocate.
pub(crate) type Dims = SmallVec<[usize; 6]>;

/// The number of elements of `shape`, or [`BroadcastError::SizeOverflow`] when it (or its
/// product of non-zero sizes, which ndarray also bounds) does not fit `isize`.
///
/// ```
/// use xla_bcast::shape::checked_size;
/// assert_eq!(checked_size(&[2, 3, 4]).unwrap(), 24);
/// assert_eq!(checked_size(&[]).unwrap(), 1);
/// assert!(checked_size(&[usize::MAX, 2]).is_err());
/// ```
pub fn checked_size(shape: &[usize]) -> Result<usize> {
    checked_size_for("shape", shape)
}

/// One dim of degenerate broadcasting, the rule every wrapper shares: equal sizes stay, a 1
/// takes the other size (so 1 against 0 gives 0), anything else is incompatible.
pub(crate) fn merge_dim(a: usize, b: usize) -> Option<usize> {
    match (a, b) {
        _ if a == b => Some(a),
        (1, _) => Some(b),
        (_, 1) => Some(a),
        _ => None,
    }
}

pub(crate) fn checked_size_for(op: &'static str, shape: &[usize]) -> Result<usize> {
    let overflow = || BroadcastError::SizeOverflow {
        op,
        shape: shape.into(),
    };
    // ndarray requires the product of the non-zero sizes to fit isize, even for empty arrays.
    let nonzero = shape
        .iter()
        .filter(|&&n| n != 0)
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(overflow)?;
    Ok(if shape.contains(&0) { 0 } else { nonzero })
}

/// How a binary op sees its operands: the output shape and, for each operand, the
/// `broadcast_in_dim` dims that place it in the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BinaryPlan {
    pub out: Dims,
    pub lhs_dims: Dims,
    pub rhs_dims: Dims,
}

/// XLA's rule for elementwise binary ops with explicit `broadcast_dimensions`.
///
/// * Equal ranks: `broadcast_dimensions` must be empty or the identity; then degenerate
///   broadcasting (each dim equal, or one side 1; `1` against `0` gives `0`).
/// * Different ranks: `broadcast_dimensions` has one entry per dim of the lower-rank operand
///   (either operand may be the lower one), strictly increasing and in range; each mapped pair is
///   equal or one side is 1; the remaining dims come from the higher-rank operand. A rank-0
///   operand with empty dims broadcasts against anything. There is no NumPy-style right
///   alignment.
///
/// ```
/// use xla_bcast::shape::binary_op_shape;
/// // |1 2 3; 4 5 6| + |7 8 9| with dims [1]: the vector runs along dim 1.
/// assert_eq!(binary_op_shape(&[2, 3], &[3], &[1]).unwrap(), vec![2, 3]);
/// // The same vector along dim 0 needs a 3x3 matrix.
/// assert!(binary_op_shape(&[2, 3], &[3], &[0]).is_err());
/// // Degenerate broadcasting: an outer product.
/// assert_eq!(binary_op_shape(&[2, 1], &[1, 3], &[]).unwrap(), vec![2, 3]);
/// // No implicit rank promotion.
/// assert!(binary_op_shape(&[2, 3], &[3], &[]).is_err());
/// ```
pub fn binary_op_shape(
    lhs: &[usize],
    rhs: &[usize],
    broadcast_dimensions: &[usize],
) -> Result<Vec<usize>> {
    binary_plan("binary_op", lhs, rhs, broadcast_dimensions).map(|p| p.out.to_vec())
}

/// Degenerate broadcasting between operands of equal rank: each dim equal, or one side 1
/// (`1` against `0` gives `0`).
///
/// ```
/// use xla_bcast::shape::degenerate_shape;
/// assert_eq!(degenerate_shape(&[7, 1, 5], &[1, 2, 5]).unwrap(), vec![7, 2, 5]);
/// assert_eq!(degenerate_shape(&[4, 1], &[4, 0]).unwrap(), vec![4, 0]);
/// assert!(degenerate_shape(&[7, 2, 5], &[7, 2, 6]).is_err());
/// assert!(degenerate_shape(&[2, 3], &[3]).is_err()); // ranks differ
/// ```
pub fn degenerate_shape(lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>> {
    if lhs.len() != rhs.len() {
        return Err(BroadcastError::RankMismatch {
            op: "degenerate",
            lhs: lhs.into(),
            rhs: rhs.into(),
        });
    }
    binary_plan("degenerate", lhs, rhs, &[]).map(|p| p.out.to_vec())
}

/// `[0, 1, ..., n - 1]`, without building it element by element for the usual ranks.
pub(crate) fn iota(n: usize) -> Dims {
    const IOTA: [usize; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    if n <= IOTA.len() {
        Dims::from_slice(&IOTA[..n])
    } else {
        (0..n).collect()
    }
}

/// [`binary_op_shape`] with the operands' placements: the lower-rank operand is placed by
/// `dims`, the other (both, at equal ranks) by the identity.
pub(crate) fn binary_plan(
    op: &'static str,
    lhs: &[usize],
    rhs: &[usize],
    dims: &[usize],
) -> Result<BinaryPlan> {
    let mut out = Dims::new();
    if !binary_shape(op, lhs, rhs, dims, &mut out)? {
        out = Dims::from_slice(higher(lhs, rhs));
    }
    // Shapes given as numbers, not arrays': their size may not fit.
    checked_size_for(op, &out)?;
    let place = |rank: usize| match rank == out.len() {
        true => iota(rank),
        false => Dims::from_slice(dims),
    };
    Ok(BinaryPlan {
        lhs_dims: place(lhs.len()),
        rhs_dims: place(rhs.len()),
        out,
    })
}

/// Whether two shapes are equal, compared in line: a slice's `==` calls `memcmp`, which costs
/// more than the few dims of a shape, and small ops compare shapes several times.
#[inline(always)]
pub(crate) fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// XLA's binary rule at its simplest: equal shapes and no `broadcast_dimensions` (or the
/// identity), where each operand is read at its own shape, which is the output's.
#[inline(always)]
pub(crate) fn elementwise(lhs: &[usize], rhs: &[usize], dims: &[usize]) -> bool {
    same_dims(lhs, rhs) && identity(dims, lhs.len())
}

/// Whether `dims` place an operand of rank `rank` at the same rank unmoved: none, or `0..rank`.
#[inline(always)]
fn identity(dims: &[usize], rank: usize) -> bool {
    dims.is_empty() || dims.iter().copied().eq(0..rank)
}

/// The higher-rank of two shapes (`lhs` at equal ranks): the output shape of XLA's binary rule
/// when [`binary_shape`] returns `Ok(false)`.
#[inline(always)]
pub(crate) fn higher<'a>(lhs: &'a [usize], rhs: &'a [usize]) -> &'a [usize] {
    if lhs.len() >= rhs.len() {
        lhs
    } else {
        rhs
    }
}

/// XLA's binary rule ([`binary_op_shape`]) for operands whose shapes are arrays' (so their own
/// sizes fit): `Ok(true)` with the output shape in `out`, or `Ok(false)` when the output shape
/// is the higher-rank operand's (`lhs`'s at equal ranks; `out` then need not hold it), or the
/// error.
#[inline]
pub(crate) fn binary_shape(
    op: &'static str,
    lhs: &[usize],
    rhs: &[usize],
    dims: &[usize],
    out: &mut Dims,
) -> Result<bool> {
    if elementwise(lhs, rhs, dims) {
        return Ok(false);
    }
    let boxed = |s: &[usize]| -> Box<[usize]> { s.into() };
    let err_ctx = || (op, boxed(lhs), boxed(rhs), boxed(dims));

    if lhs.len() == rhs.len() {
        if !identity(dims, lhs.len()) {
            let (op, lhs, rhs, dims) = err_ctx();
            return Err(BroadcastError::BroadcastDimsNotIdentity { op, lhs, rhs, dims });
        }
    } else {
        let low = lhs.len().min(rhs.len());
        let high = lhs.len().max(rhs.len());
        if dims.is_empty() && low > 0 {
            return Err(BroadcastError::RankMismatch {
                op,
                lhs: lhs.into(),
                rhs: rhs.into(),
            });
        }
        if dims.len() != low {
            let (op, lhs, rhs, dims) = err_ctx();
            return Err(BroadcastError::BroadcastDimsLength {
                op,
                lhs,
                rhs,
                dims,
                expected: low,
            });
        }
        if let Some(&dim) = dims.iter().find(|&&d| d >= high) {
            let (op, lhs, rhs, dims) = err_ctx();
            return Err(BroadcastError::BroadcastDimOutOfRange {
                op,
                lhs,
                rhs,
                dims,
                dim,
                rank: high,
            });
        }
        if dims.windows(2).any(|w| w[0] >= w[1]) {
            let (op, lhs, rhs, dims) = err_ctx();
            return Err(BroadcastError::BroadcastDimsNotIncreasing { op, lhs, rhs, dims });
        }
    }

    // Every dim of the lower-rank operand (both, at equal ranks) meets the output dim it maps
    // to (the identity at equal ranks): sizes merge pairwise.
    let lhs_low = lhs.len() < rhs.len();
    let (high, low) = if lhs_low { (rhs, lhs) } else { (lhs, rhs) };
    let out_dim = |low_dim: usize| match lhs.len() == rhs.len() {
        true => low_dim,
        false => dims[low_dim],
    };
    let mut grown = false;
    for (low_dim, &n) in low.iter().enumerate() {
        let d = out_dim(low_dim);
        match merge_dim(high[d], n) {
            Some(m) => grown |= m != high[d],
            None => {
                let (lhs_dim, rhs_dim) = if lhs_low { (low_dim, d) } else { (d, low_dim) };
                let (lhs_size, rhs_size) = (lhs[lhs_dim], rhs[rhs_dim]);
                let (op, lhs, rhs, dims) = err_ctx();
                return Err(BroadcastError::IncompatibleDims {
                    op,
                    lhs,
                    rhs,
                    dims,
                    lhs_dim,
                    rhs_dim,
                    lhs_size,
                    rhs_size,
                });
            }
        }
    }
    if !grown {
        return Ok(false);
    }
    out.clear();
    out.extend_from_slice(high);
    for (low_dim, &n) in low.iter().enumerate() {
        let d = out_dim(low_dim);
        // Checked above: every pair merges.
        out[d] = merge_dim(high[d], n).unwrap_or(high[d]);
    }
    checked_size_for(op, out)?;
    Ok(true)
}

/// The StableHLO / JAX rule for `BroadcastInDim(operand, out_shape, broadcast_dimensions)`.
///
/// `broadcast_dimensions` has one entry per operand dim, all distinct and in range of
/// `out_shape`, in any order (an unsorted list transposes); each operand dim is 1 or equal to the
/// output dim it maps to. Output dims not named are new (broadcast) dims.
///
/// ```
/// use xla_bcast::shape::broadcast_in_dim_shape;
/// assert!(broadcast_in_dim_shape(&[5], &[2, 5, 3], &[1]).is_ok());
/// assert!(broadcast_in_dim_shape(&[1, 5], &[5, 2, 7], &[2, 0]).is_ok()); // transposes
/// assert!(broadcast_in_dim_shape(&[2], &[5, 1], &[1]).is_err()); // 2 is neither 1 nor 1
/// assert!(broadcast_in_dim_shape(&[5, 1], &[1, 5], &[1, 1]).is_err()); // duplicate
/// ```
pub fn broadcast_in_dim_shape(
    operand: &[usize],
    out_shape: &[usize],
    broadcast_dimensions: &[usize],
) -> Result<()> {
    in_dim_check("broadcast_in_dim", operand, out_shape, broadcast_dimensions)
}

pub(crate) fn in_dim_check(
    op: &'static str,
    operand: &[usize],
    out_shape: &[usize],
    dims: &[usize],
) -> Result<()> {
    let Some(fault) = in_dim_fault(operand, out_shape, dims, ["operand", "output"]) else {
        return checked_size_for(op, out_shape).map(drop);
    };
    let (operand, out_shape, dims) = (operand.into(), out_shape.into(), dims.into());
    Err(match fault {
        Fault::Dims(reason) => BroadcastError::InDimInvalid {
            op,
            operand,
            out_shape,
            dims,
            reason,
        },
        Fault::Size([operand_dim, out_dim, operand_size, out_size]) => BroadcastError::InDimSize {
            op,
            operand,
            out_shape,
            dims,
            operand_dim,
            out_dim,
            operand_size,
            out_size,
        },
    })
}

/// Why `broadcast_dimensions` do not place a shape in another.
enum Fault {
    /// Wrong length, out of range or repeated: what is wrong, in words.
    Dims(String),
    /// A placed dim neither 1 nor the size it lands on: the two dims and their sizes.
    Size([usize; 4]),
}

/// What stops `dims` placing `operand` in `out_shape` (dim `i` at `dims[i]`), the two named
/// in the words as `names` says; `None` when they place it.
fn in_dim_fault(
    operand: &[usize],
    out_shape: &[usize],
    dims: &[usize],
    [from, to]: [&str; 2],
) -> Option<Fault> {
    if dims.len() != operand.len() {
        return Some(Fault::Dims(format!(
            "broadcast_dimensions has {} entries but the {from} has rank {}; give one {to} dim per {from} dim",
            dims.len(),
            operand.len()
        )));
    }
    if let Some(&d) = dims.iter().find(|&&d| d >= out_shape.len()) {
        return Some(Fault::Dims(format!(
            "dim {d} is out of range for {to} rank {}",
            out_shape.len()
        )));
    }
    for (i, d) in dims.iter().enumerate() {
        if dims[..i].contains(d) {
            return Some(Fault::Dims(format!(
                "dim {d} appears twice; each {from} dim needs its own {to} dim"
            )));
        }
    }
    operand
        .iter()
        .zip(dims)
        .enumerate()
        .find_map(|(i, (&size, &d))| {
            (size != 1 && size != out_shape[d]).then_some(Fault::Size([i, d, size, out_shape[d]]))
        })
}

/// The adjoint's check: `result` (the shape asked for) placed in `array` by `dims`, as
/// [`in_dim_check`] checks a broadcast; its errors are [`BroadcastError::ReduceInDims`], which
/// say what the dims mean and suggest the dims that fit. An overflowing shape stays
/// [`BroadcastError::SizeOverflow`].
pub(crate) fn reduce_in_dim_check(
    op: &'static str,
    result: &[usize],
    array: &[usize],
    dims: &[usize],
) -> Result<()> {
    let reason = match in_dim_fault(result, array, dims, ["result", "array"]) {
        None => return checked_size_for(op, array).map(drop),
        Some(Fault::Dims(reason)) => reason,
        Some(Fault::Size([r, a, r_size, a_size])) => format!(
            "result dim {r} has size {r_size} but array dim {a} has size {a_size}; it must be 1 \
             or equal"
        ),
    };
    Err(BroadcastError::ReduceInDims {
        op,
        array: array.into(),
        result: result.into(),
        dims: dims.into(),
        reason,
    })
}

/// NumPy's (and PyTorch's) implicit broadcasting of any number of shapes: align trailing dims;
/// each aligned group is equal or 1 (`1` against `0` gives `0`); missing leading dims count as 1.
///
/// ```
/// use xla_bcast::shape::numpy_shape;
/// assert_eq!(numpy_shape(&[&[5, 3, 4, 1], &[3, 1, 1]]).unwrap(), vec![5, 3, 4, 1]);
/// assert_eq!(numpy_shape(&[&[1, 9, 4], &[15, 1, 4]]).unwrap(), vec![15, 9, 4]);
/// assert_eq!(numpy_shape(&[]).unwrap(), Vec::<usize>::new());
/// assert!(numpy_shape(&[&[0], &[2, 2]]).is_err());
/// ```
pub fn numpy_shape(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    numpy_shape_for("broadcast_shapes", shapes)
}

pub(crate) fn numpy_shape_for(op: &'static str, shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    // Which input decided each output dim, to name both sides of a conflict.
    let mut owner = vec![usize::MAX; rank];
    for (k, shape) in shapes.iter().enumerate() {
        let pad = rank - shape.len();
        for (i, &n) in shape.iter().enumerate() {
            let o = pad + i;
            if n == out[o] || n == 1 {
                continue;
            }
            if out[o] == 1 {
                out[o] = n;
                owner[o] = k;
                continue;
            }
            let first = shapes[owner[o]];
            return Err(BroadcastError::NumpyIncompatible {
                op,
                first: first.into(),
                second: (*shape).into(),
                axis_from_end: rank - o,
                first_size: out[o],
                second_size: n,
            });
        }
    }
    checked_size_for(op, &out)?;
    Ok(out)
}

/// How Paddle's rule maps onto the strict core: how many leading dims of each operand to keep
/// (Paddle drops the trailing size-1 dims of the lower-rank operand) and the
/// `broadcast_dimensions` for the kept operands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PaddlePlan {
    pub out: Vec<usize>,
    pub x_keep: usize,
    pub y_keep: usize,
    pub dims: Vec<usize>,
}

/// PaddlePaddle's elementwise broadcasting with an `axis`.
///
/// * Identical shapes give that shape, whatever `axis` is.
/// * Otherwise `axis` is -1 or in `0..max(rank(x), rank(y))`.
/// * Equal ranks need `axis` -1 or 0; size-1 dims broadcast both ways.
/// * Different ranks: the lower-rank operand (`y`, or `x` when `y` has the higher rank) drops
///   its trailing size-1 dims and is matched against the other starting at dim `axis`
///   (`-1` means the rank difference); size-1 dims broadcast both ways.
///
/// Where Paddle itself aborts the process (a `y` whose untrimmed dims run past the end of `x`,
/// e.g. `x = [2, 1, 3]`, `y = [1, 1]`, `axis = 2`), this applies the same rules and returns
/// `[2, 1, 3]`. Sizes of 0 follow the XLA rule (`1` against `0` gives `0`, anything else must be
/// equal).
///
/// ```
/// use xla_bcast::shape::paddle_shape;
/// assert_eq!(paddle_shape(&[2, 3, 4, 5], &[3, 4], 1).unwrap(), vec![2, 3, 4, 5]);
/// assert_eq!(paddle_shape(&[2, 3, 4, 5], &[4, 5], -1).unwrap(), vec![2, 3, 4, 5]);
/// assert_eq!(paddle_shape(&[2, 3, 4, 5], &[3, 1], 1).unwrap(), vec![2, 3, 4, 5]);
/// assert!(paddle_shape(&[2, 3, 4, 5], &[4, 5], 1).is_err());
/// ```
pub fn paddle_shape(x: &[usize], y: &[usize], axis: isize) -> Result<Vec<usize>> {
    paddle_plan("elementwise", x, y, axis).map(|p| p.out)
}

pub(crate) fn paddle_plan(
    op: &'static str,
    x: &[usize],
    y: &[usize],
    axis: isize,
) -> Result<PaddlePlan> {
    let fail = |reason: String| BroadcastError::PaddleAxis {
        op,
        x: x.into(),
        y: y.into(),
        axis,
        reason,
    };
    if x == y {
        checked_size_for(op, x)?;
        return Ok(PaddlePlan {
            out: x.to_vec(),
            x_keep: x.len(),
            y_keep: y.len(),
            dims: vec![],
        });
    }
    let max_rank = x.len().max(y.len());
    if axis != -1 && !(0..max_rank as isize).contains(&axis) {
        return Err(fail(format!(
            "axis must be -1 or in 0..{max_rank} (the larger rank)"
        )));
    }
    if x.len() == y.len() {
        if axis != -1 && axis != 0 {
            return Err(fail("operands of equal rank need axis -1 or 0".to_string()));
        }
        let out = merge_paddle(x, y, 0, &fail)?;
        checked_size_for(op, &out)?;
        return Ok(PaddlePlan {
            out,
            x_keep: x.len(),
            y_keep: y.len(),
            dims: vec![],
        });
    }
    let (high, low, low_name) = if x.len() > y.len() {
        (x, y, "y")
    } else {
        (y, x, "x")
    };
    let start = if axis == -1 {
        high.len() - low.len()
    } else {
        axis as usize
    };
    let keep = low.len() - low.iter().rev().take_while(|&&n| n == 1).count();
    if start + keep > high.len() {
        return Err(fail(format!(
            "{low_name} (without its trailing 1s: {:?}) placed at dim {start} runs past the {} dims of the other operand",
            &low[..keep],
            high.len()
        )));
    }
    let out = merge_paddle(high, &low[..keep], start, &fail)?;
    checked_size_for(op, &out)?;
    let dims = (start..start + keep).collect();
    let (x_keep, y_keep) = if x.len() > y.len() {
        (x.len(), keep)
    } else {
        (keep, y.len())
    };
    Ok(PaddlePlan {
        out,
        x_keep,
        y_keep,
        dims,
    })
}

/// Paddle's per-dim merge of `low` placed at `start` of `high`.
fn merge_paddle(
    high: &[usize],
    low: &[usize],
    start: usize,
    fail: &dyn Fn(String) -> BroadcastError,
) -> Result<Vec<usize>> {
    let mut out = high.to_vec();
    for (i, &l) in low.iter().enumerate() {
        let h = high[start + i];
        out[start + i] = match merge_dim(h, l) {
            Some(n) => n,
            None => {
                return Err(fail(format!(
                    "dim {} has size {h} against size {l} of dim {i} of the lower-rank operand; sizes must be equal or one of them 1",
                    start + i
                )))
            }
        };
    }
    Ok(out)
}

/// The output shape of XLA's `Select(pred, on_true, on_false)` (and any op of three operands):
/// equal ranks with degenerate broadcasting, a rank-0 operand broadcasting against anything.
///
/// ```
/// use xla_bcast::shape::select_shape;
/// assert_eq!(select_shape(&[2, 1], &[2, 3], &[]).unwrap(), vec![2, 3]);
/// assert!(select_shape(&[2], &[2, 3], &[2, 3]).is_err());
/// ```
pub fn select_shape(pred: &[usize], on_true: &[usize], on_false: &[usize]) -> Result<Vec<usize>> {
    let pt = binary_plan("select", pred, on_true, &[])?;
    Ok(binary_plan("select", &pt.out, on_false, &[])?.out.to_vec())
}

/// XLA's rule for `Clamp(min, operand, max)`: each bound is a scalar (rank 0) or has exactly
/// the operand's shape (no other broadcasting, as StableHLO's `clamp` requires); the result has
/// the operand's shape.
///
/// ```
/// use xla_bcast::shape::clamp_shape;
/// assert_eq!(clamp_shape(&[], &[2, 3], &[2, 3]).unwrap(), vec![2, 3]);
/// assert!(clamp_shape(&[1, 3], &[2, 3], &[]).is_err()); // a row is neither
/// ```
pub fn clamp_shape(min: &[usize], operand: &[usize], max: &[usize]) -> Result<Vec<usize>> {
    let fits = |bound: &[usize]| bound.is_empty() || bound == operand;
    if !fits(min) || !fits(max) {
        return Err(BroadcastError::ClampShape {
            op: "clamp",
            min: min.into(),
            operand: operand.into(),
            max: max.into(),
        });
    }
    Ok(operand.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_against_zero_gives_zero() {
        assert_eq!(binary_op_shape(&[4, 1], &[4, 0], &[]).unwrap(), vec![4, 0]);
        assert_eq!(binary_op_shape(&[0], &[2, 1], &[1]).unwrap(), vec![2, 0]);
    }

    #[test]
    fn lower_rank_either_side() {
        assert_eq!(binary_op_shape(&[3], &[2, 3], &[1]).unwrap(), vec![2, 3]);
        assert_eq!(binary_op_shape(&[2, 3], &[3], &[1]).unwrap(), vec![2, 3]);
    }

    #[test]
    fn overflow_is_an_error() {
        let big = usize::MAX / 2;
        assert!(matches!(
            binary_op_shape(&[big, 1], &[1, 4], &[]),
            Err(BroadcastError::SizeOverflow { .. })
        ));
    }

    #[test]
    fn paddle_trailing_ones_dropped() {
        let p = paddle_plan("t", &[2, 1, 3], &[1, 1], 2).unwrap();
        assert_eq!(p.out, vec![2, 1, 3]);
        assert_eq!(p.y_keep, 0);
    }
}
