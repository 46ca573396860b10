//! The `exp` command line.
//!
//! Contract: `exp list` names the experiments; `exp show NAME` lists the keys
//! `--set` accepts with their defaults; `exp run NAME --mode sim ...` runs
//! one (`--mode real|sim|both`); `exp calibrate` fits a cost profile;
//! `exp validate` runs everything in both modes. Settings apply in order:
//! experiment defaults, `--config FILE.ron`, then each `--set key=value`. Every failure is an error whose message
//! names the problem (experiment, key, value, file position).

use crate::backend::{build_backends, Backend, Mode};
use crate::catalogue::{self, Experiment};
use crate::cli_args::{CostArgs, RunnerArgs};
use crate::config_file;
use crate::driver::{run_experiment, RunOptions};
use crate::settings::ENGINE_KEYS;
use anyhow::{anyhow, Context};
use clap::{Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "exp",
    about = "Run servetwin's named experiments (docs/experiments.md)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    Real,
    Sim,
    Both,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Names and one-line descriptions of the experiments.
    List,
    /// The settings an experiment accepts, with defaults.
    Show { name: String },
    /// Run an experiment.
    Run {
        name: String,
        #[arg(long, value_enum, default_value = "sim")]
        mode: ModeArg,
        /// Output folder; files go to OUT/NAME/MODE/ and figures to OUT/NAME/.
        #[arg(long, default_value = "results")]
        out: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        cost: CostArgs,
        #[command(flatten)]
        runner: RunnerArgs,
        /// RON file of settings, applied before --set.
        #[arg(long)]
        config: Option<PathBuf>,
        /// key=value; engine options (EngineConfig names) or experiment parameters.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Hugging Face tokenizer.json: prompts become random English words
        /// through it instead of random token ids.
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// No progress bar and no summary on stdout.
        #[arg(long)]
        quiet: bool,
    },
    /// Greedy generation with the real engine: text through the model
    /// directory's tokenizer.json, or token ids.
    Generate(crate::generate::GenerateArgs),
    /// Measure the real runner over a grid of batches and fit a cost profile.
    Calibrate(crate::calibrate::CalibrateArgs),
    /// Run every experiment in real and sim mode and write validation.csv.
    Validate(crate::validate::ValidateArgs),
    /// Capacity plan: per GPU, step costs, KV capacity, max request rate under latency targets.
    Plan(crate::plan::PlanArgs),
    /// OpenAI-compatible HTTP server over the engine (docs/serve.md).
    Serve(crate::serve_cmd::ServeArgs),
}

fn find(name: &str) -> anyhow::Result<&'static dyn Experiment> {
    catalogue::find(name).ok_or_else(|| {
        let names: Vec<&str> = catalogue::all().iter().map(|e| e.name()).collect();
        anyhow!(
            "unknown experiment `{name}`; known experiments: {}",
            names.join(", ")
        )
    })
}

fn list() {
    for e in catalogue::all() {
        println!("{:<16} {}", e.name(), e.description());
    }
}

fn show(exp: &dyn Experiment) -> anyhow::Result<()> {
    let settings = catalogue::default_settings(exp)?;
    println!(
        "{}: {}\n\nexperiment parameters (--set key=value):",
        exp.name(),
        exp.description()
    );
    for p in exp.params() {
        println!("  {:<24} default {:<20} {}", p.key, p.default, p.help);
    }
    println!("\nengine options (the experiments' defaults, docs/experiments.md):");
    let engine = ron::to_string(&settings.engine).unwrap_or_default();
    for (key, expected) in ENGINE_KEYS {
        if exp.params().iter().all(|p| p.key != *key) {
            println!("  {key:<24} {expected}");
        }
    }
    println!("  current: {engine}");
    Ok(())
}

/// Parses `args` (program name first) and runs the command.
pub fn run_cli<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help / --version: print and succeed.
            print!("{e}");
            return Ok(());
        }
        // clap's text starts with its own "error: "; main adds one.
        Err(e) => {
            let text = e.to_string();
            return Err(anyhow!("{}", text.trim_start_matches("error: ").trim_end()));
        }
    };
    match cli.command {
        Command::Generate(args) => crate::generate::run(&args)?,
        Command::Calibrate(args) => crate::calibrate::run(&args)?,
        Command::Validate(args) => crate::validate::run(&args)?,
        Command::Plan(args) => drop(crate::plan::run(&args)?),
        Command::Serve(args) => crate::serve_cmd::run(&args)?,
        Command::List => list(),
        Command::Show { name } => show(find(&name)?)?,
        Command::Run {
            name,
            mode,
            out,
            seed,
            cost,
            runner,
            config,
            set,
            tokenizer,
            quiet,
        } => {
            let exp = find(&name)?;
            let mut settings = catalogue::default_settings(exp)?;
            if let Some(path) = &config {
                config_file::apply_file(&mut settings, path)?;
            }
            for arg in &set {
                settings.set_arg(arg)?;
            }
            let mode = match mode {
                ModeArg::Real => Mode::Real,
                ModeArg::Sim => Mode::Sim,
                ModeArg::Both => Mode::Both,
            };
            let spec = runner.spec(&cost, &settings.engine)?;
            let backends = build_backends(mode, &spec)?;
            let backends: Vec<&dyn Backend> = backends.iter().map(|b| b.as_ref()).collect();
            let prompts = tokenizer
                .map(|path| sim::workload::PromptSource::from_tokenizer_file(&path))
                .transpose()?;
            let opts = RunOptions {
                out,
                seed,
                quiet,
                prompts,
            };
            let output = run_experiment(exp, &settings, &backends, &opts)
                .with_context(|| format!("experiment {name}"))?;
            if !quiet {
                print!("{}", output.report.summary.to_csv());
                println!(
                    "wrote {} files under {}",
                    output.files.len(),
                    output.dir.display()
                );
            }
        }
    }
    Ok(())
}
