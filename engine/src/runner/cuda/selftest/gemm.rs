//! The cuBLAS wrapper, the skinny GEMM and the split-K residual product
//! against host products in f64.

use super::norm::host_rmsnorm;
use super::{compare, rounded, Ctx, KernelCheck};
use crate::runner::cuda::device::{self, launch, DeviceBuffer};
use crate::runner::cuda::forward::NormParams;
use crate::runner::cuda::gemm::{Gemm, GemmArgs, OutType};
use crate::runner::cuda::linear::{skinny_gemm, Delta};
use crate::runner::RunnerError;

pub(super) fn check_gemm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let (m, n, k) = (5, 96, 64);
    let x = rounded(&c.randn(m * k, 1.0));
    let w = rounded(&c.randn(n * k, 1.0));
    let (xd, wd) = (c.up_bf16(&x)?, c.up_bf16(&w)?);
    let yd = DeviceBuffer::alloc(&c.ctx, m * n * 4).map_err(|e| device::dev_err("alloc", e))?;
    let g = Gemm::new(&c.ctx, &c.stream)?;
    g.linear(&GemmArgs {
        x: xd.ptr,
        w: wd.ptr,
        y: yd.ptr,
        m,
        n,
        k,
        out: OutType::F32,
    })?;
    let got: Vec<f32> = c.down(&yd, m * n)?;
    let want = host_product(&x, &w, m, n, k);
    Ok(compare(
        "gemm",
        &got,
        &want,
        1e-4,
        format!("{m}x{n}x{k} f32 out"),
    ))
}

/// The host product `x[m, k] · w[n, k]ᵀ` in f64.
fn host_product(x: &[f32], w: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut y = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k)
                .map(|p| x[i * k + p] as f64 * w[j * k + p] as f64)
                .sum();
        }
    }
    y
}

/// cuBLASLt (gemm_lt.rs) against host products: every heuristic offer, and
/// the tuned path (note, tune, run), for a bf16 product and an fp32 product
/// split over K in strided partials (summed on the host here).
pub(super) fn check_gemm_lt(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let g = Gemm::new(&c.ctx, &c.stream)?;
    let (mut got_all, mut want_all, mut runs) = (Vec::new(), Vec::new(), 0);
    for (m, n, k, splits, out) in [
        (40usize, 96usize, 256usize, 1usize, OutType::Bf16),
        (48, 64, 512, 4, OutType::F32),
    ] {
        let x = rounded(&c.randn(m * k, 1.0));
        let w = rounded(&c.randn(n * k, 1.0));
        let (xd, wd) = (c.up_bf16(&x)?, c.up_bf16(&w)?);
        let yd = DeviceBuffer::alloc(&c.ctx, splits * m * n * 4)
            .map_err(|e| device::dev_err("alloc", e))?;
        let a = GemmArgs {
            x: xd.ptr,
            w: wd.ptr,
            y: yd.ptr,
            m,
            n,
            k,
            out,
        };
        let want = host_product(&x, &w, m, n, k);
        let mut collect = |c: &mut Ctx| -> Result<(), RunnerError> {
            let got: Vec<f32> = match out {
                OutType::Bf16 => c.down_bf16(&yd, m * n)?,
                OutType::F32 => {
                    let parts: Vec<f32> = c.down(&yd, splits * m * n)?;
                    (0..m * n)
                        .map(|i| (0..splits).map(|s| parts[s * m * n + i]).sum())
                        .collect()
                }
            };
            got_all.extend(got);
            want_all.extend(want.iter().copied());
            Ok(())
        };
        let run = |a: &GemmArgs| match splits {
            1 => g.linear(a),
            s => g.linear_split_k(a, s),
        };
        for rank in 0.. {
            if !g.run_offer(&a, splits, rank)? {
                break;
            }
            collect(c)?;
            runs += 1;
        }
        g.lt.set_noting(true);
        run(&a)?;
        g.lt.set_noting(false);
        g.tune_noted();
        run(&a)?;
        collect(c)?;
    }
    let reports = g.tune_reports();
    if let Some(e) = reports.iter().find_map(|r| r.error.clone()) {
        return Err(RunnerError::Device {
            what: "GEMM tuning".into(),
            source: e.into(),
        });
    }
    let chosen: Vec<&str> = reports.iter().map(|r| r.chosen).collect();
    Ok(compare(
        "gemm (cuBLASLt)",
        &got_all,
        &want_all,
        1e-2,
        format!("{runs} heuristic offers over 40x96x256 bf16 and 48x64x512 in 4 fp32 slices; tuned path took {chosen:?}"),
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
        want_all.extend(host_product(&x, &w, m, n, k));
    }
    Ok(compare(
        "skinny_gemm",
        &got_all,
        &want_all,
        1e-2,
        "m in {1,13,40,64}, n 48, k 512".into(),
    ))
}

/// A residual product split over K (fp32 partials from the strided-batched
/// GEMM) summed by `add_rmsnorm`: the residual written back and the normed
/// rows against the host, for 40 rows (padded to 48, as the engine pads them).
pub(super) fn check_split_k_norm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let (m, rows, n, k, splits) = (40usize, 48usize, 256usize, 768usize, 3usize);
    let x = rounded(&c.randn(rows * k, 1.0));
    let w = rounded(&c.randn(n * k, 0.1));
    let gain = rounded(&c.randn(n, 1.0));
    let resid = c.randn(m * n, 2.0);
    let (xd, wd, gd, rd) = (
        c.up_bf16(&x)?,
        c.up_bf16(&w)?,
        c.up_bf16(&gain)?,
        c.up(&resid)?,
    );
    let alloc = |bytes| DeviceBuffer::alloc(&c.ctx, bytes).map_err(|e| device::dev_err("alloc", e));
    let (parts, out) = (alloc(splits * rows * n * 4)?, alloc(m * n * 2)?);
    let g = Gemm::new(&c.ctx, &c.stream)?;
    let a = GemmArgs {
        x: xd.ptr,
        w: wd.ptr,
        y: parts.ptr,
        m: rows,
        n,
        k,
        out: OutType::F32,
    };
    g.linear_split_k(&a, splits)?;
    launch(
        &c.stream,
        &c.k.add_rmsnorm,
        "add_rmsnorm",
        (m as u32, 1, 1),
        256,
        0,
        &NormParams {
            resid: rd.ptr,
            delta: Delta::split(parts.ptr, splits, rows * n),
            weight: gd.ptr,
            out: out.ptr,
            rows: 0,
            hidden: n,
            eps: 1e-6,
            write_resid: true,
            embed: 0,
            tokens: 0,
        }
        .args(),
    )?;
    let mut got = c.down_bf16(&out, m * n)?;
    got.extend(c.down::<f32>(&rd, m * n)?);
    let (mut normed, mut new_resid) = (Vec::new(), Vec::new());
    for i in 0..m {
        let v: Vec<f64> = (0..n)
            .map(|j| {
                let y: f64 = (0..k)
                    .map(|p| x[i * k + p] as f64 * w[j * k + p] as f64)
                    .sum();
                resid[i * n + j] as f64 + y
            })
            .collect();
        normed.extend(host_rmsnorm(&v, &gain));
        new_resid.extend(v);
    }
    normed.extend(new_resid);
    // The residual half is fp32 throughout and the normed half is rounded to bf16 once.
    Ok(compare(
        "split-K gemm + add_rmsnorm",
        &got,
        &normed,
        5e-3,
        format!(
            "{m} rows (padded {rows}), n {n}, k {k} in {splits} slices; normed rows and residual"
        ),
    ))
}
