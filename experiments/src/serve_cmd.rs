//! `exp serve`: the OpenAI-compatible server (the `serve` crate) in front of
//! an engine built the way `exp run` builds one.
//!
//! Contract: `--mode sim` (the default) serves a `sim::SimRunner` priced by
//! the cost model `--profile`/`--gpu`/`--profiles-dir` pick (the shipped H200
//! profile for Qwen3-0.6B's shape by default; see `backend::cost`), with the
//! KV pool the simulated GPU holds, on the wall clock: each step sleeps its
//! modeled time × `time_scale`. `--set` takes engine options by their vLLM
//! names and `time_scale` (default 1; 0.01 runs 100× faster, for tests).
//! `--mode real` is refused with an error saying it is not built yet. Once
//! bound, one line `serving MODEL on http://ADDR ...` goes to stdout; SIGINT
//! or SIGTERM drains and exits 0.

use crate::backend::cost::resolve;
use crate::backend::{LoadedModel, ModelChoice, DEFAULT_MODEL};
use crate::cli_args::CostArgs;
use crate::settings::{ParamKind, ParamSpec, Settings};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use engine::EngineCore;
use sim::SimRunner;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// Settings of `exp serve` that are not engine options.
const SERVE_PARAMS: &[ParamSpec] = &[ParamSpec {
    key: "time_scale",
    kind: ParamKind::Number,
    default: "1",
    help: "wall-clock seconds per modeled second of a step (0.01 = 100x faster)",
}];

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ServeMode {
    Sim,
    Real,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Model preset (qwen3-0.6b, ..., tiny) or a Hugging Face directory
    /// (its config.json gives the shape); also the name clients send.
    #[arg(long, default_value = DEFAULT_MODEL)]
    pub model: String,
    #[arg(long, value_enum, default_value = "sim")]
    pub mode: ServeMode,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// 0 picks a free port (printed on stdout).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    #[command(flatten)]
    pub cost: CostArgs,
    /// key=value: engine options (vLLM names) or time_scale.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Hugging Face tokenizer.json for text prompts; without it each byte of
    /// a text prompt is one token.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    if let ServeMode::Real = args.mode {
        bail!(
            "exp serve --mode real is not built yet; use --mode sim (the engine with the \
             simulated runner on the calibrated cost model)"
        );
    }
    let mut settings = Settings::new(SERVE_PARAMS)?;
    for arg in &args.set {
        settings.set_arg(arg)?;
    }
    let time_scale = settings.number("time_scale")?;
    let engine_config = settings.engine.clone();
    let model = LoadedModel::config_only(&ModelChoice::parse(&args.model)?)?;
    let cost = resolve(&args.cost.source(), &model)?;
    let blocks = cost.kv_blocks(&engine_config);
    let runner = SimRunner::new(cost.model.clone(), blocks);
    let engine = EngineCore::new(engine_config, runner).context("building the engine")?;
    let codec = match &args.tokenizer {
        Some(path) => serve::TextCodec::from_file(path)?,
        None => serve::TextCodec::Bytes,
    };
    let config = serve::ServerConfig {
        addr: SocketAddr::new(args.host, args.port),
        model_name: args.model.clone(),
        time_scale,
        codec,
    };
    let label = cost.short_label();
    let gpu = cost.gpu.name.clone();
    serve::serve_blocking(engine, config, |addr| {
        println!(
            "serving {} on http://{addr} (sim on {gpu}, {label}, {blocks} KV blocks, time_scale {time_scale})",
            args.model
        );
        // The line is how scripts learn the port; it must not sit in a buffer.
        let _ = std::io::stdout().flush();
    })?;
    Ok(())
}
