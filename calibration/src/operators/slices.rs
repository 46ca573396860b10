//! The GPU a measurement ran on, as the operator model sees it: the whole
//! GPU of the datasheet table, or an SM-limited slice of it (a green
//! context) described by its SM count, its share of the dense FLOP/s and
//! the copy bandwidth a runner with that many SMs measured.
//!
//! Contract: [`CopyBandwidths`] holds, per SM count below the whole GPU's,
//! the copy bandwidth measured there; [`CopyBandwidths::gpu`] turns a row's
//! SM count into its [`GpuSpec`]. The whole GPU keeps its datasheet
//! bandwidth (the model's achievable copy bandwidth is that times
//! [`COPY_FRACTION`] on every GPU, which is what a prediction for an
//! unmeasured GPU assumes too). Bandwidths come from the measurement files'
//! `copy_bandwidth_tb_s` column (each runner's copy kernel at start, means
//! per SM count); the H200's rows written before that column existed take
//! [`H200_COPY_TB_S`]. A slice with no measured bandwidth is an error.

use super::COPY_FRACTION;
use sim::GpuSpec;
use std::collections::BTreeMap;
use std::path::Path;

/// Copy bandwidth (TB/s) a green-context runner measured at start on the
/// H200, by SM count: means of `results/h200/engine_family.log`.
pub const H200_COPY_TB_S: [(u32, f64); 5] =
    [(8, 0.76), (16, 1.50), (32, 2.86), (64, 3.49), (132, 3.76)];

/// The datasheet key of the GPU whose slices [`H200_COPY_TB_S`] describes.
pub const H200: &str = "h200-sxm";

#[derive(Debug, thiserror::Error)]
pub enum SliceError {
    #[error("reading {path}: {source}")]
    Csv { path: String, source: csv::Error },
    #[error("{path}:{line}: copy_bandwidth_tb_s {value} is not a bandwidth (TB/s above zero)")]
    Bandwidth { path: String, line: u64, value: f64 },
}

/// `whole` limited to `sm_count` SMs with the measured copy bandwidth
/// `copy_tb_s`, as a GPU: FLOP/s in proportion to its SMs, and a datasheet
/// bandwidth such that the model's achievable copy bandwidth is the measured
/// one. Named `NAME@Nsm` ([`super::ops::power_budget_sms`] reads it).
pub fn slice_of(whole: &GpuSpec, sm_count: u32, copy_tb_s: f64) -> GpuSpec {
    GpuSpec {
        name: format!("{}@{}sm", whole.name, sm_count),
        bf16_flops: whole.bf16_flops * f64::from(sm_count) / f64::from(whole.sm_count),
        mem_bandwidth: copy_tb_s * 1e12 / COPY_FRACTION,
        sm_count,
        source: format!(
            "{} limited to {sm_count} SMs (green context): FLOP/s in proportion, \
             copy bandwidth {copy_tb_s} TB/s as measured",
            whole.name
        ),
        ..whole.clone()
    }
}

/// The whole GPU whose DRAM `gpu` reads: for a slice of a datasheet GPU
/// (named `NAME@Nsm`, [`slice_of`]) the datasheet's entry, otherwise `gpu`
/// itself. Why: a slice's measured copy bandwidth is the rate of its SMs,
/// not of the DRAM behind them (on the H100 one copy block an SM moves
/// 93-95 GB/s up to 16 SMs, `results/h100/sm_stream/`), and a GEMM's tiles
/// stream faster an SM than the copy kernel: qwen3-8b's batch-1 decode
/// reads its weights at about 140 GB/s an SM on 8 and 16 SMs of the H200,
/// the copy 95 (`results/h200/engine_family.csv`, against qwen3-4b's).
pub fn chip_of(gpu: &GpuSpec) -> &GpuSpec {
    gpu.name
        .split_once('@')
        .and_then(|(whole, _)| crate::datasheet::entry(whole))
        .unwrap_or(gpu)
}

/// The copy bandwidths measured on one GPU and its slices.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyBandwidths {
    pub whole: GpuSpec,
    /// TB/s by SM count.
    pub by_sm: BTreeMap<u32, f64>,
}

impl CopyBandwidths {
    /// The H200's, from [`H200_COPY_TB_S`].
    pub fn h200(whole: &GpuSpec) -> Self {
        Self {
            whole: whole.clone(),
            by_sm: H200_COPY_TB_S.iter().copied().collect(),
        }
    }

    /// Means per SM count of the `copy_bandwidth_tb_s` column of each file
    /// that has one (rows without a value are skipped); on the H200, the
    /// SM counts no file measured take [`H200_COPY_TB_S`]. Give the whole
    /// steps' file (`engine_family.csv`): every slice of a fit has its steps
    /// there.
    pub fn from_files(whole: &GpuSpec, files: &[&Path]) -> Result<Self, SliceError> {
        let mut sums: BTreeMap<u32, (f64, usize)> = BTreeMap::new();
        for path in files {
            for (sm, tb_s) in read_column(path)? {
                let e = sums.entry(sm).or_default();
                e.0 += tb_s;
                e.1 += 1;
            }
        }
        let mut by_sm: BTreeMap<u32, f64> = sums
            .into_iter()
            .map(|(sm, (sum, n))| (sm, sum / n as f64))
            .collect();
        if whole.name == H200 {
            for (sm, tb_s) in H200_COPY_TB_S {
                by_sm.entry(sm).or_insert(tb_s);
            }
        }
        Ok(Self {
            whole: whole.clone(),
            by_sm,
        })
    }

    /// The GPU of a row measured on `sm_count` SMs: a slice with its measured
    /// bandwidth, or the whole GPU with its datasheet's; `None` for a slice
    /// nobody measured, or more SMs than the GPU has.
    pub fn gpu(&self, sm_count: u32) -> Option<GpuSpec> {
        let whole = self.whole.sm_count;
        if sm_count > whole {
            return None;
        }
        if sm_count == whole {
            // The H200's table figure is its datasheet bandwidth times
            // COPY_FRACTION by construction; taken as written so the
            // committed fits reproduce to the last digit.
            let copy = match H200_COPY_TB_S.iter().find(|(n, _)| *n == whole) {
                Some((_, tb_s)) if self.whole.name == H200 => *tb_s,
                _ => self.whole.mem_bandwidth * COPY_FRACTION * 1e-12,
            };
            return Some(slice_of(&self.whole, sm_count, copy));
        }
        self.by_sm
            .get(&sm_count)
            .map(|&bw| slice_of(&self.whole, sm_count, bw))
    }

    /// The SM counts below the whole GPU's with a measured bandwidth.
    pub fn slices(&self) -> Vec<u32> {
        self.by_sm
            .keys()
            .copied()
            .filter(|&n| n < self.whole.sm_count)
            .collect()
    }
}

/// (sm_count, copy_bandwidth_tb_s) of every row of `path` that has both
/// columns filled; a file without the column gives nothing.
fn read_column(path: &Path) -> Result<Vec<(u32, f64)>, SliceError> {
    #[derive(serde::Deserialize)]
    struct Row {
        sm_count: u32,
        #[serde(default)]
        copy_bandwidth_tb_s: Option<f64>,
    }
    let p = path.display().to_string();
    let csv_err = |source| SliceError::Csv {
        path: p.clone(),
        source,
    };
    let mut reader = csv::Reader::from_path(path).map_err(csv_err)?;
    let mut out = Vec::new();
    for (i, rec) in reader.deserialize::<Row>().enumerate() {
        let row = rec.map_err(csv_err)?;
        if let Some(v) = row.copy_bandwidth_tb_s {
            if !(v.is_finite() && v > 0.0) {
                return Err(SliceError::Bandwidth {
                    path: p.clone(),
                    line: i as u64 + 2,
                    value: v,
                });
            }
            out.push((row.sm_count, v));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, text: &str) -> std::path::PathBuf {
        crate::operators::test_files::write("slices", name, text)
    }

    #[test]
    fn the_h200s_rows_without_the_column_keep_its_table() {
        let h200 = crate::datasheet::lookup(H200).expect("h200 in the table");
        let old = temp("old.csv", "model,sm_count,ms_median\nqwen3-0.6b,16,1.0\n");
        let t = CopyBandwidths::from_files(&h200, &[&old]).expect("reads");
        assert_eq!(t, CopyBandwidths::h200(&h200));
        let s = t.gpu(16).expect("measured slice");
        assert_eq!(s.name, "h200-sxm@16sm");
        assert!((s.mem_bandwidth * COPY_FRACTION - 1.50e12).abs() < 1.0);
        assert!((s.bf16_flops - h200.bf16_flops * 16.0 / 132.0).abs() < 1.0);
        assert_eq!(t.slices(), [8, 16, 32, 64]);
    }

    #[test]
    fn another_gpus_slices_take_the_means_of_what_its_runners_measured() {
        let h100 = crate::datasheet::lookup("h100-sxm").expect("h100 in the table");
        let family = temp(
            "family.csv",
            "model,sm_count,copy_bandwidth_tb_s\nqwen3-0.6b,16,1.48\nqwen3-8b,16,1.52\n\
             qwen3-8b,132,2.74\nqwen3-8b,8,\n",
        );
        let t = CopyBandwidths::from_files(&h100, &[&family]).expect("reads");
        assert_eq!(t.slices(), [16]);
        let s = t.gpu(16).expect("measured");
        assert!((s.mem_bandwidth * COPY_FRACTION - 1.50e12).abs() < 1e3);
        // The whole GPU keeps its datasheet bandwidth, whatever its runners measured.
        let w = t.gpu(132).expect("whole");
        assert!((w.mem_bandwidth - h100.mem_bandwidth).abs() < 1e3);
        assert_eq!(w.name, "h100-sxm@132sm");
        // Nobody measured 8 SMs (the row has no value); nor can a GPU have more SMs.
        assert!(t.gpu(8).is_none() && t.gpu(200).is_none());
    }

    #[test]
    fn a_bad_bandwidth_names_its_file_and_line() {
        let h100 = crate::datasheet::lookup("h100-sxm").expect("h100 in the table");
        let bad = temp("bad.csv", "sm_count,copy_bandwidth_tb_s\n16,1.5\n32,-2\n");
        let e = CopyBandwidths::from_files(&h100, &[&bad])
            .expect_err("negative")
            .to_string();
        assert!(e.contains("bad.csv:3") && e.contains("-2"), "{e}");
    }
}
