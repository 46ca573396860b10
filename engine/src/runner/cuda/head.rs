//! The head of a step: the final norm of the sampled rows (adding the last
//! layer's output), the LM head (cuBLAS, fp32 logits, which
//! [`CudaRunner::last_logits`] can copy back) and greedy sampling
//! (`argmax_rows`: one argmax key per sampled row in the step metadata, ties
//! to the lowest index; the last block of each row copies its key to the
//! page-locked host buffer the host reads them from). Fusing the argmax into
//! the LM head was measured slower (docs/performance.md).

use super::device::Arg;
use super::gemm::{GemmArgs, OutType};
use super::linear::Delta;
use super::meta::StepLayout;
use super::norm::NormArgs;
use super::{CudaRunner, SKIP_HEAD};
use crate::runner::RunnerError;

/// Logits one `argmax_rows` block scans (ARGMAX_THREADS * ARGMAX_PER_THREAD in kernels.cu).
const ARGMAX_CHUNK: usize = 256 * 16;

impl CudaRunner {
    /// Enqueues the final norm (adding the last layer's `delta`), LM head and
    /// argmax of the sampled rows; `pdl`: the step's own kernels are
    /// programmatic dependent launches.
    pub(crate) fn enqueue_head(
        &self,
        lay: &StepLayout,
        delta: Delta,
        pdl: bool,
    ) -> Result<(), RunnerError> {
        let ns = lay.num_sampled;
        if ns == 0 {
            return Ok(());
        }
        let (c, ws, w) = (&self.cfg, &self.ws, &self.weights);
        self.enqueue_norm(
            pdl,
            SKIP_HEAD,
            &NormArgs {
                name: "add_rmsnorm(final)",
                delta,
                embed_tokens: None,
                weight: w.final_norm.ptr,
                out: ws.final_normed.ptr,
                rows: Some(lay.sample_rows),
                n_rows: ns,
                write_resid: false,
            },
        )?;
        self.linear(
            pdl,
            false,
            &GemmArgs {
                x: ws.final_normed.ptr,
                w: w.lm_head_ptr(),
                y: ws.logits.ptr,
                m: ns,
                n: c.vocab_size,
                k: c.hidden_size,
                out: OutType::F32,
            },
            SKIP_HEAD,
        )?;
        self.launch_in(
            pdl,
            SKIP_HEAD,
            &self.kernels.argmax_rows,
            "argmax_rows",
            (c.vocab_size.div_ceil(ARGMAX_CHUNK) as u32, ns as u32, 1),
            256,
            0,
            &[
                Arg::Ptr(ws.logits.ptr),
                Arg::Ptr(self.meta_ptr(lay.argmax)),
                Arg::I32(c.vocab_size as i32),
                Arg::Ptr(self.meta_ptr(lay.argmax_done)),
                Arg::Ptr(self.sampled_host.device_ptr()),
            ],
        )
    }
}
