//! Discrete-event simulator (work in progress).
pub mod gpu;
