//! The cuBLAS wrapper and the skinny GEMM against host products in f64.

use super::{compare, rounded, Ctx, KernelCheck};
use crate::runner::cuda::device::{self, DeviceBuffer};
use crate::runner::cuda::gemm::{Gemm, OutType};
use crate::runner::cuda::linear::{skinny_gemm, GemmArgs};
use crate::runner::RunnerError;

pub(super) fn check_gemm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let (m, n, k) = (5, 96, 64);
    let x = rounded(&c.randn(m * k, 1.0));
    let w = rounded(&c.randn(n * k, 1.0));
    let (xd, wd) = (c.up_bf16(&x)?, c.up_bf16(&w)?);
    let yd = DeviceBuffer::alloc(&c.ctx, m * n * 4).map_err(|e| device::dev_err("alloc", e))?;
    let g = Gemm::new(&c.ctx, &c.stream)?;
    g.linear(xd.ptr, wd.ptr, yd.ptr, m, n, k, OutType::F32)?;
    let got: Vec<f32> = c.down(&yd, m * n)?;
    let mut want = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k)
                .map(|p| x[i * k + p] as f64 * w[j * k + p] as f64)
                .sum();
        }
    }
    Ok(compare(
        "gemm",
        &got,
        &want,
        1e-4,
        format!("{m}x{n}x{k} f32 out"),
    ))
}

/// The skinny GEMM against a host product for 1, 13, 40 and 64 rows (bf16 and f32 output).
pub(super) fn check_skinny(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let (n, k) = (48usize, 512usize);
    let w = rounded(&c.randn(n * k, 1.0));
    let wd = c.up_bf16(&w)?;
    let (mut got_all, mut want_all) = (Vec::new(), Vec::new());
    for (m, f32_out) in [(1usize, false), (13, true), (40, false), (64, true)] {
        let x = rounded(&c.randn(m * k, 1.0));
        let xd = c.up_bf16(&x)?;
        let yd = DeviceBuffer::alloc(&c.ctx, m * n * 4).map_err(|e| device::dev_err("alloc", e))?;
        let a = GemmArgs {
            x: xd.ptr,
            w: wd.ptr,
            y: yd.ptr,
            m,
            n,
            k,
            out: if f32_out { OutType::F32 } else { OutType::Bf16 },
        };
        skinny_gemm(&c.stream, &c.k, &a, false)?;
        if f32_out {
            got_all.extend(c.down::<f32>(&yd, m * n)?);
        } else {
            got_all.extend(c.down_bf16(&yd, m * n)?);
        }
        for i in 0..m {
            for j in 0..n {
                want_all.push(
                    (0..k)
                        .map(|p| x[i * k + p] as f64 * w[j * k + p] as f64)
                        .sum::<f64>(),
                );
            }
        }
    }
    Ok(compare(
        "skinny_gemm",
        &got_all,
        &want_all,
        1e-2,
        "m in {1,13,40,64}, n 48, k 512".into(),
    ))
}
