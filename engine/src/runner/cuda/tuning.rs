//! Tuning and profiling settings of the CUDA runner: the GEMM and decode
//! attention choices, programmatic dependent launches, fused RoPE, kernel
//! groups left out for profiling. Each setter drops the captured decode
//! graphs, so the next decode step captures one with the new setting.

use super::decode::DecodeKernel;
use super::gemm_lt::GemmTuneReport;
use super::CudaRunner;
use crate::runner::RunnerError;

impl CudaRunner {
    /// Use the skinny GEMM where it beats cuBLAS (default) or cuBLAS always.
    pub fn set_use_skinny_gemm(&mut self, on: bool) {
        self.use_skinny = on;
        self.graphs.clear();
    }

    /// Tuning: split the O and down products' K into `splits` slices where they
    /// have at most `linear::SPLIT_K_MAX_ROWS` rows (1: never), or `None` for
    /// the measured rule.
    pub fn set_split_k(&mut self, splits: Option<usize>) {
        self.split_k = splits;
        self.graphs.clear();
    }

    /// Tuning: a fixed decode attention kernel (`None`: chosen per batch size)
    /// and the number of warps its splits aim for.
    pub fn set_decode_tuning(
        &mut self,
        kernel: Option<DecodeKernel>,
        target_warps: usize,
    ) -> Result<(), RunnerError> {
        let c = &self.cfg;
        let gqa = c.num_attention_heads / c.num_key_value_heads;
        if let Some(k) = kernel {
            if !k.supports(c.head_dim, gqa, c.num_key_value_heads) {
                return Err(RunnerError::Model(format!(
                    "decode kernel {k:?} does not support head_dim {} with {gqa} query heads per KV head",
                    c.head_dim
                )));
            }
        }
        self.decode_kernel = kernel;
        self.decode_target_warps = target_warps.max(1);
        self.graphs.clear();
        Ok(())
    }

    /// The decode attention kernel for a step with `n_dec` decodes.
    pub(crate) fn decode_kernel_for(&self, n_dec: usize) -> DecodeKernel {
        let c = &self.cfg;
        self.decode_kernel.unwrap_or_else(|| {
            DecodeKernel::for_batch(
                n_dec,
                c.head_dim,
                c.num_attention_heads / c.num_key_value_heads,
                c.num_key_value_heads,
            )
        })
    }

    /// Launch the runner's own kernels as programmatic dependent launches
    /// (default on; each overlaps its start with the previous kernel's end) in
    /// the decode-only steps where that was measured faster (forward.rs).
    pub fn set_use_pdl(&mut self, on: bool) {
        self.use_pdl = on;
        self.graphs.clear();
    }

    /// In decode-only steps, let the attention kernel do q/k-norm + RoPE + the
    /// KV-cache write (default on; off runs `qk_norm_rope_cache` first).
    pub fn set_fuse_rope(&mut self, on: bool) {
        self.fuse_rope = on;
        self.graphs.clear();
    }

    /// Tune the GEMMs of decode graphs before capturing them (default on:
    /// each shape runs the cuBLASLt algorithm measured fastest, gemm_lt.rs)
    /// or run `cublasGemmEx` everywhere (the plans tuned so far are kept for
    /// when it is turned on again).
    pub fn set_gemm_tuning(&mut self, on: bool) {
        self.gemm.lt.set_enabled(on);
        self.graphs.clear();
    }

    /// What GEMM tuning measured so far, shape by shape.
    pub fn gemm_tune_reports(&self) -> Vec<GemmTuneReport> {
        self.gemm.tune_reports()
    }

    /// The decode attention kernel setting and split target in use.
    pub fn decode_tuning(&self) -> (Option<DecodeKernel>, usize) {
        (self.decode_kernel, self.decode_target_warps)
    }

    /// Profiling only: leaves out the kernel groups in `mask` (`SKIP_*`), so
    /// outputs are wrong; the difference in step time is what a group costs.
    pub fn set_profile_skip(&mut self, mask: u32) {
        self.profile_skip = mask;
        self.graphs.clear();
    }

    /// Registers and local-memory bytes per thread of every kernel (spills show as local memory).
    pub fn kernel_resources(&self) -> Vec<(&'static str, i32, i32)> {
        self.kernels.resource_report()
    }
}
