//! calibration (work in progress).
