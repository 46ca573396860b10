//! Kernel self-test: each kernel (and the cuBLAS GEMM wrapper) on small
//! random inputs against a host computation in f64/f32, reported per kernel
//! and named with the shape and its grouped-query ratio. Used by
//! `cuda-check --quick` to localise a failure before the end-to-end
//! comparisons; [`attention_self_test`] is its attention part alone
//! (`cuda-check --gqa`, for every group size of the Qwen3 family).

use super::device::{self, launch, Arg, DeviceBuffer};
use super::kernels::{KernelShape, Kernels};
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
mod norm;
mod paged;
mod rope;
use attention::{check_attention, check_prefill_chunked, check_prefill_whole, DECODE_CHECKS};
use fused_rope::check_fused_rope;
use gemm::{check_gemm, check_gemm_lt, check_skinny, check_split_k_norm};
use host_io::check_argmax;
use norm::{check_embed_norm, check_rmsnorm, check_wide_rmsnorm};
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

/// One check: its name and what runs it.
type CheckFn = Box<dyn Fn(&mut Ctx) -> Result<KernelCheck, RunnerError>>;
type Check = fn(&mut Ctx) -> Result<KernelCheck, RunnerError>;

/// Runs every check for the given attention shape (the residual stream as
/// wide as the query heads, `num_q_heads * head_dim`); an error inside one
/// check becomes a failed entry and the rest still run.
pub fn kernel_self_test(
    head_dim: usize,
    num_q_heads: usize,
    num_kv_heads: usize,
    seed: u64,
) -> Vec<KernelCheck> {
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
    let wide = (num_q_heads * head_dim > 4096)
        .then_some(("add_rmsnorm wide rows", check_wide_rmsnorm as Check));
    let checks = checks.into_iter().chain(wide).map(boxed);
    run_checks(head_dim, num_q_heads, num_kv_heads, seed, checks.collect())
}

/// The attention checks alone (`cuda-check --gqa`): the prefill tiles on
/// whole prompts and on chunks over cached context, and every decode
/// kernel that takes the shape, as [`kernel_self_test`] runs them.
pub fn attention_self_test(
    head_dim: usize,
    num_q_heads: usize,
    num_kv_heads: usize,
    seed: u64,
) -> Vec<KernelCheck> {
    run_checks(head_dim, num_q_heads, num_kv_heads, seed, Vec::new())
}

fn boxed((name, f): (&str, Check)) -> (String, CheckFn) {
    (name.to_string(), Box::new(f))
}

/// Compiles the kernels for the shape, then runs `checks` and every
/// attention check, each named with the shape and its group size.
fn run_checks(
    head_dim: usize,
    num_q_heads: usize,
    num_kv_heads: usize,
    seed: u64,
    checks: Vec<(String, CheckFn)>,
) -> Vec<KernelCheck> {
    let mut out = Vec::new();
    let group = num_q_heads / num_kv_heads.max(1);
    let tag = format!("d{head_dim}/h{num_q_heads}/kv{num_kv_heads} group {group}");
    let shape = KernelShape {
        head_dim,
        num_q_heads,
        num_kv_heads,
        hidden_size: num_q_heads * head_dim,
    };
    let setup = (|| -> Result<Ctx, RunnerError> {
        let (ctx, stream) = device::open_device(0)?;
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
    let prefill: [(&str, Check); 2] = [
        ("attn_prefill whole prompts", check_prefill_whole),
        (
            "attn_prefill chunks over cached context",
            check_prefill_chunked,
        ),
    ];
    // The prefill tiles alone, then every decode attention kernel behind them,
    // and those that fuse q/k-norm + RoPE with it fused, each with and without splits.
    let decode = DECODE_CHECKS
        .into_iter()
        .filter(|(kernel, ..)| kernel.supports(head_dim, group, num_kv_heads))
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
        });
    let all = checks
        .into_iter()
        .chain(prefill.into_iter().map(boxed))
        .chain(decode);
    for (name, f) in all {
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
