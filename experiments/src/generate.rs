//! `exp generate`: try a model with the real engine.
//!
//! Contract: `--model` is a preset (synthetic weights) or a Hugging Face
//! directory. With a directory holding `tokenizer.json`, `--prompt` is text
//! and the output is decoded; otherwise `--prompt` must be token ids
//! (separated by spaces or commas). Generation is greedy through one
//! `EngineCore` (the same scheduler as every run), stops at `--max-tokens` or
//! at the model's EOS token unless `--ignore-eos`, and reports the KV cache
//! the runner got (blocks and tokens; for the CUDA runner it is what
//! `gpu_memory_utilization` left beside the weights), TTFT and the mean
//! inter-token latency measured on the wall clock.

use crate::backend::runner::{build, RunnerKind};
use crate::backend::{LoadedModel, ModelChoice, RunnerLimits};
use crate::cli_args::RunnerArgs;
use crate::plan::cost::kv_capacity_tokens;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use engine::{EngineConfig, EngineCore, Request};
use std::time::Instant;

#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub runner: RunnerArgs,
    /// Text (models with tokenizer.json) or token ids such as "151644 872 198".
    #[arg(long)]
    pub prompt: String,
    #[arg(long, default_value_t = 32)]
    pub max_tokens: usize,
    /// Keep generating past the model's EOS token.
    #[arg(long)]
    pub ignore_eos: bool,
}

fn tokenizer_of(choice: &ModelChoice) -> anyhow::Result<Option<tokenizers::Tokenizer>> {
    let ModelChoice::Dir(dir) = choice else {
        return Ok(None);
    };
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Ok(None);
    }
    tokenizers::Tokenizer::from_file(&path)
        .map(Some)
        .map_err(|e| anyhow!("{}: cannot load the tokenizer: {e}", path.display()))
}

/// Token ids written as text: `"1 2 3"` or `"1,2,3"`.
pub fn parse_ids(text: &str, vocab: usize, model: &str) -> anyhow::Result<Vec<u32>> {
    let ids: Vec<u32> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>().map_err(|_| {
                anyhow!(
                    "model {model} has no tokenizer.json, so --prompt must be token ids \
                     (e.g. \"1 2 3\"); `{s}` is not one"
                )
            })
        })
        .collect::<Result<_, _>>()?;
    if ids.is_empty() {
        bail!("--prompt is empty; give at least one token");
    }
    if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
        bail!("token id {bad} is outside the model's vocabulary of {vocab} ids");
    }
    Ok(ids)
}

pub fn run(args: &GenerateArgs) -> anyhow::Result<()> {
    let choice = ModelChoice::parse(&args.runner.model)?;
    let model = LoadedModel::config_only(&choice)?;
    let tokenizer = tokenizer_of(&choice)?;
    let prompt = match &tokenizer {
        Some(t) => t
            .encode(args.prompt.as_str(), false)
            .map_err(|e| anyhow!("tokenizing --prompt: {e}"))?
            .get_ids()
            .to_vec(),
        None => parse_ids(&args.prompt, model.config.vocab_size, &model.name())?,
    };
    if prompt.is_empty() {
        bail!("--prompt gave no tokens");
    }
    if args.max_tokens == 0 {
        bail!("--max-tokens must be at least 1");
    }
    let block_size = EngineConfig::default().block_size;
    let max_model_len = (prompt.len() + args.max_tokens).next_multiple_of(block_size);
    let engine_config = EngineConfig {
        max_num_seqs: 1,
        max_model_len,
        max_num_batched_tokens: max_model_len.max(EngineConfig::default().max_num_batched_tokens),
        ..EngineConfig::default()
    };
    engine_config.validate()?;
    let weights = model.runner_weights(args.runner.weights_seed)?;
    let kind = args.runner.kind();
    let runner = build(
        kind,
        &model.config,
        &weights,
        &RunnerLimits::for_engine(&engine_config).on_sms(args.runner.sm_count()?),
    )?;
    let device = runner.device_name();
    // vLLM's "GPU KV cache size" line: what the memory left the cache.
    let blocks = engine::ModelRunner::num_kv_blocks(&runner);
    // The CPU runner sizes its cache from a fixed budget, not the fraction.
    let sized_by = match kind {
        RunnerKind::Cuda => format!(
            "; gpu_memory_utilization {}",
            engine_config.gpu_memory_utilization
        ),
        RunnerKind::Cpu => String::new(),
    };
    let kv_line = format!(
        "KV cache: {blocks} blocks of {} tokens ({} tokens{sized_by})",
        engine_config.block_size,
        kv_capacity_tokens(blocks, engine_config.block_size),
    );
    let mut core = EngineCore::new(engine_config, runner)?;
    let mut request = Request::new(0, prompt.clone(), args.max_tokens);
    request.ignore_eos = args.ignore_eos;
    request.eos_token_id = model.config.eos_token_id;
    core.add_request(request)?;

    let start = Instant::now();
    let mut times = Vec::with_capacity(args.max_tokens);
    let mut output = Vec::with_capacity(args.max_tokens);
    while core.has_unfinished() {
        let outcome = core.step().context("engine step")?;
        let now = start.elapsed().as_secs_f64();
        for &(_, token) in &outcome.tokens {
            output.push(token);
            times.push(now);
        }
    }
    print_result(
        &model.name(),
        &device,
        &kv_line,
        &prompt,
        &output,
        &times,
        tokenizer.as_ref(),
    )
}

fn print_result(
    model: &str,
    device: &str,
    kv_line: &str,
    prompt: &[u32],
    output: &[u32],
    times: &[f64],
    tokenizer: Option<&tokenizers::Tokenizer>,
) -> anyhow::Result<()> {
    println!("model {model} on {device}: {} prompt tokens", prompt.len());
    println!("{kv_line}");
    let ids: Vec<String> = output.iter().map(u32::to_string).collect();
    println!("output ids: {}", ids.join(" "));
    if let Some(t) = tokenizer {
        let text = t
            .decode(output, true)
            .map_err(|e| anyhow!("decoding the output: {e}"))?;
        println!("output text: {text}");
    }
    if let (Some(first), Some(last)) = (times.first(), times.last()) {
        let itl = if times.len() > 1 {
            (last - first) / (times.len() - 1) as f64 * 1e3
        } else {
            0.0
        };
        println!(
            "TTFT {:.2} ms, mean ITL {:.3} ms over {} tokens",
            first * 1e3,
            itl,
            times.len()
        );
    }
    Ok(())
}
