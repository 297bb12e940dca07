//! XLA's shape notation: `f32[2,3]{1,0}`, element type, dims and layout.

use std::fmt;
use std::str::FromStr;

use super::{Layout, PaddingValue};
use crate::error::{BroadcastError, Result};

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
        let dims = crate::error::joined(&self.dims, ",");
        write!(f, "{}[{}]", self.element_type, dims)?;
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
    let mut dims = Vec::new();
    for n in list.split(',') {
        dims.push(
            n.trim()
                .parse::<usize>()
                .map_err(|_| BroadcastError::ParseShape {
                    text: text.to_string(),
                    reason: format!("{n:?} is not a dim"),
                })?,
        );
    }
    Ok(dims)
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
