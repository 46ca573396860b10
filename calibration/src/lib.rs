//! calibration (work in progress).

pub mod datasheet;
