//! [`BroadcastError`]: every way an input can be wrong, with the shapes, the dims and a fix.
//!
//! ```
//! use ndarray::array;
//! use xla_bcast::prelude::*;
//!
//! let err = array![[1, 2, 3]].add_bcast(&array![1, 2], &[1]).unwrap_err();
//! assert!(matches!(err, BroadcastError::IncompatibleDims { .. }));
//! assert_eq!(err.op(), "add");
//! ```

/// A shape, printed the way the rest of the crate prints shapes: `[2, 3]`.
fn sh(s: &[usize]) -> String {
    format!("{s:?}")
}

/// Each of `lists` as [`sh`] writes it, `sep` between them.
fn sh_all(lists: &[Vec<usize>], sep: &str) -> String {
    let mut text = String::new();
    for (k, list) in lists.iter().enumerate() {
        text += if k > 0 { sep } else { "" };
        text += &sh(list);
    }
    text
}

/// The numbers of `items`, `sep` between them.
pub(crate) fn joined(items: &[usize], sep: &str) -> String {
    let mut text = String::new();
    for (k, n) in items.iter().enumerate() {
        text += if k > 0 { sep } else { "" };
        text += &n.to_string();
    }
    text
}

/// The error of every fallible function of the crate.
///
/// Each variant carries the operation (`op`), the shapes and the dims involved, and its message
/// says which rule failed and how to fix the call. Nothing in the crate panics on bad input: it
/// returns one of these.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let a = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let v = array![7.0, 8.0, 9.0];
/// let err = a.add_bcast(&v, &[]).unwrap_err();
/// assert!(matches!(err, BroadcastError::RankMismatch { .. }));
/// assert_eq!(
///     err.to_string(),
///     "add: lhs [2, 3] and rhs [3] have different ranks; give broadcast_dimensions, \
///      e.g. [1] maps rhs dim 0 onto lhs dim 1"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BroadcastError {
    /// A binary op got operands of different ranks and no `broadcast_dimensions`.
    RankMismatch {
        /// The operation.
        op: &'static str,
        /// Shape of the left operand.
        lhs: Box<[usize]>,
        /// Shape of the right operand.
        rhs: Box<[usize]>,
    },

    /// `broadcast_dimensions` does not have one entry per dim of the lower-rank operand.
    BroadcastDimsLength {
        /// The operation.
        op: &'static str,
        /// Shape of the left operand.
        lhs: Box<[usize]>,
        /// Shape of the right operand.
        rhs: Box<[usize]>,
        /// The `broadcast_dimensions` given.
        dims: Box<[usize]>,
        /// The number of entries required.
        expected: usize,
    },

    /// `broadcast_dimensions` of a binary op is not strictly increasing.
    BroadcastDimsNotIncreasing {
        /// The operation.
        op: &'static str,
        /// Shape of the left operand.
        lhs: Box<[usize]>,
        /// Shape of the right operand.
        rhs: Box<[usize]>,
        /// The `broadcast_dimensions` given.
        dims: Box<[usize]>,
    },

    /// An entry of `broadcast_dimensions` names a dim the higher-rank operand does not have.
    BroadcastDimOutOfRange {
        /// The operation.
        op: &'static str,
        /// Shape of the left operand.
        lhs: Box<[usize]>,
        /// Shape of the right operand.
        rhs: Box<[usize]>,
        /// The `broadcast_dimensions` given.
        dims: Box<[usize]>,
        /// The offending entry.
        dim: usize,
        /// The rank it must stay below.
        rank: usize,
    },

    /// Operands of equal rank got `broadcast_dimensions` other than empty or the identity.
    BroadcastDimsNotIdentity {
        /// The operation.
        op: &'static str,
        /// Shape of the left operand.
        lhs: Box<[usize]>,
        /// Shape of the right operand.
        rhs: Box<[usize]>,
        /// The `broadcast_dimensions` given.
        dims: Box<[usize]>,
    },

    /// Two matched dims differ and neither is 1.
    IncompatibleDims {
        /// The operation.
        op: &'static str,
        /// Shape of the left operand.
        lhs: Box<[usize]>,
        /// Shape of the right operand.
        rhs: Box<[usize]>,
        /// The `broadcast_dimensions` given.
        dims: Box<[usize]>,
        /// The lhs dim.
        lhs_dim: usize,
        /// The rhs dim.
        rhs_dim: usize,
        /// Its size in lhs.
        lhs_size: usize,
        /// Its size in rhs.
        rhs_size: usize,
    },

    /// `broadcast_in_dim` (or its adjoint) got a bad `broadcast_dimensions`: wrong length,
    /// duplicate entry or entry out of range.
    InDimInvalid {
        /// The operation.
        op: &'static str,
        /// Shape of the operand.
        operand: Box<[usize]>,
        /// The target shape.
        out_shape: Box<[usize]>,
        /// The `broadcast_dimensions` given.
        dims: Box<[usize]>,
        /// What is wrong with them.
        reason: String,
    },

    /// `broadcast_in_dim`: an operand dim is neither 1 nor the size of the output dim it maps to.
    InDimSize {
        /// The operation.
        op: &'static str,
        /// Shape of the operand.
        operand: Box<[usize]>,
        /// The target shape.
        out_shape: Box<[usize]>,
        /// The `broadcast_dimensions` given.
        dims: Box<[usize]>,
        /// The operand dim.
        operand_dim: usize,
        /// The output dim it maps to.
        out_dim: usize,
        /// Its size in the operand.
        operand_size: usize,
        /// Its size in the output.
        out_size: usize,
    },

    /// An operand of a [`StrictZip`](crate::zip::StrictZip) does not fit the zip: `source`
    /// is the rule's error, the zip's shape so far as its lhs (or output) and the operand as
    /// its rhs.
    ZipOperand {
        /// The operand's position (0 for the one given to `from`).
        position: usize,
        /// What the rule says of it.
        source: Box<BroadcastError>,
    },

    /// An output or in-place array does not have the shape the operation produces.
    OutputShape {
        /// The operation.
        op: &'static str,
        /// The result's shape.
        expected: Box<[usize]>,
        /// The shape given.
        got: Box<[usize]>,
    },

    /// `clamp`: a bound that is neither a scalar nor of the operand's shape.
    ClampShape {
        /// The operation.
        op: &'static str,
        /// Shape of the lower bound.
        min: Box<[usize]>,
        /// Shape of the operand.
        operand: Box<[usize]>,
        /// Shape of the upper bound.
        max: Box<[usize]>,
    },

    /// An op of a recorded program ([`crate::stablehlo`]) got operands whose element types it
    /// does not take.
    ElementType {
        /// The operation.
        op: &'static str,
        /// The operands' element types, in StableHLO's names.
        types: String,
        /// What is wrong.
        reason: String,
    },

    /// A program or executable got the wrong number of inputs or outputs.
    ArgumentCount {
        /// The operation.
        op: &'static str,
        /// The program's name.
        program: String,
        /// `"inputs"` or `"outputs"`.
        kind: &'static str,
        /// The number the program takes.
        expected: usize,
        /// The number given.
        got: usize,
    },

    /// An argument of the wrong shape: a program's input or output (named with its index), or
    /// a gradient given to the adjoint.
    ArgumentShape {
        /// The operation.
        op: &'static str,
        /// The argument: `input 1 of program "ln"`, `output 0 of program "ln"`, `grad`.
        argument: String,
        /// The shape it must have.
        expected: Box<[usize]>,
        /// The shape given.
        got: Box<[usize]>,
    },

    /// A value recorded by another program, given to this one.
    ForeignValue {
        /// The operation.
        op: &'static str,
        /// The name of the program the value was given to.
        program: String,
    },

    /// A result's rank differs from the rank of the dimension type it is returned in (a fixed
    /// `Ix1`..`Ix6` that the operands' types promised).
    ResultRank {
        /// The operation.
        op: &'static str,
        /// The result's shape.
        shape: Box<[usize]>,
        /// The rank of the dimension type.
        rank: usize,
    },

    /// NumPy rule: two trailing-aligned dims differ and neither is 1.
    NumpyIncompatible {
        /// The operation.
        op: &'static str,
        /// The first shape of the failing pair.
        first: Box<[usize]>,
        /// The second shape of the failing pair.
        second: Box<[usize]>,
        /// 1 for the last dim, 2 for the one before, ...
        axis_from_end: usize,
        /// Size in the first shape.
        first_size: usize,
        /// Size in the second shape.
        second_size: usize,
    },

    /// Paddle's `axis` rule failed.
    PaddleAxis {
        /// The operation.
        op: &'static str,
        /// Shape of `x`.
        x: Box<[usize]>,
        /// Shape of `y`.
        y: Box<[usize]>,
        /// The `axis` given.
        axis: isize,
        /// What failed.
        reason: String,
    },

    /// A shape whose element count (or byte extent) does not fit `isize`.
    SizeOverflow {
        /// The operation.
        op: &'static str,
        /// The shape.
        shape: Box<[usize]>,
    },

    /// The result could not be allocated (its bytes do not fit `isize`, or the allocator
    /// refused them).
    Allocation {
        /// The operation.
        op: &'static str,
        /// The result's shape.
        shape: Box<[usize]>,
        /// The bytes it needs, if that fits `usize`.
        bytes: Option<usize>,
    },

    /// A layout is malformed or does not fit the dims it is used with.
    Layout {
        /// The operation.
        op: &'static str,
        /// The layout, in XLA's notation.
        layout: String,
        /// The dims.
        dims: Box<[usize]>,
        /// What is wrong.
        reason: String,
    },

    /// A buffer is shorter than its dims and layout need.
    BufferTooShort {
        /// The operation.
        op: &'static str,
        /// The dims.
        dims: Box<[usize]>,
        /// Elements needed.
        needed: usize,
        /// Elements given.
        got: usize,
    },

    /// An index (multi-dimensional, linear, or a dim number) is out of range.
    IndexOutOfRange {
        /// The operation.
        op: &'static str,
        /// The dims.
        dims: Box<[usize]>,
        /// The offending index, described.
        what: String,
    },

    /// The adjoint of `broadcast_in_dim` ([`ReduceInDim`](crate::reduce::ReduceInDim),
    /// `Program::reduce_in_dim`) got `broadcast_dimensions` that do not place its result's
    /// shape in the array it sums. The message says what the dims mean and suggests the dims
    /// that fit the shapes given.
    ReduceInDims {
        /// The operation.
        op: &'static str,
        /// The shape of the array summed.
        array: Box<[usize]>,
        /// The shape asked for: the result's.
        result: Box<[usize]>,
        /// The `broadcast_dimensions` given.
        dims: Box<[usize]>,
        /// What is wrong with them.
        reason: String,
    },

    /// The axes of a reduction are not distinct dims of its operand.
    ReduceAxes {
        /// The operation.
        op: &'static str,
        /// The operand's shape.
        shape: Box<[usize]>,
        /// The axes given.
        axes: Box<[usize]>,
        /// What is wrong with them.
        reason: String,
    },

    /// A sharding that does not fit its array or the program's mesh.
    Sharding {
        /// The array (a parameter or output, with its shape), or the mesh.
        array: String,
        /// The dim of the array, where one is at fault.
        dim: Option<usize>,
        /// The mesh axis, where one is at fault.
        axis: Option<String>,
        /// What is wrong.
        reason: String,
    },

    /// XLA shape text that does not parse.
    ParseShape {
        /// The text.
        text: String,
        /// What is wrong.
        reason: String,
    },
}

fn rank_mismatch(op: &str, lhs: &[usize], rhs: &[usize]) -> String {
    let (lo_name, lo, hi_name, hi) = if lhs.len() < rhs.len() {
        ("lhs", lhs, "rhs", rhs)
    } else {
        ("rhs", rhs, "lhs", lhs)
    };
    // XLA's Select takes no broadcast_dimensions: its hint is a broadcast_in_dim that places the
    // lower-rank operand, with the dims that fit.
    if op == "select" {
        let place = match suggested_dims(lo, hi).first() {
            Some(dims) => format!(", e.g. .broadcast_in_dim({}, &{})", sh(hi), sh(dims)),
            None => String::new(),
        };
        return format!(
            "select: operands {} and {} have different ranks; select takes no \
             broadcast_dimensions (XLA's Select broadcasts only rank-0 operands and size-1 dims), \
             so place the lower-rank operand with broadcast_in_dim first{place}",
            sh(lhs),
            sh(rhs)
        );
    }
    let head = format!(
        "{op}: lhs {} and rhs {} have different ranks; give broadcast_dimensions",
        sh(lhs),
        sh(rhs)
    );
    // Only mappings that the rule accepts are suggested: a guess that then fails on sizes (as
    // NumPy's trailing alignment would) is the very thing broadcast_dimensions replace.
    let fits = suggested_dims(lo, hi);
    match fits.as_slice() {
        [] => format!(
            "{head}, but none fit: no strictly increasing choice of {hi_name} dims has sizes \
             equal to (or 1 against) {lo_name}'s {}",
            sh(lo)
        ),
        [dims] if lo.len() == 1 => format!(
            "{head}, e.g. {} maps {lo_name} dim 0 onto {hi_name} dim {}",
            sh(dims),
            dims[0]
        ),
        [first, rest @ ..] if lo.len() == 1 => format!(
            "{head}, e.g. {} maps {lo_name} dim 0 onto {hi_name} dim {} ({} fit too)",
            sh(first),
            first[0],
            sh_all(rest, ", ")
        ),
        [dims, ..] => format!(
            "{head}, e.g. {} maps {lo_name} dims {} onto {hi_name} dims {}",
            sh(dims),
            sh(&(0..lo.len()).collect::<Vec<_>>()),
            sh(dims)
        ),
    }
}

/// The `broadcast_dimensions` worth suggesting for an operand of shape `lo` against one of
/// higher rank `hi`, each accepted by XLA's rule (strictly increasing, each pair of sizes equal or
/// one of them 1). For a vector: every dim that fits, in order. Otherwise the one that keeps
/// the dims as far right as they fit, found greedily from the right (which finds a fit whenever
/// one exists); none when nothing fits.
pub(crate) fn suggested_dims(lo: &[usize], hi: &[usize]) -> Vec<Vec<usize>> {
    let fits = |l: usize, h: usize| l == h || l == 1 || h == 1;
    if lo.len() == 1 {
        let mut each = Vec::new();
        for (d, &h) in hi.iter().enumerate() {
            if fits(lo[0], h) {
                each.push(vec![d]);
            }
        }
        return each;
    }
    let mut dims = vec![0; lo.len()];
    let mut next = hi.len();
    for i in (0..lo.len()).rev() {
        match (0..next).rev().find(|&d| fits(lo[i], hi[d])) {
            Some(d) => (dims[i], next) = (d, d),
            None => return Vec::new(),
        }
    }
    vec![dims]
}

/// Shorthand used across the crate.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::error::Result;
/// use xla_bcast::prelude::*;
///
/// fn centred(x: &ndarray::Array2<f64>) -> Result<ndarray::Array2<f64>> {
///     let mean = x.reduce_in_dim(x.nrows(), &[0])? / x.ncols() as f64;
///     x.sub_bcast(&mean, &[0])
/// }
/// assert_eq!(centred(&array![[1.0, 3.0]]).unwrap(), array![[-1.0, 1.0]]);
/// ```
pub type Result<T, E = BroadcastError> = std::result::Result<T, E>;

impl std::fmt::Display for BroadcastError {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BroadcastError::RankMismatch { op, lhs, rhs } => write!(
                out,
                "{}", rank_mismatch(op, lhs, rhs)
            ),
            BroadcastError::BroadcastDimsLength { op, lhs, rhs, dims, expected } => write!(
                out,
                "{op}: broadcast_dimensions {} has {} entries for lhs {} and rhs {}; it needs one entry per dim \
                of the lower-rank operand ({expected})",
                sh(dims), dims.len(), sh(lhs), sh(rhs)
            ),
            BroadcastError::BroadcastDimsNotIncreasing { op, lhs, rhs, dims } => write!(
                out,
                "{op}: broadcast_dimensions {} for lhs {} and rhs {} must be strictly increasing (XLA binary ops \
                neither repeat nor transpose dims; use broadcast_in_dim to transpose)",
                sh(dims), sh(lhs), sh(rhs)
            ),
            BroadcastError::BroadcastDimOutOfRange { op, lhs, rhs, dims, dim, rank } => write!(
                out,
                "{op}: broadcast_dimensions {} for lhs {} and rhs {}: dim {dim} is out of range for rank {rank}",
                sh(dims), sh(lhs), sh(rhs)
            ),
            BroadcastError::BroadcastDimsNotIdentity { op, lhs, rhs, dims } => write!(
                out,
                "{op}: lhs {} and rhs {} have equal ranks, so broadcast_dimensions must be empty or the identity, \
                not {}",
                sh(lhs), sh(rhs), sh(dims)
            ),
            BroadcastError::IncompatibleDims { op, lhs, rhs, dims, lhs_dim, rhs_dim, lhs_size, rhs_size } => {
                write!(
                    out,
                    "{op}: lhs {} and rhs {} (broadcast_dimensions {}) are incompatible: lhs dim {lhs_dim} has size \
                    {lhs_size} and rhs dim {rhs_dim} has size {rhs_size}; matched sizes must be equal or one of them 1",
                    sh(lhs), sh(rhs), sh(dims)
                )?;
                // At different ranks, the dims that would fit (equal ranks match dim to dim).
                match lhs.len().cmp(&rhs.len()) {
                    std::cmp::Ordering::Less => write_suggested_dims(out, lhs, rhs),
                    std::cmp::Ordering::Greater => write_suggested_dims(out, rhs, lhs),
                    std::cmp::Ordering::Equal => Ok(()),
                }
            }
            BroadcastError::InDimInvalid { op, operand, out_shape, dims, reason } => write!(
                out,
                "{op}: operand {} to shape {} with broadcast_dimensions {}: {reason}",
                sh(operand),
                sh(out_shape),
                sh(dims)
            ),
            BroadcastError::InDimSize { op, operand, out_shape, dims, operand_dim, out_dim, operand_size, out_size } => write!(
                out,
                "{op}: operand {} to shape {} with broadcast_dimensions {}: operand dim {operand_dim} has size \
                {operand_size} but output dim {out_dim} has size {out_size}; it must be 1 or equal",
                sh(operand), sh(out_shape), sh(dims)
            ),
            BroadcastError::ZipOperand { position, source } => {
                write!(out, "StrictZip operand {position}: {source}")?;
                match **source {
                    BroadcastError::RankMismatch { .. } | BroadcastError::IncompatibleDims { .. } => {
                        out.write_str(" (a lower-rank operand goes in with and_in_dims(&v, &dims))")
                    }
                    _ => Ok(()),
                }
            }
            BroadcastError::OutputShape { op, expected, got } => write!(
                out,
                "{op}: the output has shape {} but the result has shape {}; pass an output of the result's shape",
                sh(got), sh(expected)
            ),
            BroadcastError::ClampShape { op, min, operand, max } => write!(
                out,
                "{op}: min {} and max {} must each be a scalar (rank 0) or have the operand's shape {}; \
                broadcast a bound first (broadcast_in_dim) to clamp against it",
                sh(min),
                sh(max),
                sh(operand)
            ),
            BroadcastError::ElementType { op, types, reason } => write!(
                out,
                "{op}: element types {types}: {reason}"
            ),
            BroadcastError::ResultRank { op, shape, rank } => write!(
                out,
                "{op}: the result has shape {} (rank {}), but its dimension type holds rank {rank}",
                sh(shape), shape.len()
            ),
            BroadcastError::NumpyIncompatible { op, first, second, axis_from_end, first_size, second_size } => write!(
                out,
                "{op}: shapes {} and {} do not broadcast (NumPy rule): trailing dim {axis} has sizes {first_size} \
                and {second_size}; aligned from the right, sizes must be equal or one of them 1",
                sh(first), sh(second), axis = -(*axis_from_end as isize)
            ),
            BroadcastError::PaddleAxis { op, x, y, axis, reason } => write!(
                out,
                "{op}: x {} and y {} with axis {axis} (Paddle rule): {reason}",
                sh(x),
                sh(y)
            ),
            BroadcastError::SizeOverflow { op, shape } => write!(
                out,
                "{op}: shape {} has more elements than fit in isize", sh(shape)
            ),
            BroadcastError::Allocation { op, shape, bytes } => write!(
                out,
                "{op}: cannot allocate a result of shape {} ({})",
                sh(shape),
                bytes.map_or("more bytes than fit in usize".to_string(), |b| format!("{b} bytes"))
            ),
            BroadcastError::Layout { op, layout, dims, reason } => write!(
                out,
                "{op}: layout {layout} for dims {}: {reason}", sh(dims)
            ),
            BroadcastError::BufferTooShort { op, dims, needed, got } => write!(
                out,
                "{op}: dims {} need a buffer of {needed} elements, got {got}",
                sh(dims)
            ),
            BroadcastError::ReduceInDims { op, array, result, dims, reason } => {
                write!(
                    out,
                    "{op}: {} summed to {} with broadcast_dimensions {}: {reason}; \
                    broadcast_dimensions name the array dims the result keeps (result dim i is \
                    array dim dims[i], the others are summed away), not the axes summed",
                    sh(array), sh(result), sh(dims)
                )?;
                write_suggested_dims(out, result, array)
            }
            BroadcastError::ArgumentCount { op, program, kind, expected, got } => write!(
                out,
                "{op}: program {program:?} takes {expected} {kind}, but {got} were given"
            ),
            BroadcastError::ArgumentShape { op, argument, expected, got } => write!(
                out,
                "{op}: {argument} has shape {} but must have shape {}",
                sh(got), sh(expected)
            ),
            BroadcastError::ForeignValue { op, program } => write!(
                out,
                "{op}: a value of another program was given to program {program:?}; use the \
                values this program (or the program it was cloned from) recorded"
            ),
            BroadcastError::IndexOutOfRange { op, dims, what } => write!(
                out,
                "{op}: {what} is out of range for dims {}", sh(dims)
            ),
            BroadcastError::ReduceAxes { op, shape, axes, reason } => write!(
                out,
                "{op}: axes {} of an operand of shape {}: {reason}; give each axis once, below \
                the rank",
                sh(axes), sh(shape)
            ),
            BroadcastError::Sharding { array, dim, axis, reason } => {
                let dim = dim.map_or(String::new(), |d| format!(", dim {d}"));
                let axis = axis.as_ref().map_or(String::new(), |a| format!(", mesh axis {a:?}"));
                write!(out, "shard: {array}{dim}{axis}: {reason}")
            }
            BroadcastError::ParseShape { text, reason } => write!(
                out,
                "cannot parse XLA shape {text:?}: {reason}"
            ),
        }
    }
}

/// The `reduce_in_dim` dims that would fit `result` and `array`, as a hint after the message.
fn write_suggested_dims(
    out: &mut std::fmt::Formatter<'_>,
    result: &[usize],
    array: &[usize],
) -> std::fmt::Result {
    match suggested_dims(result, array).as_slice() {
        [] => write!(out, "; no strictly increasing dims fit these shapes"),
        [one] => write!(out, "; {} fits these shapes", sh(one)),
        many => write!(out, "; {} fit these shapes", sh_all(many, " or ")),
    }
}

impl std::error::Error for BroadcastError {}

impl BroadcastError {
    /// The operation that failed, as named in the message (`"add"`, `"broadcast_in_dim"`, ...).
    ///
    /// ```
    /// use xla_bcast::shape::binary_op_shape;
    /// let err = binary_op_shape(&[2, 3], &[4], &[1]).unwrap_err();
    /// assert_eq!(err.op(), "binary_op");
    /// ```
    pub fn op(&self) -> &str {
        match self {
            Self::RankMismatch { op, .. }
            | Self::BroadcastDimsLength { op, .. }
            | Self::BroadcastDimsNotIncreasing { op, .. }
            | Self::BroadcastDimOutOfRange { op, .. }
            | Self::BroadcastDimsNotIdentity { op, .. }
            | Self::IncompatibleDims { op, .. }
            | Self::InDimInvalid { op, .. }
            | Self::InDimSize { op, .. }
            | Self::OutputShape { op, .. }
            | Self::ResultRank { op, .. }
            | Self::ClampShape { op, .. }
            | Self::ElementType { op, .. }
            | Self::NumpyIncompatible { op, .. }
            | Self::PaddleAxis { op, .. }
            | Self::SizeOverflow { op, .. }
            | Self::Allocation { op, .. }
            | Self::Layout { op, .. }
            | Self::BufferTooShort { op, .. }
            | Self::IndexOutOfRange { op, .. }
            | Self::ReduceInDims { op, .. }
            | Self::ArgumentCount { op, .. }
            | Self::ArgumentShape { op, .. }
            | Self::ForeignValue { op, .. }
            | Self::ReduceAxes { op, .. } => op,
            Self::ZipOperand { source, .. } => source.op(),
            Self::ParseShape { .. } => "parse_shape",
            Self::Sharding { .. } => "shard",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::binary_op_shape;

    /// Every strictly increasing choice of `k` dims out of `0..n`.
    fn increasing(k: usize, n: usize) -> Vec<Vec<usize>> {
        if k == 0 {
            return vec![vec![]];
        }
        (0..n)
            .flat_map(|last| {
                increasing(k - 1, last).into_iter().map(move |mut v| {
                    v.push(last);
                    v
                })
            })
            .collect()
    }

    /// Over every pair of shapes of ranks 1 to 4 (sizes 1 to 3): each suggestion passes the
    /// rule, a vector gets every dim that fits, and nothing is suggested only when nothing fits.
    #[test]
    fn rank_mismatch_suggests_only_dims_that_fit() {
        fn shapes(rank: usize) -> Vec<Vec<usize>> {
            (0..3usize.pow(rank as u32))
                .map(|mut code| {
                    (0..rank)
                        .map(|_| {
                            let n = code % 3 + 1;
                            code /= 3;
                            n
                        })
                        .collect()
                })
                .collect()
        }
        let mut checked = 0;
        for hi_rank in 2..=4 {
            for lo_rank in 1..hi_rank {
                for hi in shapes(hi_rank) {
                    for lo in shapes(lo_rank) {
                        let valid: Vec<Vec<usize>> = increasing(lo_rank, hi_rank)
                            .into_iter()
                            .filter(|d| binary_op_shape(&hi, &lo, d).is_ok())
                            .collect();
                        let got = suggested_dims(&lo, &hi);
                        for d in &got {
                            assert!(binary_op_shape(&hi, &lo, d).is_ok(), "{hi:?} {lo:?} {d:?}");
                            assert!(binary_op_shape(&lo, &hi, d).is_ok(), "{lo:?} {hi:?} {d:?}");
                        }
                        assert_eq!(got.is_empty(), valid.is_empty(), "{hi:?} {lo:?}");
                        if lo_rank == 1 {
                            assert_eq!(got, valid, "{hi:?} {lo:?}");
                        }
                        let msg = rank_mismatch("add", &hi, &lo);
                        assert_eq!(msg.contains("none fit"), valid.is_empty(), "{msg}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 1000);
    }

    #[test]
    fn rank_mismatch_messages() {
        // The hint names the dim of the right size, not NumPy's trailing guess.
        let msg = rank_mismatch("add", &[8, 16, 12, 10], &[16]);
        assert!(
            msg.ends_with("e.g. [1] maps rhs dim 0 onto lhs dim 1"),
            "{msg}"
        );
        let msg = rank_mismatch("add", &[3], &[3, 4, 3]);
        assert!(
            msg.ends_with("e.g. [0] maps lhs dim 0 onto rhs dim 0 ([2] fit too)"),
            "{msg}"
        );
        let msg = rank_mismatch("mul", &[8, 16, 12, 10], &[7]);
        assert!(msg.contains("but none fit"), "{msg}");
        let msg = rank_mismatch("add", &[2, 3, 4], &[2, 4]);
        assert!(
            msg.ends_with("e.g. [0, 2] maps rhs dims [0, 1] onto lhs dims [0, 2]"),
            "{msg}"
        );
    }
}
