//! The 28 decoder layers of one step for a range of token rows ("a lane"),
//! enqueued on the lane's stream with the lane's cuBLAS handle: norm, QKV
//! GEMM, q/k-norm + RoPE + KV write, attention, O GEMM, residual add + norm,
//! gate-up GEMM, SiLU·mul, down GEMM. A lane touches only its rows of the
//! activation workspace, its decode entries and its share of the split
//! buffers, so two lanes of a decode-only step can run side by side
//! (forward.rs). Nothing here synchronizes or copies.

use super::decode::{enqueue_decode_attention, DecodeArgs, DecodeKernel, RopeArgs};
use super::device::Arg;
use super::gemm::Gemm;
use super::meta::StepLayout;
use super::{CudaRunner, SKIP_ATTENTION, SKIP_ELEMENTWISE, SKIP_LAYER_NORMS};
use crate::runner::RunnerError;
use cudarc::driver::CudaStream;

/// Token rows `row0..row0 + rows` of a step and where their work goes. A lane
/// that is not the whole step must be decode-only rows (one decode entry per
/// row, entry `i` at row `i`), with `row0` a multiple of 16 so that the
/// GEMMs' padded rows of an earlier lane stay below it.
pub(super) struct Lane<'a> {
    pub stream: &'a CudaStream,
    pub gemm: &'a Gemm,
    pub row0: usize,
    pub rows: usize,
    /// Splits of each decode entry's attention.
    pub nsplit: usize,
}

/// Settings that are the same for every lane of a step.
pub(super) struct StepKnobs {
    pub pdl: bool,
    pub decode_kernel: DecodeKernel,
    pub fuse_rope: bool,
}

impl CudaRunner {
    /// Enqueues every layer for the lane's rows; the residual stream ends in
    /// `ws.resid` + `ws.out` (the last down projection) of those rows.
    pub(super) fn enqueue_layers(
        &self,
        lane: &Lane<'_>,
        lay: &StepLayout,
        knobs: &StepKnobs,
    ) -> Result<(), RunnerError> {
        let c = &self.cfg;
        let k = &self.kernels;
        let ws = &self.ws;
        let w = &self.weights;
        let (t, hdim) = (lane.rows, c.hidden_size);
        let (nq, nkv, d) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim);
        let qkv_dim = (nq + 2 * nkv) * d;
        let inter = c.intermediate_size;
        let eps = c.rms_norm_eps as f32;
        let r0 = lane.row0;
        let m = |off: usize| Arg::Ptr(ws.meta.ptr + 4 * off as u64);
        // Byte address of the lane's first row in a buffer of `width` elements of `bytes` each.
        let row = |base: u64, width: usize, bytes: usize| base + (r0 * width * bytes) as u64;
        let (resid, out) = (row(ws.resid.ptr, hdim, 4), row(ws.out.ptr, hdim, 2));
        let normed = row(ws.normed.ptr, hdim, 2);
        let qkv = row(ws.qkv.ptr, qkv_dim, 2);
        let attn = row(ws.attn.ptr, nq * d, 2);
        let gate_up = row(ws.gate_up.ptr, 2 * inter, 2);
        let act = row(ws.act.ptr, inter, 2);
        let tok = t as u32;
        let pdl = knobs.pdl;
        let scale_log2 = (1.0 / (d as f64).sqrt() * std::f64::consts::LOG2_E) as f32;
        let norm = |delta: u64, gamma: u64, name: &str| {
            self.launch_in(
                lane.stream,
                pdl,
                SKIP_ELEMENTWISE | SKIP_LAYER_NORMS,
                &k.add_rmsnorm,
                name,
                (tok, 1, 1),
                256,
                // add_rmsnorm keeps the row in registers: no dynamic shared memory.
                0,
                &[
                    Arg::Ptr(resid),
                    Arg::Ptr(delta),
                    Arg::Ptr(gamma),
                    Arg::Ptr(normed),
                    Arg::Ptr(0),
                    Arg::I32(hdim as i32),
                    Arg::F32(eps),
                    Arg::I32(1),
                ],
            )
        };
        let gemm = |x: u64, wt: u64, y: u64, n: usize, kk: usize| {
            self.linear(lane, pdl, x, wt, y, n, kk)
        };
        for (li, lw) in w.layers.iter().enumerate() {
            norm(if li == 0 { 0 } else { out }, lw.input_norm.ptr, "add_rmsnorm(in)")?;
            gemm(normed, lw.qkv.ptr, qkv, qkv_dim, hdim)?;
            let (kc, vc) = self.kv_layer_ptrs(li);
            // In decode-only steps the attention kernel does q/k-norm + RoPE + the cache write.
            let rope = knobs.fuse_rope.then_some(RopeArgs {
                q_norm: lw.q_norm.ptr,
                k_norm: lw.k_norm.ptr,
                cos: w.cos.ptr,
                sin: w.sin.ptr,
                slots: lay.slots,
                max_pos: w.rope_positions,
                eps,
            });
            if rope.is_none() {
                let items = t * (nq + nkv);
                self.launch_in(
                    lane.stream,
                    pdl,
                    SKIP_ELEMENTWISE,
                    &k.qk_norm_rope_cache,
                    "qk_norm_rope_cache",
                    (items.div_ceil(4) as u32, 1, 1),
                    128,
                    0,
                    &[
                        Arg::Ptr(qkv),
                        Arg::Ptr(lw.q_norm.ptr),
                        Arg::Ptr(lw.k_norm.ptr),
                        Arg::Ptr(w.cos.ptr),
                        Arg::Ptr(w.sin.ptr),
                        m(lay.positions + r0),
                        m(lay.slots + r0),
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
                    lane.stream,
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
            if self.profile_skip & SKIP_ATTENTION == 0 {
                // Decode entries name their sequence and token row, so the kernel takes the
                // whole step's buffers and only the lane's entries; the split partials of
                // entry i live at row i of the (entry, split) buffers, sized for max_splits.
                let part = r0 * nq * self.max_splits;
                let a = DecodeArgs {
                    qkv: ws.qkv.ptr,
                    k_cache: kc,
                    v_cache: vc,
                    out: ws.attn.ptr,
                    meta: ws.meta.ptr,
                    decodes: lay.decodes + 3 * r0,
                    block_tables: lay.block_tables,
                    block_size: self.block_size,
                    scale_log2,
                    part_o: ws.part_o.ptr + (part * d * 4) as u64,
                    part_ml: ws.part_ml.ptr + (part * 2 * 4) as u64,
                    num_decodes: if r0 == 0 && t == lay.num_tokens {
                        lay.num_decodes
                    } else {
                        t
                    },
                    num_q_heads: nq,
                    num_kv_heads: nkv,
                    head_dim: d,
                    nsplit: lane.nsplit,
                    pdl,
                    rope,
                };
                enqueue_decode_attention(lane.stream, k, knobs.decode_kernel, &a)?;
            }
            gemm(attn, lw.o.ptr, out, hdim, nq * d)?;
            norm(out, lw.post_norm.ptr, "add_rmsnorm(post)")?;
            gemm(normed, lw.gate_up.ptr, gate_up, 2 * inter, hdim)?;
            // silu_mul works on groups of 8 elements.
            let total = (t * inter / 8) as i64;
            self.launch_in(
                lane.stream,
                pdl,
                SKIP_ELEMENTWISE,
                &k.silu_mul,
                "silu_mul",
                ((total as usize).div_ceil(256) as u32, 1, 1),
                256,
                0,
                &[
                    Arg::Ptr(gate_up),
                    Arg::Ptr(act),
                    Arg::I32(inter as i32),
                    Arg::I64(total),
                ],
            )?;
            gemm(act, lw.down.ptr, out, hdim, inter)?;
        }
        Ok(())
    }
}
