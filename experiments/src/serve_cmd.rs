//! `exp serve`: the OpenAI-compatible server (the `serve` crate) in front of
//! an engine built the way `exp run` builds one.
//!
//! Contract: `--mode sim` (the default) serves a `sim::SimRunner` priced by
//! the cost model `--profile`/`--gpu`/`--profiles-dir` pick (the shipped H200
//! profile for Qwen3-0.6B's shape by default; see `backend::cost`), with the
//! KV pool the simulated GPU holds, on the wall clock: each step sleeps its
//! modeled time × `time_scale`. `--set` takes engine options by their vLLM
//! names and `time_scale` (default 1; 0.01 runs 100× faster, for tests).
//!
//! `--mode real` serves the real engine: the runner `--backend` names (CUDA
//! by default, or the CPU reference), for `--model` with synthetic weights
//! from `--weights-seed` or a directory's safetensors, built and warmed up
//! exactly as `exp run --mode real` builds it (`backend::runner::build` for
//! `RunnerLimits::for_engine` of the engine options), on the engine loop
//! thread (the CUDA runner must stay on the thread that made it). Requests
//! without `ignore_eos` stop at the model's EOS token. `time_scale` and the
//! cost-model options have no meaning there and are refused; so are
//! `--backend` and `--sm-count` in sim mode.
//!
//! Once bound, one line `serving MODEL on http://ADDR (...)` goes to stdout
//! (real: the runner, its device and the KV blocks); SIGINT or SIGTERM
//! drains and exits 0.

use crate::backend::cost::resolve;
use crate::backend::runner::{self, AnyRunner};
use crate::backend::{BackendError, LoadedModel, ModelChoice, RunnerLimits};
use crate::cli_args::{CostArgs, RunnerArgs};
use crate::settings::{ParamKind, ParamSpec, Settings};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use engine::EngineCore;
use sim::SimRunner;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// Settings of `exp serve` that are not engine options.
const SERVE_PARAMS: &[ParamSpec] = &[ParamSpec {
    key: "time_scale",
    kind: ParamKind::Number,
    default: "1",
    help: "sim mode: wall-clock seconds per modeled second of a step (0.01 = 100x faster)",
}];

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ServeMode {
    Sim,
    Real,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// sim: the simulated runner on the cost model, paced on the wall clock;
    /// real: the model on the CPU or CUDA runner (--backend).
    #[arg(long, value_enum, default_value = "sim")]
    pub mode: ServeMode,
    /// --model (also the name clients send), and in real mode the runner:
    /// --backend, --weights-seed, --sm-count.
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// 0 picks a free port (printed on stdout).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Sim mode's cost model.
    #[command(flatten)]
    pub cost: CostArgs,
    /// key=value: engine options (vLLM names), or in sim mode time_scale.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Hugging Face tokenizer.json for text prompts (real mode: the model
    /// directory's by default); without one each byte of a text prompt is
    /// one token.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let mut settings = Settings::new(SERVE_PARAMS)?;
    for arg in &args.set {
        settings.set_arg(arg)?;
    }
    match args.mode {
        ServeMode::Sim => serve_sim(args, &settings),
        ServeMode::Real => serve_real(args, &settings),
    }
}

/// Whether `--set KEY=...` appears among `sets`.
fn is_set(sets: &[String], key: &str) -> bool {
    sets.iter()
        .any(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == key))
}

fn server_config(args: &ServeArgs, codec: serve::TextCodec) -> serve::ServerConfig {
    serve::ServerConfig {
        addr: SocketAddr::new(args.host, args.port),
        model_name: args.runner.model.clone(),
        time_scale: 1.0,
        codec,
        eos_token_id: None,
    }
}

/// The line scripts read the port from; it must not sit in a buffer.
fn announce(line: &str) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

fn serve_sim(args: &ServeArgs, settings: &Settings) -> anyhow::Result<()> {
    if args.runner.backend.is_some() || args.runner.sm_count.is_some() {
        bail!(
            "--backend and --sm-count pick the real runner; --mode sim serves the simulated \
             one: add --mode real, or leave them out"
        );
    }
    let time_scale = settings.number("time_scale")?;
    let engine_config = settings.engine.clone();
    let model = LoadedModel::config_only(&ModelChoice::parse(&args.runner.model)?)?;
    let cost = resolve(&args.cost.source(), &model)?;
    let blocks = cost.kv_blocks(&engine_config);
    let runner = SimRunner::new(cost.model.clone(), blocks);
    let engine = EngineCore::new(engine_config, runner).context("building the engine")?;
    let codec = match &args.tokenizer {
        Some(path) => serve::TextCodec::from_file(path)?,
        None => serve::TextCodec::Bytes,
    };
    let config = serve::ServerConfig {
        time_scale,
        ..server_config(args, codec)
    };
    let label = cost.short_label();
    let gpu = cost.gpu.name.clone();
    serve::serve_blocking(engine, config, |server| {
        announce(&format!(
            "serving {} on http://{} (sim on {gpu}, {label}, {blocks} KV blocks, time_scale {time_scale})",
            args.runner.model,
            server.addr()
        ));
    })?;
    Ok(())
}

/// `--tokenizer`, else `tokenizer.json` of a model directory, else bytes.
fn real_codec(args: &ServeArgs, choice: &ModelChoice) -> anyhow::Result<serve::TextCodec> {
    let path = match (&args.tokenizer, choice) {
        (Some(path), _) => path.clone(),
        (None, ModelChoice::Dir(dir)) if dir.join("tokenizer.json").is_file() => {
            dir.join("tokenizer.json")
        }
        (None, _) => return Ok(serve::TextCodec::Bytes),
    };
    Ok(serve::TextCodec::from_file(&path)?)
}

fn serve_real(args: &ServeArgs, settings: &Settings) -> anyhow::Result<()> {
    if is_set(&args.set, "time_scale") {
        bail!(
            "time_scale paces the simulated runner's modeled step times (--mode sim); \
             --mode real runs the model, whose steps take the time they take: leave \
             --set time_scale out"
        );
    }
    let cost = &args.cost;
    if cost.gpu.is_some() || cost.profile.is_some() || cost.profiles_dir.is_some() {
        bail!(
            "--gpu, --profile and --profiles-dir pick the cost model of --mode sim; \
             --mode real runs the model itself: leave them out"
        );
    }
    let engine_config = settings.engine.clone();
    engine_config.validate()?;
    let choice = ModelChoice::parse(&args.runner.model)?;
    let model = LoadedModel::config_only(&choice)?;
    let weights = model.runner_weights(args.runner.weights_seed)?;
    let weights_label = model.weights_label(args.runner.weights_seed);
    let kind = args.runner.kind();
    // The limits `exp run --mode real` builds its runner for: the served
    // engine and the in-process one are the same engine.
    let limits = RunnerLimits::for_engine(&engine_config).on_sms(args.runner.sm_count()?);
    let codec = real_codec(args, &choice)?;
    let config = serve::ServerConfig {
        eos_token_id: model.config.eos_token_id,
        ..server_config(args, codec)
    };
    let device = Arc::new(OnceLock::new());
    let built_on = device.clone();
    let qwen3 = model.config.clone();
    let build = move || -> Result<EngineCore<AnyRunner>, BackendError> {
        let runner = runner::build(kind, &qwen3, &weights, &limits)?;
        let _ = built_on.set(runner.device_name());
        Ok(EngineCore::new(engine_config, runner)?)
    };
    eprintln!(
        "building the {} runner for {weights_label} (weights, KV cache{})",
        kind.name(),
        match kind {
            runner::RunnerKind::Cuda => ", CUDA graphs and warm-up",
            runner::RunnerKind::Cpu => "",
        }
    );
    serve::serve_blocking_with(build, config, |server| {
        let device = device.get().map_or("?", String::as_str);
        announce(&format!(
            "serving {} on http://{} (real: {} on {device}, {weights_label}, {} KV blocks)",
            args.runner.model,
            server.addr(),
            kind.name(),
            server.engine_limits().kv_blocks,
        ));
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_set;

    #[test]
    fn a_key_is_set_only_by_its_own_name() {
        let sets = vec!["max_num_seqs=4".to_string(), " time_scale =2".to_string()];
        assert!(is_set(&sets, "time_scale"));
        assert!(is_set(&sets, "max_num_seqs"));
        assert!(!is_set(&sets, "time"));
        assert!(!is_set(&["time_scale".to_string()], "time_scale"));
    }
}
