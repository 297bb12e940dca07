//! XLA's broadcasting semantics for [`ndarray`]: explicit, strict, zero-copy and fast.
//!
//! A binary op between arrays of different ranks takes explicit `broadcast_dimensions` (which
//! dims of the higher-rank operand the lower-rank one maps onto); between equal ranks only
//! size-1 ("degenerate") dims broadcast; rank-0 arrays broadcast to anything. Nothing is
//! right-aligned behind your back. NumPy's and Paddle's implicit rules are available as opt-in
//! wrappers ([`numpy`], [`paddle`]) that translate into the same strict core.
//!
//! ```
//! use ndarray::{arr0, array};
//! use xla_bcast::prelude::*;
//!
//! let x = array![[1, 2, 3], [4, 5, 6]];
//! let v = array![7, 8, 9];
//! // |1 2 3; 4 5 6| + |7 8 9| with broadcast_dimensions [1]:
//! assert_eq!(x.add_bcast(&v, &[1]).unwrap(), array![[8, 10, 12], [11, 13, 15]]);
//! // Without them XLA refuses, and says how to fix the call.
//! let err = x.add_bcast(&v, &[]).unwrap_err();
//! assert!(err.to_string().contains("e.g. [1] maps rhs dim 0 onto lhs dim 1"));
//! // Scalars and degenerate dims broadcast implicitly.
//! assert_eq!(x.add_bcast(&arr0(10), &[]).unwrap(), array![[11, 12, 13], [14, 15, 16]]);
//! assert_eq!(array![[1], [2]].add_bcast(&array![[10, 20]], &[]).unwrap(), array![[11, 21], [12, 22]]);
//! // broadcast_in_dim is a view: no copy, stride 0 where the operand repeats.
//! let b = v.broadcast_in_dim(&[2, 3], &[1]).unwrap();
//! assert_eq!((b.strides(), b.as_ptr()), (&[0, 1][..], v.as_ptr()));
//! ```
//!
//! Where things live:
//!
//! | module | concept |
//! |---|---|
//! | [`shape`] | the shape rules (XLA, degenerate, `broadcast_in_dim`, NumPy, Paddle) |
//! | [`ops`] | the extension traits: views, the strict op family, comparisons, `select`, `clamp` |
//! | [`strict`] | [`Strict`](strict::Strict) arrays: `std::ops` operators with XLA's rule, expression-wide |
//! | [`element`] | XLA's element semantics ([`XlaElement`]) |
//! | [`reduce`] | the adjoint: results reduced back to an operand's shape |
//! | [`numpy`], [`paddle`] | client-level wrappers with implicit rules |
//! | [`layout`], [`index`] | XLA layouts, buffers in any memory order, shape text, IndexUtil |
//! | [`stablehlo`] | programs: recorded with the same rules, run here, exported as StableHLO |
//! | [`unary`] | the unary ops on arrays (`xla_exp`, `xla_tanh`, ...): the program ops' bits, parallel |
//! | [`math`] | vectorised `exp`, `log`, `tanh`, ... for your own loops: the program ops' bits |
//! | [`zip`] | [`StrictZip`](zip::StrictZip): n-ary fused loops under XLA's rule, the closure compiled |
//! | [`error`] | [`BroadcastError`] |
//!
//! Every op runs through one kernel engine (dim merging, loop order from the strides,
//! vectorisable inner loops, staged transposes, Rayon's pool above [`PARALLEL_THRESHOLD_BYTES`]
//! with the default `rayon` feature, controlled by [`Parallelism`]).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[macro_use]
mod op_table;

pub mod element;
mod elementwise;
mod engine;
pub mod error;
mod front;
pub mod index;
pub mod layout;
pub mod math;
pub mod numpy;
pub mod ops;
pub mod paddle;
pub mod reduce;
pub mod shape;
#[cfg(feature = "stablehlo")]
#[cfg_attr(docsrs, doc(cfg(feature = "stablehlo")))]
pub mod stablehlo;
pub mod strict;
pub mod unary;
mod view;
pub mod zip;

pub use element::{
    XlaBitwise, XlaElement, XlaFloat, XlaInteger, XlaNumber, XlaOrd, XlaReal, XlaRealFloat,
};
pub use engine::parallel::{
    parallelism, set_parallelism, with_parallelism, Parallelism, PARALLEL_THRESHOLD_BYTES,
};
pub use error::BroadcastError;
pub use reduce::unbroadcast_grads;

/// Everything a user needs: `use xla_bcast::prelude::*;`.
///
/// ```
/// use ndarray::array;
/// use xla_bcast::prelude::*;
///
/// let x = array![[1, 2], [3, 4]];
/// assert_eq!(x.add_bcast(&array![10, 20], &[1]).unwrap(), array![[11, 22], [13, 24]]);
/// ```
pub mod prelude {
    pub use crate::element::{
        XlaBitwise, XlaElement, XlaFloat, XlaInteger, XlaNumber, XlaOrd, XlaReal, XlaRealFloat,
    };
    pub use crate::error::BroadcastError;
    pub use crate::ops::{
        ArithBcast, BroadcastInDim, ClampBcast, CompareBcast, SelectBcast, ZipBcast,
    };
    pub use crate::reduce::{unbroadcast_grads, ReduceInDim};
    pub use crate::strict::{InDims, IntoStrict, Strict, StrictArray, StrictView};
    pub use crate::unary::UnaryOps;
    pub use crate::zip::StrictZip;
    pub use crate::{set_parallelism, with_parallelism, Parallelism};
}

/// The README's examples, run as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
