//! Code the integration tests share.

pub mod workloads;
