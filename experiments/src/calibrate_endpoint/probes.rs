//! The probe loads of `exp calibrate --endpoint` and the grid point each
//! gives.
//!
//! Contract: [`probes`] lists the loads in the order they run, a prefill
//! or cached-prefill probe [`REPEATS`] times (their points are medians over
//! the repeats); [`script`] is a probe's script; [`sample`] its step shape
//! and time from the client-side token times, or `None` when the records
//! show no such step. Every time comes from gaps between tokens of one
//! stream, never from a TTFT, so the HTTP round trip of a request (about
//! 2 ms on a local server, the same for every prompt) stays out of the
//! profile: it prices the server's steps, as a profile fitted in process
//! does.
//!
//! - decode: c requests at once with L-token prompts; while all c are
//!   decoding (from the last first token to the first finish) each
//!   request's mean gap between tokens, and the median of those over the
//!   requests, prices a step of c decodes at the median context (a mean
//!   per request, because chunks merged on the way give gaps of 0 beside a
//!   long one);
//! - prefill and cached prefill: a pace request decodes alone; once a
//!   starter request has finished (so the pace decodes steadily) the
//!   measured request arrives: its P new tokens (after a writer with the
//!   same K-token prefix, for a cached probe) run in one step beside the
//!   pace's decode. The pace's tokens around that step, less its median
//!   decode gap for each plain step among them, price the step of one
//!   decode and one P-token chunk over the cached context the server
//!   reported.

use crate::script::{Gate, Script, ScriptBuilder};
use calibration::Sample;
use engine::{BatchShape, SeqShape};
use sim::workload::PromptSource;
use sim::RunRecords;

/// Server budget the probes assume (vLLM's default
/// `max_num_batched_tokens`): decode probes size their outputs by it, and
/// a measured prefill stays under it so it runs in one step.
pub const ASSUMED_BUDGET: usize = 2048;
/// Outputs of a decode probe past the prefills of all its requests.
const DECODE_WINDOW: usize = 16;
/// Steps a request must decode inside a probe's window to be counted.
const MIN_WINDOW_STEPS: usize = 8;
/// Runs of each prefill and cached-prefill probe (a single step's time
/// jitters by a few tenths of a millisecond).
pub const REPEATS: usize = 3;
/// Prompt and outputs of the pace request.
pub const PACE_PROMPT: usize = 16;
pub const PACE_OUTPUTS: usize = 160;
/// Outputs of the starter, so the pace decodes steadily when the measured
/// request arrives.
const STARTER_OUTPUTS: usize = 4;
/// Pace steps either side of the measured step that the span includes, so
/// that a token delivered late or merged with the next moves no time out.
const SPAN_MARGIN: usize = 2;
/// Wait between the writer's finish and the reader of a cached probe, so
/// their steps are far apart in the pace's stream.
const READER_DELAY_S: f64 = 0.02;

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
    for _ in 0..REPEATS {
        for tokens in [8, 16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2000] {
            out.push(Probe::Prefill { tokens });
        }
        for prefix in [256, 1024, 2048, 3072] {
            // 32: the longest chunk a cached prefix sends down the decode
            // path (a tile of Qwen3's), prefix_cache's warm requests.
            for new in [16, 32, 64, 256, 512] {
                out.push(Probe::Cached { prefix, new });
            }
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
            let starter = push_pace(&mut b);
            let prompt = b.random_tokens(tokens);
            b.push("measured", prompt, 1, None, after(starter, 0.0));
        }
        Probe::Cached { prefix, new } => {
            let starter = push_pace(&mut b);
            let shared = b.random_tokens(prefix);
            let mut first = shared.clone();
            first.extend(b.random_tokens(new));
            let writer = b.push("writer", first, 1, None, after(starter, 0.0));
            let mut second = shared;
            second.extend(b.random_tokens(new));
            b.push("measured", second, 1, None, after(writer, READER_DELAY_S));
        }
    }
    b.build()
}

fn after(dep: usize, delay_s: f64) -> Gate {
    Gate::After {
        deps: vec![dep],
        delay_s,
    }
}

/// Pushes the pace and the starter; returns the starter's index.
fn push_pace(b: &mut ScriptBuilder) -> usize {
    let prompt = b.random_tokens(PACE_PROMPT);
    b.push("pace", prompt, PACE_OUTPUTS, None, Gate::At(0.0));
    let prompt = b.random_tokens(PACE_PROMPT);
    b.push("starter", prompt, STARTER_OUTPUTS, None, Gate::At(0.0))
}

fn chunk(new_tokens: usize, context_before: usize) -> SeqShape {
    SeqShape {
        new_tokens: new_tokens as u32,
        context_before: context_before as u32,
        samples: true,
    }
}

/// The grid point `records` of `probe` give, if they give one (a decode
/// probe whose requests never all decoded at once, or a prefill whose step
/// the pace did not decode through, gives none).
pub fn sample(probe: Probe, records: &RunRecords) -> Option<Sample> {
    match probe {
        Probe::Decode { context, .. } => decode_sample(context, records),
        Probe::Prefill { .. } | Probe::Cached { .. } => beside_pace_sample(records),
    }
}

fn decode_sample(context: usize, records: &RunRecords) -> Option<Sample> {
    let reqs = &records.requests;
    let start = reqs.iter().filter_map(|r| r.token_times_s.first()).copied();
    let start = start.reduce(f64::max)?;
    let end = reqs.iter().filter_map(|r| r.token_times_s.last()).copied();
    let end = end.reduce(f64::min)?;
    // Per request: the mean gap over its tokens in the window. A mean, not
    // a median of gaps, because chunks that merged on the way give gaps of
    // 0 beside one long one.
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

/// The step that ran the measured request's prompt beside the pace's
/// decode, timed by the pace's tokens.
fn beside_pace_sample(records: &RunRecords) -> Option<Sample> {
    let pace = records.requests.iter().find(|r| r.tag == "pace")?;
    let measured = records.requests.iter().find(|r| r.tag == "measured")?;
    let first = *measured.token_times_s.first()?;
    let times = &pace.token_times_s;
    // The pace token of the same step: delivered with the measured one.
    let k = (0..times.len()).min_by(|&a, &b| {
        let da = (times[a] - first).abs();
        let db = (times[b] - first).abs();
        da.total_cmp(&db)
    })?;
    let (lo, hi) = (k.checked_sub(1 + SPAN_MARGIN)?, k + SPAN_MARGIN);
    // lo = 0 would start the span at the pace's own prefill.
    if hi >= times.len() || lo == 0 {
        return None;
    }
    let plain: Vec<f64> = (times.windows(2).enumerate())
        .filter(|(i, _)| *i < lo || *i >= hi)
        .map(|(_, w)| w[1] - w[0])
        .collect();
    let decode = crate::stats::median(&plain)?;
    let seconds = times[hi] - times[lo] - 2.0 * SPAN_MARGIN as f64 * decode;
    if seconds <= 0.0 {
        return None;
    }
    let cached = measured.cached_tokens.min(measured.prompt_tokens - 1);
    let shape = BatchShape {
        seqs: vec![
            chunk(1, pace.prompt_tokens + k - 1),
            chunk(measured.prompt_tokens - cached, cached),
        ],
    };
    Some(Sample { shape, seconds })
}
