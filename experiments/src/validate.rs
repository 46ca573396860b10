//! `exp validate`: every experiment in real then sim mode, one table of errors.
//!
//! Contract: runs each experiment (default: the five of docs/experiments.md and
//! `poisson_mix`) with two backends, real first then sim on the same scripts
//! (same seed, vocabulary and KV-cache size), writing each experiment's files
//! under `--out DIR` as `exp run --mode both` does, then `DIR/validation.csv`
//! with columns `experiment, condition, metric, real, sim, error_pct,
//! sim_low, sim_high` (`error_pct` = (sim − real) / real × 100; `sim_low`
//! and `sim_high` the sim figure's band with its cost model's held-out step
//! error carried through the run, [`crate::bands`], empty for a cost model
//! without one). Metrics kept from each
//! experiment's `compare.csv`: [`METRICS`], every TTFT (`*ttft*_ms`) and
//! cached-token column, and timing_leak's `attacker_accuracy`. Rows with
//! experiment `steps` hold `step_abs_error_pct_median` and
//! `step_abs_error_pct_p90` of |predicted − measured| / measured over every
//! real step (value in `error_pct`), per experiment and for `all`.
//! An experiment that fails is reported and the others still run; the
//! command fails at the end, after writing the table, naming the failures.
//!
//! `--short` ([`SHORT`]) runs fewer batches, rounds and trials with the same
//! request shapes. `--set KEY=VALUE` applies to every experiment that has
//! KEY (engine options: all of them); `--set NAME.KEY=VALUE` to one.
//! `trace_replay` needs a trace file: it runs only with `--set
//! trace_replay.trace=FILE` and is otherwise skipped with a note on stderr.

use crate::backend::{build_backends, Backend, Mode};
use crate::bands;
use crate::catalogue::{self, Experiment};
use crate::cli_args::{CostArgs, RunnerArgs};
use crate::driver::{run_experiment, RunOptions};
use crate::settings::{Settings, ENGINE_KEYS};
use crate::stats::percentile;
use crate::table::{Cell, Table};
use anyhow::{anyhow, bail, Context};
use clap::Args;
use std::path::PathBuf;
use std::time::Instant;

/// Metrics kept under their own name wherever an experiment reports them.
pub const METRICS: &[&str] = &[
    "throughput_tok_s",
    "ttft_median_ms",
    "itl_median_ms",
    "itl_p99_ms",
    "max_stall_ms",
    "cached_tokens",
];

/// `--short`: (experiment, key=value) applied after the defaults.
pub const SHORT: &[(&str, &str)] = &[
    ("cb_sweep", "batches=3"),
    ("chunk_sweep", "long_prompts=3"),
    ("chunk_sweep", "batches=3"),
    ("prefix_cache", "rounds=3"),
    ("salt_isolation", "rounds=3"),
    ("timing_leak", "trials=60"),
    ("poisson_mix", "requests=100"),
    ("poisson_mix", "skip=10"),
];

pub const COLUMNS: &[&str] = &[
    "experiment",
    "condition",
    "metric",
    "real",
    "sim",
    "error_pct",
    "sim_low",
    "sim_high",
];

#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// Output folder: DIR/NAME/{real,sim}/..., DIR/NAME/compare.csv, DIR/validation.csv.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub cost: CostArgs,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Experiments to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub experiments: Vec<String>,
    /// Fewer batches, rounds and trials (same request shapes).
    #[arg(long)]
    pub short: bool,
    /// KEY=VALUE for every experiment with KEY, or NAME.KEY=VALUE for one.
    #[arg(long = "set", value_name = "[NAME.]KEY=VALUE")]
    pub set: Vec<String>,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// Whether a `compare.csv` metric belongs in the validation table.
pub fn is_validation_metric(metric: &str) -> bool {
    METRICS.contains(&metric)
        || (metric.contains("ttft") && metric.ends_with("_ms"))
        || metric.ends_with("cached_tokens")
        || metric == "attacker_accuracy"
}

fn accepts(exp: &dyn Experiment, key: &str) -> bool {
    exp.params().iter().any(|p| p.key == key) || ENGINE_KEYS.iter().any(|(k, _)| *k == key)
}

/// An experiment that replays a trace file (a `trace` setting) but was given
/// none: validation skips it rather than fail, as no trace ships as a default.
fn needs_a_trace(exp: &dyn Experiment, settings: &Settings) -> bool {
    exp.params().iter().any(|p| p.key == "trace") && matches!(settings.path("trace"), Ok(None))
}

/// Each experiment's settings: defaults, `--short`, then every `--set`.
fn plan_settings(
    exps: &[&'static dyn Experiment],
    args: &ValidateArgs,
) -> anyhow::Result<Vec<Settings>> {
    let mut all = exps
        .iter()
        .map(|e| catalogue::default_settings(*e))
        .collect::<Result<Vec<_>, _>>()?;
    let short: &[(&str, &str)] = if args.short { SHORT } else { &[] };
    for (name, kv) in short {
        if let Some(i) = exps.iter().position(|e| e.name() == *name) {
            all[i].set_arg(kv).with_context(|| name.to_string())?;
        }
    }
    for arg in &args.set {
        let (key, value) = arg
            .split_once('=')
            .ok_or_else(|| anyhow!("--set {arg}: expected [NAME.]KEY=VALUE"))?;
        let (only, key) = match key.split_once('.') {
            Some((name, key)) => (Some(name), key),
            None => (None, key),
        };
        let mut applied = false;
        for (exp, settings) in exps.iter().zip(all.iter_mut()) {
            if only.is_some_and(|n| n != exp.name()) || !accepts(*exp, key) {
                continue;
            }
            settings
                .set_arg(&format!("{key}={value}"))
                .with_context(|| format!("--set {arg} ({})", exp.name()))?;
            applied = true;
        }
        if !applied {
            bail!("--set {arg}: no selected experiment has the key `{key}`");
        }
    }
    Ok(all)
}

/// The engine settings covering every experiment's (so the runner is built once).
fn widest_engine(settings: &[Settings]) -> engine::EngineConfig {
    let mut e = settings
        .first()
        .map(|s| s.engine.clone())
        .unwrap_or_default();
    for s in settings {
        e.max_num_seqs = e.max_num_seqs.max(s.engine.max_num_seqs);
        e.max_num_batched_tokens = e
            .max_num_batched_tokens
            .max(s.engine.max_num_batched_tokens);
        e.max_model_len = e.max_model_len.max(s.engine.max_model_len);
    }
    e
}

fn step_rows(table: &mut Table, condition: &str, errors: &[f64]) {
    for (metric, p) in [
        ("step_abs_error_pct_median", 50.0),
        ("step_abs_error_pct_p90", 90.0),
    ] {
        table.push(vec![
            Cell::text("steps"),
            Cell::text(condition),
            Cell::text(metric),
            Cell::Empty,
            Cell::Empty,
            Cell::num(percentile(errors, p)),
        ]);
    }
}

pub fn run(args: &ValidateArgs) -> anyhow::Result<()> {
    let exps: Vec<&'static dyn Experiment> = if args.experiments.is_empty() {
        // Validation compares real runs with simulated ones: an experiment
        // the real backend cannot run has nothing to compare.
        catalogue::all()
            .into_iter()
            .filter(|e| !e.sim_only())
            .collect()
    } else {
        args.experiments
            .iter()
            .map(|n| catalogue::find(n).ok_or_else(|| anyhow!("unknown experiment `{n}`")))
            .collect::<anyhow::Result<_>>()?
    };
    let settings = plan_settings(&exps, args)?;
    let spec = args.runner.spec(&args.cost, &widest_engine(&settings))?;
    let backends = build_backends(Mode::Both, &spec)?;
    let backends: Vec<&dyn Backend> = backends.iter().map(|b| b.as_ref()).collect();
    let opts = RunOptions {
        out: args.out.clone(),
        seed: args.seed,
        quiet: args.quiet,
        prompts: None,
        date_utc: engine::date::output_date()?,
    };
    let mut table = Table::new(COLUMNS);
    let (mut all_errors, mut failures) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for (exp, s) in exps.iter().zip(&settings) {
        if needs_a_trace(*exp, s) {
            eprintln!(
                "{}: skipped, no trace given (--set {}.trace=FILE replays one)",
                exp.name(),
                exp.name()
            );
            continue;
        }
        let t0 = Instant::now();
        match run_experiment(*exp, s, &backends, &opts) {
            Ok(output) => {
                let sim = backends[backends.len() - 1];
                let report = &output.report;
                let summary = (&report.summary, report.key_columns);
                let bands = match bands::propagate(
                    *exp, s, sim, summary.0, summary.1, args.seed, None, args.quiet,
                ) {
                    Ok(bands) => bands,
                    Err(e) => {
                        eprintln!("{}: the sim's bands FAILED: {e}", exp.name());
                        failures.push(format!("{} (bands): {e}", exp.name()));
                        None
                    }
                };
                for row in output.compare.iter().flat_map(|c| &c.rows) {
                    let metric = row.get(1).map(|c| c.to_string()).unwrap_or_default();
                    if is_validation_metric(&metric) {
                        let mut r = vec![Cell::text(exp.name())];
                        r.extend(row.iter().cloned());
                        let condition = row.first().map(|c| c.to_string()).unwrap_or_default();
                        r.extend(bands::band_of(bands.as_ref(), &condition, &metric));
                        table.push(r);
                    }
                }
                step_rows(&mut table, exp.name(), &output.step_errors_pct);
                all_errors.extend(output.step_errors_pct);
                eprintln!(
                    "{}: done in {:.1} s",
                    exp.name(),
                    t0.elapsed().as_secs_f64()
                );
            }
            Err(e) => {
                eprintln!(
                    "{}: FAILED after {:.1} s: {e}",
                    exp.name(),
                    t0.elapsed().as_secs_f64()
                );
                failures.push(format!("{}: {e}", exp.name()));
            }
        }
    }
    step_rows(&mut table, "all", &all_errors);
    std::fs::create_dir_all(&args.out).with_context(|| args.out.display().to_string())?;
    let path = args.out.join("validation.csv");
    std::fs::write(&path, table.to_csv()).with_context(|| path.display().to_string())?;
    eprintln!(
        "wrote {} ({} rows) in {:.1} s",
        path.display(),
        table.rows.len(),
        started.elapsed().as_secs_f64()
    );
    if let Some((inside, banded)) = bands::measured_inside(&table) {
        eprintln!(
            "measured figures inside the sim's band (its cost model's held-out step error \
             carried through): {inside} of {banded}"
        );
    }
    if !failures.is_empty() {
        bail!(
            "{} experiment(s) failed: {}",
            failures.len(),
            failures.join("; ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: ValidateArgs,
    }

    fn args(extra: &[&str]) -> ValidateArgs {
        let base = ["validate", "--out", "x"];
        Wrap::parse_from(base.iter().chain(extra)).args
    }

    #[test]
    fn validation_metrics_are_latency_throughput_and_cache_columns() {
        for m in [
            "throughput_tok_s",
            "itl_p99_ms",
            "max_stall_ms",
            "cold_ttft_ms",
            "hit_ttft_median_ms",
            "interleaved_ttft_ms",
            "warm_cached_tokens",
            "attacker_accuracy",
        ] {
            assert!(is_validation_metric(m), "{m}");
        }
        for m in [
            "throughput_spread_pct",
            "measured_batches",
            "preemptions",
            "speedup",
        ] {
            assert!(!is_validation_metric(m), "{m}");
        }
    }

    #[test]
    fn set_applies_to_every_experiment_with_the_key_or_to_one() {
        let exps: Vec<&'static dyn Experiment> = ["cb_sweep", "chunk_sweep", "prefix_cache"]
            .iter()
            .map(|n| catalogue::find(n).unwrap())
            .collect();
        let a = args(&[
            "--set",
            "prompt_tokens=48",
            "--set",
            "chunk_sweep.batches=5",
            "--set",
            "max_model_len=1024",
            "--short",
        ]);
        let s = plan_settings(&exps, &a).unwrap();
        assert_eq!(s[0].count("prompt_tokens").unwrap(), 48);
        assert_eq!(s[1].count("prompt_tokens").unwrap(), 48);
        assert_eq!(s[0].count("batches").unwrap(), 3, "--short");
        assert_eq!(s[1].count("batches").unwrap(), 5, "NAME.KEY after --short");
        assert_eq!(s[2].count("rounds").unwrap(), 3, "--short");
        assert!(s.iter().all(|x| x.engine.max_model_len == 1024));
        let e = plan_settings(&exps, &args(&["--set", "trials=3"])).unwrap_err();
        assert!(format!("{e:#}").contains("trials"), "{e:#}");
        let e = plan_settings(&exps, &args(&["--set", "cb_sweep.rounds=3"])).unwrap_err();
        assert!(format!("{e:#}").contains("rounds"), "{e:#}");
        let e = plan_settings(&exps, &args(&["--set", "batches"])).unwrap_err();
        assert!(format!("{e:#}").contains("KEY=VALUE"), "{e:#}");
    }

    #[test]
    fn trace_replay_is_skipped_only_without_a_trace() {
        let exps = catalogue::all();
        let at = |name: &str| exps.iter().position(|e| e.name() == name).unwrap();
        let (replay, mix) = (at("trace_replay"), at("poisson_mix"));
        let s = plan_settings(&exps, &args(&[])).unwrap();
        assert!(needs_a_trace(exps[replay], &s[replay]));
        assert!(!needs_a_trace(exps[mix], &s[mix]), "no trace setting");
        let given = args(&["--set", "trace_replay.trace=t.csv"]);
        let s = plan_settings(&exps, &given).unwrap();
        assert!(!needs_a_trace(exps[replay], &s[replay]));
    }

    #[test]
    fn the_runner_is_sized_for_the_widest_experiment() {
        let exps = catalogue::all();
        let a = args(&[
            "--set",
            "cb_sweep.max_model_len=8192",
            "--set",
            "prefix_cache.max_num_seqs=300",
        ]);
        let e = widest_engine(&plan_settings(&exps, &a).unwrap());
        assert_eq!((e.max_model_len, e.max_num_seqs), (8192, 300));
        assert_eq!(e.max_num_batched_tokens, 2048);
    }
}
