//! The head of a step: the final norm of the sampled rows, then greedy
//! sampling. Up to [`LM_HEAD_ARGMAX_MAX_ROWS`] sampled rows go through
//! `lm_head_argmax`, which streams the LM head's weights once and keeps the
//! scores in registers; with more rows, or when the caller asked for logits
//! ([`CudaRunner::set_keep_logits`]), cuBLAS writes the fp32 logits and
//! `argmax_rows` reads them. Both leave one argmax key per sampled row in the
//! step metadata, with the same tie rule (lowest index).

use super::device::{launch_ex, Arg};
use super::forward::NormArgs;
use super::gemm::{GemmArgs, OutType};
use super::kernels::{LM_HEAD_ARGMAX_K_MULTIPLE, LM_HEAD_ARGMAX_MAX_ROWS, LM_HEAD_ARGMAX_THREADS};
use super::linear::Delta;
use super::meta::StepLayout;
use super::{CudaRunner, SKIP_HEAD};
use crate::runner::RunnerError;

/// Logits one `argmax_rows` block scans (ARGMAX_THREADS * ARGMAX_PER_THREAD in kernels.cu).
const ARGMAX_CHUNK: usize = 256 * 16;

/// Which `lm_head_argmax` variant takes `rows` rows: variant `i` stages
/// `8 << i` rows of X (the fewest column tiles of 8 that hold them, rounded up
/// to a power of two); `None` past [`LM_HEAD_ARGMAX_MAX_ROWS`].
pub(crate) fn fused_head_variant(rows: usize) -> Option<usize> {
    (1..=LM_HEAD_ARGMAX_MAX_ROWS)
        .contains(&rows)
        .then(|| rows.div_ceil(8).next_power_of_two().trailing_zeros() as usize)
}

/// Dynamic shared memory of an `lm_head_argmax` launch for `rows` rows of
/// `hidden` (the rows its variant stages).
pub(crate) fn fused_head_smem(rows: usize, hidden: usize) -> u32 {
    let staged = fused_head_variant(rows).map_or(0, |v| 8 << v);
    (staged * hidden * 2) as u32
}

/// Most sampled rows `lm_head_argmax` takes for a model of `hidden` with
/// `smem` bytes of dynamic shared memory per block: the largest variant whose
/// staged rows fit; 0 when `hidden` is not a multiple of
/// [`LM_HEAD_ARGMAX_K_MULTIPLE`].
pub(crate) fn fused_head_max_rows(hidden: usize, smem: usize) -> usize {
    if hidden == 0 || !hidden.is_multiple_of(LM_HEAD_ARGMAX_K_MULTIPLE) {
        return 0;
    }
    [64, 32, 16, 8]
        .into_iter()
        .find(|&rows| fused_head_smem(rows, hidden) as usize <= smem)
        .unwrap_or(0)
}

impl CudaRunner {
    /// Whether a step sampling `rows` rows takes the fused LM head + argmax.
    pub(crate) fn fused_head_for(&self, rows: usize) -> bool {
        !self.keep_logits && rows <= self.fused_head_max_rows
    }

    /// Enqueues the final norm (adding the last layer's `delta`), LM head and
    /// argmax of the sampled rows. `pdl`: the step's kernels are programmatic
    /// dependent launches; `decode_only`: the fused head is then one too.
    pub(crate) fn enqueue_head(
        &self,
        lay: &StepLayout,
        delta: Delta,
        pdl: bool,
        decode_only: bool,
    ) -> Result<(), RunnerError> {
        let ns = lay.num_sampled;
        if ns == 0 {
            return Ok(());
        }
        let (c, k, ws, w) = (&self.cfg, &self.kernels, &self.ws, &self.weights);
        let hidden = c.hidden_size;
        let m = |off: usize| Arg::Ptr(ws.meta.ptr + 4 * off as u64);
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
        if self.profile_skip & SKIP_HEAD != 0 {
            return Ok(());
        }
        if self.fused_head_for(ns) {
            // Its first weights are requested before it waits for the norm, so in decode
            // steps it is a programmatic dependent launch whatever the step's PDL setting.
            let variant = fused_head_variant(ns)
                .ok_or_else(|| RunnerError::Model(format!("lm_head_argmax takes no {ns} rows")))?;
            return launch_ex(
                &self.stream,
                &k.lm_head_argmax[variant],
                "lm_head_argmax",
                (self.num_sms, 1, 1),
                LM_HEAD_ARGMAX_THREADS,
                fused_head_smem(ns, hidden),
                &[
                    Arg::Ptr(ws.final_normed.ptr),
                    Arg::Ptr(w.lm_head_ptr()),
                    m(lay.argmax),
                    Arg::I32(ns as i32),
                    Arg::I32(hidden as i32),
                    Arg::I32(c.vocab_size as i32),
                ],
                self.use_pdl && decode_only,
            );
        }
        self.linear(
            pdl,
            false,
            &GemmArgs {
                x: ws.final_normed.ptr,
                w: w.lm_head_ptr(),
                y: ws.logits.ptr,
                m: ns,
                n: c.vocab_size,
                k: hidden,
                out: OutType::F32,
            },
            SKIP_HEAD,
        )?;
        launch_ex(
            &self.stream,
            &k.argmax_rows,
            "argmax_rows",
            (c.vocab_size.div_ceil(ARGMAX_CHUNK) as u32, ns as u32, 1),
            256,
            0,
            &[
                Arg::Ptr(ws.logits.ptr),
                m(lay.argmax),
                Arg::I32(c.vocab_size as i32),
            ],
            pdl,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fused_head_takes_what_fits_its_shared_memory() {
        // Variants stage 8, 16, 32 or 64 rows.
        assert_eq!(fused_head_variant(0), None);
        assert_eq!(fused_head_variant(1), Some(0));
        assert_eq!(fused_head_variant(8), Some(0));
        assert_eq!(fused_head_variant(9), Some(1));
        assert_eq!(fused_head_variant(17), Some(2));
        assert_eq!(fused_head_variant(33), Some(3));
        assert_eq!(fused_head_variant(64), Some(3));
        assert_eq!(fused_head_variant(65), None);
        // Qwen3-0.6B on an H200 (227 KB opt-in less the 4 KB of merge slots): all 64 rows.
        let h200 = 227 * 1024 - 4096;
        assert_eq!(fused_head_max_rows(1024, h200), 64);
        assert_eq!(fused_head_smem(64, 1024), 131_072);
        assert_eq!(fused_head_smem(13, 1024), 16 * 2048);
        // Qwen3-8B (hidden 4096): 8 KB a row; 32 rows would take 256 KB.
        assert_eq!(fused_head_max_rows(4096, h200), 16);
        // K must be a multiple of 64.
        assert_eq!(fused_head_max_rows(1000, h200), 0);
        assert_eq!(fused_head_max_rows(0, h200), 0);
        assert_eq!(fused_head_max_rows(64, h200), 64);
    }
}
