//! The prefetch GEMM (plain and with SiLU·mul fused, operands tiled by
//! `tile_for_wgmma`) against host products in f64 at 5–64 rows, rows past
//! `m` of the output untouched; and `add_rmsnorm`'s tiled output against its
//! row-major one. Reported as skipped on devices that do not run the GEMM
//! (not sm_90).

use super::gemm::host_product;
use super::{compare, rounded, Ctx, KernelCheck};
use crate::runner::cuda::device::{self, launch, DeviceBuffer};
use crate::runner::cuda::forward::NormParams;
use crate::runner::cuda::linear::Delta;
use crate::runner::cuda::prefetch_gemm::{
    tile_weights, Epilogue, PrefetchGemm, PREFETCH_GEMM_K, PREFETCH_X_ROWS,
};
use crate::runner::RunnerError;

/// A bf16 bit pattern no product here yields (a NaN), left in rows past `m`.
const SENTINEL: u16 = 0x7fc1;

fn skipped() -> KernelCheck {
    KernelCheck {
        name: "prefetch_gemm".into(),
        max_abs_err: 0.0,
        rel_l2_err: 0.0,
        pass: true,
        note: "skipped: needs an sm_90 device (wgmma)".into(),
    }
}

/// Element (row, col) of a `cols`-wide matrix in the tiled layout.
fn tiled_index(row: usize, col: usize, cols: usize) -> usize {
    ((row / 8) * (cols / 8) + col / 8) * 64 + (row % 8) * 8 + col % 8
}

pub(super) fn check_prefetch_gemm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    if !c.k.prefetch_ok {
        return Ok(skipped());
    }
    let (mut got_all, mut want_all) = (Vec::new(), Vec::new());
    let mut untouched = true;
    let mut per_case = Vec::new();
    let k = PREFETCH_GEMM_K;
    // (rows, weight rows, epilogue): 1-3 clusters of 2 blocks; K is the kernels' one K.
    let cases = [
        (17usize, 64usize, Epilogue::Plain),
        (5, 128, Epilogue::Plain),
        (64, 192, Epilogue::Plain),
        (17, 96, Epilogue::SiluMul),
        (48, 192, Epilogue::SiluMul),
        (64, 288, Epilogue::SiluMul),
    ];
    for (m, n, epilogue) in cases {
        let mut x = rounded(&c.randn(m * k, 1.0));
        let w = rounded(&c.randn(n * k, 0.1));
        // X's buffer holds 64 rows; the rows past m hold garbage the kernel must not mix in.
        let mut x64 = x.clone();
        x64.extend(c.randn((PREFETCH_X_ROWS - m) * k, 1e3));
        let (xd, wd) = (c.up_bf16(&x64)?, c.up_bf16(&w)?);
        let x_tiled = tile_weights(&c.stream, &c.k, xd.ptr, PREFETCH_X_ROWS, k)?;
        let w_tiled = tile_weights(&c.stream, &c.k, wd.ptr, n, k)?;
        x.truncate(m * k);
        let cols = if epilogue == Epilogue::Plain { n } else { n / 2 };
        let rows = m.next_multiple_of(16);
        let y = DeviceBuffer::from_host(&c.ctx, &vec![SENTINEL; rows * cols])
            .map_err(|e| device::dev_err("upload", e))?;
        PrefetchGemm {
            x_tiled: x_tiled.ptr,
            w_tiled: w_tiled.ptr,
            y: y.ptr,
            m,
            n,
            k,
            epilogue,
        }
        .enqueue(&c.stream, &c.k)?;
        let out: Vec<u16> = c.down(&y, rows * cols)?;
        untouched &= out[m * cols..].iter().all(|&b| b == SENTINEL);
        let got: Vec<f32> = out[..m * cols]
            .iter()
            .map(|&b| half::bf16::from_bits(b).to_f32())
            .collect();
        let full = host_product(&x, &w, m, n, k);
        let want: Vec<f64> = match epilogue {
            Epilogue::Plain => full,
            Epilogue::SiluMul => (0..m * cols)
                .map(|i| {
                    let (r, j) = (i / cols, i % cols);
                    // The kernel rounds gate and up to bf16 first, as the GEMM's output would be.
                    let round = |v: f64| half::bf16::from_f64(v).to_f64();
                    let g = round(full[r * n + j]);
                    g / (1.0 + (-g).exp()) * round(full[r * n + cols + j])
                })
                .collect(),
        };
        let one = compare("", &got, &want, 1e-2, String::new());
        per_case.push(format!("{m}x{n} {:.1e}", one.rel_l2_err));
        got_all.extend(got);
        want_all.extend(want);
    }
    let mut check = compare(
        "prefetch_gemm",
        &got_all,
        &want_all,
        1e-2,
        format!(
            "m 5-64, plain and SiLU·mul, k {k}; rel. error by case: {}",
            per_case.join(", ")
        ),
    );
    if !untouched {
        check.pass = false;
        check.note.push_str("; wrote rows past m");
    }
    Ok(check)
}

/// `add_rmsnorm` with its output tiled: the same values, bit for bit, as its
/// row-major output, at the tiled positions (40 rows of 1,024).
pub(super) fn check_norm_tiled(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    if !c.k.prefetch_ok {
        return Ok(KernelCheck {
            name: "add_rmsnorm tiled".into(),
            ..skipped()
        });
    }
    let (m, h) = (40usize, PREFETCH_GEMM_K);
    let resid = c.randn(m * h, 2.0);
    let gain = rounded(&c.randn(h, 1.0));
    let (rd, gd) = (c.up(&resid)?, c.up_bf16(&gain)?);
    let alloc = |bytes| DeviceBuffer::alloc(&c.ctx, bytes).map_err(|e| device::dev_err("alloc", e));
    let (plain, tiled) = (alloc(m * h * 2)?, alloc(PREFETCH_X_ROWS * h * 2)?);
    for (out, is_tiled) in [(&plain, false), (&tiled, true)] {
        launch(
            &c.stream,
            &c.k.add_rmsnorm,
            "add_rmsnorm",
            (m as u32, 1, 1),
            256,
            0,
            &NormParams {
                resid: rd.ptr,
                delta: Delta::NONE,
                weight: gd.ptr,
                out: out.ptr,
                rows: 0,
                hidden: h,
                eps: 1e-6,
                write_resid: false,
                embed: 0,
                tokens: 0,
                tiled: is_tiled,
            }
            .args(),
        )?;
    }
    let want: Vec<u16> = c.down(&plain, m * h)?;
    let got: Vec<u16> = c.down(&tiled, PREFETCH_X_ROWS * h)?;
    let mismatches = (0..m * h)
        .filter(|&i| got[tiled_index(i / h, i % h, h)] != want[i])
        .count();
    Ok(KernelCheck {
        name: "add_rmsnorm tiled".into(),
        max_abs_err: mismatches as f64,
        rel_l2_err: 0.0,
        pass: mismatches == 0,
        note: format!("{m} rows of {h}: {mismatches} values differ from the row-major output (max_abs = that count)"),
    })
}
