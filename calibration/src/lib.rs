//! Calibration: measure a real runner, fit a cost profile, move it to other GPUs.
//!
//! - [`measure`]: time a `ModelRunner` over a grid of synthetic batches;
//! - [`fit`]: fit a [`CostProfile`] (linear in the terms of [`features`]) and
//!   report its error on held-out grid points;
//! - [`profile`]: the profile file (RON, with provenance); it is a `sim::CostModel`;
//! - [`datasheet`]: peak figures of known GPUs, with sources;
//! - [`transfer`]: a measured profile moved to a GPU nobody measured;
//! - [`samples_csv`]: measured grid points read back, to refit without a GPU.

pub mod datasheet;
pub mod features;
pub mod fit;
pub mod measure;
pub mod nnls;
pub mod operators;
pub mod profile;
pub mod samples_csv;
pub mod transfer;

pub use fit::{fit, Fit, FitError, Sample};
pub use measure::{measure, Grid, MeasureError};
pub use profile::{CostProfile, ProfileError, Provenance};
pub use samples_csv::{samples_from_csv, SamplesCsvError};
