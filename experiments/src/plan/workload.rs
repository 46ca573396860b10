//! The workload a plan is made for (`--workload FILE`).
//!
//! Contract:
//! - Arrivals are always a Poisson process whose rate the search varies. A
//!   `.ron` file describes the requests: `(prompt_tokens: L, output_tokens:
//!   L)` where each `L` is `Fixed(n)`, `Uniform(min: a, max: b)` (inclusive)
//!   or `Choices([(tokens, weight), ...])`. Without a file the default is
//!   `Fixed(512)` prompt tokens and `Fixed(128)` output tokens: a chat-sized
//!   prompt and reply, the cb_sweep shape at twice the prompt.
//! - A `.csv`/`.jsonl` trace (any format `sim::workload::load_trace_as`
//!   sniffs: this project's, Azure 2023, Mooncake, BurstGPT) keeps its requests and the shape of its arrivals: to run it at rate `r`
//!   its arrival times are shifted to start at 0 and stretched so that its
//!   average rate `(n - 1) / (t_last - t_first)` becomes `r`. A trace is
//!   replayed whole; the `requests` setting applies to `.ron` workloads only.
//! - [`PlanWorkload::unit_rate_entries`] draws the requests once for a seed,
//!   at an average of one request per second; [`at_rate`] only rescales
//!   their times. So every rate runs the same requests in the same order,
//!   and a higher rate differs from a lower one only by compressed gaps
//!   (common random numbers), which keeps the rate search monotone.
//! - Errors name the file, line and field.

use super::error::PlanError;
use crate::stats::unit_exponential;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use sim::workload::{load_trace_as, TraceEntry, TraceOptions, TracePrompt};
use statrs::statistics::Statistics;
use std::path::{Path, PathBuf};

/// A distribution of token counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Lengths {
    Fixed(usize),
    /// Uniform over `min..=max`.
    Uniform {
        min: usize,
        max: usize,
    },
    /// `(tokens, weight)` pairs; weights need not sum to 1.
    Choices(Vec<(usize, f64)>),
}

impl Lengths {
    fn check(&self) -> Result<(), String> {
        match self {
            Lengths::Fixed(0) => Err("Fixed(0): a request needs at least one token".into()),
            Lengths::Uniform { min, max } if *min == 0 || min > max => Err(format!(
                "Uniform(min: {min}, max: {max}): need 1 <= min <= max"
            )),
            Lengths::Choices(c) if c.is_empty() => Err("Choices([]) is empty".into()),
            Lengths::Choices(c) => match c
                .iter()
                .find(|(t, w)| *t == 0 || !(w.is_finite() && *w > 0.0))
            {
                Some((t, w)) => Err(format!(
                    "choice ({t}, {w}): tokens must be >= 1 and weight a positive number"
                )),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    pub fn max(&self) -> usize {
        match self {
            Lengths::Fixed(n) => *n,
            Lengths::Uniform { max, .. } => *max,
            Lengths::Choices(c) => c.iter().map(|(t, _)| *t).max().unwrap_or(0),
        }
    }

    pub fn mean(&self) -> f64 {
        match self {
            Lengths::Fixed(n) => *n as f64,
            Lengths::Uniform { min, max } => (*min + *max) as f64 / 2.0,
            Lengths::Choices(c) => {
                let total: f64 = c.iter().map(|(_, w)| w).sum();
                c.iter().map(|(t, w)| *t as f64 * w).sum::<f64>() / total
            }
        }
    }

    fn sample(&self, rng: &mut StdRng) -> usize {
        match self {
            Lengths::Fixed(n) => *n,
            Lengths::Uniform { min, max } => rng.random_range(*min..=*max),
            Lengths::Choices(c) => {
                let total: f64 = c.iter().map(|(_, w)| w).sum();
                let mut x = rng.random_range(0.0..total);
                for (t, w) in c {
                    if x < *w {
                        return *t;
                    }
                    x -= w;
                }
                c.last().map_or(1, |(t, _)| *t)
            }
        }
    }
}

/// Request shapes of a Poisson workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticWorkload {
    pub prompt_tokens: Lengths,
    pub output_tokens: Lengths,
}

impl Default for SyntheticWorkload {
    fn default() -> Self {
        Self {
            prompt_tokens: Lengths::Fixed(512),
            output_tokens: Lengths::Fixed(128),
        }
    }
}

#[derive(Debug, Clone)]
pub enum PlanWorkload {
    /// `file` is the RON file and its text, when one was given.
    Synthetic {
        shape: SyntheticWorkload,
        file: Option<(PathBuf, String)>,
    },
    Trace {
        path: PathBuf,
        entries: Vec<TraceEntry>,
        /// `(n - 1) / (t_last - t_first)`, requests per second.
        natural_rate: f64,
    },
}

/// The 1-based line of the first `field:` in `text` (1 when absent).
fn line_of(text: &str, field: &str) -> usize {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(field)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map_or(1, |i| i + 1)
}

fn prompt_len(e: &TraceEntry) -> usize {
    match &e.prompt {
        TracePrompt::Length(n) => *n,
        TracePrompt::Tokens(t) => t.len(),
    }
}

impl Default for PlanWorkload {
    fn default() -> Self {
        Self::Synthetic {
            shape: SyntheticWorkload::default(),
            file: None,
        }
    }
}

impl PlanWorkload {
    /// Reads a `.ron` description or a `.csv`/`.jsonl` trace.
    pub fn load(path: &Path) -> Result<Self, PlanError> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        match ext.to_ascii_lowercase().as_str() {
            "ron" => Self::load_ron(path),
            "csv" | "jsonl" | "ndjson" => Self::load_trace(path),
            _ => Err(PlanError::WorkloadFormat {
                path: path.to_path_buf(),
            }),
        }
    }

    fn load_ron(path: &Path) -> Result<Self, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|error| PlanError::WorkloadIo {
            path: path.to_path_buf(),
            error,
        })?;
        let shape: SyntheticWorkload =
            ron::from_str(&text).map_err(|e| PlanError::WorkloadSyntax {
                path: path.to_path_buf(),
                line: e.position.line,
                column: e.position.col,
                message: e.code.to_string(),
            })?;
        for (field, lengths) in [
            ("prompt_tokens", &shape.prompt_tokens),
            ("output_tokens", &shape.output_tokens),
        ] {
            lengths
                .check()
                .map_err(|message| PlanError::WorkloadField {
                    path: path.to_path_buf(),
                    line: line_of(&text, field),
                    field: field.into(),
                    message,
                })?;
        }
        Ok(Self::Synthetic {
            shape,
            file: Some((path.to_path_buf(), text)),
        })
    }

    fn load_trace(path: &Path) -> Result<Self, PlanError> {
        let entries = load_trace_as(path, None, &TraceOptions::default())?.entries;
        let first = entries.iter().map(|e| e.arrival_s).reduce(f64::min);
        let last = entries.iter().map(|e| e.arrival_s).reduce(f64::max);
        let natural_rate = match (first, last) {
            (Some(a), Some(b)) if b > a => (entries.len() - 1) as f64 / (b - a),
            _ => {
                return Err(PlanError::WorkloadField {
                    path: path.to_path_buf(),
                    line: 1,
                    field: "arrival_s".into(),
                    message: "the trace needs at least two distinct arrival times to be \
                              scaled to a request rate"
                        .into(),
                })
            }
        };
        Ok(Self::Trace {
            path: path.to_path_buf(),
            entries,
            natural_rate,
        })
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        match self {
            Self::Synthetic { shape, file } => format!(
                "Poisson arrivals; prompt_tokens {:?}, output_tokens {:?}{}",
                shape.prompt_tokens,
                shape.output_tokens,
                file.as_ref()
                    .map(|(p, _)| format!(" (from {})", p.display()))
                    .unwrap_or_default()
            ),
            Self::Trace {
                path,
                entries,
                natural_rate,
            } => format!(
                "trace {} ({} requests at {natural_rate:.3} req/s, time-scaled to each rate)",
                path.display(),
                entries.len()
            ),
        }
    }

    /// Fails, naming the field, if a request could exceed `max_model_len`.
    pub fn check_fits(&self, max_model_len: usize) -> Result<(), PlanError> {
        match self {
            Self::Synthetic { shape, file } => {
                let longest = shape.prompt_tokens.max() + shape.output_tokens.max();
                if longest <= max_model_len {
                    return Ok(());
                }
                let (path, line) = match file {
                    Some((p, text)) => (p.clone(), line_of(text, "prompt_tokens")),
                    None => (PathBuf::from("(default workload)"), 1),
                };
                Err(PlanError::WorkloadField {
                    path,
                    line,
                    field: "prompt_tokens".into(),
                    message: format!(
                        "the longest prompt plus the longest output is {longest} tokens, more \
                         than max_model_len = {max_model_len}; shorten them or --set \
                         max_model_len=..."
                    ),
                })
            }
            Self::Trace { path, entries, .. } => match entries
                .iter()
                .position(|e| prompt_len(e) + e.output_tokens > max_model_len)
            {
                None => Ok(()),
                Some(i) => Err(PlanError::WorkloadEntry {
                    path: path.clone(),
                    index: i,
                    message: format!(
                        "{} prompt + {} output tokens is more than max_model_len = \
                         {max_model_len}; --set max_model_len=...",
                        prompt_len(&entries[i]),
                        entries[i].output_tokens
                    ),
                }),
            },
        }
    }

    /// Whether this is a trace (replayed whole) rather than a synthetic
    /// workload (whose run length the search chooses).
    pub fn is_trace(&self) -> bool {
        matches!(self, Self::Trace { .. })
    }

    /// Mean prompt and output tokens of a request.
    pub fn mean_tokens(&self) -> (f64, f64) {
        match self {
            Self::Synthetic { shape, .. } => {
                (shape.prompt_tokens.mean(), shape.output_tokens.mean())
            }
            Self::Trace { entries, .. } if entries.is_empty() => (0.0, 0.0),
            Self::Trace { entries, .. } => (
                Statistics::mean(entries.iter().map(|e| prompt_len(e) as f64)),
                Statistics::mean(entries.iter().map(|e| e.output_tokens as f64)),
            ),
        }
    }

    /// The run's requests at an average of one per second (see the module
    /// docs): `requests` of them for a synthetic workload (the first `n` are
    /// the same for every `requests >= n`), the whole trace for a trace.
    pub fn unit_rate_entries(&self, requests: usize, seed: u64) -> Vec<TraceEntry> {
        match self {
            Self::Synthetic { shape, .. } => {
                // Separate streams: changing lengths does not move arrivals.
                let mut gaps = StdRng::seed_from_u64(seed);
                let mut lengths = StdRng::seed_from_u64(seed ^ 0x5DEE_CE66_D1CE_5EED);
                let mut t = 0.0;
                (0..requests)
                    .map(|_| {
                        // Exponential gap of mean 1 s, by inversion.
                        let u: f64 = gaps.random_range(0.0..1.0);
                        t += unit_exponential(u);
                        // Arguments are evaluated in order: the prompt
                        // length is drawn before the output length.
                        TraceEntry::new(
                            t,
                            TracePrompt::Length(shape.prompt_tokens.sample(&mut lengths)),
                            shape.output_tokens.sample(&mut lengths),
                        )
                    })
                    .collect()
            }
            Self::Trace {
                entries,
                natural_rate,
                ..
            } => {
                let first = entries
                    .iter()
                    .map(|e| e.arrival_s)
                    .fold(f64::INFINITY, f64::min);
                entries
                    .iter()
                    .map(|e| TraceEntry {
                        arrival_s: (e.arrival_s - first) * natural_rate,
                        ..e.clone()
                    })
                    .collect()
            }
        }
    }
}

/// `unit` (one request per second on average) at `rate` requests per second.
pub fn at_rate(unit: &[TraceEntry], rate: f64) -> Vec<TraceEntry> {
    unit.iter()
        .map(|e| TraceEntry {
            arrival_s: e.arrival_s / rate,
            ..e.clone()
        })
        .collect()
}
