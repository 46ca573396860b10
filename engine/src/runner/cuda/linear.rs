//! `y[m, n] = x[m, k] · w[n, k]ᵀ` (a Linear layer) by the kernel that is
//! fastest for the shape on the H200: the skinny tensor-core kernel for small
//! products, cuBLAS otherwise (scripts/gemm_bench.cu,
//! results/h200/gemm_bench.csv).

use super::device::{launch_ex, Arg};
use super::gemm::OutType;
use super::kernels::Kernels;
use super::CudaRunner;
use crate::runner::{gemm_padded_rows, RunnerError};
use cudarc::driver::CudaStream;

/// The skinny kernel re-reads all of `x` in every block of 8 output columns,
/// so it wins only while `m · n` is small: measured on the H200 (28-layer
/// graphs, 2026-11-30) it beats cuBLAS for Qwen3-0.6B's O and down
/// projections (n = 1024) up to 24–32 rows and for its QKV (n = 4096) up to 8
/// rows, and loses for gate-up (n = 6144) and the LM head at any row count.
const SKINNY_MAX_PRODUCT: usize = 32 * 1024;
const SKINNY_MAX_COLS: usize = 4096;

/// Whether the skinny kernel can compute an `m × k` by `n × k` product at
/// all: 1–64 rows (four 16-row tiles), K a multiple of 256, N of 8.
fn skinny_takes(m: usize, n: usize, k: usize) -> bool {
    (1..=64).contains(&m) && k.is_multiple_of(256) && n.is_multiple_of(8)
}

/// Whether the skinny kernel takes, and beats cuBLAS on, an `m × k` by
/// `n × k` product.
pub(crate) fn skinny_wins(m: usize, n: usize, k: usize) -> bool {
    skinny_takes(m, n, k) && m * n <= SKINNY_MAX_PRODUCT && n <= SKINNY_MAX_COLS
}

/// Operands of one GEMM: device addresses and sizes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GemmArgs {
    pub x: u64,
    pub w: u64,
    pub y: u64,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub out: OutType,
}

/// Enqueues the skinny GEMM; a shape it cannot take is an error.
pub(crate) fn skinny_gemm(
    stream: &CudaStream,
    k: &Kernels,
    a: &GemmArgs,
    pdl: bool,
) -> Result<(), RunnerError> {
    if !skinny_takes(a.m, a.n, a.k) {
        return Err(RunnerError::Model(format!(
            "skinny_gemm takes 1-64 rows, K % 256 == 0 and N % 8 == 0, not m={} n={} k={}",
            a.m, a.n, a.k
        )));
    }
    launch_ex(
        stream,
        &k.skinny_gemm[a.m.div_ceil(16) - 1],
        "skinny_gemm",
        ((a.n / 8) as u32, 1, 1),
        256,
        0,
        &[
            Arg::Ptr(a.x),
            Arg::Ptr(a.w),
            Arg::Ptr(a.y),
            Arg::I32(a.m as i32),
            Arg::I32(a.n as i32),
            Arg::I32(a.k as i32),
            Arg::I32((a.out == OutType::F32) as i32),
        ],
        pdl,
    )
}

impl CudaRunner {
    /// `pad`: run cuBLAS with [`gemm_padded_rows`] rows (layer GEMMs, whose
    /// activation buffers hold them); the LM head, whose rows are the sampled
    /// sequences, runs unpadded.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn linear(
        &self,
        pdl: bool,
        pad: bool,
        x: u64,
        w: u64,
        y: u64,
        m: usize,
        n: usize,
        k: usize,
        out: OutType,
        group: u32,
    ) -> Result<(), RunnerError> {
        if self.profile_skip & group != 0 || m == 0 {
            return Ok(());
        }
        if self.use_skinny && skinny_wins(m, n, k) {
            let a = GemmArgs {
                x,
                w,
                y,
                m,
                n,
                k,
                out,
            };
            return skinny_gemm(&self.stream, &self.kernels, &a, pdl);
        }
        let rows = if pad { gemm_padded_rows(m) } else { m };
        self.gemm.linear(x, w, y, rows, n, k, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skinny_takes_the_products_it_wins_on_the_h200() {
        // Qwen3-0.6B: O and down (n = 1024), QKV (4096), gate-up (6144), LM head.
        assert!(skinny_wins(32, 1024, 2048));
        assert!(!skinny_wins(48, 1024, 3072));
        assert!(skinny_wins(8, 4096, 1024));
        assert!(!skinny_wins(16, 4096, 1024));
        assert!(!skinny_wins(1, 6144, 1024));
        assert!(!skinny_wins(1, 151_936, 1024));
        // Shapes the kernel cannot take.
        assert!(!skinny_wins(0, 1024, 1024));
        assert!(!skinny_wins(1, 1024, 1000));
        assert!(!skinny_wins(1, 1020, 1024));
    }
}
