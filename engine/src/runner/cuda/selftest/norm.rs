//! The `add_rmsnorm` checks: rows of a residual stream plus a delta, rows
//! picked by index, the first layer's rows from the embeddings, and rows as
//! wide as the model's residual stream where it is past the kernel's 4,096
//! of four chunks a thread.

use super::{compare, rounded, Ctx, KernelCheck};
use crate::runner::cuda::device::{self, launch, DeviceBuffer};
use crate::runner::cuda::forward::NormParams;
use crate::runner::cuda::linear::Delta;
use crate::runner::RunnerError;

/// The host reference of `add_rmsnorm`'s output for one row `v` (the residual
/// plus its delta), in f64, with eps 1e-6 as every norm check launches it.
pub(super) fn host_rmsnorm<'a>(v: &'a [f64], gain: &'a [f32]) -> impl Iterator<Item = f64> + 'a {
    let inv = 1.0 / (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64 + 1e-6).sqrt();
    v.iter().zip(gain).map(move |(x, g)| x * inv * *g as f64)
}

pub(super) fn check_rmsnorm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    check_rmsnorm_at(c, 200)
}

/// Rows of the shape's own hidden size (more than four chunks a thread past 4,096).
pub(super) fn check_wide_rmsnorm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    let h = c.shape.hidden_size;
    check_rmsnorm_at(c, h)
}

/// `add_rmsnorm` over rows of `h` (from a residual stream plus a bf16 delta,
/// rows picked by index, the sum written back).
fn check_rmsnorm_at(c: &mut Ctx, h: usize) -> Result<KernelCheck, RunnerError> {
    let rows = 3usize;
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
        format!("rows [2,0] of 3, hidden {h}"),
    );
    let resid_ok = (resid[h] - new_resid[h]).abs() == 0.0
        && (new_resid[0] - (resid[0] + delta[0])).abs() < 1e-5;
    if !resid_ok {
        chk.pass = false;
        chk.note += "; residual write-back wrong";
    }
    Ok(chk)
}

/// The first layer's norm: the residual stream starts from the token embeddings.
pub(super) fn check_embed_norm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
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
