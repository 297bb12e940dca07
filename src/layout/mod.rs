//! XLA's `Layout` mapped onto ndarray strides: the layout an array's strides express
//! ([`layout_of`]), views over buffers in any layout and relayout copies ([`view`],
//! [`to_buffer`], ...), and XLA's shape notation (`f32[2,3]{1,0}`, [`Shape`]).
//!
//! An XLA layout lists the dims from fastest- to slowest-varying (`minor_to_major`); the older
//! form may pad each dim to a larger extent (`padded_dimensions`), the extra elements holding a
//! `padding_value`. The stride (in elements) of a dim is the product of the padded extents of all
//! more-minor dims.
//!
//! ```
//! use ndarray::array;
//! use xla_bcast::layout::{self, Layout};
//!
//! // A column-major (Fortran, XLA `{0,1}`) buffer, read zero-copy.
//! let buffer = [1, 4, 2, 5, 3, 6];
//! let a = layout::view(&buffer, &[2, 3], &Layout::col_major(2)).unwrap();
//! assert_eq!(a, array![[1, 2, 3], [4, 5, 6]].into_dyn());
//! // And written back in that layout.
//! assert_eq!(layout::to_buffer(&a, &Layout::col_major(2)).unwrap(), buffer);
//! ```

mod buffer;
mod text;

use std::fmt;

use ndarray::{ArrayRef, Dimension, IxDyn, ShapeBuilder, StrideShape};

pub use buffer::{from_buffer, to_buffer, view, view_mut};
pub use text::{ElementType, Shape};

use crate::element::XlaOrd;
use crate::engine;
use crate::error::{BroadcastError, Result};
use crate::shape::checked_size_for;

/// What fills the padding of a padded layout.
///
/// ```
/// use xla_bcast::layout::PaddingValue;
/// assert_eq!(PaddingValue::default(), PaddingValue::Zero);
/// assert_ne!(PaddingValue::Lowest, PaddingValue::Highest);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum PaddingValue {
    /// 0.
    #[default]
    Zero,
    /// 1.
    One,
    /// The lowest value: -inf for floats, `MIN` for integers.
    Lowest,
    /// The highest value: +inf for floats, `MAX` for integers.
    Highest,
}

impl PaddingValue {
    /// This padding value as an element of type `A`.
    ///
    /// ```
    /// use xla_bcast::layout::PaddingValue;
    /// assert_eq!(PaddingValue::Lowest.value::<f32>(), f32::NEG_INFINITY);
    /// assert_eq!(PaddingValue::Highest.value::<u8>(), 255);
    /// ```
    pub fn value<A: XlaOrd>(self) -> A {
        match self {
            Self::Zero => A::xla_zero(),
            Self::One => A::xla_one(),
            Self::Lowest => A::xla_lowest(),
            Self::Highest => A::xla_highest(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Zero => "zero",
            Self::One => "one",
            Self::Lowest => "lowest",
            Self::Highest => "highest",
        }
    }
}

/// An XLA layout: `minor_to_major`, and optionally padded extents with their padding value.
///
/// ```
/// use xla_bcast::layout::Layout;
///
/// let l = Layout::row_major(3);
/// assert_eq!(l.minor_to_major(), &[2, 1, 0]);
/// assert_eq!(l.strides(&[2, 3, 4]).unwrap(), vec![12, 4, 1]);
/// assert_eq!(Layout::col_major(3).strides(&[2, 3, 4]).unwrap(), vec![1, 2, 6]);
/// assert_eq!(l.to_string(), "{2,1,0}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    minor_to_major: Vec<usize>,
    padded_dimensions: Option<Vec<usize>>,
    padding_value: PaddingValue,
}

impl Layout {
    /// XLA's default layout: dim 0 most major, `minor_to_major = [n-1, ..., 0]` (C order).
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert_eq!(Layout::row_major(2).minor_to_major(), &[1, 0]);
    /// ```
    pub fn row_major(rank: usize) -> Self {
        Self::unchecked((0..rank).rev().collect())
    }

    /// Dim 0 most minor, `minor_to_major = [0, ..., n-1]` (Fortran order).
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert_eq!(Layout::col_major(2).minor_to_major(), &[0, 1]);
    /// ```
    pub fn col_major(rank: usize) -> Self {
        Self::unchecked((0..rank).collect())
    }

    fn unchecked(minor_to_major: Vec<usize>) -> Self {
        Layout {
            minor_to_major,
            padded_dimensions: None,
            padding_value: PaddingValue::Zero,
        }
    }

    /// A layout from `minor_to_major`, which must be a permutation of `0..rank`.
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert!(Layout::new(vec![1, 2, 0]).is_ok());
    /// assert!(Layout::new(vec![1, 1]).is_err());
    /// ```
    pub fn new(minor_to_major: Vec<usize>) -> Result<Self> {
        let n = minor_to_major.len();
        let mut seen = vec![false; n];
        for &d in &minor_to_major {
            if d >= n || std::mem::replace(&mut seen[d], true) {
                return Err(BroadcastError::Layout {
                    op: "Layout::new",
                    layout: format_m2m(&minor_to_major),
                    dims: Box::new([]),
                    reason: format!("minor_to_major must be a permutation of 0..{n}"),
                });
            }
        }
        Ok(Self::unchecked(minor_to_major))
    }

    /// A layout from the dims listed slowest- to fastest-varying (the reverse of
    /// `minor_to_major`).
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert_eq!(Layout::from_major_to_minor(&[0, 1]).unwrap(), Layout::row_major(2));
    /// ```
    pub fn from_major_to_minor(major_to_minor: &[usize]) -> Result<Self> {
        Self::new(major_to_minor.iter().rev().copied().collect())
    }

    /// This layout with every dim padded to `padded_dimensions` (one extent per dim, each at
    /// least the dim's size when used), the padding holding `padding_value`.
    ///
    /// ```
    /// use xla_bcast::layout::{Layout, PaddingValue};
    /// let l = Layout::col_major(2).with_padding(vec![3, 5], PaddingValue::Zero);
    /// assert_eq!(l.strides(&[2, 3]).unwrap(), vec![1, 3]);
    /// assert_eq!(l.buffer_len(&[2, 3]).unwrap(), 15);
    /// ```
    pub fn with_padding(
        mut self,
        padded_dimensions: Vec<usize>,
        padding_value: PaddingValue,
    ) -> Self {
        self.padded_dimensions = Some(padded_dimensions);
        self.padding_value = padding_value;
        self
    }

    /// The rank this layout is for.
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert_eq!(Layout::col_major(3).rank(), 3);
    /// ```
    pub fn rank(&self) -> usize {
        self.minor_to_major.len()
    }

    /// The dims from fastest- to slowest-varying.
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert_eq!(Layout::from_major_to_minor(&[2, 0, 1]).unwrap().minor_to_major(), &[1, 0, 2]);
    /// ```
    pub fn minor_to_major(&self) -> &[usize] {
        &self.minor_to_major
    }

    /// The padded extents, if the layout pads.
    ///
    /// ```
    /// use xla_bcast::layout::{Layout, PaddingValue};
    /// assert_eq!(Layout::row_major(1).padded_dimensions(), None);
    /// let l = Layout::row_major(1).with_padding(vec![8], PaddingValue::One);
    /// assert_eq!(l.padded_dimensions(), Some(&[8][..]));
    /// ```
    pub fn padded_dimensions(&self) -> Option<&[usize]> {
        self.padded_dimensions.as_deref()
    }

    /// What fills the padding.
    ///
    /// ```
    /// use xla_bcast::layout::{Layout, PaddingValue};
    /// let l = Layout::row_major(1).with_padding(vec![8], PaddingValue::Lowest);
    /// assert_eq!(l.padding_value(), PaddingValue::Lowest);
    /// ```
    pub fn padding_value(&self) -> PaddingValue {
        self.padding_value
    }

    /// Whether dim 0 is most major and the rest follow in order (row-major).
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert!(Layout::row_major(3).is_monotonic_with_dim0_major());
    /// assert!(!Layout::col_major(3).is_monotonic_with_dim0_major());
    /// ```
    pub fn is_monotonic_with_dim0_major(&self) -> bool {
        self.minor_to_major.iter().rev().copied().eq(0..self.rank())
    }

    /// Whether dim 0 is most minor and the rest follow in order (column-major).
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert!(Layout::col_major(3).is_monotonic_with_dim0_minor());
    /// ```
    pub fn is_monotonic_with_dim0_minor(&self) -> bool {
        self.minor_to_major.iter().copied().eq(0..self.rank())
    }

    fn error(&self, op: &'static str, dims: &[usize], reason: String) -> BroadcastError {
        BroadcastError::Layout {
            op,
            layout: self.to_string(),
            dims: dims.into(),
            reason,
        }
    }

    /// The extent of each dim in memory: its padded extent, or its size.
    fn extents(&self, op: &'static str, dims: &[usize]) -> Result<Vec<usize>> {
        if dims.len() != self.rank() {
            return Err(self.error(op, dims, format!("the layout is for rank {}", self.rank())));
        }
        match &self.padded_dimensions {
            None => Ok(dims.to_vec()),
            Some(p) if p.len() != dims.len() => Err(self.error(
                op,
                dims,
                format!(
                    "padded_dimensions has {} entries for rank {}",
                    p.len(),
                    dims.len()
                ),
            )),
            Some(p) => match (0..dims.len()).find(|&d| p[d] < dims[d]) {
                Some(d) => Err(self.error(
                    op,
                    dims,
                    format!("dim {d} of size {} is padded to only {}", dims[d], p[d]),
                )),
                None => Ok(p.clone()),
            },
        }
    }

    /// The stride in elements of each dim of an array of `dims` in this layout (padding
    /// included).
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert_eq!(Layout::new(vec![1, 2, 0]).unwrap().strides(&[2, 3, 4]).unwrap(), vec![12, 1, 3]);
    /// assert!(Layout::row_major(2).strides(&[2, 3, 4]).is_err());
    /// ```
    pub fn strides(&self, dims: &[usize]) -> Result<Vec<usize>> {
        self.strides_for("strides", dims)
    }

    fn strides_for(&self, op: &'static str, dims: &[usize]) -> Result<Vec<usize>> {
        let extents = self.extents(op, dims)?;
        checked_size_for(op, &extents)?;
        let mut strides = vec![0; dims.len()];
        let mut step = 1usize;
        for &d in &self.minor_to_major {
            strides[d] = step;
            // Cannot overflow: the product of the extents fits isize (checked above), except
            // through zero-sized extents, which `checked_size_for` also bounds.
            step = step.saturating_mul(extents[d].max(1));
        }
        Ok(strides)
    }

    /// The stride in elements of dim `dim`.
    ///
    /// ```
    /// use xla_bcast::layout::Layout;
    /// assert_eq!(Layout::col_major(2).dimension_stride(&[2, 3], 1).unwrap(), 2);
    /// assert!(Layout::col_major(2).dimension_stride(&[2, 3], 2).is_err());
    /// ```
    pub fn dimension_stride(&self, dims: &[usize], dim: usize) -> Result<usize> {
        let strides = self.strides_for("dimension_stride", dims)?;
        strides
            .get(dim)
            .copied()
            .ok_or_else(|| BroadcastError::IndexOutOfRange {
                op: "dimension_stride",
                dims: dims.into(),
                what: format!("dim {dim}"),
            })
    }

    /// The number of elements a buffer of `dims` in this layout holds, padding included.
    ///
    /// ```
    /// use xla_bcast::layout::{Layout, PaddingValue};
    /// assert_eq!(Layout::row_major(2).buffer_len(&[2, 3]).unwrap(), 6);
    /// let padded = Layout::row_major(2).with_padding(vec![4, 4], PaddingValue::Zero);
    /// assert_eq!(padded.buffer_len(&[2, 3]).unwrap(), 16);
    /// ```
    pub fn buffer_len(&self, dims: &[usize]) -> Result<usize> {
        self.buffer_len_for("buffer_len", dims)
    }

    fn buffer_len_for(&self, op: &'static str, dims: &[usize]) -> Result<usize> {
        checked_size_for(op, &self.extents(op, dims)?)
    }

    /// The ndarray shape (with strides) of an array of `dims` in this layout, and the buffer
    /// length it needs; checks a buffer of `got` elements is long enough.
    fn stride_shape(
        &self,
        op: &'static str,
        dims: &[usize],
        got: usize,
    ) -> Result<(StrideShape<IxDyn>, usize)> {
        let strides = self.strides_for(op, dims)?;
        let needed = self.buffer_len_for(op, dims)?;
        if got < needed {
            return Err(BroadcastError::BufferTooShort {
                op,
                dims: dims.into(),
                needed,
                got,
            });
        }
        // An empty array addresses nothing; ndarray wants plain strides for it.
        Ok(if dims.contains(&0) {
            (IxDyn(dims).into(), 0)
        } else {
            (IxDyn(dims).strides(IxDyn(&strides)), needed)
        })
    }
}

fn format_m2m(m2m: &[usize]) -> String {
    format!("{{{}}}", crate::error::joined(m2m, ","))
}

impl fmt::Display for Layout {
    /// XLA's notation, `{1,0}`; a padded layout as `{0,1:pad(3,5)=zero}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m2m = format_m2m(&self.minor_to_major);
        match &self.padded_dimensions {
            None => f.write_str(&m2m),
            Some(p) => {
                write!(
                    f,
                    "{}:pad({})={}}}",
                    &m2m[..m2m.len() - 1],
                    crate::error::joined(p, ","),
                    self.padding_value.name()
                )
            }
        }
    }
}

/// The layout (padding included) that `array`'s strides express, or `None` when they express
/// none: a broadcast (stride 0) or reversed (negative stride) dim, a stepped innermost dim, or
/// overlapping dims.
///
/// Size-1 dims do not constrain memory, so layouts that differ only in where size-1 dims sit
/// are equivalent; this returns the one that places a size-1 dim just inside the dim whose stride
/// it shares, ties broken toward row-major. The padding value of a padded result is `Zero`
/// (strides cannot tell).
///
/// ```
/// use ndarray::{s, Array2, ShapeBuilder};
/// use xla_bcast::layout::{layout_of, Layout, PaddingValue};
///
/// assert_eq!(layout_of(&Array2::<f32>::zeros((2, 3))), Some(Layout::row_major(2)));
/// assert_eq!(layout_of(&Array2::<f32>::zeros((2, 3).f())), Some(Layout::col_major(2)));
/// let big = Array2::<f32>::zeros((4, 5));
/// let window = big.slice(s![.., ..3]);
/// assert_eq!(
///     layout_of(&window),
///     Some(Layout::row_major(2).with_padding(vec![4, 5], PaddingValue::Zero))
/// );
/// assert_eq!(layout_of(&big.slice(s![.., ..;2])), None);
/// ```
pub fn layout_of<A, D: Dimension>(array: &ArrayRef<A, D>) -> Option<Layout> {
    let (dims, strides) = (array.shape(), array.strides());
    // Size-1 dims carry no information: a non-positive stride there counts as 1.
    let eff: Vec<isize> = (0..dims.len())
        .map(|d| {
            if dims[d] == 1 {
                strides[d].max(1)
            } else {
                strides[d]
            }
        })
        .collect();
    if (0..dims.len()).any(|d| eff[d] <= 0) {
        return None;
    }
    // The dims longer than 1 in the engine's memory order; each size-1 dim then goes just
    // inside the dims of larger or equal stride (after earlier size-1 dims of that stride).
    let mut outer_first: Vec<usize> = match engine::memory_order(dims, &[&eff]) {
        Some(order) => order.to_vec(),
        None => (0..dims.len()).collect(),
    };
    outer_first.retain(|&d| dims[d] != 1);
    for d in (0..dims.len()).filter(|&d| dims[d] == 1) {
        let at = outer_first
            .iter()
            .position(|&o| eff[o] < eff[d])
            .unwrap_or(outer_first.len());
        outer_first.insert(at, d);
    }
    let order: Vec<usize> = outer_first.into_iter().rev().collect();
    let mut extents = dims.to_vec();
    let mut expected = 1isize;
    for (k, &d) in order.iter().enumerate() {
        if eff[d] != expected {
            if k == 0 || eff[d] < expected || eff[d] % eff[order[k - 1]] != 0 {
                return None;
            }
            // The more-minor dim is padded to the extent its successor's stride implies.
            let prev = order[k - 1];
            extents[prev] = (eff[d] / eff[prev]) as usize;
            if extents[prev] < dims[prev] {
                return None;
            }
        }
        expected = eff[d].checked_mul(extents[d].max(1) as isize)?;
    }
    let layout = Layout::unchecked(order);
    Some(if extents.as_slice() == dims {
        layout
    } else {
        layout.with_padding(extents, PaddingValue::Zero)
    })
}
