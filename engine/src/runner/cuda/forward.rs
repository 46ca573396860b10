//! The forward pass of one step, enqueued on the runner's stream:
//! 28 × (norm, QKV GEMM, q/k-norm + RoPE + KV write, attention, O GEMM,
//! residual add + norm, gate-up GEMM, SiLU·mul, down GEMM), then the head
//! (head.rs). The first layer's norm gathers the token embeddings itself.
//! Nothing here synchronizes or copies, so the same code is captured into
//! decode graphs. The O and down products may leave split-K partials
//! ([`Delta`]); the norm after each adds them up.

use super::decode::{enqueue_decode_attention, scale_log2, DecodeArgs, RopeArgs};
use super::device::{launch_ex, Arg};
use super::gemm::{GemmArgs, OutType};
use super::linear::Delta;
use super::meta::StepLayout;
use super::{CudaRunner, SKIP_ATTENTION, SKIP_ELEMENTWISE, SKIP_GEMM};
use crate::runner::RunnerError;

use cudarc::driver::CudaFunction;

/// Most decodes of a step whose kernels are programmatic dependent launches.
const PDL_MAX_DECODES: usize = 24;

/// One `add_rmsnorm` launch: `n_rows` rows (residual rows listed at metadata
/// offset `rows`, or the first `n_rows`) plus `delta`, or the embeddings of
/// the tokens at metadata offset `embed_tokens` instead, normalised with
/// `weight` into `out`; `write_resid` stores the sum back in the residual stream.
pub(crate) struct NormArgs<'a> {
    pub name: &'a str,
    pub delta: Delta,
    pub embed_tokens: Option<usize>,
    pub weight: u64,
    pub out: u64,
    pub rows: Option<usize>,
    pub n_rows: usize,
    pub write_resid: bool,
}

/// The arguments of one `add_rmsnorm` launch in the kernel's parameter order
/// (kernels.cu); device addresses are 0 where absent. The runner and the
/// kernel self-tests both launch through it.
pub(crate) struct NormParams {
    pub resid: u64,
    pub delta: Delta,
    pub weight: u64,
    pub out: u64,
    /// Residual row of each output row, or 0: row t is residual row t.
    pub rows: u64,
    pub hidden: usize,
    pub eps: f32,
    pub write_resid: bool,
    /// With `tokens`, the rows start from these embeddings instead of `resid + delta`.
    pub embed: u64,
    pub tokens: u64,
}

impl NormParams {
    pub fn args(&self) -> [Arg; 13] {
        let [d0, d1, d2, d3] = self.delta.args();
        [
            Arg::Ptr(self.resid),
            d0,
            d1,
            d2,
            d3,
            Arg::Ptr(self.weight),
            Arg::Ptr(self.out),
            Arg::Ptr(self.rows),
            Arg::I32(self.hidden as i32),
            Arg::F32(self.eps),
            Arg::I32(self.write_resid as i32),
            Arg::Ptr(self.embed),
            Arg::Ptr(self.tokens),
        ]
    }
}

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

    /// Enqueues one fused residual-add RMSNorm (`add_rmsnorm`, which keeps its
    /// row in registers: no dynamic shared memory).
    pub(crate) fn enqueue_norm(
        &self,
        pdl: bool,
        group: u32,
        a: &NormArgs,
    ) -> Result<(), RunnerError> {
        let meta = |off: Option<usize>| off.map_or(0, |o| self.meta_ptr(o));
        let params = NormParams {
            resid: self.ws.resid.ptr,
            delta: a.delta,
            weight: a.weight,
            out: a.out,
            rows: meta(a.rows),
            hidden: self.cfg.hidden_size,
            eps: self.cfg.rms_norm_eps as f32,
            write_resid: a.write_resid,
            embed: a.embed_tokens.map_or(0, |_| self.weights.embed.ptr),
            tokens: meta(a.embed_tokens),
        };
        self.launch_in(
            pdl,
            group,
            &self.kernels.add_rmsnorm,
            a.name,
            (a.n_rows as u32, 1, 1),
            256,
            0,
            &params.args(),
        )
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
        let k = &self.kernels;
        let ws = &self.ws;
        let w = &self.weights;
        let (t, hdim) = (lay.num_tokens, c.hidden_size);
        let (nq, nkv, d) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim);
        let qkv_dim = (nq + 2 * nkv) * d;
        let inter = c.intermediate_size;
        let eps = c.rms_norm_eps as f32;
        let m = |off: usize| Arg::Ptr(self.meta_ptr(off));
        let scale_log2 = scale_log2(d);
        // Programmatic dependent launches only in decode-only steps of up to
        // PDL_MAX_DECODES sequences: measured on the H200 they save 0.07 ms per
        // step at batch 1 and 0.04 at 16, and cost 0.01-0.04 ms from 32
        // sequences on (results/h200/pdl.csv) and 3-8 % in prefill steps
        // (profile.csv).
        let decode_only = lay.is_decode_only();
        let pdl = self.tuning.pdl && decode_only && lay.num_decodes <= PDL_MAX_DECODES;
        let decode_kernel = self.decode_kernel_for(lay.num_decodes);
        let fuse_rope = self.tuning.fuse_rope && decode_only && decode_kernel.fuses_rope(d);

        // The previous down projection's output, added by the next norm.
        let mut delta = Delta::NONE;
        for (li, lw) in w.layers.iter().enumerate() {
            // The first layer's norm starts the residual stream from the embeddings.
            self.enqueue_norm(
                pdl,
                SKIP_ELEMENTWISE,
                &NormArgs {
                    name: "add_rmsnorm(in)",
                    delta,
                    embed_tokens: (li == 0).then_some(lay.tokens),
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
                    n: qkv_dim,
                    k: hdim,
                    out: OutType::Bf16,
                },
                SKIP_GEMM,
            )?;
            let (kc, vc) = self.kv_layer_ptrs(li);
            let items = t * (nq + nkv);
            // In decode-only steps the attention kernel does q/k-norm + RoPE + the cache write.
            let rope = fuse_rope.then_some(RopeArgs {
                q_norm: lw.q_norm.ptr,
                k_norm: lw.k_norm.ptr,
                cos: w.cos.ptr,
                sin: w.sin.ptr,
                slots: lay.slots,
                max_pos: w.rope_positions,
                eps,
            });
            if rope.is_none() {
                self.launch_in(
                    pdl,
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
            }
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
            if !self.skips(SKIP_ATTENTION) {
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
                enqueue_decode_attention(&self.stream, k, decode_kernel, &a)?;
            }
            let o = self.linear_residual(
                pdl,
                &GemmArgs {
                    x: ws.attn.ptr,
                    w: lw.o.ptr,
                    y: ws.out.ptr,
                    m: t,
                    n: hdim,
                    k: nq * d,
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
            delta = self.linear_residual(
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
            )?;
        }
        self.enqueue_head(lay, delta, pdl)
    }
}
