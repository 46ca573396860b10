//! The `exp` command line.
//!
//! Contract: `exp list` names the experiments; `exp show NAME` lists the keys
//! `--set` accepts with their defaults; `exp run NAME --mode sim ...` runs
//! one (`--mode real|sim|both`); `exp calibrate` fits a cost profile;
//! `exp validate` runs everything in both modes. Settings apply in order:
//! experiment defaults, `--config FILE.ron`, then each `--set key=value`. Every failure is an error whose message
//! names the problem (experiment, key, value, file position). `exp run`
//! lives in [`crate::run_cmd`]. Text for stdout goes through
//! [`write_stdout`], so a reader that closes the pipe early ends the output
//! quietly with exit status 0.

use crate::catalogue::{self, Experiment};
use crate::run_cmd::RunArgs;
use crate::settings::ENGINE_KEYS;
use anyhow::anyhow;
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;

#[derive(Debug, Parser)]
#[command(
    name = "exp",
    about = "Run servetwin's named experiments (docs/experiments.md)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Names and one-line descriptions of the experiments.
    List,
    /// The settings an experiment accepts, with defaults.
    Show { name: String },
    /// Run an experiment.
    Run(RunArgs),
    /// Greedy generation with the real engine: text through the model
    /// directory's tokenizer.json, or token ids.
    Generate(crate::generate::GenerateArgs),
    /// Measure the real runner over a grid of batches and fit a cost profile.
    Calibrate(crate::calibrate::CalibrateArgs),
    /// Run every experiment in real and sim mode and write validation.csv.
    Validate(crate::validate::ValidateArgs),
    /// Capacity plan: per GPU, step costs, KV capacity, max request rate under latency targets.
    Plan(crate::plan::PlanArgs),
    /// Join the shards of `exp plan --shard K/N` or `exp run NAME --shard K/N` into the files of one unsharded run.
    Merge(crate::plan::merge::MergeArgs),
    /// OpenAI-compatible HTTP server over the engine (docs/serve.md).
    Serve(crate::serve_cmd::ServeArgs),
    /// Fit the operator cost model on family measurements and predict held-out sizes and SM counts.
    TransferCheck(crate::transfer_check::TransferArgs),
}

/// The experiment called `name`, or an error listing the known ones.
pub(crate) fn find(name: &str) -> anyhow::Result<&'static dyn Experiment> {
    catalogue::find(name).ok_or_else(|| {
        let names: Vec<&str> = catalogue::all().iter().map(|e| e.name()).collect();
        anyhow!(
            "unknown experiment `{name}`; known experiments: {}",
            names.join(", ")
        )
    })
}

/// Writes `text` to stdout through its lock. A reader that closed the pipe
/// early (`exp show NAME | head`) is not an error: the output it wanted has
/// been delivered, so EPIPE ends the write quietly instead of panicking.
pub(crate) fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

// Writing into a String cannot fail, so the `writeln!` results are dropped.
fn list() -> String {
    let mut text = String::new();
    for e in catalogue::all() {
        let _ = writeln!(text, "{:<16} {}", e.name(), e.description());
    }
    text
}

fn show(exp: &dyn Experiment) -> anyhow::Result<String> {
    let settings = catalogue::default_settings(exp)?;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}: {}\n\nexperiment parameters (--set key=value):",
        exp.name(),
        exp.description()
    );
    for p in exp.params() {
        let _ = writeln!(text, "  {:<24} default {:<20} {}", p.key, p.default, p.help);
    }
    let _ = writeln!(
        text,
        "\nengine options (the experiments' defaults, docs/experiments.md):"
    );
    let engine = ron::to_string(&settings.engine).unwrap_or_default();
    for (key, expected) in ENGINE_KEYS {
        if exp.params().iter().all(|p| p.key != *key) {
            let _ = writeln!(text, "  {key:<24} {expected}");
        }
    }
    let _ = writeln!(text, "  current: {engine}");
    Ok(text)
}

/// `exp merge`: the shards of a plan or of a run, as the first one says.
fn merge(args: &crate::plan::merge::MergeArgs) -> anyhow::Result<()> {
    use crate::shard::{kind_of, ShardKind};
    let kind = match args.dirs.first() {
        Some(dir) => kind_of(dir)?,
        None => ShardKind::Plan,
    };
    match kind {
        ShardKind::Plan => drop(crate::plan::merge::run(args)?),
        ShardKind::Run => drop(crate::run_shard::merge(args)?),
    }
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
            write_stdout(&e.to_string())?;
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
        Command::Merge(args) => merge(&args)?,
        Command::Serve(args) => crate::serve_cmd::run(&args)?,
        Command::TransferCheck(args) => crate::transfer_check::run(&args)?,
        Command::List => write_stdout(&list())?,
        Command::Show { name } => write_stdout(&show(find(&name)?)?)?,
        Command::Run(args) => crate::run_cmd::run(&args)?,
    }
    Ok(())
}
