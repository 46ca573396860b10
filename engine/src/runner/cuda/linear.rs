//! `y[m, n] = x[m, k] · w[n, k]ᵀ` (a Linear layer) by the kernel that is
//! fastest for the shape on the H200: the skinny tensor-core kernel for small
//! products, cuBLAS otherwise (`scripts/gemm_bench.cu`; docs/performance.md).
//!
//! The two products whose output is added to the residual stream (O and
//! down) may instead run split over K ([`split_k_for`]): fp32 partials that
//! the next `add_rmsnorm` adds up, so the split costs no reduction kernel.
//! [`Delta`] says which form the output took.

use super::device::{launch_ex, Arg};
use super::gemm::{GemmArgs, OutType};
use super::kernels::Kernels;
use super::CudaRunner;
pub use crate::runner::gemm_choice::SPLIT_K_MAX;
pub(crate) use crate::runner::gemm_choice::SPLIT_K_MAX_ROWS;
use crate::runner::gemm_choice::{largest_split, skinny_takes, skinny_wins, split_k_for};
use crate::runner::{gemm_padded_rows, RunnerError};
use cudarc::driver::CudaStream;

/// How a residual product left its output: a bf16 matrix at `bf16`, or `nparts`
/// fp32 partials `part_stride` floats apart from `parts` (`parts` = 0 when not split).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Delta {
    pub bf16: u64,
    pub parts: u64,
    pub nparts: usize,
    pub part_stride: usize,
}

impl Delta {
    /// Nothing to add (the first layer's input norm).
    pub const NONE: Delta = Delta::bf16(0);

    pub const fn bf16(ptr: u64) -> Self {
        Delta {
            bf16: ptr,
            parts: 0,
            nparts: 0,
            part_stride: 0,
        }
    }

    /// `nparts` fp32 partials, `part_stride` floats apart from `parts`.
    pub const fn split(parts: u64, nparts: usize, part_stride: usize) -> Self {
        Delta {
            bf16: 0,
            parts,
            nparts,
            part_stride,
        }
    }

    /// The `delta, parts, nparts, part_stride` arguments of `add_rmsnorm`.
    pub fn args(&self) -> [Arg; 4] {
        [
            Arg::Ptr(self.bf16),
            Arg::Ptr(self.parts),
            Arg::I32(self.nparts as i32),
            Arg::I64(self.part_stride as i64),
        ]
    }
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
    pub(super) fn linear(
        &self,
        pdl: bool,
        pad: bool,
        a: &GemmArgs,
        group: u32,
    ) -> Result<(), RunnerError> {
        if self.skips(group) || a.m == 0 {
            return Ok(());
        }
        if self.tuning.skinny_gemm && skinny_wins(a.m, a.n, a.k, self.sm_count) {
            return skinny_gemm(&self.stream, &self.kernels, a, pdl);
        }
        let rows = if pad { gemm_padded_rows(a.m) } else { a.m };
        self.gemm.linear(&GemmArgs { m: rows, ..*a })
    }

    /// Slices of K for a residual product: the tuning override if set, else [`split_k_for`].
    fn residual_splits(&self, m: usize, n: usize, k: usize, graphed: bool) -> usize {
        match self.tuning.split_k {
            Some(s) if m <= SPLIT_K_MAX_ROWS => largest_split(k, s.clamp(1, SPLIT_K_MAX)),
            Some(_) => 1,
            None => split_k_for(m, n, k, graphed, self.sm_count),
        }
    }

    /// A product whose output is added to the residual stream by the next
    /// `add_rmsnorm`: split over K into `ws.parts` when [`Self::residual_splits`]
    /// says so for a step that is (`graphed`) or is not captured into a graph,
    /// else [`Self::linear`] into `a.y` (bf16; `a.out` is not used).
    pub(super) fn linear_residual(
        &self,
        pdl: bool,
        a: &GemmArgs,
        graphed: bool,
        group: u32,
    ) -> Result<Delta, RunnerError> {
        let bf16_out = GemmArgs {
            out: OutType::Bf16,
            ..*a
        };
        let splits = self.residual_splits(a.m, a.n, a.k, graphed);
        if splits <= 1 || self.skips(group) {
            self.linear(pdl, true, &bf16_out, group)?;
            return Ok(Delta::bf16(a.y));
        }
        let rows = gemm_padded_rows(a.m);
        if splits * rows * a.n > self.ws.parts_floats {
            return Err(RunnerError::Model(format!(
                "split-K product of {rows} x {} in {splits} slices exceeds the partials' buffer",
                a.n
            )));
        }
        let parts = GemmArgs {
            y: self.ws.parts.ptr,
            m: rows,
            out: OutType::F32,
            ..*a
        };
        self.gemm.linear_split_k(&parts, splits)?;
        Ok(Delta::split(self.ws.parts.ptr, splits, rows * a.n))
    }
}
