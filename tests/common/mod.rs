//! Code the integration tests share (each test uses some of it).

#[allow(dead_code)]
pub mod workloads;
