//! cuBLAS products timed one by one (`results/h200/operators/gemm_shapes.csv`),
//! as fit points of the GEMM model.
//!
//! Contract: each row is a layer or LM-head product the runner tuned (M × N ×
//! K, the runner's split over K, µs per call of `cublasGemmEx` and of the best
//! cuBLASLt offer, 28 calls in a CUDA graph), per model and SM count; the
//! point's time is the faster of the two, which is the one the runner keeps.
//! Whole steps cannot tell a GEMM's latency from its per-SM rate on a
//! 132-SM GPU; single products on few tiles can. A row that does not parse is
//! an error naming its line and field.

use super::family::{read_checked, FamilyError, MeasuredRow};
use super::gemm::{Gemm, GemmKernel};
use super::slices::CopyBandwidths;
use sim::GpuSpec;
use std::path::Path;

/// One timed product.
#[derive(Debug, Clone)]
pub struct GemmPoint {
    pub model: String,
    pub gpu: GpuSpec,
    pub gemm: Gemm,
    pub kernel: GemmKernel,
    pub measured_s: f64,
}

impl GemmPoint {
    /// `gemm 64x4096x1024 split 4`.
    pub fn target(&self) -> String {
        let split = match self.kernel {
            GemmKernel::Cublas { split } => split,
            GemmKernel::Skinny => 1,
        };
        format!(
            "gemm {}x{}x{} split {split}",
            self.gemm.m, self.gemm.n, self.gemm.k
        )
    }
}

#[derive(serde::Deserialize)]
struct Row {
    model: String,
    sm_count: u32,
    m: usize,
    n: usize,
    k: usize,
    splits: usize,
    gemm_ex_us: f64,
    best_lt_us: f64,
}

impl MeasuredRow for Row {
    fn model(&self) -> &str {
        &self.model
    }
    fn sm_count(&self) -> u32 {
        self.sm_count
    }
}

/// Reads a gemm_shapes CSV measured on the GPU of `gpus`.
pub fn read(path: &Path, gpus: &CopyBandwidths) -> Result<Vec<GemmPoint>, FamilyError> {
    let mut out = Vec::new();
    for c in read_checked::<Row>(path, gpus)? {
        let row = &c.row;
        if row.m == 0 || row.n == 0 || row.k == 0 {
            return Err(c.field("m", format!("{}x{}x{} has no work", row.m, row.n, row.k)));
        }
        if row.splits == 0 {
            return Err(c.field("splits", "0 slices; at least 1".into()));
        }
        let us = c.positive_time("gemm_ex_us", row.gemm_ex_us.min(row.best_lt_us))?;
        out.push(GemmPoint {
            model: row.model.clone(),
            gpu: c.gpu.clone(),
            gemm: Gemm {
                m: row.m,
                n: row.n,
                k: row.k,
            },
            kernel: GemmKernel::Cublas { split: row.splits },
            measured_s: us * 1e-6,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_products_and_bad_rows_name_their_line() {
        let whole = crate::operators::test_files::h200();
        let header = "model,sm_count,m,n,k,splits,gemm_ex_us,best_lt_us,chosen,date,commit\n";
        let write =
            |name: &str, body: String| crate::operators::test_files::write("shapes", name, &body);
        let ok = write(
            "ok.csv",
            format!("{header}qwen3-0.6b,16,64,1024,2048,4,13.0,12.9,cublaslt,d,c\n"),
        );
        let pts = read(&ok, &whole).expect("reads");
        assert_eq!(pts.len(), 1);
        assert_eq!(pts[0].gpu.sm_count, 16);
        assert_eq!(pts[0].kernel, GemmKernel::Cublas { split: 4 });
        assert!((pts[0].measured_s - 12.9e-6).abs() < 1e-15);
        assert_eq!(pts[0].target(), "gemm 64x1024x2048 split 4");
        let bad = write(
            "bad.csv",
            format!("{header}qwen3-0.6b,16,64,1024,2048,0,13.0,12.9,cublaslt,d,c\n"),
        );
        let text = read(&bad, &whole).expect_err("0 splits").to_string();
        assert!(
            text.contains("bad.csv:2") && text.contains("splits"),
            "{text}"
        );
    }
}
