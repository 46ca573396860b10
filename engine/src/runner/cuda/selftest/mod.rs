//! Kernel self-test: each kernel (and the cuBLAS GEMM wrapper) on small
//! random inputs against a host computation in f64/f32, reported per kernel.
//! Used by `cuda-check --quick` to localise a failure before the end-to-end
//! comparisons.

use super::device::{self, launch, Arg, DeviceBuffer};
use super::kernels::{KernelShape, Kernels};
use crate::runner::cuda::forward::NormParams;
use crate::runner::cuda::linear::Delta;
use crate::runner::RunnerError;
use cudarc::driver::{CudaContext, CudaStream};
use half::bf16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

mod attention;
mod fused_rope;
mod gemm;
mod host_io;
mod paged;
mod rope;
use attention::{check_attention, DECODE_CHECKS};
use fused_rope::check_fused_rope;
use gemm::{check_gemm, check_gemm_lt, check_skinny, check_split_k_norm};
use host_io::check_argmax;
use rope::check_rope;

/// One kernel's result: worst absolute error, relative L2 error, verdict.
#[derive(Debug, Clone)]
pub struct KernelCheck {
    pub name: String,
    pub max_abs_err: f64,
    pub rel_l2_err: f64,
    pub pass: bool,
    pub note: String,
}

struct Ctx {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    k: Kernels,
    shape: KernelShape,
    rng: StdRng,
}

fn compare(name: &str, got: &[f32], want: &[f64], tol: f64, note: String) -> KernelCheck {
    let mut max_abs: f64 = 0.0;
    let (mut num, mut den) = (0.0f64, 0.0f64);
    let mut finite = got.len() == want.len();
    for (g, w) in got.iter().zip(want) {
        if !g.is_finite() {
            finite = false;
        }
        let d = (*g as f64 - w).abs();
        max_abs = max_abs.max(d);
        num += d * d;
        den += w * w;
    }
    let rel = (num / den.max(1e-30)).sqrt();
    KernelCheck {
        name: name.into(),
        max_abs_err: max_abs,
        rel_l2_err: rel,
        pass: finite && rel < tol,
        note,
    }
}

impl Ctx {
    fn randn(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| (self.rng.random::<f32>() * 2.0 - 1.0) * scale)
            .collect()
    }
    fn up_bf16(&self, v: &[f32]) -> Result<DeviceBuffer, RunnerError> {
        let b: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
        DeviceBuffer::from_host(&self.ctx, &b)
    }
    fn up<T: Copy>(&self, v: &[T]) -> Result<DeviceBuffer, RunnerError> {
        DeviceBuffer::from_host(&self.ctx, v)
    }
    fn down_bf16(&self, b: &DeviceBuffer, n: usize) -> Result<Vec<f32>, RunnerError> {
        let mut h = vec![bf16::ZERO; n];
        device::copy_dtoh_async(&mut h, b.ptr, &self.stream)?;
        device::sync(&self.stream)?;
        Ok(h.iter().map(|x| x.to_f32()).collect())
    }
    fn down<T: Copy + Default>(&self, b: &DeviceBuffer, n: usize) -> Result<Vec<T>, RunnerError> {
        let mut h = vec![T::default(); n];
        device::copy_dtoh_async(&mut h, b.ptr, &self.stream)?;
        device::sync(&self.stream)?;
        Ok(h)
    }
}

fn rounded(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| bf16::from_f32(x).to_f32()).collect()
}

/// The host reference of `add_rmsnorm`'s output for one row `v` (the residual
/// plus its delta), in f64, with eps 1e-6 as every norm check launches it.
fn host_rmsnorm<'a>(v: &'a [f64], gain: &'a [f32]) -> impl Iterator<Item = f64> + 'a {
    let inv = 1.0 / (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64 + 1e-6).sqrt();
    v.iter().zip(gain).map(move |(x, g)| x * inv * *g as f64)
}

/// Runs every check for the given attention shape; an error inside one check
/// becomes a failed entry and the rest still run.
pub fn kernel_self_test(
    head_dim: usize,
    num_q_heads: usize,
    num_kv_heads: usize,
    seed: u64,
) -> Vec<KernelCheck> {
    let mut out = Vec::new();
    let tag = format!("d{head_dim}/h{num_q_heads}/kv{num_kv_heads}");
    let setup = (|| -> Result<Ctx, RunnerError> {
        let (ctx, stream) = device::open_device(0)?;
        let shape = KernelShape {
            head_dim,
            num_q_heads,
            num_kv_heads,
        };
        let k = Kernels::compile(&ctx, shape)?;
        Ok(Ctx {
            ctx,
            stream,
            k,
            shape,
            rng: StdRng::seed_from_u64(seed),
        })
    })();
    let mut c = match setup {
        Ok(c) => c,
        Err(e) => {
            out.push(KernelCheck {
                name: format!("compile {tag}"),
                max_abs_err: f64::NAN,
                rel_l2_err: f64::NAN,
                pass: false,
                note: device::error_chain(&e),
            });
            return out;
        }
    };
    type CheckFn = Box<dyn Fn(&mut Ctx) -> Result<KernelCheck, RunnerError>>;
    type Check = fn(&mut Ctx) -> Result<KernelCheck, RunnerError>;
    let checks: [(&str, Check); 9] = [
        ("gemm", check_gemm),
        ("gemm (cuBLASLt)", check_gemm_lt),
        ("skinny_gemm", check_skinny),
        ("add_rmsnorm", check_rmsnorm),
        ("split-K gemm + add_rmsnorm", check_split_k_norm),
        ("silu_mul", check_silu),
        ("argmax_rows", check_argmax),
        ("qk_norm_rope_cache", check_rope),
        ("add_rmsnorm from embeddings", check_embed_norm),
    ];
    // Every decode attention kernel behind the prefill kernel, and those that
    // fuse q/k-norm + RoPE with it fused, each with and without splits.
    let checks: Vec<(String, CheckFn)> = checks
        .into_iter()
        .map(|(name, f)| (name.to_string(), Box::new(f) as CheckFn))
        .chain(
            DECODE_CHECKS
                .into_iter()
                .filter(|(kernel, ..)| {
                    let KernelShape {
                        head_dim,
                        num_q_heads,
                        num_kv_heads,
                    } = c.shape;
                    kernel.supports(head_dim, num_q_heads / num_kv_heads, num_kv_heads)
                })
                .map(|(kernel, nsplit, fused)| {
                    let name = format!(
                        "decode {kernel:?} {}(nsplit={nsplit})",
                        if fused { "fused rope " } else { "" }
                    );
                    let f = move |c: &mut Ctx| {
                        if fused {
                            check_fused_rope(c, nsplit, kernel)
                        } else {
                            check_attention(c, nsplit, kernel)
                        }
                    };
                    (name, Box::new(f) as CheckFn)
                }),
        )
        .collect();
    for (name, f) in checks {
        let r = f(&mut c).unwrap_or_else(|e| KernelCheck {
            name: String::new(),
            max_abs_err: f64::NAN,
            rel_l2_err: f64::NAN,
            pass: false,
            note: format!("error: {}", device::error_chain(&e)),
        });
        out.push(KernelCheck {
            name: format!("{name} [{tag}]"),
            ..r
        });
    }
    out
}

fn check_rmsnorm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let (rows, h) = (3usize, 200usize);
    let resid = c.randn(rows * h, 2.0);
    let delta = rounded(&c.randn(rows * h, 1.0));
    let w = rounded(&c.randn(h, 1.0));
    let rd = c.up(&resid)?;
    let (dd, wd) = (c.up_bf16(&delta)?, c.up_bf16(&w)?);
    let sel = [2i32, 0];
    let seld = c.up(&sel)?;
    let od = DeviceBuffer::alloc(&c.ctx, rows * h * 2).map_err(|e| device::dev_err("alloc", e))?;
    launch(
        &c.stream,
        &c.k.add_rmsnorm,
        "add_rmsnorm",
        (2, 1, 1),
        256,
        (h * 4) as u32,
        &NormParams {
            resid: rd.ptr,
            delta: Delta::bf16(dd.ptr),
            weight: wd.ptr,
            out: od.ptr,
            rows: seld.ptr,
            hidden: h,
            eps: 1e-6,
            write_resid: true,
            embed: 0,
            tokens: 0,
        }
        .args(),
    )?;
    let got = c.down_bf16(&od, 2 * h)?;
    let new_resid: Vec<f32> = c.down(&rd, rows * h)?;
    let mut want = Vec::new();
    for &r in &sel {
        let r = r as usize;
        let v: Vec<f64> = (0..h)
            .map(|i| resid[r * h + i] as f64 + delta[r * h + i] as f64)
            .collect();
        want.extend(host_rmsnorm(&v, &w));
    }
    let mut chk = compare(
        "add_rmsnorm",
        &got,
        &want,
        1e-2,
        "rows [2,0] of 3, hidden 200".into(),
    );
    let resid_ok = (resid[h] - new_resid[h]).abs() == 0.0
        && (new_resid[0] - (resid[0] + delta[0])).abs() < 1e-5;
    if !resid_ok {
        chk.pass = false;
        chk.note += "; residual write-back wrong";
    }
    Ok(chk)
}

fn check_silu(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let (t, inter) = (3usize, 104usize);
    let gu = rounded(&c.randn(t * 2 * inter, 4.0));
    let gd = c.up_bf16(&gu)?;
    let ad = DeviceBuffer::alloc(&c.ctx, t * inter * 2).map_err(|e| device::dev_err("alloc", e))?;
    let total = (t * inter / 8) as i64;
    launch(
        &c.stream,
        &c.k.silu_mul,
        "silu_mul",
        (2, 1, 1),
        256,
        0,
        &[
            Arg::Ptr(gd.ptr),
            Arg::Ptr(ad.ptr),
            Arg::I32(inter as i32),
            Arg::I64(total),
        ],
    )?;
    let got = c.down_bf16(&ad, t * inter)?;
    let want: Vec<f64> = (0..t * inter)
        .map(|i| {
            let (r, j) = (i / inter, i % inter);
            let g = gu[r * 2 * inter + j] as f64;
            g / (1.0 + (-g).exp()) * gu[r * 2 * inter + inter + j] as f64
        })
        .collect();
    Ok(compare("silu_mul", &got, &want, 1e-2, String::new()))
}

/// The first layer's norm: the residual stream starts from the token embeddings.
fn check_embed_norm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let (vocab, h) = (50usize, 200usize);
    let e = rounded(&c.randn(vocab * h, 1.0));
    let w = rounded(&c.randn(h, 1.0));
    let (ed, wd) = (c.up_bf16(&e)?, c.up_bf16(&w)?);
    let toks = [3i32, 49, 0];
    let td = c.up(&toks)?;
    // Stale values in the residual stream must be overwritten, not added to.
    let rd = c.up(&vec![5.0f32; 3 * h])?;
    let od = DeviceBuffer::alloc(&c.ctx, 3 * h * 2).map_err(|e| device::dev_err("alloc", e))?;
    launch(
        &c.stream,
        &c.k.add_rmsnorm,
        "add_rmsnorm",
        (3, 1, 1),
        256,
        0,
        &NormParams {
            resid: rd.ptr,
            delta: Delta::NONE,
            weight: wd.ptr,
            out: od.ptr,
            rows: 0,
            hidden: h,
            eps: 1e-6,
            write_resid: true,
            embed: ed.ptr,
            tokens: td.ptr,
        }
        .args(),
    )?;
    let got = c.down_bf16(&od, 3 * h)?;
    let resid: Vec<f32> = c.down(&rd, 3 * h)?;
    let rows: Vec<&[f32]> = toks
        .iter()
        .map(|&t| &e[t as usize * h..(t as usize + 1) * h])
        .collect();
    let mut want = Vec::new();
    for row in &rows {
        let v: Vec<f64> = row.iter().map(|&x| x as f64).collect();
        want.extend(host_rmsnorm(&v, &w));
    }
    let mut chk = compare(
        "add_rmsnorm from embeddings",
        &got,
        &want,
        1e-2,
        "tokens [3, 49, 0] of 50, hidden 200".into(),
    );
    if resid != rows.concat() {
        chk.pass = false;
        chk.note += "; residual stream is not the embedding rows";
    }
    Ok(chk)
}
