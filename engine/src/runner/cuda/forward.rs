//! The forward pass of one step, enqueued on the runner's stream: embedding,
//! 28 × (norm, QKV GEMM, q/k-norm + RoPE + KV write, attention, O GEMM,
//! residual add + norm, gate-up GEMM, SiLU·mul, down GEMM), final norm of the
//! sampled rows only, LM head, argmax. Nothing here synchronizes or copies, so
//! the same code is captured into decode graphs.

use super::device::{launch, Arg};
use super::gemm::OutType;
use super::meta::StepLayout;
use super::{CudaRunner, DecodeKernel, SKIP_ATTENTION, SKIP_ELEMENTWISE, SKIP_GEMM, SKIP_HEAD};
use crate::runner::RunnerError;
use cudarc::driver::CudaFunction;

/// Rows up to which the skinny GEMM beats cuBLAS (measured on the H200: equal at 16, much slower at 64).
const SKINNY_MAX_ROWS: usize = 16;

impl CudaRunner {
    /// Launches unless `group` is masked off for profiling.
    #[allow(clippy::too_many_arguments)]
    fn launch_in(
        &self,
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
        launch(&self.stream, f, name, grid, block, smem, args)
    }

    /// `y[m, n] = x[m, k] · w[n, k]ᵀ`: the skinny tensor-core kernel for
    /// decode-sized `m` (it reads each weight byte once at full width), cuBLAS otherwise.
    #[allow(clippy::too_many_arguments)]
    fn linear(
        &self,
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
        if self.use_skinny && m <= SKINNY_MAX_ROWS && k.is_multiple_of(256) && n.is_multiple_of(8) {
            let f = &self.kernels.skinny_gemm[m.div_ceil(16) - 1];
            return launch(
                &self.stream,
                f,
                "skinny_gemm",
                ((n / 8) as u32, 1, 1),
                256,
                0,
                &[
                    Arg::Ptr(x),
                    Arg::Ptr(w),
                    Arg::Ptr(y),
                    Arg::I32(m as i32),
                    Arg::I32(n as i32),
                    Arg::I32(k as i32),
                    Arg::I32((out == OutType::F32) as i32),
                ],
            );
        }
        self.gemm.linear(x, w, y, m, n, k, out)
    }

    /// Enqueues the forward pass for a step whose metadata is (or will be, before
    /// the work runs) at `self.ws.meta`, laid out as `lay`; `nsplit` splits of the
    /// decode attention.
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
        let (nq, nkv, d) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim);
        let qkv_dim = (nq + 2 * nkv) * d;
        let inter = c.intermediate_size;
        let eps = c.rms_norm_eps as f32;
        let m = |off: usize| Arg::Ptr(ws.meta.ptr + 4 * off as u64);
        let tok = t as u32;
        // add_rmsnorm keeps the row in registers: no dynamic shared memory.
        let norm_smem = 0;
        let scale_log2 = (1.0 / (d as f64).sqrt() * std::f64::consts::LOG2_E) as f32;

        self.launch_in(
            SKIP_ELEMENTWISE,
            &k.embed_gather,
            "embed_gather",
            (tok, 1, 1),
            256,
            0,
            &[
                Arg::Ptr(w.embed.ptr),
                m(lay.tokens),
                Arg::Ptr(ws.resid.ptr),
                Arg::I32(hdim as i32),
            ],
        )?;
        for (li, lw) in w.layers.iter().enumerate() {
            let delta = if li == 0 { 0 } else { ws.out.ptr };
            self.launch_in(
                SKIP_ELEMENTWISE,
                &k.add_rmsnorm,
                "add_rmsnorm(in)",
                (tok, 1, 1),
                256,
                norm_smem,
                &[
                    Arg::Ptr(ws.resid.ptr),
                    Arg::Ptr(delta),
                    Arg::Ptr(lw.input_norm.ptr),
                    Arg::Ptr(ws.normed.ptr),
                    Arg::Ptr(0),
                    Arg::I32(hdim as i32),
                    Arg::F32(eps),
                    Arg::I32(1),
                ],
            )?;
            self.linear(
                ws.normed.ptr,
                lw.qkv.ptr,
                ws.qkv.ptr,
                t,
                qkv_dim,
                hdim,
                OutType::Bf16,
                SKIP_GEMM,
            )?;
            let (kc, vc) = self.kv_layer_ptrs(li);
            let items = t * (nq + nkv);
            self.launch_in(
                SKIP_ELEMENTWISE,
                &k.qk_norm_rope_cache,
                "qk_norm_rope_cache",
                (items.div_ceil(4) as u32, 1, 1),
                128,
                0,
                &[
                    Arg::Ptr(ws.qkv.ptr),
                    Arg::Ptr(lw.q_norm.ptr),
                    Arg::Ptr(lw.k_norm.ptr),
                    Arg::Ptr(w.cos.ptr),
                    Arg::Ptr(w.sin.ptr),
                    m(lay.positions),
                    m(lay.slots),
                    Arg::Ptr(kc),
                    Arg::Ptr(vc),
                    Arg::I32(t as i32),
                    Arg::I32(w.rope_positions as i32),
                    Arg::F32(eps),
                ],
            )?;
            if lay.num_tiles > 0 {
                self.launch_in(
                    SKIP_ATTENTION,
                    &k.attn_prefill,
                    "attn_prefill",
                    (lay.num_tiles as u32, nkv as u32, 1),
                    128,
                    k.prefill_smem,
                    &[
                        Arg::Ptr(ws.qkv.ptr),
                        Arg::Ptr(kc),
                        Arg::Ptr(vc),
                        Arg::Ptr(ws.attn.ptr),
                        m(lay.tiles),
                        m(lay.q_start),
                        m(lay.ctx_len),
                        m(lay.block_tables),
                        m(0),
                        Arg::I32(self.block_size as i32),
                        Arg::F32(scale_log2),
                    ],
                )?;
            }
            if lay.num_decodes > 0 {
                // One warp per (sequence, KV head, split), four per block.
                let units = lay.num_decodes * nkv * nsplit;
                let grid = (units.div_ceil(4) as u32, 1, 1);
                self.launch_in(
                    SKIP_ATTENTION,
                    match self.decode_kernel {
                        DecodeKernel::Prefetch8 => &k.attn_decode,
                        DecodeKernel::Group16 => &k.attn_decode_g16,
                        DecodeKernel::SmemPipeline => &k.attn_decode_async,
                    },
                    "attn_decode",
                    grid,
                    128,
                    if self.decode_kernel == DecodeKernel::SmemPipeline {
                        k.decode_async_smem
                    } else {
                        0
                    },
                    &[
                        Arg::Ptr(ws.qkv.ptr),
                        Arg::Ptr(kc),
                        Arg::Ptr(vc),
                        Arg::Ptr(ws.attn.ptr),
                        m(lay.dec_seqs),
                        m(lay.q_start),
                        m(lay.ctx_len),
                        m(lay.block_tables),
                        m(0),
                        Arg::I32(self.block_size as i32),
                        Arg::F32(scale_log2),
                        Arg::Ptr(ws.part_o.ptr),
                        Arg::Ptr(ws.part_ml.ptr),
                        Arg::I32(nsplit as i32),
                        Arg::I32(units as i32),
                    ],
                )?;
                if nsplit > 1 {
                    self.launch_in(
                        SKIP_ATTENTION,
                        &k.attn_combine,
                        "attn_combine",
                        (lay.num_decodes as u32, nq as u32, 1),
                        128,
                        0,
                        &[
                            Arg::Ptr(ws.part_o.ptr),
                            Arg::Ptr(ws.part_ml.ptr),
                            Arg::Ptr(ws.attn.ptr),
                            m(lay.dec_seqs),
                            m(lay.q_start),
                            Arg::I32(nsplit as i32),
                        ],
                    )?;
                }
            }
            self.linear(
                ws.attn.ptr,
                lw.o.ptr,
                ws.out.ptr,
                t,
                hdim,
                nq * d,
                OutType::Bf16,
                SKIP_GEMM,
            )?;
            self.launch_in(
                SKIP_ELEMENTWISE,
                &k.add_rmsnorm,
                "add_rmsnorm(post)",
                (tok, 1, 1),
                256,
                norm_smem,
                &[
                    Arg::Ptr(ws.resid.ptr),
                    Arg::Ptr(ws.out.ptr),
                    Arg::Ptr(lw.post_norm.ptr),
                    Arg::Ptr(ws.normed.ptr),
                    Arg::Ptr(0),
                    Arg::I32(hdim as i32),
                    Arg::F32(eps),
                    Arg::I32(1),
                ],
            )?;
            self.linear(
                ws.normed.ptr,
                lw.gate_up.ptr,
                ws.gate_up.ptr,
                t,
                2 * inter,
                hdim,
                OutType::Bf16,
                SKIP_GEMM,
            )?;
            // silu_mul works on groups of 8 elements.
            let total = (t * inter / 8) as i64;
            self.launch_in(
                SKIP_ELEMENTWISE,
                &k.silu_mul,
                "silu_mul",
                ((total as usize).div_ceil(256) as u32, 1, 1),
                256,
                0,
                &[
                    Arg::Ptr(ws.gate_up.ptr),
                    Arg::Ptr(ws.act.ptr),
                    Arg::I32(inter as i32),
                    Arg::I64(total),
                ],
            )?;
            self.linear(
                ws.act.ptr,
                lw.down.ptr,
                ws.out.ptr,
                t,
                hdim,
                inter,
                OutType::Bf16,
                SKIP_GEMM,
            )?;
        }
        let ns = lay.num_sampled;
        if ns == 0 {
            return Ok(());
        }
        self.launch_in(
            SKIP_HEAD,
            &k.add_rmsnorm,
            "add_rmsnorm(final)",
            (ns as u32, 1, 1),
            256,
            norm_smem,
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
        self.linear(
            ws.final_normed.ptr,
            w.lm_head_ptr(),
            ws.logits.ptr,
            ns,
            c.vocab_size,
            hdim,
            OutType::F32,
            SKIP_HEAD,
        )?;
        self.launch_in(
            SKIP_HEAD,
            &k.argmax_rows,
            "argmax_rows",
            (ns as u32, 1, 1),
            1024,
            0,
            &[
                Arg::Ptr(ws.logits.ptr),
                Arg::Ptr(ws.sampled.ptr),
                Arg::I32(c.vocab_size as i32),
            ],
        )
    }
}
