//! `exp plan`: capacity planning for a GPU nobody measured.
//!
//! Contract: given target GPUs (datasheet names, `all`, or `--gpu-file`), a
//! model, a workload and latency targets, `exp plan` predicts per GPU the
//! per-step costs, the KV-cache capacity, and the highest Poisson request
//! rate meeting the SLO with the engine settings that reach it, and runs the
//! cb_sweep experiment there. Every GPU runs on the crate's
//! [`crate::backend::SimBackend`] with the cost model
//! [`crate::backend::cost_for`] gives: a calibrated profile of the model's
//! shape (`--profile`, else `--profiles-dir`'s, else those built into
//! `exp`) transferred to the GPU, else sim's datasheet roofline; the output
//! says which, measured on which GPU ([`output::assumptions_text`]). Writes
//! under `--out DIR`:
//! - `plan.csv` (one row per GPU, [`output::PLAN_COLUMNS`]),
//!   `plan_search.csv` (every setting searched, with the reason a setting
//!   reached 0), `plan_curve.csv` and the figures `plan_ttft_p99` /
//!   `plan_itl_p99` (PNG + SVG: p99 latency vs rate at the best settings);
//! - `assumptions.txt` (also printed unless `--quiet`) and `meta.ron`;
//! - `cb_sweep.csv` (all GPUs) and cb_sweep's usual files under
//!   `DIR/<gpu>/cb_sweep/`; cb_sweep runs with its own parameter defaults
//!   (changed by `--cb-set`) on the plan's engine options (`--set`, apart
//!   from the two grid keys, which cb_sweep does not take from the plan).
//!
//! - with a rate to size a fleet for (`--set qps=Q`, or `--trace FILE` at
//!   its own rate times `--set rate_scale=..`), also `fleet_plan.csv` (one
//!   row per GPU: the fewest replicas, each one GPU of that type running one
//!   engine, meeting the SLO at that rate behind `--router`
//!   (least_outstanding by default), with the setting, `usd_per_hour` and
//!   `usd_per_million_output_tokens`; [`fleet_output::FLEET_COLUMNS`]),
//!   `fleet_search.csv` and the figures `fleet_usd_per_hour`,
//!   `fleet_usd_per_million_output_tokens`, `fleet_ttft_p99`,
//!   `fleet_itl_p99` ([`fleet_size`], [`fleet_output`]). Prices come from
//!   [`prices`] (`--prices FILE`). Tensor parallelism is out of scope: a
//!   replica is one GPU. `plan.csv` keeps its columns either way.
//!
//! `--shard K/N` searches only the K-th share of the (GPU, setting) grid
//! and writes `DIR/shard.ron` ([`shard`]); `exp merge` ([`merge`]) joins
//! the N shards into the files above, the same bytes as one unsharded run
//! (`date_utc` in `meta.ron` is when the first shard started, or
//! `SOURCE_DATE_EPOCH`).
//!
//! An SLO no setting can meet gives `max_qps_under_slo` 0 and a note saying
//! why, not an error; bad input (GPU, SLO, workload, settings, prices, shard
//! spec) fails before anything runs, naming the problem ([`inputs`]).

pub mod cb;
pub mod cost;
pub mod error;
pub mod evaluate;
pub mod fleet_output;
pub mod fleet_size;
pub mod gpus;
pub mod inputs;
pub mod merge;
pub mod output;
pub mod prices;
pub mod search;
pub mod shard;
pub mod slo;
pub mod steady;
pub mod workload;

pub use error::PlanError;
pub use evaluate::{GpuPlan, PlanRow};

use crate::backend::DEFAULT_MODEL;
use crate::driver::RunOutput;
use crate::shard::{ShardFile, ShardKind, ShardSpec, SHARD_FORMAT};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

/// Arguments of `exp plan`.
#[derive(Debug, Clone, PartialEq, clap::Args, serde::Serialize, serde::Deserialize)]
pub struct PlanArgs {
    /// Target GPUs: datasheet names, comma-separated, or `all`.
    #[arg(long)]
    pub gpu: Option<String>,
    /// RON list of extra GPU entries (`GpuSpec`), usable by name in --gpu.
    #[arg(long)]
    pub gpu_file: Option<PathBuf>,
    /// Model preset (qwen3-0.6b, -1.7b, -4b, -8b, -14b, -32b, tiny) or a Hugging Face
    /// directory (only its config.json is read).
    #[arg(long, default_value = DEFAULT_MODEL)]
    pub model: String,
    /// Calibrated cost profile to transfer (default: the first one built into exp of the model's shape, if any).
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Folder of profiles searched instead of the ones built into exp (ignored with --profile).
    #[arg(long)]
    pub profiles_dir: Option<PathBuf>,
    /// What prices the steps: a calibrated profile (else the roofline), or the
    /// operator model, with the error its hold-outs measured (plan.csv's
    /// expected_error_* columns).
    #[arg(long, value_enum, default_value = "profile")]
    #[serde(default)]
    pub cost_model: crate::cli_args::CostModelArg,
    /// Operator profile (written by `exp transfer-check`) instead of the one
    /// built into exp; with --cost-model operators.
    #[arg(long)]
    #[serde(default)]
    pub operator_profile: Option<PathBuf>,
    /// Workload: .ron description or .csv/.jsonl trace (default: Poisson, 512-token prompts, 128 outputs).
    #[arg(long, conflicts_with = "trace")]
    pub workload: Option<PathBuf>,
    /// A trace (.csv/.jsonl, any format exp run trace_replay reads) to size a fleet for, at its
    /// own rate times rate_scale (--set rate_scale=..), or at --set qps=..
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Router of a sized fleet: round_robin, least_outstanding, least_kv, prefix_aware, affinity.
    #[arg(long)]
    pub router: Option<String>,
    /// GPU price table (RON) replacing the built-in experiments/data/gpu_prices.ron.
    #[arg(long)]
    pub prices: Option<PathBuf>,
    /// Run only the K-th of N shares of the grid (K from 1 to N) and write
    /// DIR/shard.ron; join the shards with `exp merge`.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Latency targets, e.g. ttft_p99_ms=2000,itl_p99_ms=100 (the defaults).
    #[arg(long)]
    pub slo: Option<String>,
    #[arg(long, default_value = "results/plan")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// key=value: engine options as in `exp run`, or plan parameters
    /// (max_num_batched_tokens and max_num_seqs take the grid as a list,
    /// requests, max_requests, warmup_pct, precision_pct; fleet sizing:
    /// qps, rate_scale, max_replicas, router_load_weight).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// key=value for the cb_sweep run (its parameters, e.g. concurrency=1,4).
    #[arg(long = "cb-set", value_name = "KEY=VALUE")]
    pub cb_set: Vec<String>,
    /// No progress bar and nothing on stdout.
    #[arg(long)]
    pub quiet: bool,
}

/// What a plan produced.
pub struct PlanOutput {
    pub plans: Vec<GpuPlan>,
    pub cb_sweeps: Vec<RunOutput>,
    pub files: Vec<PathBuf>,
    pub assumptions: String,
}

fn progress(quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0).with_message("plan");
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} GPU x settings ({elapsed})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Runs `exp plan` and writes its files (with `--shard`, only the shard's
/// `shard.ron`).
pub fn run(args: &PlanArgs) -> Result<PlanOutput, PlanError> {
    let spec = args.shard.as_deref().map(ShardSpec::parse).transpose()?;
    let inputs = inputs::read(args)?;
    if let (Some(fleet), false) = (&inputs.fleet, inputs.quiet) {
        for line in fleet.unpriced_warnings(&inputs.targets) {
            eprintln!("{line}");
        }
    }
    let total = evaluate::grid_points(&inputs).len();
    let indices: Vec<usize> = match spec {
        Some(spec) => spec.units(total, "(GPU, setting) points")?,
        None => (0..total).collect(),
    };
    let unit = evaluate::unit_arrivals(&inputs)?;
    let bar = progress(inputs.quiet);
    let points = evaluate::search_points(&inputs, &unit, &indices, &bar)?;
    bar.finish_and_clear();
    let Some(spec) = spec else {
        return complete(&inputs, &unit, points);
    };
    let file = ShardFile {
        format: SHARD_FORMAT,
        kind: ShardKind::Plan,
        shard: spec,
        args: shard::shared_args(args),
        fingerprint: shard::fingerprint(&inputs)?,
        units: total,
        date_utc: inputs.date_utc.clone(),
        results: points,
    };
    let path = crate::shard::write(&inputs.out, &file)?;
    if !inputs.quiet {
        println!(
            "shard {spec}: {} of {total} grid points searched; wrote {} (join the shards with \
             `exp merge DIR... --out DIR`)",
            indices.len(),
            path.display()
        );
    }
    Ok(PlanOutput {
        plans: Vec::new(),
        cb_sweeps: Vec::new(),
        files: vec![path],
        assumptions: String::new(),
    })
}

/// Everything after the search, from every grid point's outcome (one run's,
/// or the shards' put together by `exp merge`): the plans, their files,
/// cb_sweep on each GPU, and the report on stdout.
pub fn complete(
    inputs: &inputs::PlanInputs,
    unit: &[sim::Arrival],
    points: Vec<evaluate::PointResult>,
) -> Result<PlanOutput, PlanError> {
    let plans = evaluate::finish(inputs, unit, points)?;
    let mut files = output::write_all(inputs, &plans, &inputs.out)?;
    let mut cb_sweeps = Vec::new();
    for p in &plans {
        let run = cb::run_cb_sweep(
            &p.target,
            &inputs.cb_settings,
            &inputs.out,
            inputs.method.seed,
            inputs.quiet,
            &inputs.date_utc,
        )?;
        files.extend(run.files.iter().cloned());
        cb_sweeps.push(run);
    }
    let named: Vec<(String, &RunOutput)> = plans
        .iter()
        .map(|p| p.row.gpu.clone())
        .zip(cb_sweeps.iter())
        .collect();
    let cb_path = inputs.out.join("cb_sweep.csv");
    std::fs::write(&cb_path, cb::combined_csv(&named)).map_err(|error| PlanError::Io {
        path: cb_path.clone(),
        error,
    })?;
    files.push(cb_path);
    let assumptions = output::assumptions_text(inputs, &plans);
    if !inputs.quiet {
        println!("{assumptions}");
        print!("{}", output::plan_table(&plans).to_csv());
        if let Some(fleet) = &inputs.fleet {
            let rows = fleet_output::fleet_rows(inputs, fleet, &plans);
            print!("{}", fleet_output::fleet_table(&rows).to_csv());
        }
        println!("wrote {} files under {}", files.len(), inputs.out.display());
    }
    Ok(PlanOutput {
        plans,
        cb_sweeps,
        files,
        assumptions,
    })
}
