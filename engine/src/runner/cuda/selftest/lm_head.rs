//! `lm_head_argmax` against a host argmax of f64 scores: several row counts,
//! vocabulary sizes that leave a partial 16-row tile, grids with more and
//! fewer warps than tiles, and an exact tie between two vocabulary rows.

use super::{rounded, Ctx, KernelCheck};
use crate::runner::cuda::device::{launch, Arg};
use crate::runner::cuda::head::{fused_head_smem, fused_head_variant};
use crate::runner::cuda::kernels::LM_HEAD_ARGMAX_THREADS;
use crate::runner::cuda::meta::argmax_index;
use crate::runner::RunnerError;

pub(super) fn check_lm_head_argmax(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    // (rows, K, vocabulary, blocks): 64 rows with 7 blocks of 8 warps (several tiles each),
    // 13 rows with 40 blocks (320 warps for 188 tiles: some warps have none), 1 row, and K
    // of 64 and 320 (a tile's last group of 8 K steps partly past K).
    let cases = [
        (64usize, 512usize, 3007usize, 7u32),
        (13, 256, 3007, 40),
        (1, 512, 3007, 3),
        (24, 64, 3007, 5),
        (40, 320, 1000, 2),
    ];
    let (mut wrong, mut worst_gap) = (0usize, 0f64);
    let mut notes = Vec::new();
    for (rows, k, vocab, blocks) in cases {
        // Two vocabulary rows that equal each other and beat every other row for
        // non-negative inputs: the lower one must win.
        let ties = [5, vocab - 7];
        let mut w = c.randn(vocab * k, 1.0);
        for &r in &ties {
            w[r * k..(r + 1) * k].fill(1.0);
        }
        let w = rounded(&w);
        // Odd rows non-negative (the tie rows win), even rows of either sign.
        let mut x = c.randn(rows * k, 1.0);
        for (i, v) in x.iter_mut().enumerate() {
            if (i / k) % 2 == 1 {
                *v = v.abs();
            }
        }
        let x = rounded(&x);
        let (xd, wd) = (c.up_bf16(&x)?, c.up_bf16(&w)?);
        let bd = c.up(&vec![0u64; rows])?;
        let variant = fused_head_variant(rows).unwrap_or(3);
        launch(
            &c.stream,
            &c.k.lm_head_argmax[variant],
            "lm_head_argmax",
            (blocks, 1, 1),
            LM_HEAD_ARGMAX_THREADS,
            fused_head_smem(rows, k),
            &[
                Arg::Ptr(xd.ptr),
                Arg::Ptr(wd.ptr),
                Arg::Ptr(bd.ptr),
                Arg::I32(rows as i32),
                Arg::I32(k as i32),
                Arg::I32(vocab as i32),
            ],
        )?;
        let keys: Vec<u64> = c.down(&bd, rows)?;
        let mut picks = Vec::new();
        for (r, &key) in keys.iter().enumerate() {
            let xr = &x[r * k..(r + 1) * k];
            let scores: Vec<f64> = (0..vocab)
                .map(|v| {
                    w[v * k..(v + 1) * k]
                        .iter()
                        .zip(xr)
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum()
                })
                .collect();
            let best = (0..vocab).fold(0, |b, v| if scores[v] > scores[b] { v } else { b });
            let got = argmax_index(key) as usize;
            // A different pick is only acceptable as a near-tie of fp32 sums, and never in
            // the exact-tie rows, which must give the lower index.
            let gap = if got < vocab {
                scores[best] - scores[got]
            } else {
                f64::INFINITY
            };
            worst_gap = worst_gap.max(gap);
            let tie_row = r % 2 == 1;
            if key == 0 || (tie_row && got != ties[0]) || gap > 1e-3 {
                wrong += 1;
            }
            picks.push(got);
        }
        notes.push(format!(
            "{rows} rows K {k} V {vocab} on {blocks} blocks: {:?}",
            &picks[..picks.len().min(4)]
        ));
    }
    Ok(KernelCheck {
        name: "lm_head_argmax".into(),
        max_abs_err: worst_gap,
        rel_l2_err: wrong as f64,
        pass: wrong == 0,
        note: notes.join("; "),
    })
}
