//! q/k-norm + RoPE + KV-cache write against a host computation.

use super::{compare, rounded, Ctx, KernelCheck};
use crate::runner::cuda::device::{launch, Arg};
use crate::runner::cuda::kernels::KernelShape;
use crate::runner::RunnerError;

/// Launches `qk_norm_rope_cache` over `t` token rows of `qkv`: `norms` are
/// (q_norm, k_norm, cos table, sin table), `meta` (positions, KV slots) and
/// `cache` (K, V), all device addresses; eps 1e-6.
pub(super) fn launch_qk_norm_rope(
    c: &Ctx,
    qkv: u64,
    norms: (u64, u64, u64, u64),
    meta: (u64, u64),
    cache: (u64, u64),
    t: usize,
    max_pos: usize,
) -> Result<(), RunnerError> {
    let items = t * (c.shape.num_q_heads + c.shape.num_kv_heads);
    launch(
        &c.stream,
        &c.k.qk_norm_rope_cache,
        "qk_norm_rope_cache",
        (items.div_ceil(4) as u32, 1, 1),
        128,
        0,
        &[
            Arg::Ptr(qkv),
            Arg::Ptr(norms.0),
            Arg::Ptr(norms.1),
            Arg::Ptr(norms.2),
            Arg::Ptr(norms.3),
            Arg::Ptr(meta.0),
            Arg::Ptr(meta.1),
            Arg::Ptr(cache.0),
            Arg::Ptr(cache.1),
            Arg::I32(t as i32),
            Arg::I32(max_pos as i32),
            Arg::F32(1e-6),
        ],
    )
}

pub(super) fn check_rope(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let KernelShape {
        head_dim: d,
        num_q_heads: nq,
        num_kv_heads: nkv,
        ..
    } = c.shape;
    let qkv_dim = (nq + 2 * nkv) * d;
    let t = 3usize;
    let max_pos = 64usize;
    let qkv = rounded(&c.randn(t * qkv_dim, 1.0));
    let qn = rounded(&c.randn(d, 1.0));
    let kn = rounded(&c.randn(d, 1.0));
    let (cos, sin) = crate::runner::cuda::weights::rope_table(d, 10_000.0, max_pos);
    let pos = [5i32, 0, 63];
    let slots = [2i32, -1, 0];
    let nslots = 4usize;
    let qd = c.up_bf16(&qkv)?;
    let (qnd, knd, cd, sd, pd, sld) = (
        c.up_bf16(&qn)?,
        c.up_bf16(&kn)?,
        c.up(&cos)?,
        c.up(&sin)?,
        c.up(&pos)?,
        c.up(&slots)?,
    );
    let zeros = vec![0f32; nslots * nkv * d];
    let (kc, vc) = (c.up_bf16(&zeros)?, c.up_bf16(&zeros)?);
    let norms = (qnd.ptr, knd.ptr, cd.ptr, sd.ptr);
    launch_qk_norm_rope(
        c,
        qd.ptr,
        norms,
        (pd.ptr, sld.ptr),
        (kc.ptr, vc.ptr),
        t,
        max_pos,
    )?;
    let q_after = c.down_bf16(&qd, t * qkv_dim)?;
    let k_cache = c.down_bf16(&kc, nslots * nkv * d)?;
    let v_cache = c.down_bf16(&vc, nslots * nkv * d)?;
    let half = d / 2;
    let rot = |x: &[f32], w: &[f32], p: usize| -> Vec<f64> {
        let inv =
            1.0 / ((x.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / d as f64) + 1e-6).sqrt();
        let n: Vec<f64> = x
            .iter()
            .zip(w)
            .map(|(a, b)| *a as f64 * *b as f64 * inv)
            .collect();
        let mut o = vec![0f64; d];
        for j in 0..half {
            let (cs, sn) = (cos[p * half + j] as f64, sin[p * half + j] as f64);
            o[j] = n[j] * cs - n[j + half] * sn;
            o[j + half] = n[j + half] * cs + n[j] * sn;
        }
        o
    };
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for ti in 0..t {
        let p = pos[ti] as usize;
        for h in 0..nq {
            want.extend(rot(
                &qkv[ti * qkv_dim + h * d..ti * qkv_dim + (h + 1) * d],
                &qn,
                p,
            ));
            got.extend_from_slice(&q_after[ti * qkv_dim + h * d..ti * qkv_dim + (h + 1) * d]);
        }
        if slots[ti] >= 0 {
            let s = slots[ti] as usize;
            for h in 0..nkv {
                let koff = ti * qkv_dim + (nq + h) * d;
                want.extend(rot(&qkv[koff..koff + d], &kn, p));
                got.extend_from_slice(&k_cache[(s * nkv + h) * d..(s * nkv + h + 1) * d]);
                let voff = ti * qkv_dim + (nq + nkv + h) * d;
                want.extend(qkv[voff..voff + d].iter().map(|&v| v as f64));
                got.extend_from_slice(&v_cache[(s * nkv + h) * d..(s * nkv + h + 1) * d]);
            }
        }
    }
    // Slot 1 and 3 must stay untouched (slot -1 is padding).
    let untouched = k_cache[nkv * d..2 * nkv * d]
        .iter()
        .chain(&k_cache[3 * nkv * d..])
        .all(|&v| v == 0.0);
    let mut chk = compare(
        "qk_norm_rope_cache",
        &got,
        &want,
        1.5e-2,
        format!("positions {pos:?}, slots {slots:?}"),
    );
    if !untouched {
        chk.pass = false;
        chk.note += "; wrote to a slot it should not have";
    }
    Ok(chk)
}
