//! The prefetch GEMM (plain and with SiLU·mul fused, weights tiled by
//! `tile_for_wgmma`) against host products in f64, at 5–64 rows; rows past
//! `m` of the output must stay untouched. Reported as skipped on devices
//! that do not run it (not sm_90).

use super::gemm::host_product;
use super::{compare, rounded, Ctx, KernelCheck};
use crate::runner::cuda::device::{self, DeviceBuffer};
use crate::runner::cuda::prefetch_gemm::{tile_weights, Epilogue, PrefetchGemm, PREFETCH_GEMM_K};
use crate::runner::RunnerError;

/// A bf16 bit pattern no product here yields (a NaN), left in rows past `m`.
const SENTINEL: u16 = 0x7fc1;

pub(super) fn check_prefetch_gemm(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    if !c.k.prefetch_ok {
        return Ok(KernelCheck {
            name: "prefetch_gemm".into(),
            max_abs_err: 0.0,
            rel_l2_err: 0.0,
            pass: true,
            note: "skipped: needs an sm_90 device (wgmma)".into(),
        });
    }
    let (mut got_all, mut want_all) = (Vec::new(), Vec::new());
    let mut untouched = true;
    let mut per_case = Vec::new();
    // (rows, weight rows, epilogue): 1-3 clusters of 4 blocks; K is the kernels' one K.
    let k = PREFETCH_GEMM_K;
    let cases = [
        (17usize, 256usize, Epilogue::Plain),
        (5, 512, Epilogue::Plain),
        (64, 768, Epilogue::Plain),
        (17, 256, Epilogue::SiluMul),
        (48, 512, Epilogue::SiluMul),
        (64, 768, Epilogue::SiluMul),
    ];
    for (m, n, epilogue) in cases {
        let x = rounded(&c.randn(m * k, 1.0));
        let w = rounded(&c.randn(n * k, 0.1));
        let (xd, wd) = (c.up_bf16(&x)?, c.up_bf16(&w)?);
        let tiled = tile_weights(&c.stream, &c.k, wd.ptr, n, k)?;
        let cols = if epilogue == Epilogue::Plain {
            n
        } else {
            n / 2
        };
        let rows = m.next_multiple_of(16);
        let y = DeviceBuffer::from_host(&c.ctx, &vec![SENTINEL; rows * cols])
            .map_err(|e| device::dev_err("upload", e))?;
        PrefetchGemm {
            x: xd.ptr,
            w_tiled: tiled.ptr,
            y: y.ptr,
            m,
            n,
            k,
            epilogue,
        }
        .enqueue(&c.stream, &c.k)?;
        let out: Vec<u16> = c.down(&y, rows * cols)?;
        untouched &= out[m * cols..].iter().all(|&b| b == SENTINEL);
        got_all.extend(
            out[..m * cols]
                .iter()
                .map(|&b| half::bf16::from_bits(b).to_f32()),
        );
        let full = host_product(&x, &w, m, n, k);
        let before = want_all.len();
        match epilogue {
            Epilogue::Plain => want_all.extend(full),
            Epilogue::SiluMul => want_all.extend((0..m * cols).map(|i| {
                let (r, j) = (i / cols, i % cols);
                // The kernel rounds gate and up to bf16 first, as the GEMM's output would be.
                let round = |v: f64| half::bf16::from_f64(v).to_f64();
                let g = round(full[r * n + j]);
                g / (1.0 + (-g).exp()) * round(full[r * n + cols + j])
            })),
        }
        let one = compare(
            "",
            &got_all[before..],
            &want_all[before..],
            1e-2,
            String::new(),
        );
        per_case.push(format!("{m}x{n} {:.1e}", one.rel_l2_err));
    }
    let mut check = compare(
        "prefetch_gemm",
        &got_all,
        &want_all,
        1e-2,
        format!(
            "m 5-64, plain and SiLU·mul, k 1024; rel. error by case: {}",
            per_case.join(", ")
        ),
    );
    if !untouched {
        check.pass = false;
        check.note.push_str("; wrote rows past m");
    }
    Ok(check)
}
