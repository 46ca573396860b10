//! `exp run NAME`: one experiment in sim, real or both modes.
//!
//! Contract: settings apply in order (experiment defaults, `--config
//! FILE.ron`, each `--set key=value`); the run's files go under `OUT/NAME/`,
//! which replaces the previous run's folder whole ([`crate::run_dir`]).
//! stdout carries only the summary CSV of the last mode run (with `--seeds
//! N`, `seeds.csv`), so `exp run X > s.csv` is a clean CSV; stderr has the
//! progress bar and then `wrote PATH` for every file written; `--quiet`
//! prints nothing on either but errors. A closed stdout (`exp run X | head`)
//! is not an error.
//!
//! `--endpoint URL` runs real mode against an OpenAI-compatible server
//! (`--mode both`: then its sim twin; `--mode sim` is refused), with
//! `--model-name` the served model (default: the first it lists) and
//! `--model` its shape (prompt vocabulary, twin); see docs/endpoint.md.
//!
//! `--seeds N` (sim mode only) repeats the run with seeds seed..seed+N-1:
//! the first seed's files are written as for one seed, and the mode folder
//! also gets `summary_seeds.csv` (every seed's summary) and `seeds.csv`
//! (every metric's spread over the seeds, [`crate::seeds`]).
//!
//! A sim run priced by a cost model with a held-out step error (the
//! operator model) runs again with every step off by shares of that error
//! and writes each figure's band to `bands.csv` beside its summary
//! ([`crate::bands`]; the first seed's run only).

use crate::backend::{build_backends, Backend, EndpointSpec, Mode};
use crate::catalogue::{self, Experiment};
use crate::cli::{find, write_stdout};
use crate::cli_args::{CostArgs, RunnerArgs};
use crate::config_file;
use crate::driver::{self, evaluate, write_run, RunOptions, RunOutput};
use crate::run_dir::StagedRun;
use crate::settings::Settings;
use crate::table::Table;
use crate::{bands, progress, seeds};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum ModeArg {
    Real,
    Sim,
    Both,
}

impl From<ModeArg> for Mode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Real => Mode::Real,
            ModeArg::Sim => Mode::Sim,
            ModeArg::Both => Mode::Both,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
pub struct RunArgs {
    pub name: String,
    /// sim (the default), real, or both; with --endpoint, real (the default) or both.
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Real mode against this OpenAI-compatible server (vLLM, or `exp
    /// serve --mode sim`), e.g. http://localhost:8000.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The model the endpoint serves (default: the first of GET /v1/models).
    #[arg(long, value_name = "NAME", requires = "endpoint")]
    pub model_name: Option<String>,
    /// Output folder; files go to OUT/NAME/MODE/ and figures to OUT/NAME/.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Sim mode: repeat the run with seeds seed..seed+N-1 and write each
    /// metric's mean, sd and 95% interval over them (seeds.csv).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seeds: u64,
    #[command(flatten)]
    pub cost: CostArgs,
    #[command(flatten)]
    pub runner: RunnerArgs,
    /// RON file of settings, applied before --set.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// key=value; engine options (EngineConfig names) or experiment parameters.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Hugging Face tokenizer.json: prompts become random English words
    /// through it instead of random token ids.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// No progress bar, no summary on stdout and no file list on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Request trace replayed by trace_replay (its `trace` setting);
    /// formats in docs/traces.md.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Sim mode: run only the K-th of N shares of the experiment's
    /// conditions (K from 1 to N) and write OUT/NAME/shard.ron; join the
    /// shards with `exp merge`.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
}

/// The seeds `--seed S --seeds N` asks for in `mode`.
fn seed_list(seed: u64, count: u64, mode: Mode) -> anyhow::Result<Vec<u64>> {
    if count == 0 {
        bail!("--seeds 0: give the number of seeds to run, at least 1 (the default)");
    }
    if count > 1 && mode != Mode::Sim {
        bail!(
            "--seeds {count} repeats sim runs only; use --mode sim, or leave --seeds out \
             with --mode {}",
            mode.dir_name()
        );
    }
    let Some(last) = seed.checked_add(count - 1) else {
        bail!(
            "--seed {seed} --seeds {count}: the last seed would pass {}",
            u64::MAX
        );
    };
    Ok((seed..=last).collect())
}

/// What `exp run`'s arguments resolve to before anything runs.
pub struct Resolved {
    pub exp: &'static dyn Experiment,
    pub settings: Settings,
    pub mode: Mode,
    pub seeds: Vec<u64>,
    /// Real before sim in `--mode both`.
    pub backends: Vec<Box<dyn Backend>>,
    pub opts: RunOptions,
}

/// The mode `args` ask for: `--mode`, else real with `--endpoint`, else sim.
pub fn mode_of(args: &RunArgs) -> Mode {
    match (args.mode, &args.endpoint) {
        (Some(mode), _) => mode.into(),
        (None, Some(_)) => Mode::Real,
        (None, None) => Mode::Sim,
    }
}

/// Reads the settings, cost model, runner and prompts `args` name.
pub fn resolve(args: &RunArgs) -> anyhow::Result<Resolved> {
    let mode = mode_of(args);
    let seeds = seed_list(args.seed, args.seeds, mode)?;
    let exp: &'static dyn Experiment = find(&args.name)?;
    let mut settings = catalogue::default_settings(exp)?;
    if let Some(path) = &args.config {
        config_file::apply_file(&mut settings, path)?;
    }
    if let Some(path) = &args.trace {
        if exp.params().iter().all(|p| p.key != "trace") {
            bail!(
                "--trace FILE is read by trace_replay only, not {}",
                args.name
            );
        }
        settings.set("trace", &path.to_string_lossy())?;
    }
    for arg in &args.set {
        settings.set_arg(arg)?;
    }
    let mut spec = args.runner.spec(&args.cost, &settings.engine)?;
    if let Some(url) = &args.endpoint {
        if args.runner.backend.is_some() || args.runner.sm_count.is_some() {
            bail!(
                "--backend and --sm-count pick the runner in this process; with --endpoint \
                 {url} the server runs the model, so leave them out"
            );
        }
        spec.endpoint = Some(EndpointSpec {
            url: url.clone(),
            model_name: args.model_name.clone(),
        });
    }
    let backends = build_backends(mode, &spec)?;
    let prompts = args
        .tokenizer
        .as_ref()
        .map(|path| sim::workload::PromptSource::from_tokenizer_file(path))
        .transpose()?;
    let opts = RunOptions {
        out: args.out.clone(),
        seed: args.seed,
        quiet: args.quiet,
        prompts,
        date_utc: engine::date::output_date()?,
    };
    Ok(Resolved {
        exp,
        settings,
        mode,
        seeds,
        backends,
        opts,
    })
}

/// Runs `args.name` and prints its summary CSV on stdout (with `--shard`,
/// runs its share and writes `shard.ron`, [`crate::run_shard`]).
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    if let Some(spec) = &args.shard {
        return crate::run_shard::run(args, spec);
    }
    let Resolved {
        exp,
        settings,
        seeds,
        backends,
        opts,
        ..
    } = resolve(args)?;
    let backends: Vec<&dyn Backend> = backends.iter().map(|b| b.as_ref()).collect();
    let context = || format!("experiment {}", args.name);
    let staged = StagedRun::begin(&opts.out, exp.name()).with_context(context)?;
    let mut output =
        write_run(exp, &settings, &backends, &opts, staged.path(), &seeds).with_context(context)?;
    let bands_note =
        write_bands(exp, &settings, &backends, &opts, &mut output).with_context(context)?;
    let mut printed = output.report.summary.to_csv();
    // More than one seed (sim mode only, one backend: `seed_list`).
    if let ([backend], [_, _, ..]) = (backends.as_slice(), seeds.as_slice()) {
        printed = repeat_seeds(exp, &settings, *backend, &opts, &seeds, &mut output)
            .with_context(context)?;
    }
    let output = driver::commit(staged, output).with_context(context)?;
    print_run(args.quiet, &printed, &output, &backends)?;
    if let (false, Some(note)) = (args.quiet, bands_note) {
        eprintln!("{note}");
    }
    Ok(())
}

/// Where the last backend (sim) has a held-out step error: the run again
/// with its steps off by shares of it, each figure's band in `bands.csv`
/// beside the summary ([`crate::bands`]); returns the line saying which
/// figure moves most.
fn write_bands(
    exp: &dyn Experiment,
    settings: &Settings,
    backends: &[&dyn Backend],
    opts: &RunOptions,
    output: &mut RunOutput,
) -> anyhow::Result<Option<String>> {
    let Some(backend) = backends.last() else {
        return Ok(None);
    };
    let report = &output.report;
    let Some(bands) = bands::propagate(
        exp,
        settings,
        *backend,
        &report.summary,
        report.key_columns,
        opts.seed,
        opts.prompts.as_ref(),
        opts.quiet,
    )?
    else {
        return Ok(None);
    };
    let path = output.dir.join("bands.csv");
    std::fs::write(&path, bands.to_csv()).with_context(|| path.display().to_string())?;
    output.files.push(path);
    Ok(bands::widest(&bands, &[]).map(|(condition, metric, pct)| {
        format!(
            "that step error carried through this run (bands.csv): figures move by up to \
             \u{b1}{pct:.0} % ({metric} at {condition})"
        )
    }))
}

/// stdout gets `printed`, stderr the expected error of each backend's
/// figures (where its cost model has one) and the files written, unless `quiet`.
pub fn print_run(
    quiet: bool,
    printed: &str,
    output: &RunOutput,
    backends: &[&dyn Backend],
) -> anyhow::Result<()> {
    if !quiet {
        write_stdout(printed)?;
        for backend in backends {
            if let Some(e) = backend.info().expected_error {
                eprintln!("{}", expected_error_line(&e));
            }
        }
        for file in &output.files {
            eprintln!("wrote {}", file.display());
        }
    }
    Ok(())
}

/// How a sim run states the error its figures are expected to have.
pub fn expected_error_line(e: &calibration::operators::profile::ExpectedError) -> String {
    let mut line = format!(
        "expected error of these figures (held out): ITL and decode steps \u{b1}{:.0} %, TTFT \
         and prefill steps \u{b1}{:.0} %, throughput \u{b1}{:.0} % ({})",
        e.decode_pct,
        e.prefill_pct,
        e.step_pct(),
        e.basis
    );
    for note in &e.off_ground {
        line.push_str(&format!("\noff the measured ground: {note}"));
    }
    line
}

/// Runs the seeds after the first (whose run `output` holds) and writes
/// `summary_seeds.csv` and `seeds.csv` beside its summary; returns `seeds.csv`.
fn repeat_seeds(
    exp: &dyn Experiment,
    settings: &Settings,
    backend: &dyn Backend,
    opts: &RunOptions,
    seeds: &[u64],
    output: &mut RunOutput,
) -> anyhow::Result<String> {
    let bar = progress::conditions_bar(opts.quiet, exp.name());
    let mut summaries: Vec<(u64, Table)> = vec![(opts.seed, output.report.summary.clone())];
    for &seed in seeds.iter().skip(1) {
        bar.set_message(format!("(seed {seed})"));
        let evaluation = evaluate(exp, settings, backend, seed, opts.prompts.as_ref(), &bar)?;
        summaries.push((seed, evaluation.report.summary));
    }
    bar.finish_and_clear();
    let tables: Vec<(u64, &Table)> = summaries.iter().map(|(s, t)| (*s, t)).collect();
    let spread = seeds::spread(&tables, output.report.key_columns)?.to_csv();
    let per_seed = seeds::per_seed(&tables)?.to_csv();
    for (name, text) in [("summary_seeds.csv", &per_seed), ("seeds.csv", &spread)] {
        let path = output.dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("{}", path.display()))?;
        output.files.push(path);
    }
    Ok(spread)
}
