//! chunk_sweep: chunked prefill and the decode stall.
//!
//! Part `stall`: one request decodes while long prompts arrive one after
//! another; measured per long prompt: the longest gap between two output
//! tokens of the decoding request while that prompt was being prefilled
//! (arrival to first token), and the prompt's TTFT. The first long prompt is
//! the warm-up and is left out; values are medians over the rest.
//! Part `load`: the cb_sweep load at one concurrency, per chunk size.

use super::load::{self, LoadShape};
use super::{at_least, condition, ms, request, Condition, Experiment, ExperimentError, Report};
use crate::charts::ChartSpec;
use crate::script::{condition_seed, Gate, ScriptBuilder};
use crate::settings::{ParamKind, ParamSpec, Settings};
use crate::stats::{median, spread_pct};
use crate::table::{Cell, Table};
use engine::EngineConfig;
use figures::YScale;
use sim::workload::PromptSource;
use sim::RunRecords;

pub struct ChunkSweep;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "part",
        kind: ParamKind::Choices(&["stall", "load"]),
        default: "stall,load",
        help: "parts to run",
    },
    ParamSpec {
        key: "chunk_tokens",
        kind: ParamKind::ChunkList,
        default: "512,1024,2048,off",
        help: "stall part: max_num_batched_tokens with chunking on; off = chunking off at max_model_len",
    },
    ParamSpec {
        key: "decode_tokens",
        kind: ParamKind::Count,
        default: "900",
        help: "stall part: output tokens of the decoding request",
    },
    ParamSpec {
        key: "decode_prompt_tokens",
        kind: ParamKind::Count,
        default: "256",
        help: "stall part: prompt of the decoding request",
    },
    ParamSpec {
        key: "long_prompt_tokens",
        kind: ParamKind::Count,
        default: "3700",
        help: "stall part: prompt of each interleaved long request (1 output token)",
    },
    ParamSpec {
        key: "long_prompts",
        kind: ParamKind::Count,
        default: "5",
        help: "stall part: long prompts, each sent after the previous finished (first = warm-up)",
    },
    ParamSpec {
        key: "gap_ms",
        kind: ParamKind::Number,
        default: "20",
        help: "stall part: pause before each long prompt",
    },
    ParamSpec {
        key: "load_chunk_tokens",
        kind: ParamKind::ChunkList,
        default: "512,2048",
        help: "load part: chunk sizes compared",
    },
    ParamSpec {
        key: "concurrency",
        kind: ParamKind::Count,
        default: "16",
        help: "load part: closed-loop clients",
    },
    ParamSpec {
        key: "prompt_tokens",
        kind: ParamKind::Count,
        default: "256",
        help: "load part: prompt length",
    },
    ParamSpec {
        key: "output_tokens",
        kind: ParamKind::Count,
        default: "128",
        help: "load part: output tokens",
    },
    ParamSpec {
        key: "batches",
        kind: ParamKind::Count,
        default: "4",
        help: "load part: batches of 2c requests, the first a warm-up",
    },
];

const COLUMNS: &[&str] = &[
    "part",
    "chunk_tokens",
    "max_stall_ms",
    "interleaved_ttft_ms",
    "stall_spread_pct",
    "throughput_tok_s",
    "ttft_median_ms",
    "itl_median_ms",
    "itl_p99_ms",
    "throughput_spread_pct",
];

const DECODE_TAG: &str = "decode";
const LONG_TAG: &str = "long";

fn chunk_name(chunk: Option<usize>) -> String {
    chunk.map_or_else(|| "off".to_string(), |n| n.to_string())
}

/// Chunk size n: chunking on with budget n; off: chunking off, budget max_model_len.
fn with_chunk(base: &EngineConfig, chunk: Option<usize>) -> EngineConfig {
    let mut e = base.clone();
    match chunk {
        Some(n) => {
            e.enable_chunked_prefill = true;
            e.max_num_batched_tokens = n;
        }
        None => {
            e.enable_chunked_prefill = false;
            e.max_num_batched_tokens = e.max_model_len;
        }
    }
    e
}

fn load_shape(settings: &Settings) -> Result<LoadShape, ExperimentError> {
    Ok(LoadShape {
        concurrency: at_least(settings, "concurrency", 1)?,
        batches: at_least(settings, "batches", 2)?,
        prompt_tokens: at_least(settings, "prompt_tokens", 1)?,
        output_tokens: at_least(settings, "output_tokens", 1)?,
    })
}

/// Ids of the decoding request and of the long prompts.
fn stall_ids(settings: &Settings) -> Result<(usize, Vec<usize>), ExperimentError> {
    let n = at_least(settings, "long_prompts", 2)?;
    // Script order: warm-up (0), decoder (1), long prompts (2..).
    Ok((1, (2..2 + n).collect()))
}

fn stall_script(
    settings: &Settings,
    seed: u64,
    prompts: &PromptSource,
) -> Result<ScriptBuilder, ExperimentError> {
    let gap_s = settings.number("gap_ms")? / 1e3;
    let long_tokens = at_least(settings, "long_prompt_tokens", 1)?;
    let mut b = ScriptBuilder::new(seed, prompts);
    let warm = b.warmup();
    let prompt = b.random_tokens(at_least(settings, "decode_prompt_tokens", 1)?);
    let decode_gate = Gate::After {
        deps: vec![warm],
        delay_s: 0.0,
    };
    b.push(
        DECODE_TAG,
        prompt,
        at_least(settings, "decode_tokens", 1)?,
        None,
        decode_gate,
    );
    let mut previous = warm;
    for _ in stall_ids(settings)?.1 {
        let prompt = b.random_tokens(long_tokens);
        let gate = Gate::After {
            deps: vec![previous],
            delay_s: gap_s,
        };
        previous = b.push(LONG_TAG, prompt, 1, None, gate);
    }
    Ok(b)
}

/// Per measured long prompt: (longest decode gap while it prefilled, its TTFT), in ms.
fn stall_measurements(
    settings: &Settings,
    records: &RunRecords,
    label: &str,
) -> Result<Vec<(f64, f64)>, ExperimentError> {
    let (decoder_id, long_ids) = stall_ids(settings)?;
    let decoder = request(records, decoder_id, label)?;
    let mut out = Vec::new();
    for (k, &id) in long_ids.iter().enumerate().skip(1) {
        let long = request(records, id, label)?;
        let (start, end) = (long.arrival_s, long.token_times_s[0]);
        let stall = decoder
            .token_times_s
            .windows(2)
            .filter(|w| w[1] > start && w[0] < end)
            .map(|w| w[1] - w[0])
            .reduce(f64::max)
            .ok_or_else(|| ExperimentError::Incomplete {
                label: label.to_string(),
                message: format!(
                    "the decoding request was not decoding while long prompt {} was prefilled; \
                     raise decode_tokens or lower gap_ms",
                    k + 1
                ),
            })?;
        out.push((ms(stall), ms(end - start)));
    }
    Ok(out)
}

impl Experiment for ChunkSweep {
    fn name(&self) -> &'static str {
        "chunk_sweep"
    }

    fn description(&self) -> &'static str {
        "chunked prefill: decode stall under ~3,700-token prompts per chunk size, and load at c=16"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn plan(
        &self,
        settings: &Settings,
        seed: u64,
        prompts: &PromptSource,
    ) -> Result<Vec<Condition>, ExperimentError> {
        let parts = settings.words("part")?;
        let mut out = Vec::new();
        if parts.iter().any(|p| p == "stall") {
            for chunk in settings.chunks("chunk_tokens")? {
                let seed = condition_seed(seed, out.len());
                let b = stall_script(settings, seed, prompts)?;
                let label = format!("stall chunk={}", chunk_name(chunk));
                out.push(condition(
                    label,
                    with_chunk(&settings.engine, chunk),
                    b.build(),
                    seed,
                )?);
            }
        }
        if parts.iter().any(|p| p == "load") {
            let chunks = settings.chunks("load_chunk_tokens")?;
            load::check_fits(load_shape(settings)?, chunks.len())?;
            for chunk in chunks {
                let seed = condition_seed(seed, out.len());
                let mut b = ScriptBuilder::new(seed, prompts);
                load::closed_loop(&mut b, load_shape(settings)?);
                let label = format!("load chunk={}", chunk_name(chunk));
                out.push(condition(
                    label,
                    with_chunk(&settings.engine, chunk),
                    b.build(),
                    seed,
                )?);
            }
        }
        Ok(out)
    }

    fn summarize(
        &self,
        settings: &Settings,
        conditions: &[Condition],
        runs: &[RunRecords],
    ) -> Result<Report, ExperimentError> {
        let mut table = Table::new(COLUMNS);
        let (mut stall_names, mut stalls, mut ttfts) = (Vec::new(), Vec::new(), Vec::new());
        let (mut load_names, mut load_p99, mut load_ttft) = (Vec::new(), Vec::new(), Vec::new());
        let mut load_throughput = Vec::new();
        for (cond, rec) in conditions.iter().zip(runs) {
            let (part, chunk) = cond
                .label
                .split_once(" chunk=")
                .unwrap_or((&cond.label, ""));
            if part == "stall" {
                let m = stall_measurements(settings, rec, &cond.label)?;
                let stall: Vec<f64> = m.iter().map(|x| x.0).collect();
                let ttft: Vec<f64> = m.iter().map(|x| x.1).collect();
                let (s, t) = (median(&stall), median(&ttft));
                table.push(vec![
                    Cell::text("stall"),
                    Cell::text(chunk),
                    Cell::num(s),
                    Cell::num(t),
                    Cell::num(spread_pct(&stall)),
                ]);
                let x = stall_names.len() as f64;
                stall_names.push(chunk.to_string());
                stalls.push((x, s.unwrap_or(f64::NAN)));
                ttfts.push((x, t.unwrap_or(f64::NAN)));
            } else {
                let s = load::summarize(rec, load_shape(settings)?, &cond.label)?;
                table.push(vec![
                    Cell::text("load"),
                    Cell::text(chunk),
                    Cell::Empty,
                    Cell::Empty,
                    Cell::Empty,
                    Cell::num(Some(s.throughput_tok_s)),
                    Cell::num(Some(s.ttft_median_ms)),
                    Cell::num(Some(s.itl_median_ms)),
                    Cell::num(Some(s.itl_p99_ms)),
                    Cell::num(Some(s.throughput_spread_pct)),
                ]);
                let x = load_names.len() as f64;
                load_names.push(chunk.to_string());
                load_p99.push((x, s.itl_p99_ms));
                load_ttft.push((x, s.ttft_median_ms));
                load_throughput.push((x, s.throughput_tok_s));
            }
        }
        let mut charts = Vec::new();
        if !stall_names.is_empty() {
            charts.push(
                ChartSpec::new(
                    "chunk_sweep_stall",
                    "chunk_sweep: decode stall and long-prompt TTFT vs chunk size",
                    "chunk size (max_num_batched_tokens, tokens)",
                    "time (ms)",
                )
                .categories(&stall_names)
                .bars()
                .y_scale(YScale::Auto)
                .series("longest decode gap", stalls)
                .series("long-prompt TTFT", ttfts),
            );
        }
        if !load_names.is_empty() {
            charts.push(
                ChartSpec::new(
                    "chunk_sweep_load",
                    "chunk_sweep: latency under closed-loop load vs chunk size",
                    "chunk size (max_num_batched_tokens, tokens)",
                    "time (ms)",
                )
                .categories(&load_names)
                .bars()
                .y_scale(YScale::Auto)
                .series("ITL p99", load_p99)
                .series("median TTFT", load_ttft),
            );
            charts.push(
                ChartSpec::new(
                    "chunk_sweep_load_throughput",
                    "chunk_sweep: output throughput under closed-loop load vs chunk size",
                    "chunk size (max_num_batched_tokens, tokens)",
                    "output throughput (tok/s)",
                )
                .categories(&load_names)
                .bars()
                .series("output throughput", load_throughput),
            );
        }
        Ok(Report {
            summary: table,
            key_columns: 2,
            charts,
        })
    }
}
