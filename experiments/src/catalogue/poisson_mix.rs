//! poisson_mix: a validation workload not used for fitting.
//!
//! Open loop: after the warm-up request finishes, requests arrive as a
//! Poisson process at each rate (one condition per rate). Prompt and output
//! lengths are log-uniform in their ranges (many short, some long); a share
//! of the prompts starts with one of a small pool of shared prefixes, so the
//! prefix cache gets hits. The first `skip` requests are a warm-up and are
//! left out; metrics are over the rest: output throughput (output tokens over
//! first arrival to last completion), TTFT and ITL percentiles, end-to-end
//! latency, prompt tokens found cached, preemptions. `shared_pct` above 100,
//! and (with `shared_pct` > 0) a `prefix_tokens` not shorter than
//! `prompt_max`, are errors, never clamped or silently unused.

use super::latency::latencies;
use super::{at_least, condition, ms, tagged, Condition, Experiment, ExperimentError, Report};
use crate::charts::ChartSpec;
use crate::script::{condition_seed, Gate, ScriptBuilder};
use crate::settings::{ParamKind, ParamSpec, Settings};
use crate::stats::{median, percentile, unit_exponential};
use crate::table::{Cell, Table};
use figures::YScale;
use rand::Rng;
use sim::workload::PromptSource;
use sim::RunRecords;

pub struct PoissonMix;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "rates",
        kind: ParamKind::CountList,
        default: "10,40",
        help: "arrival rates swept (requests per second)",
    },
    ParamSpec {
        key: "requests",
        kind: ParamKind::Count,
        default: "200",
        help: "requests per rate, the first `skip` of them a warm-up",
    },
    ParamSpec {
        key: "skip",
        kind: ParamKind::Count,
        default: "20",
        help: "first requests left out of the metrics",
    },
    ParamSpec {
        key: "prompt_min",
        kind: ParamKind::Count,
        default: "64",
        help: "shortest prompt (log-uniform lengths)",
    },
    ParamSpec {
        key: "prompt_max",
        kind: ParamKind::Count,
        default: "3000",
        help: "longest prompt",
    },
    ParamSpec {
        key: "output_min",
        kind: ParamKind::Count,
        default: "16",
        help: "fewest output tokens (log-uniform)",
    },
    ParamSpec {
        key: "output_max",
        kind: ParamKind::Count,
        default: "256",
        help: "most output tokens",
    },
    ParamSpec {
        key: "prefixes",
        kind: ParamKind::Count,
        default: "4",
        help: "shared prefixes in the pool",
    },
    ParamSpec {
        key: "prefix_tokens",
        kind: ParamKind::Count,
        default: "1024",
        help: "length of each shared prefix",
    },
    ParamSpec {
        key: "shared_pct",
        kind: ParamKind::Count,
        default: "30",
        help: "percent of prompts that start with a pool prefix",
    },
];

const COLUMNS: &[&str] = &[
    "rate_rps",
    "throughput_tok_s",
    "ttft_median_ms",
    "ttft_p99_ms",
    "itl_median_ms",
    "itl_p99_ms",
    "e2e_median_ms",
    "cached_tokens",
    "preemptions",
    "measured_requests",
];

const SKIP_TAG: &str = "skip";
const MIX_TAG: &str = "mix";

struct Shape {
    requests: usize,
    skip: usize,
    prompt: (usize, usize),
    output: (usize, usize),
    prefixes: usize,
    prefix_tokens: usize,
    shared_pct: usize,
}

fn range(
    settings: &Settings,
    lo: &'static str,
    hi: &'static str,
) -> Result<(usize, usize), ExperimentError> {
    let (a, b) = (at_least(settings, lo, 1)?, at_least(settings, hi, 1)?);
    if a > b {
        return Err(ExperimentError::BadParameter {
            key: hi,
            message: format!("{b} is below {lo} = {a}"),
        });
    }
    Ok((a, b))
}

impl Shape {
    fn new(settings: &Settings) -> Result<Self, ExperimentError> {
        let s = Self {
            requests: at_least(settings, "requests", 2)?,
            skip: settings.count("skip")?,
            prompt: range(settings, "prompt_min", "prompt_max")?,
            output: range(settings, "output_min", "output_max")?,
            prefixes: at_least(settings, "prefixes", 1)?,
            prefix_tokens: at_least(settings, "prefix_tokens", 1)?,
            shared_pct: settings.count("shared_pct")?,
        };
        if s.shared_pct > 100 {
            return Err(ExperimentError::BadParameter {
                key: "shared_pct",
                message: format!(
                    "{} is not a percentage; give a value from 0 to 100",
                    s.shared_pct
                ),
            });
        }
        // Only prompts longer than the prefix start with it: a prefix as long
        // as the longest prompt would silently share nothing.
        if s.shared_pct > 0 && s.prefix_tokens >= s.prompt.1 {
            return Err(ExperimentError::BadParameter {
                key: "prefix_tokens",
                message: format!(
                    "{} is not shorter than prompt_max = {}, so no prompt could start with a \
                     shared prefix; lower prefix_tokens, raise prompt_max, or set shared_pct=0",
                    s.prefix_tokens, s.prompt.1
                ),
            });
        }
        if s.skip >= s.requests {
            return Err(ExperimentError::BadParameter {
                key: "skip",
                message: format!(
                    "{} leaves none of the {} requests measured",
                    s.skip, s.requests
                ),
            });
        }
        let longest = s.prompt.1 + s.output.1;
        if longest > settings.engine.max_model_len {
            return Err(ExperimentError::BadParameter {
                key: "prompt_max",
                message: format!(
                    "prompt_max + output_max = {longest} exceeds max_model_len = {}",
                    settings.engine.max_model_len
                ),
            });
        }
        Ok(s)
    }
}

/// Log-uniform integer in `lo..=hi`.
fn log_uniform(rng: &mut impl Rng, (lo, hi): (usize, usize)) -> usize {
    let (a, b) = ((lo as f64).ln(), (hi as f64 + 1.0).ln());
    let x = rng.random_range(a..b).exp().floor() as usize;
    x.clamp(lo, hi)
}

fn script(shape: &Shape, rate: f64, seed: u64, prompts: &PromptSource) -> ScriptBuilder {
    let mut b = ScriptBuilder::new(seed, prompts);
    let pool: Vec<Vec<u32>> = (0..shape.prefixes)
        .map(|_| b.random_tokens(shape.prefix_tokens))
        .collect();
    let warm = b.warmup();
    let mut t = 0.0;
    for i in 0..shape.requests {
        let u: f64 = b.rng().random();
        t += unit_exponential(u) / rate;
        let len = log_uniform(b.rng(), shape.prompt);
        let output = log_uniform(b.rng(), shape.output);
        let shared = b.rng().random_range(0..100) < shape.shared_pct;
        let prompt = if shared && len > shape.prefix_tokens {
            let k = b.rng().random_range(0..pool.len());
            let mut p = pool[k].clone();
            p.extend(b.random_tokens(len - shape.prefix_tokens));
            p
        } else {
            b.random_tokens(len)
        };
        let tag = if i < shape.skip { SKIP_TAG } else { MIX_TAG };
        let gate = Gate::After {
            deps: vec![warm],
            delay_s: t,
        };
        b.push(tag, prompt, output, None, gate);
    }
    b
}

struct Metrics {
    throughput: f64,
    ttft: (Option<f64>, Option<f64>),
    itl: (Option<f64>, Option<f64>),
    e2e: Option<f64>,
    cached: usize,
    preemptions: usize,
    measured: usize,
}

fn metrics(rec: &RunRecords, label: &str) -> Result<Metrics, ExperimentError> {
    let reqs = tagged(rec, MIX_TAG);
    let incomplete = |message: String| ExperimentError::Incomplete {
        label: label.to_string(),
        message,
    };
    let lat = latencies(&reqs, label)?;
    if reqs.is_empty() {
        return Err(incomplete("no measured request".into()));
    }
    let e2e: Vec<f64> = reqs
        .iter()
        .filter_map(|r| r.finish_s.map(|f| ms(f - r.arrival_s)))
        .collect();
    Ok(Metrics {
        throughput: lat.throughput().unwrap_or(f64::NAN),
        ttft: (median(&lat.ttft_ms), percentile(&lat.ttft_ms, 99.0)),
        itl: (median(&lat.itl_ms), percentile(&lat.itl_ms, 99.0)),
        e2e: median(&e2e),
        cached: reqs.iter().map(|r| r.cached_tokens).sum(),
        preemptions: reqs.iter().map(|r| r.preemptions).sum(),
        measured: reqs.len(),
    })
}

impl Experiment for PoissonMix {
    fn name(&self) -> &'static str {
        "poisson_mix"
    }

    fn description(&self) -> &'static str {
        "validation load: Poisson arrivals, prompts 64-3,000 and outputs 16-256 tokens, shared prefixes"
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
        let shape = Shape::new(settings)?;
        let mut out = Vec::new();
        for rate in settings.counts("rates")? {
            let seed = condition_seed(seed, out.len());
            let b = script(&shape, rate as f64, seed, prompts);
            let label = format!("rate={rate}");
            out.push(condition(label, settings.engine.clone(), b.build(), seed)?);
        }
        Ok(out)
    }

    fn summarize(
        &self,
        settings: &Settings,
        conditions: &[Condition],
        runs: &[RunRecords],
    ) -> Result<Report, ExperimentError> {
        let rates = settings.counts("rates")?;
        let mut table = Table::new(COLUMNS);
        let (mut names, mut ttft, mut ttft99, mut itl99) = (vec![], vec![], vec![], vec![]);
        for ((rate, cond), rec) in rates.iter().zip(conditions).zip(runs) {
            let m = metrics(rec, &cond.label)?;
            table.push(vec![
                Cell::int(*rate),
                Cell::num(Some(m.throughput)),
                Cell::num(m.ttft.0),
                Cell::num(m.ttft.1),
                Cell::num(m.itl.0),
                Cell::num(m.itl.1),
                Cell::num(m.e2e),
                Cell::int(m.cached),
                Cell::int(m.preemptions),
                Cell::int(m.measured),
            ]);
            let x = names.len() as f64;
            names.push(rate.to_string());
            let nan = f64::NAN;
            ttft.push((x, m.ttft.0.unwrap_or(nan)));
            ttft99.push((x, m.ttft.1.unwrap_or(nan)));
            itl99.push((x, m.itl.1.unwrap_or(nan)));
        }
        let chart = ChartSpec::new(
            "poisson_mix_latency",
            "poisson_mix: latency vs arrival rate",
            "arrival rate (requests/s)",
            "time (ms)",
        )
        .categories(&names)
        .bars()
        .y_scale(YScale::Auto)
        .series("median TTFT", ttft)
        .series("TTFT p99", ttft99)
        .series("ITL p99", itl99);
        Ok(Report {
            summary: table,
            key_columns: 1,
            charts: vec![chart],
        })
    }
}

#[cfg(test)]
mod tests;
