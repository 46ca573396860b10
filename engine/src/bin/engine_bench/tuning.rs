//! The tuning and profiling runs of `engine-bench`: `--tune` (decode
//! attention kernels and split targets), `--profile` (kernel groups left out)
//! `--split-sweep` (the O and down products split over K, by batch) and
//! `--pdl-sweep` (programmatic dependent launches on and off, by batch).

use crate::steps::{decode, prefill, Workload};
use engine::runner::cuda::{
    CudaRunner, CudaTuning, DecodeKernel, SKIP_ATTENTION, SKIP_ELEMENTWISE, SKIP_GEMM, SKIP_HEAD,
};
use std::fmt::Write as _;

type Timing = anyhow::Result<f64>;

/// What every tuning run shares: the decode workload, where the CSV goes, and
/// the run's date for its rows.
pub(crate) struct Run<'a> {
    pub workload: Workload,
    pub out: &'a std::path::Path,
    pub date: &'a str,
}

/// Prints one timing as `{label}: N ms` and appends `{row},N,{date}` to `csv`
/// (seconds in, milliseconds out), or prints the error and appends nothing.
fn record(csv: &mut String, label: &str, row: &str, date: &str, timing: Timing) {
    match timing {
        Ok(s) => {
            println!("{label}: {:.3} ms", s * 1e3);
            let _ = writeln!(csv, "{row},{:.4},{date}", s * 1e3);
        }
        Err(e) => println!("{label}: ERROR {e:#}"),
    }
}

/// Decode step time for each decode-attention kernel and split target.
pub(crate) fn tune(r: &mut CudaRunner, run: &Run) -> anyhow::Result<()> {
    let (wl, date) = (&run.workload, run.date);
    let mut csv = String::from("batch,kernel,target_warps,ms_median,date\n");
    let chosen = *r.tuning();
    for b in [1usize, 16, 64, 256] {
        for kernel in DecodeKernel::ALL {
            for target in [1024usize, 2048, 4096] {
                let t = CudaTuning {
                    decode_kernel: Some(kernel),
                    decode_target_warps: target,
                    ..chosen
                };
                if let Err(e) = r.set_tuning(t) {
                    println!("tune {kernel:?}: {e:#}");
                    continue;
                }
                let kernel = format!("{kernel:?}");
                record(
                    &mut csv,
                    &format!("tune decode{b:<4} {kernel:<13} target {target:>5}"),
                    &format!("{b},{kernel},{target}"),
                    date,
                    decode(r, b, wl),
                );
            }
        }
    }
    r.set_tuning(chosen)?;
    std::fs::write(run.out.join("tune.csv"), csv)?;
    Ok(())
}

/// Step time with kernel groups left out (outputs are wrong; differences are
/// what each group costs), with cuBLAS for every GEMM, without programmatic
/// dependent launches, and with q/k-norm + RoPE in its own kernel in decode
/// steps. (In decode steps q/k-norm + RoPE is part of the attention group.)
pub(crate) fn profile(r: &mut CudaRunner, run: &Run) -> anyhow::Result<()> {
    for (name, regs, local) in r.kernel_resources() {
        println!("kernel {name:<20} {regs:>4} regs/thread {local:>5} B local/thread");
    }
    let mut csv = String::from("case,variant,ms_median,date\n");
    for (case, variant, timing) in profile_cases(r, &run.workload)? {
        record(
            &mut csv,
            &format!("profile {case:<12} {variant:<15}"),
            &format!("{case},{variant}"),
            run.date,
            timing,
        );
    }
    std::fs::write(run.out.join("profile.csv"), csv)?;
    Ok(())
}

/// Every (case, variant) of [`profile`] timed, the runner's tuning restored after.
pub(crate) fn profile_cases(
    r: &mut CudaRunner,
    wl: &Workload,
) -> anyhow::Result<Vec<(&'static str, &'static str, Timing)>> {
    let vocab = wl.vocab;
    let default = true;
    let masks: [(&str, u32, bool); 10] = [
        ("full", 0, default),
        ("full_cublas", 0, false),
        ("full_no_pdl", 0, default),
        ("full_unfused_rope", 0, default),
        ("no_gemm", SKIP_GEMM, default),
        ("no_attention", SKIP_ATTENTION, default),
        ("no_elementwise", SKIP_ELEMENTWISE, default),
        ("no_head", SKIP_HEAD, default),
        (
            "gemm_only",
            SKIP_ATTENTION | SKIP_ELEMENTWISE | SKIP_HEAD,
            default,
        ),
        (
            "nothing",
            SKIP_GEMM | SKIP_ATTENTION | SKIP_ELEMENTWISE | SKIP_HEAD,
            default,
        ),
    ];
    let chosen = *r.tuning();
    let mut out = Vec::new();
    for case in [
        "decode1",
        "decode16",
        "decode64",
        "decode256",
        "prefill3200",
        "prefill512",
    ] {
        for &(variant, mask, skinny) in &masks {
            r.set_tuning(CudaTuning {
                skinny_gemm: skinny,
                profile_skip: mask,
                pdl: variant != "full_no_pdl",
                fuse_rope: variant != "full_unfused_rope",
                ..chosen
            })?;
            let s = match case {
                "decode1" => decode(r, 1, wl),
                "decode16" => decode(r, 16, wl),
                "decode64" => decode(r, 64, wl),
                "decode256" => decode(r, 256, wl),
                "prefill3200" => prefill(r, 3200, vocab),
                _ => prefill(r, 512, vocab),
            };
            out.push((case, variant, s));
        }
    }
    r.set_tuning(chosen)?;
    Ok(out)
}

/// Decode step time by batch with the O and down products split over K into
/// 1 (never), 2, 4, 6 or 8 slices, and with the runner's rule (`rule`); then
/// eager prefill steps of 24-256 tokens with the rule, 1 and 4 slices.
pub(crate) fn split_sweep(r: &mut CudaRunner, run: &Run) -> anyhow::Result<()> {
    let (wl, vocab, date) = (&run.workload, run.workload.vocab, run.date);
    let chosen = *r.tuning();
    let mut csv = String::from("case,splits,ms_median,date\n");
    for b in [1usize, 16, 24, 32, 40, 48, 64, 96, 128, 192, 256] {
        for splits in [None, Some(1usize), Some(2), Some(4), Some(6), Some(8)] {
            r.set_tuning(CudaTuning {
                split_k: splits,
                ..chosen
            })?;
            let label = splits.map_or("rule".to_string(), |s| s.to_string());
            record(
                &mut csv,
                &format!("split-k decode{b:<4} splits {label:>4}"),
                &format!("decode{b},{label}"),
                date,
                decode(r, b, wl),
            );
        }
    }
    // Eager steps: one prompt of n tokens.
    for n in [24usize, 32, 64, 128, 256] {
        for splits in [None, Some(1usize), Some(4)] {
            r.set_tuning(CudaTuning {
                split_k: splits,
                ..chosen
            })?;
            let label = splits.map_or("rule".to_string(), |s| s.to_string());
            record(
                &mut csv,
                &format!("split-k prefill{n:<4} splits {label:>4}"),
                &format!("prefill{n},{label}"),
                date,
                prefill(r, n, vocab),
            );
        }
    }
    r.set_tuning(chosen)?;
    std::fs::write(run.out.join("split_k.csv"), csv)?;
    Ok(())
}

/// Decode step time by batch with programmatic dependent launches on and off,
/// alternating, twice each.
pub(crate) fn pdl_sweep(r: &mut CudaRunner, run: &Run) -> anyhow::Result<()> {
    let (wl, date) = (&run.workload, run.date);
    let chosen = *r.tuning();
    let mut csv = String::from("batch,pdl,round,ms_median,date\n");
    for b in [1usize, 16, 24, 32, 48, 64, 96, 128, 192, 256] {
        for round in 0..2 {
            for pdl in [true, false] {
                r.set_tuning(CudaTuning { pdl, ..chosen })?;
                record(
                    &mut csv,
                    &format!("pdl decode{b:<4} pdl {pdl:<5} round {round}"),
                    &format!("{b},{pdl},{round}"),
                    date,
                    decode(r, b, wl),
                );
            }
        }
    }
    r.set_tuning(chosen)?;
    std::fs::write(run.out.join("pdl.csv"), csv)?;
    Ok(())
}

/// The GEMM shapes tuned so far: cublasGemmEx's and the best cuBLASLt offer's
/// µs per call, and which one the runner took (`gemm_tuning.csv`).
pub(crate) fn write_gemm_tuning(r: &CudaRunner, run: &Run) -> anyhow::Result<()> {
    let mut csv =
        String::from("m,n,k,splits,gemm_ex_us,best_lt_us,best_lt_rank,offers,chosen,error,date\n");
    let us = |v: Option<f64>| v.map(|u| format!("{u:.3}")).unwrap_or_default();
    for t in r.gemm_tune_reports() {
        // The error text goes in as one field: commas and quotes would split it.
        let error = t.error.unwrap_or_default().replace([',', '"', '\n'], " ");
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{},{},{}",
            t.m,
            t.n,
            t.k,
            t.splits,
            us(t.gemm_ex_us),
            us(t.best_lt_us),
            t.best_lt_rank.map(|k| k.to_string()).unwrap_or_default(),
            t.offers,
            t.chosen,
            error,
            run.date
        );
    }
    std::fs::write(run.out.join("gemm_tuning.csv"), csv)?;
    Ok(())
}
