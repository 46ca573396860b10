//! The CUDA runner's tuning knobs, gathered in [`CudaTuning`]: its
//! `Default` is the rules measured on the H200, and each field overrides one
//! of them (for `engine-bench`'s sweeps, profiles and A/B runs).
//!
//! Contract: [`CudaRunner::set_tuning`] checks the settings against the
//! model (a fixed decode kernel must handle its shape), then drops every
//! captured graph (decode graphs and piecewise graphs), so that the next
//! step of each bucket captures them with the new settings; eager steps use
//! them at once.

use super::decode::DecodeKernel;
use super::gemm_lt::GemmTuneReport;
use super::CudaRunner;
use crate::runner::RunnerError;

/// Kernel groups that [`CudaTuning::profile_skip`] can leave out.
pub const SKIP_GEMM: u32 = 1;
pub const SKIP_ATTENTION: u32 = 2;
pub const SKIP_ELEMENTWISE: u32 = 4;
/// Final norm, LM head and argmax.
pub const SKIP_HEAD: u32 = 8;

pub use crate::runner::attention_choice::DECODE_TARGET_WARPS;

pub use crate::runner::gemm_choice::PIECEWISE_MAX_TOKENS;

/// Tuning settings of a [`CudaRunner`]; `CudaTuning::default()` is what the
/// runner starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaTuning {
    /// Run the skinny tensor-core GEMM where it beats cuBLAS (`true`, the
    /// rule of `linear::skinny_wins`, measured by `scripts/gemm_bench.cu` on
    /// the H200), or cuBLAS for every product (`false`).
    pub skinny_gemm: bool,
    /// Split the O and down products' K into this many slices where they
    /// have at most `linear::SPLIT_K_MAX_ROWS` rows (1: never; clamped to
    /// 1..=[`super::SPLIT_K_MAX`] and to slices of a multiple of 64), or
    /// `None`: the rule of `linear::split_k_for` (`engine-bench
    /// --split-sweep`, results/h200/split_k.csv).
    pub split_k: Option<usize>,
    /// One decode-attention kernel for every batch, or `None`: the rule of
    /// [`DecodeKernel::for_batch`] (`engine-bench --tune`,
    /// results/h200/tune.csv). It must handle the model's shape.
    pub decode_kernel: Option<DecodeKernel>,
    /// Warps the decode attention's splits aim at ([`DECODE_TARGET_WARPS`],
    /// measured with the kernel choice in tune.csv); 0 counts as 1.
    pub decode_target_warps: usize,
    /// Programmatic dependent launches in the decode-only steps where they
    /// were measured faster (`true`: up to 24 decodes, the rule in
    /// forward.rs, `engine-bench --pdl-sweep`, results/h200/pdl.csv), or
    /// never (`false`).
    pub pdl: bool,
    /// In decode-only steps, let the attention kernel do q/k-norm + RoPE +
    /// the KV-cache write (`true`), or run `qk_norm_rope_cache` first
    /// (`false`; the `full_unfused_rope` rows of `engine-bench --profile`,
    /// results/h200/profile.csv).
    pub fuse_rope: bool,
    /// Before a decode graph or a token bucket's pieces are captured, time
    /// each of their cuBLAS shapes
    /// against cuBLASLt's heuristic offers and run the fastest (`true`,
    /// gemm_lt.rs; what each shape measured goes to `engine-bench`'s
    /// results/h200/gemm_tuning.csv), or `cublasGemmEx` everywhere (`false`;
    /// the plans tuned so far are kept for when it is turned on again).
    pub gemm_tuning: bool,
    /// Run steps that are not decode-only (prefill chunks, mixed batches) of
    /// up to [`Self::piecewise_max_tokens`] tokens from piecewise CUDA
    /// graphs (`true`, piecewise.rs), or eagerly (`false`, for A/B runs).
    /// Like every graph, only where the runner was built with
    /// `use_cuda_graphs`.
    pub piecewise_graphs: bool,
    /// Most tokens of a piecewise-graphed step ([`PIECEWISE_MAX_TOKENS`]);
    /// longer steps run eagerly.
    pub piecewise_max_tokens: usize,
    /// Profiling only: the kernel groups left out (`SKIP_*` bits; 0: none).
    /// Outputs are then wrong; the difference in step time is what a group
    /// costs (`engine-bench --profile`, results/h200/profile.csv).
    pub profile_skip: u32,
}

impl Default for CudaTuning {
    fn default() -> Self {
        Self {
            skinny_gemm: true,
            split_k: None,
            decode_kernel: None,
            decode_target_warps: DECODE_TARGET_WARPS,
            pdl: true,
            fuse_rope: true,
            gemm_tuning: true,
            piecewise_graphs: true,
            piecewise_max_tokens: PIECEWISE_MAX_TOKENS,
            profile_skip: 0,
        }
    }
}

impl CudaRunner {
    /// Applies `tuning` and drops the captured graphs (module docs);
    /// a fixed decode kernel that does not handle the model's shape is an
    /// error, and leaves the settings as they were.
    pub fn set_tuning(&mut self, tuning: CudaTuning) -> Result<(), RunnerError> {
        let c = &self.cfg;
        let gqa = c.num_attention_heads / c.num_key_value_heads;
        if let Some(k) = tuning.decode_kernel {
            if !k.supports(c.head_dim, gqa, c.num_key_value_heads) {
                return Err(RunnerError::Model(format!(
                    "decode kernel {k:?} does not support head_dim {} with {gqa} query heads per KV head",
                    c.head_dim
                )));
            }
        }
        self.gemm.lt.set_enabled(tuning.gemm_tuning);
        self.tuning = tuning;
        self.graphs.clear();
        self.pieces.clear();
        Ok(())
    }

    /// The settings in use.
    pub fn tuning(&self) -> &CudaTuning {
        &self.tuning
    }

    /// The decode attention kernel for a step with `n_dec` decodes.
    pub(crate) fn decode_kernel_for(&self, n_dec: usize) -> DecodeKernel {
        let c = &self.cfg;
        self.tuning.decode_kernel.unwrap_or_else(|| {
            DecodeKernel::for_batch(
                n_dec,
                c.head_dim,
                c.num_attention_heads / c.num_key_value_heads,
                c.num_key_value_heads,
            )
        })
    }

    /// Whether the kernel groups `group` (`SKIP_*`) are left out for profiling.
    pub(crate) fn skips(&self, group: u32) -> bool {
        self.tuning.profile_skip & group != 0
    }

    /// What GEMM tuning measured so far, shape by shape.
    pub fn gemm_tune_reports(&self) -> Vec<GemmTuneReport> {
        self.gemm.tune_reports()
    }

    /// Registers and local-memory bytes per thread of every kernel (spills show as local memory).
    pub fn kernel_resources(&self) -> Vec<(&'static str, i32, i32)> {
        self.kernels.resource_report()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_overrides_no_rule() {
        let t = CudaTuning::default();
        assert_eq!(
            (t.split_k, t.decode_kernel, t.profile_skip),
            (None, None, 0)
        );
        assert!(t.skinny_gemm && t.pdl && t.fuse_rope && t.gemm_tuning);
        assert_eq!(t.decode_target_warps, DECODE_TARGET_WARPS);
        assert!(t.piecewise_graphs);
        assert_eq!(t.piecewise_max_tokens, PIECEWISE_MAX_TOKENS);
    }
}
