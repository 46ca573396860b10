//! Attention self-test: a mixed batch (prefill chunks over cached context,
//! a fresh prefill, decodes at long and one-token contexts, a short chunk over
//! cached context on the decode path) over a paged cache
//! with shuffled blocks, packed by the runner's own metadata packer; and the
//! prefill tiles alone, on whole prompts and on chunks over cached context
//! whose lengths end every group size's tiles part-way.

use super::paged::{PagedBatch, BLOCK_SIZE, NUM_BLOCKS};
use super::{compare, Ctx, KernelCheck};
use crate::runner::cuda::decode::{scale_log2, DecodeKernel};
use crate::runner::cuda::device::{launch, Arg};
use crate::runner::cuda::kernels::KernelShape;
use crate::runner::RunnerError;

/// The decode attention checks: (kernel, splits, with q/k-norm + RoPE fused).
/// Kernels that do not support the shape are left out.
pub(super) const DECODE_CHECKS: [(DecodeKernel, usize, bool); 9] = [
    (DecodeKernel::Prefetch8, 1, false),
    (DecodeKernel::Prefetch8, 7, false),
    (DecodeKernel::BlockW4U4, 1, false),
    (DecodeKernel::BlockW8U4, 3, false),
    (DecodeKernel::HeadsU4, 1, false),
    (DecodeKernel::HeadsU4, 5, false),
    (DecodeKernel::BlockW4U4, 1, true),
    (DecodeKernel::BlockW8U4, 3, true),
    (DecodeKernel::HeadsU4, 4, true),
];

/// `(start_pos, new tokens)` of the prefill-only checks: prompts from the
/// start (of two tokens or more: a one-token prompt is a decode entry), and
/// chunks over cached context, each longer than the 64 tokens of the widest
/// tile (so none takes the decode path), ending tiles of 32, 21, 16, 12 and
/// 8 tokens part-way.
const WHOLE_PROMPTS: [(usize, usize); 4] = [(0, 70), (0, 5), (0, 2), (0, 100)];
const CHUNKS: [(usize, usize); 4] = [(50, 70), (17, 100), (200, 130), (64, 65)];

pub(super) fn check_attention(
    c: &mut Ctx,
    nsplit: usize,
    kernel: DecodeKernel,
) -> Result<KernelCheck, RunnerError> {
    // (start_pos, new tokens)
    // (100, 7) is a short chunk over cached context: decode entries, not a tile.
    let shapes = [
        (50usize, 70usize),
        (299, 1),
        (0, 5),
        (0, 1),
        (17, 33),
        (100, 7),
    ];
    run(c, &shapes, Some((kernel, nsplit)), "attention")
}

/// The prefill tiles alone on prompts from their start.
pub(super) fn check_prefill_whole(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    run(c, &WHOLE_PROMPTS, None, "attn_prefill whole prompts")
}

/// The prefill tiles alone on chunks over cached context.
pub(super) fn check_prefill_chunked(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    run(c, &CHUNKS, None, "attn_prefill chunks over cached context")
}

/// The attention of the batch `shapes` against the host: the prefill tiles,
/// then `decode`'s kernel and splits for the decode entries (a batch with
/// decode entries and no decode kernel is an error).
fn run(
    c: &mut Ctx,
    shapes: &[(usize, usize)],
    decode: Option<(DecodeKernel, usize)>,
    name: &str,
) -> Result<KernelCheck, RunnerError> {
    let KernelShape {
        head_dim: d,
        num_q_heads: nq,
        num_kv_heads: nkv,
        ..
    } = c.shape;
    let g = nq / nkv;
    let qkv_dim = (nq + 2 * nkv) * d;
    let (bs, nblocks) = (BLOCK_SIZE, NUM_BLOCKS);
    let pb = PagedBatch::new(c, shapes, 1024)?;
    let (lay, tables, t) = (pb.lay, &pb.tables, pb.tokens);
    if decode.is_none() && lay.num_decodes > 0 {
        return Err(RunnerError::BadBatch(format!(
            "{name}: {} decode entries and no decode kernel",
            lay.num_decodes
        )));
    }

    let slots = nblocks * bs;
    let kc = super::rounded(&c.randn(slots * nkv * d, 1.0));
    let vc = super::rounded(&c.randn(slots * nkv * d, 1.0));
    let qkv = super::rounded(&c.randn(t * qkv_dim, 1.0));
    let (kd, vd, qd) = (c.up_bf16(&kc)?, c.up_bf16(&vc)?, c.up_bf16(&qkv)?);
    let md = c.up(&pb.meta)?;
    let poison = vec![f32::NAN; t * nq * d];
    let od = c.up_bf16(&poison)?;
    let m = |off: usize| Arg::Ptr(md.ptr + 4 * off as u64);
    let scale_log2 = scale_log2(d);
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
    if let Some((kernel, nsplit)) = decode {
        pb.decode(
            c,
            kernel,
            nsplit,
            &md,
            (qd.ptr, kd.ptr, vd.ptr, od.ptr),
            None,
        )?;
    }
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
        name,
        &got,
        &want,
        2e-2,
        format!(
            "{} tiles, {} decodes; worst token row {} (err {:.3e})",
            lay.num_tiles, lay.num_decodes, worst.1, worst.0
        ),
    ))
}
