//! Attention self-test: a mixed batch (prefill chunks over cached context,
//! a fresh prefill, decodes at long and one-token contexts) over a paged cache
//! with shuffled blocks, packed by the runner's own metadata packer.

use super::{compare, Ctx, KernelCheck};
use crate::request::RequestId;
use crate::runner::cuda::decode::{enqueue_decode_attention, DecodeArgs, DecodeKernel};
use crate::runner::cuda::device::{self, launch, Arg, DeviceBuffer};
use crate::runner::cuda::kernels::KernelShape;
use crate::runner::cuda::meta::{pack_step, BatchLimits};
use crate::runner::{RunnerError, ScheduledBatch, ScheduledSeq};
use rand::seq::SliceRandom;

pub(super) fn check_attention(
    c: &mut Ctx,
    nsplit: usize,
    kernel: DecodeKernel,
) -> Result<KernelCheck, RunnerError> {
    let KernelShape {
        head_dim: d,
        num_q_heads: nq,
        num_kv_heads: nkv,
    } = c.shape;
    let g = nq / nkv;
    let qkv_dim = (nq + 2 * nkv) * d;
    let (bs, nblocks) = (16usize, 64usize);
    // (start_pos, new tokens)
    let shapes = [(50usize, 70usize), (299, 1), (0, 5), (0, 1), (17, 33)];
    let mut perm: Vec<u32> = (1..nblocks as u32).collect();
    perm.shuffle(&mut c.rng);
    let mut tables = Vec::new();
    let mut used = 0;
    for &(s, n) in &shapes {
        let b = (s + n).div_ceil(bs);
        tables.push(perm[used..used + b].to_vec());
        used += b;
    }
    let t: usize = shapes.iter().map(|x| x.1).sum();
    let toks = vec![0u32; t];
    let mut seqs = Vec::new();
    let mut row = 0;
    for (i, &(s, n)) in shapes.iter().enumerate() {
        seqs.push(ScheduledSeq {
            request_id: RequestId(i as u64),
            token_ids: &toks[row..row + n],
            start_pos: s,
            block_table: &tables[i],
            samples: true,
        });
        row += n;
    }
    let batch = ScheduledBatch {
        seqs,
        block_size: bs,
    };
    let lim = BatchLimits {
        block_size: bs,
        num_blocks: nblocks,
        vocab_size: 1,
        max_tokens: 1024,
        max_seqs: 16,
        max_len: 1024,
        tokens_per_tile: 64 / g,
    };
    let mut meta = vec![0i32; 8192];
    let lay = pack_step(&batch, &lim, None, &mut meta)?;

    let slots = nblocks * bs;
    let kc = super::rounded(&c.randn(slots * nkv * d, 1.0));
    let vc = super::rounded(&c.randn(slots * nkv * d, 1.0));
    let qkv = super::rounded(&c.randn(t * qkv_dim, 1.0));
    let (kd, vd, qd) = (c.up_bf16(&kc)?, c.up_bf16(&vc)?, c.up_bf16(&qkv)?);
    let md = c.up(&meta[..lay.total])?;
    let poison = vec![f32::NAN; t * nq * d];
    let od = c.up_bf16(&poison)?;
    let po = DeviceBuffer::alloc(&c.ctx, 16 * nq * nsplit * d * 4)
        .map_err(|e| device::dev_err("alloc", e))?;
    let pml = DeviceBuffer::alloc(&c.ctx, 16 * nq * nsplit * 2 * 4)
        .map_err(|e| device::dev_err("alloc", e))?;
    let m = |off: usize| Arg::Ptr(md.ptr + 4 * off as u64);
    let scale_log2 = (1.0 / (d as f64).sqrt() * std::f64::consts::LOG2_E) as f32;
    launch(
        &c.stream,
        &c.k.attn_prefill,
        "attn_prefill",
        (lay.num_tiles as u32, nkv as u32, 1),
        128,
        c.k.prefill_smem,
        &[
            Arg::Ptr(qd.ptr),
            Arg::Ptr(kd.ptr),
            Arg::Ptr(vd.ptr),
            Arg::Ptr(od.ptr),
            m(lay.tiles),
            m(lay.q_start),
            m(lay.ctx_len),
            m(lay.block_tables),
            m(0),
            Arg::I32(bs as i32),
            Arg::F32(scale_log2),
        ],
    )?;
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
        rope: None,
    };
    enqueue_decode_attention(&c.stream, &c.k, kernel, &a)?;
    let got = c.down_bf16(&od, t * nq * d)?;

    let mut want = vec![0f64; t * nq * d];
    let scale = 1.0 / (d as f64).sqrt();
    let mut row = 0;
    for (i, &(s, n)) in shapes.iter().enumerate() {
        for j in 0..n {
            let pos = s + j;
            for h in 0..nq {
                let kvh = h / g;
                let q = &qkv[(row + j) * qkv_dim + h * d..(row + j) * qkv_dim + (h + 1) * d];
                let slot = |key: usize| tables[i][key / bs] as usize * bs + key % bs;
                let scores: Vec<f64> = (0..=pos)
                    .map(|key| {
                        let k = &kc[(slot(key) * nkv + kvh) * d..(slot(key) * nkv + kvh + 1) * d];
                        q.iter()
                            .zip(k)
                            .map(|(a, b)| *a as f64 * *b as f64)
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let mx = scores.iter().cloned().fold(f64::MIN, f64::max);
                let p: Vec<f64> = scores.iter().map(|x| (x - mx).exp()).collect();
                let sum: f64 = p.iter().sum();
                let o = &mut want[(row + j) * nq * d + h * d..(row + j) * nq * d + (h + 1) * d];
                for (key, pk) in p.iter().enumerate() {
                    let v = &vc[(slot(key) * nkv + kvh) * d..(slot(key) * nkv + kvh + 1) * d];
                    for (oe, ve) in o.iter_mut().zip(v) {
                        *oe += pk / sum * *ve as f64;
                    }
                }
            }
        }
        row += n;
    }
    // Worst row, to say which sequence is off when the check fails.
    let mut worst = (0.0f64, 0usize);
    for r in 0..t {
        let e = (0..nq * d)
            .map(|x| (got[r * nq * d + x] as f64 - want[r * nq * d + x]).abs())
            .fold(0.0, f64::max);
        if e.is_nan() || e > worst.0 {
            worst = (e, r);
        }
    }
    Ok(compare(
        "attention",
        &got,
        &want,
        2e-2,
        format!(
            "{} tiles, {} decodes; worst token row {} (err {:.3e})",
            lay.num_tiles, lay.num_decodes, worst.1, worst.0
        ),
    ))
}
