//! The forward pass of one step, enqueued on the runner's stream:
//! 28 × (norm, QKV GEMM, q/k-norm + RoPE + KV write, attention, O GEMM,
//! residual add + norm, gate-up GEMM, SiLU·mul, down GEMM), then the head
//! (head.rs). The first layer's norm gathers the token embeddings itself.
//! Nothing here synchronizes or copies, so the same code is captured into
//! decode graphs. The O and down products may leave split-K partials
//! ([`Delta`]); the norm after each adds them up.
//!
//! A layer is enqueued in three parts: the front (up to the QKV product and
//! the KV write) and the back (O product to the down product) read only the
//! token sections of the metadata ([`TokenRows`]), so piecewise.rs captures
//! them into graphs per token bucket; the attention between them depends on
//! the step's composition.

use super::decode::{enqueue_decode_attention, scale_log2, DecodeArgs, DecodeKernel, RopeArgs};
use super::device::{launch_ex, Arg};
use super::gemm::{GemmArgs, OutType};
use super::linear::Delta;
use super::meta::{StepLayout, TokenRows};
use super::norm::NormArgs;
// Where the kernel self-tests take it from.
pub(crate) use super::norm::NormParams;
use super::{CudaRunner, SKIP_ATTENTION, SKIP_ELEMENTWISE, SKIP_GEMM};
use crate::runner::RunnerError;

use cudarc::driver::CudaFunction;

/// Most decodes of a step whose kernels are programmatic dependent launches.
const PDL_MAX_DECODES: usize = 24;

impl CudaRunner {
    /// The device address of offset `off` (in i32s) of the step metadata.
    pub(crate) fn meta_ptr(&self, off: usize) -> u64 {
        self.ws.meta.ptr + 4 * off as u64
    }

    /// Launches unless `group` is masked off for profiling.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_in(
        &self,
        pdl: bool,
        group: u32,
        f: &CudaFunction,
        name: &str,
        grid: (u32, u32, u32),
        block: u32,
        smem: u32,
        args: &[Arg],
    ) -> Result<(), RunnerError> {
        if self.skips(group) {
            return Ok(());
        }
        launch_ex(&self.stream, f, name, grid, block, smem, args, pdl)
    }

    /// Enqueues the forward pass for a step whose metadata is (or will be, before
    /// the work runs) at `self.ws.meta`, laid out as `lay`; `nsplit` splits of the
    /// decode attention; `graphed` when it is being captured into a graph.
    pub(crate) fn enqueue_forward(
        &self,
        lay: &StepLayout,
        nsplit: usize,
        graphed: bool,
    ) -> Result<(), RunnerError> {
        let c = &self.cfg;
        let w = &self.weights;
        // Programmatic dependent launches only in decode-only steps of up to
        // PDL_MAX_DECODES sequences: measured on the H200 they save 0.07 ms per
        // step at batch 1 and 0.04 at 16, and cost 0.01-0.04 ms from 32
        // sequences on (results/h200/pdl.csv) and 3-8 % in prefill steps
        // (profile.csv).
        let decode_only = lay.is_decode_only();
        let pdl = self.tuning.pdl && decode_only && lay.num_decodes <= PDL_MAX_DECODES;
        let decode_kernel = self.decode_kernel_for(lay.num_decodes);
        let fuse_rope =
            self.tuning.fuse_rope && decode_only && decode_kernel.fuses_rope(c.head_dim);
        let rows = lay.token_rows();

        // The previous down projection's output, added by the next norm.
        let mut delta = Delta::NONE;
        for (li, lw) in w.layers.iter().enumerate() {
            self.enqueue_layer_front(li, &rows, delta, pdl, !fuse_rope)?;
            // In decode-only steps the attention kernel does q/k-norm + RoPE + the cache write.
            let rope = fuse_rope.then_some(RopeArgs {
                q_norm: lw.q_norm.ptr,
                k_norm: lw.k_norm.ptr,
                cos: w.cos.ptr,
                sin: w.sin.ptr,
                slots: lay.slots,
                max_pos: w.rope_positions,
                eps: c.rms_norm_eps as f32,
            });
            self.enqueue_attention(li, lay, nsplit, pdl, decode_kernel, rope)?;
            delta = self.enqueue_layer_back(li, &rows, pdl, graphed)?;
        }
        self.enqueue_head(lay, delta, pdl)
    }

    /// Layer `li` up to its attention, on the token rows `rows`: the input
    /// norm (adding `delta`, the previous layer's output; the first layer's
    /// norm gathers the token embeddings instead), the QKV product and, with
    /// `rope`, q/k-norm + RoPE + the KV-cache write. It reads only `rows`'
    /// sections of the metadata (piecewise.rs captures it).
    pub(crate) fn enqueue_layer_front(
        &self,
        li: usize,
        rows: &TokenRows,
        delta: Delta,
        pdl: bool,
        rope: bool,
    ) -> Result<(), RunnerError> {
        let (c, ws, w) = (&self.cfg, &self.ws, &self.weights);
        let lw = &w.layers[li];
        let t = rows.num_tokens;
        let (nq, nkv, d) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim);
        self.enqueue_norm(
            pdl,
            SKIP_ELEMENTWISE,
            &NormArgs {
                name: "add_rmsnorm(in)",
                delta,
                embed_tokens: (li == 0).then_some(rows.tokens),
                weight: lw.input_norm.ptr,
                out: ws.normed.ptr,
                rows: None,
                n_rows: t,
                write_resid: true,
            },
        )?;
        self.linear(
            pdl,
            true,
            &GemmArgs {
                x: ws.normed.ptr,
                w: lw.qkv.ptr,
                y: ws.qkv.ptr,
                m: t,
                n: (nq + 2 * nkv) * d,
                k: c.hidden_size,
                out: OutType::Bf16,
            },
            SKIP_GEMM,
        )?;
        if !rope {
            return Ok(());
        }
        let (kc, vc) = self.kv_layer_ptrs(li);
        let m = |off: usize| Arg::Ptr(self.meta_ptr(off));
        let items = t * (nq + nkv);
        self.launch_in(
            pdl,
            SKIP_ELEMENTWISE,
            &self.kernels.qk_norm_rope_cache,
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
                m(rows.positions),
                m(rows.slots),
                Arg::Ptr(kc),
                Arg::Ptr(vc),
                Arg::I32(t as i32),
                Arg::I32(w.rope_positions as i32),
                Arg::F32(c.rms_norm_eps as f32),
            ],
        )
    }

    /// Layer `li`'s attention: the prefill tiles and the decode path of
    /// `lay` (`decode_kernel`, `nsplit` splits; with `rope`, the decode
    /// kernel also does q/k-norm + RoPE + the cache write). Its grids depend
    /// on the step's composition, so piecewise steps launch it eagerly.
    pub(crate) fn enqueue_attention(
        &self,
        li: usize,
        lay: &StepLayout,
        nsplit: usize,
        pdl: bool,
        decode_kernel: DecodeKernel,
        rope: Option<RopeArgs>,
    ) -> Result<(), RunnerError> {
        let (c, ws, k) = (&self.cfg, &self.ws, &self.kernels);
        let (nq, nkv, d) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim);
        let (kc, vc) = self.kv_layer_ptrs(li);
        let m = |off: usize| Arg::Ptr(self.meta_ptr(off));
        let scale_log2 = scale_log2(d);
        if lay.num_tiles > 0 {
            self.launch_in(
                pdl,
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
        if self.skips(SKIP_ATTENTION) {
            return Ok(());
        }
        let a = DecodeArgs {
            qkv: ws.qkv.ptr,
            k_cache: kc,
            v_cache: vc,
            out: ws.attn.ptr,
            meta: ws.meta.ptr,
            decodes: lay.decodes,
            block_tables: lay.block_tables,
            block_size: self.block_size,
            scale_log2,
            part_o: ws.part_o.ptr,
            part_ml: ws.part_ml.ptr,
            num_decodes: lay.num_decodes,
            num_q_heads: nq,
            num_kv_heads: nkv,
            nsplit,
            pdl,
            rope,
        };
        enqueue_decode_attention(&self.stream, k, decode_kernel, &a)
    }

    /// Layer `li` after its attention, on the token rows `rows`: the O
    /// product, residual add + norm, gate-up, SiLU·mul and the down product,
    /// whose output (maybe split-K partials, by the rule for a step that is
    /// or is not `graphed`) the next norm adds. Reads no metadata.
    pub(crate) fn enqueue_layer_back(
        &self,
        li: usize,
        rows: &TokenRows,
        pdl: bool,
        graphed: bool,
    ) -> Result<Delta, RunnerError> {
        let (c, ws) = (&self.cfg, &self.ws);
        let lw = &self.weights.layers[li];
        let (t, hdim, inter) = (rows.num_tokens, c.hidden_size, c.intermediate_size);
        let o = self.linear_residual(
            pdl,
            &GemmArgs {
                x: ws.attn.ptr,
                w: lw.o.ptr,
                y: ws.out.ptr,
                m: t,
                n: hdim,
                k: c.num_attention_heads * c.head_dim,
                out: OutType::Bf16,
            },
            graphed,
            SKIP_GEMM,
        )?;
        self.enqueue_norm(
            pdl,
            SKIP_ELEMENTWISE,
            &NormArgs {
                name: "add_rmsnorm(post)",
                delta: o,
                embed_tokens: None,
                weight: lw.post_norm.ptr,
                out: ws.normed.ptr,
                rows: None,
                n_rows: t,
                write_resid: true,
            },
        )?;
        self.linear(
            pdl,
            true,
            &GemmArgs {
                x: ws.normed.ptr,
                w: lw.gate_up.ptr,
                y: ws.gate_up.ptr,
                m: t,
                n: 2 * inter,
                k: hdim,
                out: OutType::Bf16,
            },
            SKIP_GEMM,
        )?;
        // silu_mul works on groups of 8 elements.
        let total = (t * inter / 8) as i64;
        self.launch_in(
            pdl,
            SKIP_ELEMENTWISE,
            &self.kernels.silu_mul,
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
        self.linear_residual(
            pdl,
            &GemmArgs {
                x: ws.act.ptr,
                w: lw.down.ptr,
                y: ws.out.ptr,
                m: t,
                n: hdim,
                k: inter,
                out: OutType::Bf16,
            },
            graphed,
            SKIP_GEMM,
        )
    }
}
