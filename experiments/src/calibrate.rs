//! `exp calibrate`: measure the real runner, fit a cost profile, write it.
//!
//! Contract: builds the runner (`--backend`, `--model`, `--weights-seed`),
//! runs `calibration::measure` over `calibration::Grid` (`--grid gpu`: the
//! H200 grid for the experiments' settings; `--grid small`: [`small_grid`]),
//! fits with `calibration::fit`, prints the held-out error (median, p90) and
//! writes the profile with provenance (device, model, commit, UTC date,
//! method `measured`) to `--out FILE.ron`, and every grid point (shape
//! summary, measured and predicted ms, error %, held out or not) to
//! `FILE.samples.csv`. The profile's datasheet GPU (needed to transfer it)
//! is `--gpu`, else guessed from the device name, else `h200-sxm`.
//!
//! `--operators` measures no single runner: several sizes and SM counts
//! through engine-bench, fitted into an operator profile
//! ([`crate::calibrate_operators`]).
//!
//! `--endpoint URL` measures no runner: probe loads on a server give the
//! grid points ([`crate::calibrate_endpoint`]).
//!
//! `--refit PROFILE.ron` measures nothing: it fits the grid points measured
//! for that profile (`--samples`, default `PROFILE.samples.csv`; they must
//! match `--grid`, or, for a profile calibrated with `--endpoint`, be its
//! probe points) with the current cost model, keeps the profile's device,
//! model label, engine commit, date and GPU, and records the refit in its
//! `method`. No GPU needed.

use crate::backend::runner::{self, RunnerLimits};
use crate::backend::{LoadedModel, ModelChoice, RunnerKind, DEFAULT_GPU};
use crate::cli_args::RunnerArgs;
use crate::output::git_commit;
use crate::table::{Cell, Table};
use anyhow::Context;
use calibration::fit::{relative_error_pct, HOLDOUT_EVERY};
use calibration::{fit, measure, CostProfile, Grid, Provenance, Sample};
use clap::{Args, ValueEnum};

/// How the provenance of a profile calibrated with `--endpoint` names its
/// device (followed by the URL).
pub const ENDPOINT_DEVICE: &str = "endpoint ";
use engine::date::utc_now;
use engine::BatchShape;
use indicatif::{ProgressBar, ProgressStyle};
use sim::{CostModel, ModelShape};
use std::path::{Path, PathBuf};

/// Block size of every measured batch (the experiments' block size).
const BLOCK_SIZE: usize = 16;
/// Longest sequence of the small grid.
const SMALL_GRID_MAX_LEN: usize = 512;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GridArg {
    /// Decode batches 1–256 at contexts up to 3,000, prefills to 4,096 tokens, mixed batches.
    Gpu,
    /// Decode batches 1–16, prefills to 256 tokens: for CPU runners and tests.
    Small,
}

#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// Profile to write (RON); grid points go to FILE.samples.csv.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[arg(long, value_enum, default_value = "gpu")]
    pub grid: GridArg,
    /// Timed executions of each grid point (the median is kept).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Untimed executions of each grid point before the timed ones.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Datasheet GPU the profile holds for (default: from the device name, else h200-sxm).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Measure nothing: refit the grid points measured for this profile.
    #[arg(long, value_name = "PROFILE.ron")]
    pub refit: Option<PathBuf>,
    /// With --refit: the measured grid points (default: PROFILE.samples.csv).
    #[arg(long, requires = "refit")]
    pub samples: Option<PathBuf>,
    /// Measure no runner: fit probe loads on this OpenAI-compatible server
    /// (docs/endpoint.md).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// With --endpoint: the served model (default: the first of GET /v1/models).
    #[arg(long, value_name = "NAME", requires = "endpoint")]
    pub model_name: Option<String>,
    /// Measure no single runner: the steps and kernel groups of several
    /// sizes and SM counts, through engine-bench, fitted into an operator
    /// profile (`--cost-model operators --operator-profile OUT`;
    /// calibrate_operators.rs), on whichever datasheet GPU engine-bench
    /// runs on (named in its log; `--gpu` must agree).
    #[arg(
        long,
        conflicts_with_all = ["endpoint", "refit", "model", "backend", "sm_count", "grid", "reps", "warmup"]
    )]
    pub operators: bool,
    /// With --operators: the engine-bench to run (default: the one beside exp).
    #[arg(long, value_name = "PATH", requires = "operators")]
    pub engine_bench: Option<PathBuf>,
    /// With --operators: the sizes measured on the whole GPU.
    #[arg(
        long,
        value_delimiter = ',',
        requires = "operators",
        default_value = "qwen3-0.6b,qwen3-1.7b,qwen3-4b,qwen3-8b,qwen3-14b,qwen3-32b"
    )]
    pub models: Vec<String>,
    /// With --operators: the sizes whose kernel groups are timed and which
    /// run on the SM-limited slices.
    #[arg(
        long,
        value_delimiter = ',',
        requires = "operators",
        default_value = "qwen3-0.6b,qwen3-8b"
    )]
    pub slice_models: Vec<String>,
    /// With --operators: the slices (SMs) the slice models run on.
    #[arg(
        long,
        value_delimiter = ',',
        requires = "operators",
        default_value = "16,32"
    )]
    pub sm_counts: Vec<usize>,
    /// With --operators: descents of each fit besides the one from the
    /// model's initial point, the best kept (`exp transfer-check
    /// --fit-starts`).
    #[arg(
        long,
        requires = "operators",
        default_value_t = calibration::operators::fit::FIT_STARTS
    )]
    pub fit_starts: usize,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// The datasheet key of a device the driver names, when it is unambiguous.
pub fn datasheet_key(device: &str) -> Option<&'static str> {
    let d = device.to_ascii_lowercase();
    let key = if d.contains("h200") {
        "h200-sxm"
    } else if d.contains("h100") {
        if d.contains("pcie") {
            "h100-pcie"
        } else {
            "h100-sxm"
        }
    } else if d.contains("a100") {
        if d.contains("80") {
            "a100-80gb-sxm"
        } else {
            "a100-40gb-pcie"
        }
    } else if d.contains("4090") {
        "rtx-4090"
    } else if d.contains("3090") {
        "rtx-3090"
    } else {
        return None;
    };
    Some(key)
}

/// `calibration::Grid::small` widened to enough points for the fit (it needs
/// two per coefficient): more decode batch sizes and contexts, prefills and
/// mixed batches, all within [`SMALL_GRID_MAX_LEN`].
pub fn small_grid() -> Grid {
    Grid {
        decode_batches: vec![1, 2, 3, 4, 6, 8, 12, 16, 24, 32],
        decode_contexts: vec![16, 64, 200, 400],
        prefill_tokens: vec![8, 16, 32, 64, 128, 192, 256, 384],
        prefill_cached: vec![0, 64, 100],
        mixed: vec![(32, 1), (64, 4), (128, 2), (96, 8), (200, 16), (16, 32)],
        ..Grid::small(SMALL_GRID_MAX_LEN)
    }
}

/// Runner limits that fit every grid point (KV blocks exactly as needed on CPU).
fn limits_for(grid: &Grid, shapes: &[BatchShape], kind: RunnerKind) -> RunnerLimits {
    let max_seqs = shapes.iter().map(|s| s.seqs.len()).max().unwrap_or(1);
    let max_tokens = shapes.iter().map(BatchShape::num_tokens).max().unwrap_or(1);
    let blocks: usize = shapes
        .iter()
        .map(|s| {
            s.seqs
                .iter()
                .map(|q| ((q.context_before + q.new_tokens) as usize).div_ceil(BLOCK_SIZE))
                .sum::<usize>()
        })
        .max()
        .unwrap_or(1);
    RunnerLimits {
        block_size: BLOCK_SIZE,
        max_num_seqs: max_seqs,
        max_num_batched_tokens: max_tokens.max(grid.max_model_len),
        max_model_len: grid.max_model_len,
        num_gpu_blocks: (kind == RunnerKind::Cpu).then_some(blocks + 1),
        gpu_memory_utilization: 0.9,
        sm_count: None,
    }
}

fn bar(n: usize, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(n as u64).with_message("calibrate");
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} grid points ({elapsed})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// `FILE.ron` -> `FILE.samples.csv`.
pub fn samples_path(profile: &Path) -> PathBuf {
    profile.with_extension("samples.csv")
}

/// Every grid point with its measured and predicted time.
pub fn samples_table(samples: &[Sample], profile: &CostProfile) -> Table {
    let mut t = Table::new(&[
        "point",
        "seqs",
        "decodes",
        "prefill_tokens",
        "tokens",
        "sampled",
        "max_context",
        "measured_ms",
        "predicted_ms",
        "error_pct",
        "held_out",
    ]);
    // The fit's hold-out rule, over the samples it could use.
    let mut usable = 0;
    for (i, s) in samples.iter().enumerate() {
        let ok = s.seconds.is_finite() && s.seconds > 0.0 && !s.shape.seqs.is_empty();
        let held = ok && usable % HOLDOUT_EVERY == HOLDOUT_EVERY - 1;
        usable += usize::from(ok);
        let predicted = profile.step_seconds(&s.shape);
        let c = s.shape.counts();
        t.push(vec![
            Cell::int(i),
            Cell::int(c.seqs),
            Cell::int(c.decode_seqs),
            Cell::int(c.prefill_tokens),
            Cell::int(c.tokens),
            Cell::int(c.sampled),
            Cell::int(c.max_context),
            Cell::num(Some(s.seconds * 1e3)),
            Cell::num(Some(predicted * 1e3)),
            Cell::num(ok.then(|| relative_error_pct(predicted, s.seconds))),
            Cell::text(if held { "yes" } else { "no" }),
        ]);
    }
    t
}

pub fn run(args: &CalibrateArgs) -> anyhow::Result<()> {
    if args.operators {
        let plan = crate::calibrate_operators::Plan {
            models: args.models.clone(),
            slice_models: args.slice_models.clone(),
            sm_counts: args.sm_counts.clone(),
        };
        return crate::calibrate_operators::run(
            &plan,
            args.engine_bench.as_deref(),
            args.gpu.as_deref(),
            &args.out,
            args.fit_starts,
            args.quiet,
        );
    }
    if let Some(url) = &args.endpoint {
        return crate::calibrate_endpoint::run(args, url);
    }
    let model = LoadedModel::config_only(&ModelChoice::parse(&args.runner.model)?)?;
    let kind = args.runner.kind();
    let grid = match args.grid {
        GridArg::Gpu => Grid::gpu_default(),
        GridArg::Small => small_grid(),
    };
    if let Some(old) = &args.refit {
        return refit(args, old, &grid, ModelShape::from_qwen3(&model.config));
    }
    // Before the runner is built: a full-size model takes a while to load.
    if args.reps == 0 {
        return Err(calibration::MeasureError::NoReps.into());
    }
    let shapes = grid.shapes();
    let needed = 2 * calibration::features::NUM_FEATURES;
    if shapes.len() < needed {
        anyhow::bail!(
            "the grid has {} points; the fit needs at least {needed}",
            shapes.len()
        );
    }
    let limits = limits_for(&grid, &shapes, kind).on_sms(args.runner.sm_count()?);
    let weights = model.runner_weights(args.runner.weights_seed)?;
    let mut runner = runner::build(kind, &model.config, &weights, &limits)?;
    drop(weights);
    let device = runner.device_name();
    let gpu_name = match (&args.gpu, datasheet_key(&device)) {
        (Some(g), _) => g.clone(),
        (None, Some(k)) => k.to_string(),
        (None, None) => DEFAULT_GPU.to_string(),
    };
    let gpu =
        calibration::datasheet::lookup(&gpu_name).with_context(|| format!("--gpu {gpu_name}"))?;
    let progress = bar(shapes.len(), args.quiet);
    let samples = measure(
        &mut runner,
        &grid,
        BLOCK_SIZE,
        args.warmup,
        args.reps,
        |done, _| progress.set_position(done as u64),
    )
    .with_context(|| format!("measuring {} on {device}", model.name()))?;
    progress.finish_and_clear();
    let provenance = Provenance {
        device: device.clone(),
        model: model.weights_label(args.runner.weights_seed),
        engine_commit: git_commit(),
        date: utc_now(),
        method: "measured".into(),
        samples: 0,
        holdout_error_pct_median: f64::NAN,
        holdout_error_pct_p90: f64::NAN,
    };
    let fitted = fit(
        &samples,
        gpu,
        ModelShape::from_qwen3(&model.config),
        provenance,
    )
    .context("fitting the cost profile")?;
    let p = &fitted.profile.provenance;
    println!(
        "{} grid points on {device} ({}); held-out error: median {:.2} %, p90 {:.2} % ({} points)",
        samples.len(),
        kind.name(),
        p.holdout_error_pct_median,
        p.holdout_error_pct_p90,
        fitted.holdout_errors_pct.len()
    );
    write_fit(&args.out, &samples, &fitted.profile)
}

/// Writes the profile and its grid points.
pub(crate) fn write_fit(
    out: &Path,
    samples: &[Sample],
    profile: &CostProfile,
) -> anyhow::Result<()> {
    profile.save(out)?;
    let csv = samples_path(out);
    std::fs::write(&csv, samples_table(samples, profile).to_csv())
        .with_context(|| format!("writing {}", csv.display()))?;
    println!("wrote {} and {}", out.display(), csv.display());
    Ok(())
}

/// `--refit`: the measurements behind `old`, fitted again.
fn refit(args: &CalibrateArgs, old: &Path, grid: &Grid, model: ModelShape) -> anyhow::Result<()> {
    let previous = CostProfile::load(old)?;
    let csv = args.samples.clone().unwrap_or_else(|| samples_path(old));
    let text =
        std::fs::read_to_string(&csv).with_context(|| format!("reading {}", csv.display()))?;
    let p = &previous.provenance;
    // A profile calibrated from outside was fitted on probe points, not a grid.
    let samples = if p.device.starts_with(ENDPOINT_DEVICE) {
        crate::calibrate_endpoint::samples_from_csv(&text, &csv)
            .context("the endpoint probe points")?
    } else {
        calibration::samples_from_csv(&text, &csv, grid).context("the samples against --grid")?
    };
    let provenance = Provenance {
        method: format!(
            "refit at commit {} of the points measured for engine {} on {}",
            git_commit(),
            p.engine_commit,
            p.date
        ),
        samples: 0,
        holdout_error_pct_median: f64::NAN,
        holdout_error_pct_p90: f64::NAN,
        ..p.clone()
    };
    let fitted = fit(&samples, previous.gpu.clone(), model, provenance)
        .context("fitting the cost profile")?;
    let q = &fitted.profile.provenance;
    println!(
        "{} grid points refitted; held-out error: median {:.2} %, p90 {:.2} % (was {:.2} %, {:.2} %)",
        samples.len(),
        q.holdout_error_pct_median,
        q.holdout_error_pct_p90,
        p.holdout_error_pct_median,
        p.holdout_error_pct_p90
    );
    write_fit(&args.out, &samples, &fitted.profile)
}
