//! `exp transfer-check`: how well the operator cost model
//! (`calibration::operators`) predicts steps it was not fitted on.
//!
//! Contract: reads whole-step measurements over the Qwen3 family and SM
//! counts (`--family`, the format of `results/h200/engine_family.csv`), what
//! each kernel group costs (`--groups`, `operators/groups.csv`) and single
//! cuBLAS products (`--gemm-shapes`, `operators/gemm_shapes.csv`); fits the
//! operator model on all of them, then predicts
//! every step of each model size from a fit on nothing of that size, and
//! every SM-limited step from a fit on the whole GPU only, and the steps
//! measured on each other GPU of `--held-out-gpu` (whole and SM-limited)
//! from the fit on everything of this one; writes each
//! prediction to `transfer.csv` (held_out, target, quantity, predicted_ms,
//! measured_ms, error_pct), the same hold-outs of the group costs and
//! products to `transfer_groups.csv`, and the largest error per model and
//! kind to the figure `transfer_error` (PNG + SVG). Prints the median and
//! largest absolute error of each kind unless `--quiet`. No GPU is needed.

use anyhow::Context;
use calibration::operators::family::{self, FamilyError, FamilyPoint};
use calibration::operators::profile::OperatorProfile;
use calibration::operators::slices::CopyBandwidths;
use calibration::operators::{decode_mix, fit, groups, lone_blocks, shapes};
use figures::{Chart, Kind, Series, Source};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct TransferArgs {
    /// Whole-step measurements (model, sm_count, kind, batch, tokens, ms_median, ...).
    #[arg(long, default_value = "results/h200/engine_family.csv")]
    pub family: PathBuf,
    /// Kernel-group costs (model, sm_count, copy_bandwidth_tb_s, case, variant,
    /// ms_median, ...) that pin the parts of a step.
    #[arg(long, default_value = "results/h200/operators/groups.csv")]
    pub groups: PathBuf,
    /// cuBLAS products timed one by one (model, sm_count, m, n, k, splits,
    /// gemm_ex_us, best_lt_us, ...).
    #[arg(long, default_value = "results/h200/operators/gemm_shapes.csv")]
    pub gemm_shapes: PathBuf,
    /// Datasheet GPU the measurements were taken on (its SM-limited slices are
    /// described by SM count, FLOP/s share and measured copy bandwidth).
    #[arg(long, default_value = "h200-sxm")]
    pub gpu: String,
    /// Steps measured on another GPU (`NAME=FILE`: its datasheet name and
    /// its engine_family.csv, with the copy bandwidths of its slices),
    /// predicted by the fit on this GPU's measurements; repeatable. Given,
    /// it replaces the default; `none` for none.
    #[arg(
        long = "held-out-gpu",
        value_name = "NAME=FILE",
        default_value = "h100-sxm=results/h100/engine_family.csv"
    )]
    pub held_out_gpus: Vec<String>,
    /// Decode batches of sequences at different contexts measured on a GPU
    /// of the same SMs (`NAME=FILE`: its datasheet name and the
    /// `decode_mix.csv` of `engine-bench --decode-mix`): each size's
    /// predicted by the fit without that size (no fit reads them);
    /// repeatable. Given, it replaces the default; `none` for none.
    #[arg(
        long = "decode-mix",
        value_name = "NAME=FILE",
        default_value = "h100-sxm=results/h100/decode_mix/decode_mix.csv"
    )]
    pub decode_mixes: Vec<String>,
    /// Decode attention with each block alone on its SM, measured on a GPU
    /// of the same SMs (`NAME=FILE`: its datasheet name and the
    /// `lone_blocks.csv` of `engine-bench --lone-blocks`): in every fit
    /// whose model and SM count they share; repeatable. Given, it replaces
    /// the default; `none` for none.
    #[arg(long = "lone-blocks", value_name = "NAME=FILE", default_value = "none")]
    pub lone_blocks: Vec<String>,
    /// Descents of each fit besides the one from the model's initial point,
    /// the best kept (0: one descent, about 9 times faster, which may stop
    /// in a worse minimum).
    #[arg(long, default_value_t = fit::FIT_STARTS)]
    pub fit_starts: usize,
    #[arg(long, default_value = "results/h200")]
    pub out: PathBuf,
    #[arg(long)]
    pub quiet: bool,
}

/// A `--FLAG NAME=FILE` value: the datasheet GPU named and the file (a
/// `what` of it).
fn gpu_and_file<'a>(
    spec: &'a str,
    flag: &str,
    what: &str,
) -> anyhow::Result<(&'a str, sim::GpuSpec, PathBuf)> {
    let (name, file) = spec.split_once('=').with_context(|| {
        format!("--{flag} {spec}: expected NAME=FILE (a datasheet GPU and its {what})")
    })?;
    Ok((
        name,
        calibration::datasheet::lookup(name)?,
        PathBuf::from(file),
    ))
}

/// The `NAME=FILE` values of a repeatable option, `none` left out.
fn given(specs: &[String]) -> impl Iterator<Item = &String> {
    specs.iter().filter(|s| *s != "none")
}

/// The rows of every `--FLAG NAME=FILE` of `specs` (`none` skipped), each
/// file (a `what`) read by `read` on its GPU, whose slices take the copy
/// bandwidths the file measured; and the GPUs' names in order.
fn read_each<T>(
    specs: &[String],
    flag: &str,
    what: &str,
    read: impl Fn(&Path, &CopyBandwidths) -> Result<Vec<T>, FamilyError>,
) -> anyhow::Result<(Vec<String>, Vec<T>)> {
    let (mut names, mut rows) = (Vec::new(), Vec::new());
    for spec in given(specs) {
        let (name, on, file) = gpu_and_file(spec, flag, what)?;
        let on = CopyBandwidths::from_files(&on, &[&file])
            .with_context(|| format!("--{flag} {spec}"))?;
        rows.extend(read(&file, &on).with_context(|| format!("--{flag} {spec}"))?);
        names.push(name.to_string());
    }
    Ok((names, rows))
}

fn summary(rows: &[fit::HeldOutRow]) -> (f64, f64) {
    let mut e: Vec<f64> = rows.iter().map(|r| r.error_pct.abs()).collect();
    e.sort_by(f64::total_cmp);
    if e.is_empty() {
        return (0.0, 0.0);
    }
    (e[e.len() / 2], e[e.len() - 1])
}

/// Largest absolute error per model (the part of the target before `@`).
fn worst_per_model(rows: &[fit::HeldOutRow]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for r in rows {
        let model = r.target.split('@').next().unwrap_or(&r.target).to_string();
        match out.iter_mut().find(|(t, _)| *t == model) {
            Some((_, e)) => *e = e.max(r.error_pct.abs()),
            None => out.push((model, r.error_pct.abs())),
        }
    }
    out
}

/// The decode contexts the fit was measured at, and those only a held-out
/// GPU has: `300 keys`, or `300 keys (held-out GPUs also 1000 / 2000)`.
fn contexts_label<'a>(
    fitted: impl IntoIterator<Item = &'a FamilyPoint>,
    held: impl IntoIterator<Item = &'a FamilyPoint>,
) -> String {
    fn decode_keys<'a>(steps: impl IntoIterator<Item = &'a FamilyPoint>) -> BTreeSet<usize> {
        steps
            .into_iter()
            .filter(|p| p.kind == "decode")
            .map(|p| p.tokens)
            .collect()
    }
    let list = |keys: &BTreeSet<usize>| {
        keys.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let fitted = decode_keys(fitted);
    let only_held: BTreeSet<usize> = decode_keys(held).difference(&fitted).copied().collect();
    if only_held.is_empty() {
        format!("{} keys", list(&fitted))
    } else {
        format!(
            "{} keys (held-out GPUs also {})",
            list(&fitted),
            list(&only_held)
        )
    }
}

pub fn run(args: &TransferArgs) -> anyhow::Result<()> {
    fit_and_write(args, "exp transfer-check")
}

/// The fit, its hold-outs and the figure, written to `args.out`; `how` names
/// the command in the profile's `fitted_on`.
pub fn fit_and_write(args: &TransferArgs, how: &str) -> anyhow::Result<()> {
    let whole = calibration::datasheet::lookup(&args.gpu)?;
    let gpus = CopyBandwidths::from_files(&whole, &[&args.family])?;
    let (mix_gpus, mixes) = read_each(
        &args.decode_mixes,
        "decode-mix",
        "decode_mix.csv",
        decode_mix::read,
    )?;
    let (_, lone) = read_each(
        &args.lone_blocks,
        "lone-blocks",
        "lone_blocks.csv",
        lone_blocks::read,
    )?;
    let data = fit::Measurements {
        steps: family::read(&args.family, &gpus)?,
        groups: groups::read(&args.groups, &gpus)?,
        gemms: shapes::read(&args.gemm_shapes, &gpus)?,
        mixes,
        lone,
    };
    // Another GPU's steps are read before the fits, so bad input fails at once.
    let mut others = Vec::new();
    for spec in given(&args.held_out_gpus) {
        let (name, other, file) = gpu_and_file(spec, "held-out-gpu", "engine_family.csv")?;
        anyhow::ensure!(
            name != whole.name,
            "--held-out-gpu {spec}: the fit's own GPU cannot be held out of it"
        );
        let gpus = CopyBandwidths::from_files(&other, &[&file])
            .with_context(|| format!("--held-out-gpu {spec}"))?;
        let steps = family::read(&file, &gpus).with_context(|| format!("--held-out-gpu {spec}"))?;
        others.push((name, other.sm_count, steps));
    }
    let points = &data.steps;
    let params = fit::fit_points(&data.all(), args.fit_starts)?;
    let held_model = fit::leave_one_model_out(&data, args.fit_starts)?;
    let held_sm = fit::sm_count_holdout(&data, whole.sm_count, args.fit_starts)?;
    // Each held-out GPU's predictions in file order, and apart for the
    // figure: its whole-GPU steps and its slices'.
    let mut by_gpu: Vec<fit::HeldOutRow> = Vec::new();
    let mut gpu_parts: Vec<(String, Vec<fit::HeldOutRow>)> = Vec::new();
    for (name, whole_sms, steps) in &others {
        let rows = fit::gpu_holdout(&params, name, steps);
        let slices = sm_span(
            steps
                .iter()
                .map(|p| p.gpu.sm_count)
                .filter(|n| n != whole_sms),
        );
        for (part, on_whole) in [("whole GPU", true), (slices.as_str(), false)] {
            let picked: Vec<fit::HeldOutRow> = steps
                .iter()
                .zip(&rows)
                .filter(|(p, _)| (p.gpu.sm_count == *whole_sms) == on_whole)
                .map(|(_, r)| r.clone())
                .collect();
            if !picked.is_empty() {
                let label = format!("{name} held out ({part}), fit on {}", whole.name);
                gpu_parts.push((label, picked));
            }
        }
        by_gpu.extend(rows);
    }
    // Each size's decode mixes, predicted by the fit without that size:
    // apart from the family table's steps, which the targets are about.
    let (mix_rows, by_model): (Vec<fit::HeldOutRow>, Vec<fit::HeldOutRow>) = held_model
        .steps
        .iter()
        .cloned()
        .partition(|r| r.quantity.starts_with(decode_mix::KIND));
    if !mix_rows.is_empty() {
        let label = format!("{} decode mixes, size held out", mix_gpus.join(" + "));
        gpu_parts.push((label, mix_rows.clone()));
    }
    let (by_model, by_sm) = (&by_model, &held_sm.steps);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let csv_path = args.out.join("transfer.csv");
    let mut w = csv::Writer::from_path(&csv_path)
        .with_context(|| format!("writing {}", csv_path.display()))?;
    for r in by_model.iter().chain(&mix_rows).chain(by_sm).chain(&by_gpu) {
        w.serialize(r)?;
    }
    w.flush()?;
    let parts_path = args.out.join("transfer_groups.csv");
    let mut w = csv::Writer::from_path(&parts_path)
        .with_context(|| format!("writing {}", parts_path.display()))?;
    for r in held_model.groups.iter().chain(&held_sm.groups) {
        w.serialize(r)?;
    }
    w.flush()?;
    let held: Vec<fit::HeldOutRow> = by_model
        .iter()
        .chain(&mix_rows)
        .chain(by_sm)
        .chain(&by_gpu)
        .cloned()
        .collect();
    let profile = OperatorProfile {
        format: calibration::operators::profile::FORMAT,
        gpu: whole.name.clone(),
        fitted_on: format!(
            "{}, {}, {}{} ({how})",
            args.family.display(),
            args.groups.display(),
            args.gemm_shapes.display(),
            given(&args.decode_mixes)
                .map(|s| format!(", decode mixes {s}"))
                .chain(given(&args.lone_blocks).map(|s| format!(", lone blocks {s}")))
                .collect::<String>()
        ),
        params,
        held_out: calibration::operators::profile::summarise(&held),
    };
    let ron_path = args.out.join("operator_profile.ron");
    let text = ron::ser::to_string_pretty(&profile, ron::ser::PrettyConfig::default())?;
    std::fs::write(&ron_path, text + "\n")
        .with_context(|| format!("writing {}", ron_path.display()))?;

    // Models from the smallest to the largest.
    let mut models: Vec<(usize, String)> = points
        .iter()
        .map(|p| (p.shape.linear_params(), p.model.clone()))
        .collect();
    models.sort();
    models.dedup();
    let pos = |m: &str| models.iter().position(|(_, x)| x == m).unwrap_or(0) as f64;
    let series = |label: &str, worst: Vec<(String, f64)>| {
        let mut pts: Vec<(f64, f64)> = worst.iter().map(|(m, e)| (pos(m), *e)).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        Series::new(label, Source::Sim, pts)
    };
    let (mm, mx) = summary(by_model);
    let (sm_med, sm_max) = summary(by_sm);
    let gpu_summary: String = gpu_parts
        .iter()
        .map(|(label, rows)| {
            let (med, max) = summary(rows);
            format!("; {label}: median {med:.1} %, max {max:.1} %")
        })
        .collect();
    let keys = contexts_label(points, others.iter().flat_map(|(_, _, steps)| steps.iter()));
    let mixed = if mix_rows.is_empty() {
        String::new()
    } else {
        ", decode batches of sequences at different contexts".to_string()
    };
    let chart = Chart {
        title: "Operator cost model on steps it was not fitted on".into(),
        subtitle: format!(
            "GPU {} and SM-limited slices; cost model: operators fitted on {}; models qwen3-0.6b..32b; \
             workload: decode batches 1-256 at {keys}, prefills 512-3200 tokens{mixed}. \
             Held-out size: median {mm:.1} %, max {mx:.1} %; held-out SM count: median {sm_med:.1} %, max {sm_max:.1} %{gpu_summary}",
            whole.name,
            args.family.display()
        ),
        x_label: "model (Qwen3)".into(),
        y_label: "largest |error| over the model's held-out steps (%)".into(),
        kind: Kind::Bars,
        series: [
            series("model size held out", worst_per_model(by_model)),
            series(
                &format!(
                    "SM count held out: {}, fit on the whole GPU",
                    sm_span(
                        data.steps
                            .iter()
                            .map(|p| p.gpu.sm_count)
                            .filter(|n| *n != whole.sm_count)
                    )
                ),
                worst_per_model(by_sm),
            ),
        ]
        .into_iter()
        .chain(
            gpu_parts
                .iter()
                .map(|(label, rows)| series(label, worst_per_model(rows))),
        )
        .collect(),
        references: vec![
            figures::Reference { label: "8 % (sizes target)".into(), y: 8.0 },
            figures::Reference { label: "10 % (SM target)".into(), y: 10.0 },
        ],
        x_ticks: Some(
            models
                .iter()
                .enumerate()
                .map(|(i, (_, m))| (i as f64, m.trim_start_matches("qwen3-").to_string()))
                .collect(),
        ),
        ..Chart::default()
    };
    let files = figures::draw(&chart, &args.out.join("transfer_error"))?;
    if !args.quiet {
        eprintln!(
            "held-out model size: {} steps, |error| median {mm:.2} %, max {mx:.2} %",
            by_model.len()
        );
        eprintln!(
            "held-out SM count: {} steps, |error| median {sm_med:.2} %, max {sm_max:.2} %",
            by_sm.len()
        );
        for (label, rows) in &gpu_parts {
            let (med, max) = summary(rows);
            eprintln!(
                "{label}: {} steps, |error| median {med:.2} %, max {max:.2} %",
                rows.len()
            );
        }
        eprintln!(
            "wrote {}, {}, {}",
            csv_path.display(),
            parts_path.display(),
            ron_path.display()
        );
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// The SM counts a figure's series covers, as its legend says them:
/// `16-32 SMs`, or `16 SMs` for one.
fn sm_span(counts: impl IntoIterator<Item = u32>) -> String {
    let counts: std::collections::BTreeSet<u32> = counts.into_iter().collect();
    match (counts.first(), counts.last()) {
        (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi} SMs"),
        (Some(n), _) => format!("{n} SMs"),
        _ => "no slices".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legend_names_the_sm_counts_the_rows_hold() {
        assert_eq!(sm_span([32, 16, 16]), "16-32 SMs");
        assert_eq!(sm_span([8, 64, 16, 32]), "8-64 SMs");
        assert_eq!(sm_span([16]), "16 SMs");
        assert_eq!(sm_span([]), "no slices");
    }
}
