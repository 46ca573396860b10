//! `exp run NAME`: one experiment in sim, real or both modes.
//!
//! Contract: settings apply in order (experiment defaults, `--config
//! FILE.ron`, each `--set key=value`); the run's files go under `OUT/NAME/`
//! ([`crate::driver`]). stdout carries only the summary CSV of the last mode
//! run, so `exp run X > s.csv` is a clean CSV; `--quiet` prints nothing on
//! stdout or stderr but errors. A closed stdout (`exp run X | head`) is not
//! an error.

use crate::backend::{build_backends, Backend, Mode};
use crate::catalogue::{self, Experiment};
use crate::cli::{find, write_stdout};
use crate::cli_args::{CostArgs, RunnerArgs};
use crate::config_file;
use crate::driver::{run_experiment, RunOptions};
use anyhow::Context;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
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

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    pub name: String,
    #[arg(long, value_enum, default_value = "sim")]
    pub mode: ModeArg,
    /// Output folder; files go to OUT/NAME/MODE/ and figures to OUT/NAME/.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
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
}

/// Runs `args.name` and prints its summary CSV on stdout.
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let exp: &dyn Experiment = find(&args.name)?;
    let mut settings = catalogue::default_settings(exp)?;
    if let Some(path) = &args.config {
        config_file::apply_file(&mut settings, path)?;
    }
    for arg in &args.set {
        settings.set_arg(arg)?;
    }
    let spec = args.runner.spec(&args.cost, &settings.engine)?;
    let backends = build_backends(args.mode.into(), &spec)?;
    let backends: Vec<&dyn Backend> = backends.iter().map(|b| b.as_ref()).collect();
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
    };
    let output = run_experiment(exp, &settings, &backends, &opts)
        .with_context(|| format!("experiment {}", args.name))?;
    if !args.quiet {
        write_stdout(&output.report.summary.to_csv())?;
        eprintln!(
            "wrote {} files under {}",
            output.files.len(),
            output.dir.display()
        );
    }
    Ok(())
}
