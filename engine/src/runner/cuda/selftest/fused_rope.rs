//! The decode kernels that also do q/k-norm + RoPE + the KV-cache write
//! (decode-only steps) against the two-kernel path they replace
//! (`qk_norm_rope_cache`, then the plain decode kernel), which the other
//! checks hold against host computations: same outputs, same cache contents.

use super::{compare, rounded, Ctx, KernelCheck};
use crate::request::RequestId;
use crate::runner::cuda::decode::{enqueue_decode_attention, DecodeArgs, DecodeKernel, RopeArgs};
use crate::runner::cuda::device::{self, launch, Arg, DeviceBuffer};
use crate::runner::cuda::kernels::KernelShape;
use crate::runner::cuda::meta::{pack_step, BatchLimits};
use crate::runner::{RunnerError, ScheduledBatch, ScheduledSeq};
use rand::seq::SliceRandom;

/// Attention output, K cache and V cache of one path.
type PathResult = (Vec<f32>, Vec<f32>, Vec<f32>);

pub(super) fn check_fused_rope(
    c: &mut Ctx,
    nsplit: usize,
    kernel: DecodeKernel,
) -> Result<KernelCheck, RunnerError> {
    let KernelShape {
        head_dim: d,
        num_q_heads: nq,
        num_kv_heads: nkv,
    } = c.shape;
    let qkv_dim = (nq + 2 * nkv) * d;
    let (bs, nblocks, max_pos) = (16usize, 64usize, 512usize);
    // Decode-only: one new token each, at positions 299, 0, 16 and 47.
    let starts = [299usize, 0, 16, 47];
    let mut perm: Vec<u32> = (1..nblocks as u32).collect();
    perm.shuffle(&mut c.rng);
    let mut tables = Vec::new();
    let mut used = 0;
    for &s in &starts {
        let b = (s + 1).div_ceil(bs);
        tables.push(perm[used..used + b].to_vec());
        used += b;
    }
    let toks = vec![0u32; starts.len()];
    let seqs = starts
        .iter()
        .enumerate()
        .map(|(i, &s)| ScheduledSeq {
            request_id: RequestId(i as u64),
            token_ids: &toks[i..i + 1],
            start_pos: s,
            block_table: &tables[i],
            samples: true,
        })
        .collect();
    let batch = ScheduledBatch {
        seqs,
        block_size: bs,
    };
    let lim = BatchLimits {
        block_size: bs,
        num_blocks: nblocks,
        vocab_size: 1,
        max_tokens: 64,
        max_seqs: 16,
        max_len: max_pos,
        tokens_per_tile: 64 / (nq / nkv),
    };
    let mut meta = vec![0i32; 4096];
    let lay = pack_step(&batch, &lim, None, &mut meta)?;
    let t = starts.len();
    let slots = nblocks * bs;
    let kc = rounded(&c.randn(slots * nkv * d, 1.0));
    let vc = rounded(&c.randn(slots * nkv * d, 1.0));
    let qkv = rounded(&c.randn(t * qkv_dim, 1.0));
    let qn = rounded(&c.randn(d, 1.0));
    let kn = rounded(&c.randn(d, 1.0));
    let (cos, sin) = crate::runner::cuda::weights::rope_table(d, 10_000.0, max_pos);
    let (qnd, knd, cd, sd) = (c.up_bf16(&qn)?, c.up_bf16(&kn)?, c.up(&cos)?, c.up(&sin)?);
    let md = c.up(&meta[..lay.total])?;
    let m = |off: usize| Arg::Ptr(md.ptr + 4 * off as u64);
    let scale_log2 = (1.0 / (d as f64).sqrt() * std::f64::consts::LOG2_E) as f32;
    let alloc = |n: usize| DeviceBuffer::alloc(&c.ctx, n).map_err(|e| device::dev_err("alloc", e));
    let run = |fused: bool| -> Result<PathResult, RunnerError> {
        let (qd, kd, vd) = (c.up_bf16(&qkv)?, c.up_bf16(&kc)?, c.up_bf16(&vc)?);
        let od = c.up_bf16(&vec![f32::NAN; t * nq * d])?;
        let (po, pml) = (
            alloc(t * nq * nsplit * d * 4)?,
            alloc(t * nq * nsplit * 2 * 4)?,
        );
        if !fused {
            launch(
                &c.stream,
                &c.k.qk_norm_rope_cache,
                "qk_norm_rope_cache",
                ((t * (nq + nkv)).div_ceil(4) as u32, 1, 1),
                128,
                0,
                &[
                    Arg::Ptr(qd.ptr),
                    Arg::Ptr(qnd.ptr),
                    Arg::Ptr(knd.ptr),
                    Arg::Ptr(cd.ptr),
                    Arg::Ptr(sd.ptr),
                    m(lay.positions),
                    m(lay.slots),
                    Arg::Ptr(kd.ptr),
                    Arg::Ptr(vd.ptr),
                    Arg::I32(t as i32),
                    Arg::I32(max_pos as i32),
                    Arg::F32(1e-6),
                ],
            )?;
        }
        let a = DecodeArgs {
            qkv: qd.ptr,
            k_cache: kd.ptr,
            v_cache: vd.ptr,
            out: od.ptr,
            meta: md.ptr,
            dec_seqs: lay.dec_seqs,
            q_start: lay.q_start,
            ctx_len: lay.ctx_len,
            block_tables: lay.block_tables,
            block_size: bs,
            scale_log2,
            part_o: po.ptr,
            part_ml: pml.ptr,
            num_decodes: lay.num_decodes,
            num_q_heads: nq,
            num_kv_heads: nkv,
            nsplit,
            pdl: false,
            rope: fused.then_some(RopeArgs {
                q_norm: qnd.ptr,
                k_norm: knd.ptr,
                cos: cd.ptr,
                sin: sd.ptr,
                slots: lay.slots,
                max_pos,
                eps: 1e-6,
            }),
        };
        enqueue_decode_attention(&c.stream, &c.k, kernel, &a)?;
        Ok((
            c.down_bf16(&od, t * nq * d)?,
            c.down_bf16(&kd, slots * nkv * d)?,
            c.down_bf16(&vd, slots * nkv * d)?,
        ))
    };
    let (o2, k2, v2) = run(false)?;
    let (o1, k1, v1) = run(true)?;
    let cache_diff = k1
        .iter()
        .zip(&k2)
        .chain(v1.iter().zip(&v2))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    let want: Vec<f64> = o2.iter().map(|&x| x as f64).collect();
    let mut chk = compare(
        "attn_decode fused q/k-norm + RoPE",
        &o1,
        &want,
        1e-2,
        format!("{kernel:?}, nsplit {nsplit}; max |cache difference| {cache_diff:.3e}"),
    );
    // A bf16 rounding of the normed key may differ by one unit (the sum of squares runs in
    // another order); anything larger is a wrong or missing write.
    chk.pass &= cache_diff <= 0.02;
    Ok(chk)
}
