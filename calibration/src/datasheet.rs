//! The table of known GPUs: vendor peak figures the cost models scale from.
//!
//! Contract:
//! - Every entry gives dense (no sparsity) bf16 tensor FLOP/s *with FP32
//!   accumulate*, memory bandwidth in bytes/s (vendor GB/s and TB/s are
//!   decimal: 1 GB/s = 1e9 B/s), memory size in bytes, the SM count, and a
//!   `source` naming the documents (URL and the table or section) each figure
//!   comes from. Figures that are derived (laptop parts, whose clocks depend on
//!   the power limit) or that no vendor document confirms say so in `source`.
//! - Memory sizes: vendors write "GB" for DRAM capacity, which by the JEDEC
//!   convention for memory means 2^30 bytes; an "80 GB" part is stored as
//!   80 * 2^30 bytes. The usable size the driver reports is slightly lower.
//! - GeForce parts run bf16 with FP32 accumulate at half their FP16-accumulate
//!   rate; the table uses the FP32-accumulate figure because that is what bf16
//!   inference kernels use.
//! - [`load_user_entries`] reads extra entries from a RON list of
//!   [`GpuSpec`]; every figure must be a positive finite number and names must
//!   be non-empty and unique within the file.

mod table;

use std::path::{Path, PathBuf};

pub use sim::GpuSpec;

#[derive(Debug, thiserror::Error)]
pub enum DatasheetError {
    #[error("unknown GPU {name:?}; known GPUs: {}", known.join(", "))]
    UnknownGpu { name: String, known: Vec<String> },
    #[error("reading GPU entries from {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: invalid GPU entry list: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: GPU {name:?}: field `{field}` must be a positive finite number, got {value}", path.display())]
    NonPositive {
        path: PathBuf,
        name: String,
        field: &'static str,
        value: f64,
    },
    #[error("{}: entry {index} has an empty name", path.display())]
    EmptyName { path: PathBuf, index: usize },
    #[error("{}: GPU {name:?} is listed more than once", path.display())]
    DuplicateName { path: PathBuf, name: String },
}

/// Every built-in entry, in table order.
pub fn all() -> Vec<GpuSpec> {
    table::entries()
}

/// Names of the built-in entries, in table order.
pub fn known_names() -> Vec<String> {
    table::entries().into_iter().map(|g| g.name).collect()
}

/// The built-in entry called `name` (exact key, e.g. `"h100-sxm"`).
pub fn lookup(name: &str) -> Result<GpuSpec, DatasheetError> {
    entry(name)
        .cloned()
        .ok_or_else(|| DatasheetError::UnknownGpu {
            name: name.to_string(),
            known: known_names(),
        })
}

/// The built-in entry named `name`, without copying it: the table is built
/// once (the cost models look entries up for every operator they price).
pub fn entry(name: &str) -> Option<&'static GpuSpec> {
    static TABLE: std::sync::OnceLock<Vec<GpuSpec>> = std::sync::OnceLock::new();
    TABLE
        .get_or_init(table::entries)
        .iter()
        .find(|g| g.name == name)
}

/// The first field of `spec` that is not a positive finite number, with its
/// value; `None` when every figure is usable.
pub fn invalid_field(spec: &GpuSpec) -> Option<(&'static str, f64)> {
    [
        ("bf16_flops", spec.bf16_flops),
        ("mem_bandwidth", spec.mem_bandwidth),
        ("mem_bytes", spec.mem_bytes),
        ("sm_count", f64::from(spec.sm_count)),
    ]
    .into_iter()
    .find(|(_, v)| !(v.is_finite() && *v > 0.0))
}

/// Reads a RON list of [`GpuSpec`] from `path` and checks every entry.
pub fn load_user_entries(path: impl AsRef<Path>) -> Result<Vec<GpuSpec>, DatasheetError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| DatasheetError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let entries: Vec<GpuSpec> = ron::de::from_str(&text).map_err(|e| DatasheetError::Parse {
        path: path.to_path_buf(),
        line: e.position.line,
        column: e.position.col,
        message: e.code.to_string(),
    })?;
    let mut seen: Vec<&str> = Vec::with_capacity(entries.len());
    for (index, spec) in entries.iter().enumerate() {
        if spec.name.trim().is_empty() {
            return Err(DatasheetError::EmptyName {
                path: path.to_path_buf(),
                index,
            });
        }
        if seen.contains(&spec.name.as_str()) {
            return Err(DatasheetError::DuplicateName {
                path: path.to_path_buf(),
                name: spec.name.clone(),
            });
        }
        seen.push(&spec.name);
        if let Some((field, value)) = invalid_field(spec) {
            return Err(DatasheetError::NonPositive {
                path: path.to_path_buf(),
                name: spec.name.clone(),
                field,
                value,
            });
        }
    }
    Ok(entries)
}
