//! The fused Hopper layer GEMMs (fused.rs) at Qwen3-0.6B's dimensions, for 5
//! and 64 rows, against host products in f64. Rows past the step's count
//! must come back untouched.

use super::{compare, rounded, Ctx, KernelCheck};
use crate::model::Qwen3Config;
use crate::runner::cuda::fused::{
    compile_fused, norm_tiles, resid_tiles, FusedKernels, FusedShape, NormGemm,
};
use crate::runner::RunnerError;
use half::bf16;

const TILE_ROWS: usize = 64;
const EPS: f64 = 1e-6;

fn to_bf16(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f32(x)).collect()
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
}

/// Runs the four checks with the fused kernels compiled once at Qwen3-0.6B's
/// shape; on a device without them, one entry that says so (not a failure:
/// the runner does not use them there).
pub(super) fn check_fused(c: &mut Ctx) -> Vec<Result<KernelCheck, RunnerError>> {
    let shape = match Qwen3Config::preset("qwen3-0.6b") {
        Ok(cfg) => FusedShape::of(&cfg),
        Err(e) => return vec![Err(RunnerError::Model(e.to_string()))],
    };
    let fk = match compile_fused(&c.ctx, shape, c.shape) {
        Ok(Some(k)) => k,
        Ok(None) => {
            return vec![Ok(KernelCheck {
                name: "wg_* fused layer GEMMs".into(),
                max_abs_err: 0.0,
                rel_l2_err: 0.0,
                pass: true,
                note: "not run: the runner compiles them for compute capability 9.0 only".into(),
            })]
        }
        Err(e) => return vec![Err(e)],
    };
    vec![
        check_norm_gemm(c, &fk, &shape, false),
        check_norm_gemm(c, &fk, &shape, true),
        check_resid_gemm(c, &fk, &shape, true),
        check_resid_gemm(c, &fk, &shape, false),
    ]
}

/// `wg_norm_gemm_qkv` (`silu = false`) or `wg_norm_gemm_silu`.
fn check_norm_gemm(
    c: &mut Ctx,
    fk: &FusedKernels,
    s: &FusedShape,
    silu: bool,
) -> Result<KernelCheck, RunnerError> {
    let name = if silu {
        "wg_norm_gemm_silu"
    } else {
        "wg_norm_gemm_qkv"
    };
    let h = s.hidden;
    let (n_w, n_out) = if silu {
        (2 * s.inter, s.inter)
    } else {
        (s.qkv_dim, s.qkv_dim)
    };
    let w = rounded(&c.randn(n_w * h, 0.05));
    let gain = rounded(&c.randn(h, 1.0));
    let tiled = norm_tiles(&to_bf16(&w), n_w, h, if silu { 48 } else { 32 }, silu);
    let (wd, gd) = (c.up(&tiled)?, c.up_bf16(&gain)?);
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for m in [5usize, TILE_ROWS] {
        let resid = c.randn(TILE_ROWS * h, 3.0);
        let rd = c.up(&resid)?;
        let yd = c.up_bf16(&vec![0.0; TILE_ROWS * n_out])?;
        let a = NormGemm {
            resid: rd.ptr,
            gain: gd.ptr,
            w: wd.ptr,
            out: yd.ptr,
            rows: m,
        };
        if silu {
            fk.norm_silu(&c.stream, &a, EPS as f32, false)?;
        } else {
            fk.norm_qkv(&c.stream, &a, EPS as f32, false)?;
        }
        got.extend(c.down_bf16(&yd, TILE_ROWS * n_out)?);
        for r in 0..TILE_ROWS {
            let x = &resid[r * h..(r + 1) * h];
            let inv = 1.0 / (dot(x, x) / h as f64 + EPS).sqrt();
            let xg: Vec<f32> = x.iter().zip(&gain).map(|(a, g)| a * g).collect();
            let row = |j: usize| dot(&xg, &w[j * h..(j + 1) * h]) * inv;
            for j in 0..n_out {
                want.push(match (r < m, silu) {
                    (false, _) => 0.0,
                    (true, false) => row(j),
                    (true, true) => {
                        let (g, u) = (row(j), row(s.inter + j));
                        g / (1.0 + (-g).exp()) * u
                    }
                });
            }
        }
    }
    Ok(compare(
        name,
        &got,
        &want,
        1e-2,
        format!("m in {{5, 64}}, hidden {h}, {n_out} outputs"),
    ))
}

/// `wg_resid_gemm_o` (`o = true`) or `wg_resid_gemm_down`: resid += x · Wᵀ.
fn check_resid_gemm(
    c: &mut Ctx,
    fk: &FusedKernels,
    s: &FusedShape,
    o: bool,
) -> Result<KernelCheck, RunnerError> {
    let name = if o {
        "wg_resid_gemm_o"
    } else {
        "wg_resid_gemm_down"
    };
    let (n, k) = (s.hidden, if o { s.q_dim } else { s.inter });
    let w = rounded(&c.randn(n * k, 0.05));
    let wd = c.up(&resid_tiles(&to_bf16(&w), n, k))?;
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for m in [5usize, TILE_ROWS] {
        let x = rounded(&c.randn(TILE_ROWS * k, 1.0));
        let resid = c.randn(TILE_ROWS * n, 2.0);
        let (xd, rd) = (c.up_bf16(&x)?, c.up(&resid)?);
        fk.resid_gemm(&c.stream, o, xd.ptr, wd.ptr, rd.ptr, m, false)?;
        got.extend(c.down::<f32>(&rd, TILE_ROWS * n)?);
        for r in 0..TILE_ROWS {
            for j in 0..n {
                let add = if r < m {
                    dot(&x[r * k..(r + 1) * k], &w[j * k..(j + 1) * k])
                } else {
                    0.0
                };
                want.push(resid[r * n + j] as f64 + add);
            }
        }
    }
    Ok(compare(
        name,
        &got,
        &want,
        1e-4,
        format!("m in {{5, 64}}, k {k}, n {n}"),
    ))
}
