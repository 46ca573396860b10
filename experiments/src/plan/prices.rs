//! GPU prices for fleet sizing (`--prices FILE`).
//!
//! Contract: a price table is a RON list of [`GpuPrice`] (GPU datasheet
//! name, dollars per GPU-hour, where the price comes from and the month it
//! was read there). The default table, `experiments/data/gpu_prices.ron`,
//! is built into `exp` ([`DEFAULT_FILE`]); its prices are public on-demand
//! list prices as of the month each entry names, for users to edit.
//! `--prices FILE` replaces the whole table. A table naming a GPU twice, or
//! with a price that is not a positive finite number, or an empty source or
//! month, fails naming the entry; [`PriceTable::price_of`] fails for a GPU
//! without an entry, naming the GPU and the file to edit.

use super::error::PlanError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where the built-in table lives in the source tree (for messages).
pub const DEFAULT_FILE: &str = "experiments/data/gpu_prices.ron";
const DEFAULT_TEXT: &str = include_str!("../../data/gpu_prices.ron");

/// One GPU's price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuPrice {
    /// Datasheet name (`--gpu`).
    pub gpu: String,
    pub usd_per_gpu_hour: f64,
    /// The price list or marketplace the price was read from.
    pub source: String,
    /// When it was read there, `YYYY-MM`.
    pub month: String,
}

/// A checked price table and the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    pub file: String,
    pub prices: Vec<GpuPrice>,
}

impl PriceTable {
    /// The built-in table.
    pub fn default_table() -> Result<Self, PlanError> {
        Self::parse(DEFAULT_TEXT, &format!("{DEFAULT_FILE} (built into exp)"))
    }

    /// `--prices FILE`.
    pub fn load(path: &Path) -> Result<Self, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|error| PlanError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses and checks `text`, read from `file`.
    pub fn parse(text: &str, file: &str) -> Result<Self, PlanError> {
        let bad = |message: String| PlanError::Prices {
            file: file.to_string(),
            message,
        };
        let prices: Vec<GpuPrice> = ron::from_str(text).map_err(|e| {
            bad(format!(
                "line {}, column {}: {}",
                e.position.line, e.position.col, e.code
            ))
        })?;
        for (i, p) in prices.iter().enumerate() {
            if prices[..i].iter().any(|q| q.gpu == p.gpu) {
                return Err(bad(format!("{} has two entries; keep one", p.gpu)));
            }
            if !(p.usd_per_gpu_hour.is_finite() && p.usd_per_gpu_hour > 0.0) {
                return Err(bad(format!(
                    "{}: usd_per_gpu_hour = {} is not a positive number of dollars",
                    p.gpu, p.usd_per_gpu_hour
                )));
            }
            if p.source.trim().is_empty() || p.month.trim().is_empty() {
                return Err(bad(format!(
                    "{}: give the price's source and month (where and when it was read)",
                    p.gpu
                )));
            }
        }
        Ok(Self {
            file: file.to_string(),
            prices,
        })
    }

    /// `gpu`'s price, or an error naming the GPU and the file to edit.
    pub fn price_of(&self, gpu: &str) -> Result<&GpuPrice, PlanError> {
        self.prices.iter().find(|p| p.gpu == gpu).ok_or_else(|| {
            let known: Vec<&str> = self.prices.iter().map(|p| p.gpu.as_str()).collect();
            PlanError::Prices {
                file: self.file.clone(),
                message: format!(
                    "no price for GPU {gpu}: add an entry (gpu: \"{gpu}\", usd_per_gpu_hour: ..., \
                     source: \"...\", month: \"YYYY-MM\") to this file, or pass --prices FILE \
                     with one (priced now: {})",
                    known.join(", ")
                ),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_table_parses_and_prices_the_planned_gpus() {
        let t = PriceTable::default_table().unwrap();
        for gpu in ["h100-sxm", "a100-80gb-sxm", "l40s"] {
            let p = t.price_of(gpu).unwrap();
            assert!(p.usd_per_gpu_hour > 0.0 && !p.source.is_empty(), "{p:?}");
            assert!(calibration::datasheet::lookup(gpu).is_ok(), "{gpu}");
        }
        for p in &t.prices {
            assert!(calibration::datasheet::lookup(&p.gpu).is_ok(), "{}", p.gpu);
        }
    }

    #[test]
    fn a_missing_gpu_names_the_gpu_and_the_file() {
        let t = PriceTable::parse(
            "[(gpu: \"l4\", usd_per_gpu_hour: 1.0, source: \"s\", month: \"2026-01\")]",
            "my.ron",
        )
        .unwrap();
        let msg = t.price_of("h100-sxm").unwrap_err().to_string();
        assert!(
            msg.contains("h100-sxm") && msg.contains("my.ron") && msg.contains("l4"),
            "{msg}"
        );
    }

    #[test]
    fn bad_tables_fail_naming_the_entry() {
        for (text, needle) in [
            (
                "[(gpu: \"l4\", usd_per_gpu_hour: 0.0, source: \"s\", month: \"m\")]",
                "positive",
            ),
            (
                "[(gpu: \"l4\", usd_per_gpu_hour: 1.0, source: \"\", month: \"m\")]",
                "source and month",
            ),
            (
                "[(gpu: \"l4\", usd_per_gpu_hour: 1.0, source: \"s\", month: \"m\"), \
                  (gpu: \"l4\", usd_per_gpu_hour: 2.0, source: \"s\", month: \"m\")]",
                "two entries",
            ),
            ("[(gpu: \"l4\")]", "line 1"),
        ] {
            let msg = PriceTable::parse(text, "p.ron").unwrap_err().to_string();
            assert!(msg.contains(needle) && msg.contains("p.ron"), "{msg}");
        }
    }
}
