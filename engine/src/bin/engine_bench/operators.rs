//! `engine-bench --family --operators`: besides a (model, SM count)'s steps,
//! what the operator cost model is fitted on (`calibration::operators`), in
//! the formats it reads: each kernel group's cost (the `--profile` cases, each
//! group left out) appended to `operators/groups.csv` (`model, sm_count,
//! copy_bandwidth_tb_s, case, variant, ms_median, date, commit`), and every
//! cuBLAS product the runner tuned appended to `operators/gemm_shapes.csv`
//! (`model, sm_count, m, n, k, splits, gemm_ex_us, best_lt_us, chosen, date,
//! commit`). A case that fails, or a product whose tuning measured no time,
//! is reported on stderr and left out; the other rows are written. On the
//! whole GPU it also times [`FAMILY_MIXES`] into `operators/decode_mix.csv`
//! ([`time_mixes`]).

use crate::steps::{decode_mix, Workload};
use crate::table::{self, RunInfo};
use crate::tuning::profile_cases;
use anyhow::Context as _;
use engine::runner::cuda::{CudaRunner, GemmTuneReport};
use std::fmt::Write as _;
use std::path::Path;

/// Directory of the two files, in `--out`.
pub(crate) const DIR: &str = "operators";
pub(crate) const GROUPS_HEADER: &str =
    "model,sm_count,copy_bandwidth_tb_s,case,variant,ms_median,date,commit";
pub(crate) const SHAPES_HEADER: &str =
    "model,sm_count,m,n,k,splits,gemm_ex_us,best_lt_us,chosen,date,commit";

/// Times the profile cases on `r` and appends both files' rows; `tag` starts
/// each progress line. Returns whether every case and product was timed.
pub(crate) fn append_rows(
    r: &mut CudaRunner,
    info: &RunInfo,
    wl: &Workload,
    out: &Path,
    tag: &str,
) -> anyhow::Result<bool> {
    let dir = out.join(DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let bandwidth = info.copy_bandwidth_tb_s;
    let mut ok = true;
    let mut groups = String::new();
    for (case, variant, timing) in profile_cases(r, wl)? {
        match timing {
            Ok(s) => {
                eprintln!("{tag}: {case} {variant}: {:.3} ms", s * 1e3);
                groups.push_str(&group_row(info, bandwidth, case, variant, s));
            }
            Err(e) => {
                eprintln!("{tag}: {case} {variant}: FAILED: {e:#}");
                ok = false;
            }
        }
    }
    let path = dir.join("groups.csv");
    table::append_with_header(&path, GROUPS_HEADER, &groups)
        .with_context(|| format!("appending to {}", path.display()))?;
    let mut shapes = String::new();
    for t in r.gemm_tune_reports() {
        match shape_row(info, &t) {
            Some(row) => shapes.push_str(&row),
            None => eprintln!(
                "{tag}: gemm {}x{}x{} split {}: no time measured ({})",
                t.m,
                t.n,
                t.k,
                t.splits,
                t.error.as_deref().unwrap_or("no offer")
            ),
        }
    }
    let path = dir.join("gemm_shapes.csv");
    table::append_with_header(&path, SHAPES_HEADER, &shapes)
        .with_context(|| format!("appending to {}", path.display()))?;
    Ok(ok)
}

/// The file of decode mixes (`--decode-mix`, and in [`DIR`] with `--family
/// --operators`): `contexts` lists a batch's sequences' median keys,
/// separated by spaces.
pub(crate) const MIX_FILE: &str = "decode_mix.csv";
pub(crate) const MIX_HEADER: &str =
    "model,sm_count,contexts,ms_median,copy_bandwidth_tb_s,date,commit";

/// The decode mixes a `--family --operators` run times on the whole GPU:
/// batches of 5, 8 and 9 (graphs of 8 and 16) with one long sequence among
/// short ones, against the same count at one context, and a spread. What
/// the operator model's cost of the longest block's tail is fitted on
/// (`calibration::operators::decode_mix`).
pub(crate) const FAMILY_MIXES: [&[usize]; 8] = [
    &[300, 300, 300, 300, 300],
    &[2048, 300, 300, 300, 300],
    &[1000, 300, 300, 300, 300],
    &[2048, 300, 300, 300, 300, 300, 300, 300],
    &[2048, 300, 300, 300, 300, 300, 300, 300, 300],
    &[2048, 2048, 300, 300, 300],
    &[1500, 900, 600, 400, 300],
    &[2048, 1500, 1000, 800, 600, 400, 300, 300],
];

/// Times each of `mixes` (a context per sequence, `steps::decode_mix`) and
/// appends a row each to `path`; a mix that fails is reported (after `tag`)
/// and left out. Returns whether every mix was timed.
pub(crate) fn time_mixes(
    r: &mut CudaRunner,
    info: &RunInfo,
    wl: &Workload,
    mixes: &[&[usize]],
    path: &Path,
    tag: &str,
) -> anyhow::Result<bool> {
    let mut rows = String::new();
    let mut ok = true;
    for mix in mixes {
        let contexts: Vec<String> = mix.iter().map(usize::to_string).collect();
        let contexts = contexts.join(" ");
        match decode_mix(r, mix, wl) {
            Ok(s) => {
                println!("{tag}decode mix [{contexts}]: {:.3} ms/step", s * 1e3);
                let _ = writeln!(
                    rows,
                    "{},{},{contexts},{:.4},{:.3},{},{}",
                    info.model_cell(),
                    info.sm_count,
                    s * 1e3,
                    info.copy_bandwidth_tb_s,
                    info.date,
                    info.commit
                );
            }
            Err(e) => {
                eprintln!("{tag}decode mix [{contexts}]: FAILED: {e:#}");
                ok = false;
            }
        }
    }
    table::append_with_header(path, MIX_HEADER, &rows)
        .with_context(|| format!("appending to {}", path.display()))?;
    Ok(ok)
}

fn group_row(info: &RunInfo, bandwidth_tb_s: f64, case: &str, variant: &str, s: f64) -> String {
    format!(
        "{},{},{bandwidth_tb_s:.2},{case},{variant},{:.4},{},{}\n",
        info.model_cell(),
        info.sm_count,
        s * 1e3,
        info.date,
        info.commit
    )
}

/// The product's row, or `None` when either time is missing (the fit needs both).
fn shape_row(info: &RunInfo, t: &GemmTuneReport) -> Option<String> {
    let (ex, lt) = (t.gemm_ex_us?, t.best_lt_us?);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{},{},{},{},{},{},{ex:.3},{lt:.3},{},{},{}",
        info.model_cell(),
        info.sm_count,
        t.m,
        t.n,
        t.k,
        t.splits,
        t.chosen,
        info.date,
        info.commit
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_mixes_are_batches_the_bench_can_time_with_a_uniform_baseline() {
        use crate::steps::CONTEXT_RANGE;
        for mix in FAMILY_MIXES {
            assert!(!mix.is_empty() && mix.len() <= crate::args::MAX_BATCH);
            assert!(mix.iter().all(|c| CONTEXT_RANGE.contains(c)), "{mix:?}");
        }
        // A long sequence among short ones, and the same batch at one context.
        assert!(FAMILY_MIXES.contains(&[2048, 300, 300, 300, 300].as_slice()));
        assert!(FAMILY_MIXES.contains(&[300; 5].as_slice()));
    }

    fn info() -> RunInfo {
        RunInfo {
            model: "qwen3-8b".into(),
            sm_count: 132,
            copy_bandwidth_tb_s: 3.72,
            date: "2026-12-04T22:00:00Z".into(),
            commit: "abc1234".into(),
        }
    }

    #[test]
    fn rows_have_the_columns_of_their_headers() {
        let g = group_row(&info(), 3.734, "decode1", "no_gemm", 0.00123456);
        assert_eq!(
            g,
            "qwen3-8b,132,3.73,decode1,no_gemm,1.2346,2026-12-04T22:00:00Z,abc1234\n"
        );
        assert_eq!(
            g.trim_end().split(',').count(),
            GROUPS_HEADER.split(',').count()
        );
        let t = GemmTuneReport {
            m: 16,
            n: 4096,
            k: 4096,
            splits: 1,
            gemm_ex_us: Some(12.5),
            best_lt_us: Some(11.25),
            best_lt_rank: Some(0),
            offers: 8,
            chosen: "cublaslt",
            error: None,
        };
        let row = shape_row(&info(), &t).expect("both times");
        assert_eq!(
            row,
            "qwen3-8b,132,16,4096,4096,1,12.500,11.250,cublaslt,2026-12-04T22:00:00Z,abc1234\n"
        );
        assert_eq!(
            row.trim_end().split(',').count(),
            SHAPES_HEADER.split(',').count()
        );
    }

    #[test]
    fn a_product_without_a_time_is_left_out() {
        let t = GemmTuneReport {
            m: 16,
            n: 4096,
            k: 4096,
            splits: 1,
            gemm_ex_us: None,
            best_lt_us: None,
            best_lt_rank: None,
            offers: 0,
            chosen: "cublas",
            error: Some("no heuristic".into()),
        };
        assert!(shape_row(&info(), &t).is_none());
    }
}
