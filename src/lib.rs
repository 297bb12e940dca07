//! XLA's broadcasting semantics for [`ndarray`]: explicit, strict, zero-copy and fast.
#![warn(missing_docs)]

pub mod element;
mod engine;
pub mod error;
pub mod index;
pub mod layout;
pub mod numpy;
pub mod ops;
pub mod paddle;
pub mod reduce;
pub mod shape;
mod view;

pub use element::XlaElement;
pub use engine::parallel::{
    parallelism, set_parallelism, with_parallelism, Parallelism, PARALLEL_THRESHOLD,
};
pub use error::BroadcastError;

/// Everything a user needs: `use xla_bcast::prelude::*;`.
pub mod prelude {
    pub use crate::error::BroadcastError;
    pub use crate::ops::{ArithBcast, BroadcastInDim, CompareBcast, SelectBcast, Strict, ZipBcast};
    pub use crate::reduce::ReduceInDim;
    pub use crate::XlaElement;
}
