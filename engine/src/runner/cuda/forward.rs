//! The forward pass of one step: embedding, the decoder layers (layer.rs),
//! final norm of the sampled rows only, LM head, argmax. Nothing here
//! synchronizes or copies, so the same code is captured into decode graphs.
//!
//! With [`CudaRunner::set_overlap_halves`], a decode-only step of at least
//! `2 * HALF_ROWS_MULTIPLE` sequences runs its layers as two lanes: the first
//! half of the rows on the runner's stream, the second on an auxiliary stream
//! with its own cuBLAS handle, forked after the embedding and joined before
//! the final norm. Each lane's small GEMMs and kernel boundaries then overlap
//! the other lane's attention instead of leaving the GPU idle. The LM head
//! runs once for all rows: its 300 MB of weights are read once.

use super::device::{launch_ex, Arg};
use super::gemm::OutType;
use super::layer::{Lane, StepKnobs};
use super::linear::GemmArgs;
use super::meta::StepLayout;
use super::{CudaRunner, SKIP_ELEMENTWISE, SKIP_HEAD};
use crate::runner::RunnerError;
use cudarc::driver::{CudaFunction, CudaStream};

/// Logits one `argmax_rows` block scans (ARGMAX_THREADS * ARGMAX_PER_THREAD in kernels.cu).
const ARGMAX_CHUNK: usize = 256 * 16;
/// A second lane starts at a multiple of the GEMMs' padding of small row
/// counts (`gemm_padded_rows`), so the first lane's padded rows stay its own.
pub(super) const HALF_ROWS_MULTIPLE: usize = 16;

/// Rows of the first lane when a step of `rows` decodes is split in two, or
/// `None` when it is too small to split.
pub(super) fn first_half_rows(rows: usize) -> Option<usize> {
    let first = (rows / 2) / HALF_ROWS_MULTIPLE * HALF_ROWS_MULTIPLE;
    (first >= HALF_ROWS_MULTIPLE && rows - first >= HALF_ROWS_MULTIPLE).then_some(first)
}

impl CudaRunner {
    /// Launches on `stream` unless `group` is masked off for profiling.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_in(
        &self,
        stream: &CudaStream,
        pdl: bool,
        group: u32,
        f: &CudaFunction,
        name: &str,
        grid: (u32, u32, u32),
        block: u32,
        smem: u32,
        args: &[Arg],
    ) -> Result<(), RunnerError> {
        if self.profile_skip & group != 0 {
            return Ok(());
        }
        launch_ex(stream, f, name, grid, block, smem, args, pdl)
    }

    /// Enqueues the forward pass for a step whose metadata is (or will be, before
    /// the work runs) at `self.ws.meta`, laid out as `lay`; `nsplit` splits of the
    /// decode attention when the step runs as one lane.
    pub(crate) fn enqueue_forward(
        &self,
        lay: &StepLayout,
        nsplit: usize,
    ) -> Result<(), RunnerError> {
        let c = &self.cfg;
        let k = &self.kernels;
        let ws = &self.ws;
        let w = &self.weights;
        let (t, hdim) = (lay.num_tokens, c.hidden_size);
        let eps = c.rms_norm_eps as f32;
        let m = |off: usize| Arg::Ptr(ws.meta.ptr + 4 * off as u64);
        let main = self.stream.as_ref();
        // Programmatic dependent launches only in decode-only steps: measured on
        // the H200 they save ~0.1 ms per decode step at batch 1 and cost 3-8 % in
        // prefill steps (results/h200/profile.csv).
        let decode_only = lay.is_decode_only();
        let pdl = self.use_pdl && decode_only;
        let halves = (self.overlap_halves && decode_only)
            .then(|| first_half_rows(t))
            .flatten();
        // Each half's attention kernel is picked for the half's size.
        let kernel_rows = halves.map_or(lay.num_decodes, |h| t - h);
        let decode_kernel = self.decode_kernel_for(kernel_rows);
        let knobs = StepKnobs {
            pdl,
            decode_kernel,
            fuse_rope: self.fuse_rope && decode_only && decode_kernel.fuses_rope(c.head_dim),
        };

        self.launch_in(
            main,
            pdl,
            SKIP_ELEMENTWISE,
            &k.embed_gather,
            "embed_gather",
            (t as u32, 1, 1),
            256,
            0,
            &[
                Arg::Ptr(w.embed.ptr),
                m(lay.tokens),
                Arg::Ptr(ws.resid.ptr),
                Arg::I32(hdim as i32),
            ],
        )?;
        match halves {
            None => {
                let lane = Lane {
                    stream: main,
                    gemm: &self.gemm,
                    row0: 0,
                    rows: t,
                    nsplit,
                };
                self.enqueue_layers(&lane, lay, &knobs)?;
            }
            Some(first) => {
                let aux = self.aux.as_ref().ok_or_else(|| {
                    RunnerError::Device("overlapped halves need the auxiliary stream".into())
                })?;
                let fork = |e| super::device::dev_err("fork the second lane", e);
                aux.stream.join(main).map_err(fork)?;
                let a = Lane {
                    stream: main,
                    gemm: &self.gemm,
                    row0: 0,
                    rows: first,
                    nsplit: self.half_splits(first),
                };
                let b = Lane {
                    stream: &aux.stream,
                    gemm: &aux.gemm,
                    row0: first,
                    rows: t - first,
                    nsplit: self.half_splits(t - first),
                };
                // The streams are independent: enqueuing one lane after the other does
                // not order their work.
                self.enqueue_layers(&a, lay, &knobs)?;
                self.enqueue_layers(&b, lay, &knobs)?;
                main.join(&aux.stream)
                    .map_err(|e| super::device::dev_err("join the second lane", e))?;
            }
        }
        let ns = lay.num_sampled;
        if ns == 0 {
            return Ok(());
        }
        self.launch_in(
            main,
            pdl,
            SKIP_HEAD,
            &k.add_rmsnorm,
            "add_rmsnorm(final)",
            (ns as u32, 1, 1),
            256,
            0,
            &[
                Arg::Ptr(ws.resid.ptr),
                Arg::Ptr(ws.out.ptr),
                Arg::Ptr(w.final_norm.ptr),
                Arg::Ptr(ws.final_normed.ptr),
                m(lay.sample_rows),
                Arg::I32(hdim as i32),
                Arg::F32(eps),
                Arg::I32(0),
            ],
        )?;
        let head = GemmArgs {
            x: ws.final_normed.ptr,
            w: w.lm_head_ptr(),
            y: ws.logits.ptr,
            m: ns,
            n: c.vocab_size,
            k: hdim,
            out: OutType::F32,
        };
        self.linear_on(main, &self.gemm, pdl, false, &head, SKIP_HEAD)?;
        self.launch_in(
            main,
            pdl,
            SKIP_HEAD,
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
        )
    }
}

#[cfg(test)]
mod tests {
    use super::first_half_rows;

    #[test]
    fn halves_start_on_a_padding_boundary_and_small_steps_stay_whole() {
        assert_eq!(first_half_rows(16), None);
        assert_eq!(first_half_rows(31), None);
        assert_eq!(first_half_rows(32), Some(16));
        assert_eq!(first_half_rows(48), Some(16));
        assert_eq!(first_half_rows(64), Some(32));
        assert_eq!(first_half_rows(96), Some(48));
        assert_eq!(first_half_rows(256), Some(128));
        for rows in 1..=512 {
            if let Some(h) = first_half_rows(rows) {
                assert_eq!(h % 16, 0);
                assert!(h >= 16 && rows - h >= 16 && h <= rows - h);
            }
        }
    }
}
