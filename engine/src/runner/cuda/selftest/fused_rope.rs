//! The decode kernels that also do q/k-norm + RoPE + the KV-cache write
//! (decode-only steps) against the two-kernel path they replace
//! (`qk_norm_rope_cache`, then the plain decode kernel), which the other
//! checks hold against host computations: same outputs, same cache contents.

use super::paged::{PagedBatch, BLOCK_SIZE, NUM_BLOCKS};
use super::rope::launch_qk_norm_rope;
use super::{compare, rounded, Ctx, KernelCheck};
use crate::runner::cuda::decode::{DecodeKernel, RopeArgs};
use crate::runner::cuda::kernels::KernelShape;
use crate::runner::RunnerError;

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
        ..
    } = c.shape;
    let qkv_dim = (nq + 2 * nkv) * d;
    let (bs, nblocks, max_pos) = (BLOCK_SIZE, NUM_BLOCKS, 512usize);
    // Decode-only: one new token each, at positions 299, 0, 16 and 47.
    let pb = PagedBatch::new(c, &[(299, 1), (0, 1), (16, 1), (47, 1)], max_pos)?;
    let (lay, t) = (pb.lay, pb.tokens);
    let slots = nblocks * bs;
    let kc = rounded(&c.randn(slots * nkv * d, 1.0));
    let vc = rounded(&c.randn(slots * nkv * d, 1.0));
    let qkv = rounded(&c.randn(t * qkv_dim, 1.0));
    let qn = rounded(&c.randn(d, 1.0));
    let kn = rounded(&c.randn(d, 1.0));
    let (cos, sin) = crate::runner::cuda::weights::rope_table(d, 10_000.0, max_pos);
    let (qnd, knd, cd, sd) = (c.up_bf16(&qn)?, c.up_bf16(&kn)?, c.up(&cos)?, c.up(&sin)?);
    let md = c.up(&pb.meta)?;
    let run = |fused: bool| -> Result<PathResult, RunnerError> {
        let (qd, kd, vd) = (c.up_bf16(&qkv)?, c.up_bf16(&kc)?, c.up_bf16(&vc)?);
        let od = c.up_bf16(&vec![f32::NAN; t * nq * d])?;
        if !fused {
            let (pos, slots) = (
                md.ptr + 4 * lay.positions as u64,
                md.ptr + 4 * lay.slots as u64,
            );
            let norms = (qnd.ptr, knd.ptr, cd.ptr, sd.ptr);
            launch_qk_norm_rope(c, qd.ptr, norms, (pos, slots), (kd.ptr, vd.ptr), t, max_pos)?;
        }
        let rope = fused.then_some(RopeArgs {
            q_norm: qnd.ptr,
            k_norm: knd.ptr,
            cos: cd.ptr,
            sin: sd.ptr,
            slots: lay.slots,
            max_pos,
            eps: 1e-6,
        });
        pb.decode(
            c,
            kernel,
            nsplit,
            &md,
            (qd.ptr, kd.ptr, vd.ptr, od.ptr),
            rope,
        )?;
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
