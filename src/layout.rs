//! XLA's `Layout` mapped onto ndarray strides: views over buffers in any layout, relayout copies,
//! the layout an array's strides express, and XLA's shape notation (`f32[2,3]{1,0}`).
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

use std::fmt;
use std::str::FromStr;

use ndarray::{
    Array, ArrayRef, ArrayView, ArrayViewMut, Dimension, IxDyn, ShapeBuilder, StrideShape,
};

use crate::element::XlaOrd;
use crate::engine::{self, Src};
use crate::error::{BroadcastError, Result};
use crate::shape::checked_size_for;

/// What fills the padding of a padded layout.
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
    let items: Vec<String> = m2m.iter().map(|d| d.to_string()).collect();
    format!("{{{}}}", items.join(","))
}

impl fmt::Display for Layout {
    /// XLA's notation, `{1,0}`; a padded layout as `{0,1:pad(3,5)=zero}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m2m = format_m2m(&self.minor_to_major);
        match &self.padded_dimensions {
            None => f.write_str(&m2m),
            Some(p) => {
                let p: Vec<String> = p.iter().map(|d| d.to_string()).collect();
                write!(
                    f,
                    "{}:pad({})={}}}",
                    &m2m[..m2m.len() - 1],
                    p.join(","),
                    self.padding_value.name()
                )
            }
        }
    }
}

/// A zero-copy view of `buffer`, an array of `dims` in `layout` (padding skipped).
///
/// # Errors
/// A layout that does not fit `dims`, or a buffer shorter than
/// [`Layout::buffer_len`].
///
/// ```
/// use ndarray::array;
/// use xla_bcast::layout::{self, Layout, PaddingValue};
///
/// // a d 0 b e 0 c f 0 0 0 0 0 0 0: 2x3 in {0,1} padded to 3x5.
/// let buf = [1, 4, 0, 2, 5, 0, 3, 6, 0, 0, 0, 0, 0, 0, 0];
/// let l = Layout::col_major(2).with_padding(vec![3, 5], PaddingValue::Zero);
/// let a = layout::view(&buf, &[2, 3], &l).unwrap();
/// assert_eq!(a, array![[1, 2, 3], [4, 5, 6]].into_dyn());
/// ```
pub fn view<'a, A>(
    buffer: &'a [A],
    dims: &[usize],
    layout: &Layout,
) -> Result<ArrayView<'a, A, IxDyn>> {
    let (shape, used) = layout.stride_shape("view", dims, buffer.len())?;
    ArrayView::from_shape(shape, &buffer[..used])
        .map_err(|e| layout.error("view", dims, format!("ndarray refused the strides: {e}")))
}

/// A zero-copy mutable view of `buffer`, an array of `dims` in `layout` (padding skipped).
///
/// ```
/// use xla_bcast::layout::{self, Layout};
///
/// let mut buf = [0; 6];
/// layout::view_mut(&mut buf, &[2, 3], &Layout::col_major(2)).unwrap()[[0, 1]] = 7;
/// assert_eq!(buf, [0, 0, 7, 0, 0, 0]);
/// ```
pub fn view_mut<'a, A>(
    buffer: &'a mut [A],
    dims: &[usize],
    layout: &Layout,
) -> Result<ArrayViewMut<'a, A, IxDyn>> {
    let (shape, used) = layout.stride_shape("view_mut", dims, buffer.len())?;
    ArrayViewMut::from_shape(shape, &mut buffer[..used]).map_err(|e| {
        layout.error(
            "view_mut",
            dims,
            format!("ndarray refused the strides: {e}"),
        )
    })
}

/// A relayout copy: `array` (any ndarray array or view, any strides) written into a new buffer
/// in `layout`, padding filled with the layout's padding value. Large copies run in parallel.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::layout::{self, Layout, PaddingValue};
///
/// let a = array![[1, 2, 3], [4, 5, 6]];
/// assert_eq!(layout::to_buffer(&a, &Layout::row_major(2)).unwrap(), vec![1, 2, 3, 4, 5, 6]);
/// assert_eq!(layout::to_buffer(&a, &Layout::col_major(2)).unwrap(), vec![1, 4, 2, 5, 3, 6]);
/// let l = Layout::row_major(2).with_padding(vec![2, 4], PaddingValue::Highest);
/// assert_eq!(layout::to_buffer(&a, &l).unwrap(), vec![1, 2, 3, i32::MAX, 4, 5, 6, i32::MAX]);
/// ```
pub fn to_buffer<A: XlaOrd, D: Dimension>(
    array: &ArrayRef<A, D>,
    layout: &Layout,
) -> Result<Vec<A>> {
    let dims = array.shape();
    let len = layout.buffer_len_for("to_buffer", dims)?;
    let (shape, used) = layout.stride_shape("to_buffer", dims, len)?;
    let mut buffer: Vec<A> =
        engine::with_capacity(len).ok_or_else(|| BroadcastError::Allocation {
            op: "to_buffer",
            shape: Box::new([len]),
            bytes: len.checked_mul(std::mem::size_of::<A>()),
        })?;
    let slots = &mut buffer.spare_capacity_mut()[..len];
    let padded = layout.padded_dimensions.is_some() && len != array.len();
    if padded {
        let pad = layout.padding_value.value::<A>();
        for s in slots.iter_mut() {
            s.write(pad);
        }
    }
    let mut out = ArrayViewMut::from_shape(shape, &mut slots[..used]).map_err(|e| {
        layout.error(
            "to_buffer",
            dims,
            format!("ndarray refused the strides: {e}"),
        )
    })?;
    engine::map(&mut out, &Src::of(array), &|x: A| x);
    // SAFETY: without padding the layout's strides map the array's elements one-to-one onto
    // 0..len, all written by the engine pass; with padding every slot was written first.
    unsafe { buffer.set_len(len) };
    Ok(buffer)
}

/// An owned copy, in ndarray's standard (row-major) layout, of `buffer` holding an array of
/// `dims` in `layout`.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::layout::{self, Layout};
///
/// let a = layout::from_buffer(&[1, 4, 2, 5, 3, 6], &[2, 3], &Layout::col_major(2)).unwrap();
/// assert_eq!(a, array![[1, 2, 3], [4, 5, 6]].into_dyn());
/// assert!(a.is_standard_layout());
/// ```
pub fn from_buffer<A: Clone + Send + Sync>(
    buffer: &[A],
    dims: &[usize],
    layout: &Layout,
) -> Result<Array<A, IxDyn>> {
    let v = view(buffer, dims, layout).map_err(|e| rename(e, "from_buffer"))?;
    // Standard layout whatever the buffer's, as documented: no inputs to follow.
    engine::collect_map("from_buffer", IxDyn(dims), &Src::of(&v), &|x: A| x, true)
}

fn rename(e: BroadcastError, op: &'static str) -> BroadcastError {
    match e {
        BroadcastError::Layout {
            layout,
            dims,
            reason,
            ..
        } => BroadcastError::Layout {
            op,
            layout,
            dims,
            reason,
        },
        BroadcastError::BufferTooShort {
            dims, needed, got, ..
        } => BroadcastError::BufferTooShort {
            op,
            dims,
            needed,
            got,
        },
        other => other,
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
    let mut order: Vec<usize> = (0..dims.len()).collect();
    order.sort_by_key(|&d| (eff[d], dims[d] != 1, std::cmp::Reverse(d)));
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

/// An XLA primitive element type, as written in XLA's shape notation.
///
/// ```
/// use xla_bcast::layout::{ElementType, Shape};
/// let s: Shape = "bf16[4]".parse().unwrap();
/// assert_eq!(s.element_type, ElementType::Bf16);
/// assert_eq!(ElementType::Pred.to_string(), "pred");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum ElementType {
    Pred,
    S8,
    S16,
    S32,
    S64,
    U8,
    U16,
    U32,
    U64,
    F16,
    Bf16,
    F32,
    F64,
}

const ELEMENT_NAMES: [(ElementType, &str); 13] = [
    (ElementType::Pred, "pred"),
    (ElementType::S8, "s8"),
    (ElementType::S16, "s16"),
    (ElementType::S32, "s32"),
    (ElementType::S64, "s64"),
    (ElementType::U8, "u8"),
    (ElementType::U16, "u16"),
    (ElementType::U32, "u32"),
    (ElementType::U64, "u64"),
    (ElementType::F16, "f16"),
    (ElementType::Bf16, "bf16"),
    (ElementType::F32, "f32"),
    (ElementType::F64, "f64"),
];

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = ELEMENT_NAMES
            .iter()
            .find(|(t, _)| t == self)
            .map(|(_, n)| *n);
        f.write_str(name.unwrap_or("?"))
    }
}

/// An XLA shape: element type, dims and optionally a layout, with XLA's text form both ways.
///
/// ```
/// use xla_bcast::layout::{ElementType, Layout, Shape};
///
/// let s: Shape = "f32[2,3]{1,0}".parse().unwrap();
/// assert_eq!(s.element_type, ElementType::F32);
/// assert_eq!(s.dims, vec![2, 3]);
/// assert_eq!(s.layout, Some(Layout::row_major(2)));
/// assert_eq!(s.to_string(), "f32[2,3]{1,0}");
/// assert_eq!("pred[]".parse::<Shape>().unwrap().dims, Vec::<usize>::new());
/// assert!("f32[2,3]{0,0}".parse::<Shape>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    /// The element type.
    pub element_type: ElementType,
    /// The dims.
    pub dims: Vec<usize>,
    /// The layout, if given.
    pub layout: Option<Layout>,
}

impl Shape {
    /// The number of dims larger than 1 (XLA's "true rank").
    ///
    /// ```
    /// use xla_bcast::layout::Shape;
    /// assert_eq!("f32[1,5,1,3]".parse::<Shape>().unwrap().true_rank(), 2);
    /// ```
    pub fn true_rank(&self) -> usize {
        self.dims.iter().filter(|&&d| d > 1).count()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(|d| d.to_string()).collect();
        write!(f, "{}[{}]", self.element_type, dims.join(","))?;
        match &self.layout {
            Some(l) => write!(f, "{l}"),
            None => Ok(()),
        }
    }
}

fn parse_list(text: &str, list: &str) -> Result<Vec<usize>> {
    if list.trim().is_empty() {
        return Ok(vec![]);
    }
    list.split(',')
        .map(|n| {
            n.trim()
                .parse::<usize>()
                .map_err(|_| BroadcastError::ParseShape {
                    text: text.to_string(),
                    reason: format!("{n:?} is not a dim"),
                })
        })
        .collect()
}

impl FromStr for Shape {
    type Err = BroadcastError;

    fn from_str(text: &str) -> Result<Self> {
        let fail = |reason: &str| BroadcastError::ParseShape {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let t = text.trim();
        let open = t.find('[').ok_or_else(|| fail("expected `type[dims]`"))?;
        let close = t.find(']').ok_or_else(|| fail("missing `]`"))?;
        if close < open {
            return Err(fail("`]` before `[`"));
        }
        let name = &t[..open];
        let element_type = ELEMENT_NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(e, _)| *e)
            .ok_or_else(|| fail("unknown element type"))?;
        let dims = parse_list(text, &t[open + 1..close])?;
        let rest = t[close + 1..].trim();
        let layout = if rest.is_empty() {
            None
        } else {
            let body = rest
                .strip_prefix('{')
                .and_then(|r| r.strip_suffix('}'))
                .ok_or_else(|| fail("a layout is written `{minor,...,major}`"))?;
            let (m2m, pad) = match body.split_once(':') {
                None => (body, None),
                Some((m, p)) => (m, Some(p)),
            };
            let mut layout =
                Layout::new(parse_list(text, m2m)?).map_err(|e| fail(&e.to_string()))?;
            if let Some(p) = pad {
                let p = p
                    .trim()
                    .strip_prefix("pad(")
                    .ok_or_else(|| fail("padding is written `pad(n,...)=value`"))?;
                let (extents, value) = p
                    .split_once(")=")
                    .ok_or_else(|| fail("padding is written `pad(n,...)=value`"))?;
                let value = [
                    PaddingValue::Zero,
                    PaddingValue::One,
                    PaddingValue::Lowest,
                    PaddingValue::Highest,
                ]
                .into_iter()
                .find(|v| v.name() == value.trim())
                .ok_or_else(|| fail("padding value must be zero, one, lowest or highest"))?;
                layout = layout.with_padding(parse_list(text, extents)?, value);
            }
            if layout.rank() != dims.len() {
                return Err(fail("the layout's rank differs from the number of dims"));
            }
            layout
                .extents("parse", &dims)
                .map_err(|e| fail(&e.to_string()))?;
            Some(layout)
        };
        Ok(Shape {
            element_type,
            dims,
            layout,
        })
    }
}
