//! `exp calibrate --endpoint URL`: a cost profile from probe loads on a
//! server seen from outside.
//!
//! Contract: every probe is a small script played by the endpoint backend
//! (one at a time, each in its own salt namespace so nothing hits a
//! previous probe's cache), and yields one grid point (a step's batch
//! shape and its time) for `calibration::fit`, the same fit a measured
//! grid gets:
//!
//! - decode: c requests at once with L-token prompts; while all c are
//!   decoding (from the last first token to the first finish) each
//!   request's mean gap between tokens, and the median of those over the
//!   requests, prices a step of c decodes at the median context (a mean per
//!   request, because chunks merged on the way give gaps of 0 beside a
//!   long one);
//! - prefill: one request of P tokens on an idle server; its TTFT prices a
//!   step with one P-token chunk (so the HTTP round trip lands in the
//!   per-step constant of non-decode steps, as a client sees it);
//! - cached prefill: a request, then one sharing its K-token prefix; the
//!   second's TTFT prices a chunk of its uncached tokens over the cached
//!   context the server reported.
//!
//! The profile's provenance names the endpoint, the probes and the
//! held-out error; its GPU is `--gpu` (default h200-sxm), the datasheet a
//! transfer would start from, and its model shape `--model`'s.

use crate::backend::{Backend, EndpointBackend, EndpointSpec, LoadedModel, ModelChoice};
use crate::calibrate::{write_fit, CalibrateArgs};
use crate::output::git_commit;
use crate::script::{Gate, Script, ScriptBuilder};
use anyhow::{bail, Context};
use calibration::{fit, Provenance, Sample};
use engine::date::utc_now;
use engine::{BatchShape, EngineConfig, SeqShape};
use indicatif::ProgressBar;
use sim::workload::PromptSource;
use sim::{ModelShape, RunRecords};

/// Server budget the decode probes assume when they size their outputs
/// (vLLM's default `max_num_batched_tokens`; a larger budget only adds slack).
const ASSUMED_BUDGET: usize = 2048;
/// Outputs of a decode probe past the prefills of all its requests.
const DECODE_WINDOW: usize = 16;
/// Steps a request must decode inside a probe's window to be counted.
const MIN_WINDOW_STEPS: usize = 8;

/// One probe load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Probe {
    Decode { concurrency: usize, context: usize },
    Prefill { tokens: usize },
    Cached { prefix: usize, new: usize },
}

/// The probes, in the order they run.
pub fn probes() -> Vec<Probe> {
    let mut out = Vec::new();
    for context in [128, 512, 1536, 3000] {
        for concurrency in [1, 2, 4, 8, 16, 24, 32, 48, 64, 128] {
            out.push(Probe::Decode {
                concurrency,
                context,
            });
        }
    }
    for tokens in [8, 16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072] {
        out.push(Probe::Prefill { tokens });
    }
    for prefix in [256, 1024, 2048] {
        for new in [16, 64, 256, 512] {
            out.push(Probe::Cached { prefix, new });
        }
    }
    out
}

/// Outputs of each request of a decode probe: enough that every request
/// is still decoding once the last prefill is done.
fn decode_outputs(concurrency: usize, context: usize) -> usize {
    DECODE_WINDOW + 2 * (concurrency * context).div_ceil(ASSUMED_BUDGET)
}

/// The script of `probe`.
pub fn script(probe: Probe, seed: u64, prompts: &PromptSource) -> Script {
    let mut b = ScriptBuilder::new(seed, prompts);
    match probe {
        Probe::Decode {
            concurrency,
            context,
        } => {
            let outputs = decode_outputs(concurrency, context);
            for _ in 0..concurrency {
                let prompt = b.random_tokens(context);
                b.push("decode", prompt, outputs, None, Gate::At(0.0));
            }
        }
        Probe::Prefill { tokens } => {
            let prompt = b.random_tokens(tokens);
            b.push("prefill", prompt, 1, None, Gate::At(0.0));
        }
        Probe::Cached { prefix, new } => {
            let shared = b.random_tokens(prefix);
            let mut first = shared.clone();
            first.extend(b.random_tokens(new));
            let writer = b.push("writer", first, 1, None, Gate::At(0.0));
            let mut second = shared;
            second.extend(b.random_tokens(new));
            let gate = Gate::After {
                deps: vec![writer],
                delay_s: 0.0,
            };
            b.push("reader", second, 1, None, gate);
        }
    }
    b.build()
}

fn chunk(new_tokens: usize, context_before: usize) -> SeqShape {
    SeqShape {
        new_tokens: new_tokens as u32,
        context_before: context_before as u32,
        samples: true,
    }
}

/// The grid point `records` of `probe` give, if they give one (a decode
/// probe whose requests never all decoded at once gives none).
pub fn sample(probe: Probe, records: &RunRecords) -> Option<Sample> {
    match probe {
        Probe::Decode { context, .. } => {
            let reqs = &records.requests;
            let start = reqs.iter().filter_map(|r| r.token_times_s.first()).copied();
            let start = start.reduce(f64::max)?;
            let end = reqs.iter().filter_map(|r| r.token_times_s.last()).copied();
            let end = end.reduce(f64::min)?;
            // Per request: the mean gap over its tokens in the window. A
            // mean, not a median of gaps, because chunks that merged on the
            // way give gaps of 0 beside one long one.
            let mut steps = Vec::new();
            let mut positions = Vec::new();
            for r in reqs {
                let inside: Vec<(usize, f64)> = (r.token_times_s.iter().copied().enumerate())
                    .filter(|(_, t)| *t >= start && *t <= end)
                    .collect();
                if let ([(k0, t0), ..], [.., (k1, t1)]) = (inside.as_slice(), inside.as_slice()) {
                    if k1 - k0 >= MIN_WINDOW_STEPS {
                        steps.push((t1 - t0) / (k1 - k0) as f64);
                        positions.push((k0 + k1) as f64 / 2.0);
                    }
                }
            }
            let step = crate::stats::median(&steps)?;
            let position = crate::stats::median(&positions)?;
            let shape = BatchShape {
                seqs: vec![chunk(1, context + position as usize); reqs.len()],
            };
            Some(Sample {
                shape,
                seconds: step,
            })
        }
        Probe::Prefill { tokens } => {
            let ttft = records.requests.first()?.ttft_s()?;
            Some(Sample {
                shape: BatchShape {
                    seqs: vec![chunk(tokens, 0)],
                },
                seconds: ttft,
            })
        }
        Probe::Cached { .. } => {
            let reader = records.requests.iter().find(|r| r.tag == "reader")?;
            let cached = reader.cached_tokens.min(reader.prompt_tokens - 1);
            Some(Sample {
                shape: BatchShape {
                    seqs: vec![chunk(reader.prompt_tokens - cached, cached)],
                },
                seconds: reader.ttft_s()?,
            })
        }
    }
}

/// Runs every probe against `backend`; `bar` counts probes.
pub fn measure(
    backend: &EndpointBackend,
    seed: u64,
    bar: &ProgressBar,
) -> anyhow::Result<Vec<Sample>> {
    let prompts = PromptSource::random_tokens(backend.vocab())
        .map_err(|e| anyhow::anyhow!("prompts: {e}"))?;
    let engine = EngineConfig::default();
    let all = probes();
    bar.set_length(all.len() as u64);
    let mut samples = Vec::new();
    let mut missed = Vec::new();
    for (i, probe) in all.into_iter().enumerate() {
        let script = script(probe, crate::script::condition_seed(seed, i), &prompts);
        let records = backend
            .run(&engine, &script)
            .with_context(|| format!("probe {probe:?}"))?;
        match sample(probe, &records) {
            Some(s) => samples.push(s),
            None => missed.push(format!("{probe:?}")),
        }
        bar.inc(1);
    }
    let needed = 2 * calibration::features::NUM_FEATURES;
    if samples.len() < needed {
        bail!(
            "{} of the probes gave a grid point, the fit needs {needed}; these gave none \
             (their requests never all decoded at once: a KV cache too small for them, or \
             a server max_num_seqs below their concurrency): {}",
            samples.len(),
            missed.join(", ")
        );
    }
    Ok(samples)
}

/// `exp calibrate --endpoint URL --out P.ron`.
pub fn run(args: &CalibrateArgs, url: &str) -> anyhow::Result<()> {
    if args.refit.is_some() || args.runner.backend.is_some() || args.runner.sm_count.is_some() {
        bail!(
            "--endpoint {url} probes a server: leave out --refit, --backend and --sm-count, \
             which are for a runner in this process"
        );
    }
    let model = LoadedModel::config_only(&ModelChoice::parse(&args.runner.model)?)?;
    let spec = EndpointSpec {
        url: url.to_string(),
        model_name: args.model_name.clone(),
    };
    let backend = EndpointBackend::connect(&spec, &model)?;
    let gpu_name = args
        .gpu
        .clone()
        .unwrap_or_else(|| crate::backend::DEFAULT_GPU.into());
    let gpu =
        calibration::datasheet::lookup(&gpu_name).with_context(|| format!("--gpu {gpu_name}"))?;
    let bar = crate::progress::conditions_bar(args.quiet, "calibrate");
    let samples = measure(&backend, 0, &bar)?;
    bar.finish_and_clear();
    let provenance = Provenance {
        device: format!("endpoint {}", backend.url()),
        model: backend.model_name().to_string(),
        engine_commit: git_commit(),
        date: utc_now(),
        method: "black-box: endpoint probes (decode ITL over concurrency and context, TTFT \
                 over prompt length and cached prefix), timed on the client"
            .into(),
        samples: 0,
        holdout_error_pct_median: f64::NAN,
        holdout_error_pct_p90: f64::NAN,
    };
    let fitted = fit(
        &samples,
        gpu,
        ModelShape::from_qwen3(&model.config),
        provenance,
    )?;
    if !args.quiet {
        let p = &fitted.profile.provenance;
        eprintln!(
            "{} probe points from {}; held-out error median {:.1} %, p90 {:.1} %",
            p.samples, p.device, p.holdout_error_pct_median, p.holdout_error_pct_p90
        );
    }
    write_fit(&args.out, &samples, &fitted.profile)
}
