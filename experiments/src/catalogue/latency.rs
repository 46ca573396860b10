//! What the open-loop experiments' latency summaries start from.
//!
//! Contract: [`latencies`] takes a set of request records, every one of
//! which must have finished (else [`ExperimentError::Incomplete`] naming the
//! request), and gives their TTFTs and inter-token gaps in ms, their output
//! tokens, and the span from the first arrival to the last finish (`None`
//! for no requests), over which throughput is counted.

use super::{ms, ExperimentError};
use sim::RequestRecord;

pub(crate) struct Latencies {
    pub ttft_ms: Vec<f64>,
    pub itl_ms: Vec<f64>,
    pub output_tokens: usize,
    /// Last finish minus first arrival, in seconds.
    pub span_s: Option<f64>,
}

impl Latencies {
    /// Output tokens per second over the span, when the span is positive.
    pub fn throughput(&self) -> Option<f64> {
        self.span_s
            .filter(|s| *s > 0.0)
            .map(|s| self.output_tokens as f64 / s)
    }
}

pub(crate) fn latencies(
    reqs: &[&RequestRecord],
    label: &str,
) -> Result<Latencies, ExperimentError> {
    let mut last = f64::NEG_INFINITY;
    for r in reqs {
        let finish = r.finish_s.ok_or_else(|| ExperimentError::Incomplete {
            label: label.to_string(),
            message: format!("request {} unfinished", r.id),
        })?;
        last = last.max(finish);
    }
    let first = reqs.iter().map(|r| r.arrival_s).reduce(f64::min);
    Ok(Latencies {
        ttft_ms: reqs.iter().filter_map(|r| r.ttft_s()).map(ms).collect(),
        itl_ms: reqs.iter().flat_map(|r| r.itls_s()).map(ms).collect(),
        output_tokens: reqs.iter().map(|r| r.output_tokens()).sum(),
        span_s: first.map(|f| last - f),
    })
}
