//! The closed-loop load of cb_sweep (also chunk_sweep's `load` part).
//!
//! Contract: after the warm-up request, `batches` batches run one after
//! another; each sends `2c` requests from a closed loop of `c` clients (each
//! client sends a request, then its second when the first finishes), and the
//! next batch starts when every request of the previous one finished. Batch 0
//! is the warm-up batch and is left out; reported values are medians over
//! the measured batches, with the throughput spread across them.
//! [`check_fits`] refuses a load whose scripts would not fit in host memory
//! before building them (their dependencies grow with concurrency squared).

use super::{ms, tagged, ExperimentError};
use crate::script::{Gate, ScriptBuilder};
use crate::stats::{median, percentile, spread_pct};
use sim::RunRecords;

/// Requests each client sends per batch (2c requests from c clients).
const REQUESTS_PER_CLIENT: usize = 2;

#[derive(Debug, Clone, Copy)]
pub struct LoadShape {
    pub concurrency: usize,
    pub batches: usize,
    pub prompt_tokens: usize,
    pub output_tokens: usize,
}

fn batch_tag(b: usize) -> String {
    format!("batch{b}")
}

/// Appends the warm-up request and the batches to `b`.
pub fn closed_loop(b: &mut ScriptBuilder, shape: LoadShape) {
    // A batch starts when every request of the previous one finished, which
    // is when every client's last request finished (a client's requests run
    // one after another): c dependencies per first request, not 2c.
    let mut previous_lasts = vec![b.warmup()];
    for batch in 0..shape.batches {
        let mut lasts = Vec::with_capacity(shape.concurrency);
        for _client in 0..shape.concurrency {
            let mut gate = Gate::After {
                deps: previous_lasts.clone(),
                delay_s: 0.0,
            };
            let mut last = 0;
            for _ in 0..REQUESTS_PER_CLIENT {
                let prompt = b.random_tokens(shape.prompt_tokens);
                last = b.push(batch_tag(batch), prompt, shape.output_tokens, None, gate);
                gate = Gate::After {
                    deps: vec![last],
                    delay_s: 0.0,
                };
            }
            lasts.push(last);
        }
        previous_lasts = lasts;
    }
}

/// Host bytes one closed-loop script of `shape` takes: each batch's first
/// requests depend on every client of the previous batch (c² dependencies
/// a batch), and the prompt tokens.
pub fn script_bytes(shape: LoadShape) -> u64 {
    let requests = shape.batches as u64 * shape.concurrency as u64 * REQUESTS_PER_CLIENT as u64;
    dependency_bytes(shape) + requests * (shape.prompt_tokens as u64 * 4 + 200)
}

fn dependency_bytes(shape: LoadShape) -> u64 {
    let c = shape.concurrency as u64;
    shape.batches.saturating_sub(1) as u64 * c * c * 8
}

/// Refuses, before any script is built, a load whose scripts alone (one
/// per condition of `conditions`) would not fit in the host's available
/// memory: at 100,000 clients the dependencies alone take hundreds of GB.
pub fn check_fits(shape: LoadShape, conditions: usize) -> Result<(), ExperimentError> {
    // Every condition's script is planned up front; a running one also has
    // a copy and an index of dependents (as many at once as rayon threads).
    let running = conditions.clamp(1, rayon::current_num_threads().max(1)) as u64;
    let needed = script_bytes(shape)
        .saturating_mul(conditions.max(1) as u64)
        .saturating_add(dependency_bytes(shape).saturating_mul(2 * running));
    match crate::memory::available_bytes() {
        Some(available) if needed > available => Err(ExperimentError::BadParameter {
            key: "concurrency",
            message: format!(
                "{} clients over {} batches need about {} of host memory for the scripts \
                 alone (closed-loop dependencies grow with concurrency squared), but {} is \
                 available; lower concurrency (or batches)",
                shape.concurrency,
                shape.batches,
                crate::memory::Bytes(needed),
                crate::memory::Bytes(available)
            ),
        }),
        _ => Ok(()),
    }
}

/// Metrics of one batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchStats {
    /// Output tokens / (last completion − first arrival).
    pub throughput_tok_s: f64,
    pub ttft_median_ms: f64,
    pub itl_median_ms: f64,
    pub itl_p99_ms: f64,
    pub preemptions: usize,
}

/// Metrics of the requests tagged `batch{b}`; `None` if any did not finish.
pub fn batch_stats(records: &RunRecords, b: usize) -> Option<BatchStats> {
    let reqs = tagged(records, &batch_tag(b));
    if reqs.is_empty() {
        return None;
    }
    let first_arrival = reqs.iter().map(|r| r.arrival_s).reduce(f64::min)?;
    let mut last_finish = f64::NEG_INFINITY;
    for r in &reqs {
        last_finish = last_finish.max(r.finish_s?);
    }
    let tokens: usize = reqs.iter().map(|r| r.token_times_s.len()).sum();
    let ttfts: Vec<f64> = reqs.iter().filter_map(|r| r.ttft_s()).map(ms).collect();
    let itls: Vec<f64> = reqs.iter().flat_map(|r| r.itls_s()).map(ms).collect();
    let span = last_finish - first_arrival;
    Some(BatchStats {
        throughput_tok_s: if span > 0.0 {
            tokens as f64 / span
        } else {
            f64::NAN
        },
        ttft_median_ms: median(&ttfts)?,
        itl_median_ms: median(&itls).unwrap_or(f64::NAN),
        itl_p99_ms: percentile(&itls, 99.0).unwrap_or(f64::NAN),
        preemptions: reqs.iter().map(|r| r.preemptions).sum(),
    })
}

/// A condition's load metrics: medians over measured batches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadSummary {
    pub throughput_tok_s: f64,
    pub throughput_spread_pct: f64,
    pub ttft_median_ms: f64,
    pub itl_median_ms: f64,
    pub itl_p99_ms: f64,
    pub measured_batches: usize,
    pub preemptions: usize,
}

pub fn summarize(
    records: &RunRecords,
    shape: LoadShape,
    label: &str,
) -> Result<LoadSummary, ExperimentError> {
    let stats = (1..shape.batches)
        .map(|b| {
            batch_stats(records, b).ok_or_else(|| ExperimentError::Incomplete {
                label: label.to_string(),
                message: format!("batch {b} has unfinished requests"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let col = |f: fn(&BatchStats) -> f64| stats.iter().map(f).collect::<Vec<f64>>();
    let nan = f64::NAN;
    let throughputs = col(|s| s.throughput_tok_s);
    Ok(LoadSummary {
        throughput_tok_s: median(&throughputs).unwrap_or(nan),
        throughput_spread_pct: spread_pct(&throughputs).unwrap_or(nan),
        ttft_median_ms: median(&col(|s| s.ttft_median_ms)).unwrap_or(nan),
        itl_median_ms: median(&col(|s| s.itl_median_ms)).unwrap_or(nan),
        itl_p99_ms: median(&col(|s| s.itl_p99_ms)).unwrap_or(nan),
        measured_batches: stats.len(),
        preemptions: stats.iter().map(|s| s.preemptions).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::workload::PromptSource;
    use sim::RequestRecord;

    fn rec(id: u64, tag: &str, arrival: f64, tokens: &[f64]) -> RequestRecord {
        RequestRecord {
            id,
            tag: tag.into(),
            arrival_s: arrival,
            prompt_tokens: 8,
            max_tokens: tokens.len(),
            cached_tokens: 0,
            preemptions: 0,
            token_times_s: tokens.to_vec(),
            finish_s: tokens.last().copied(),
            finish_reason: "length".into(),
        }
    }

    #[test]
    fn batch_throughput_counts_tokens_over_span() {
        let records = RunRecords {
            requests: vec![
                rec(1, "batch1", 1.0, &[1.5, 1.6, 1.7]),
                rec(2, "batch1", 1.2, &[1.4, 1.6, 2.0]),
                rec(3, "batch0", 0.0, &[0.5]),
            ],
            ..Default::default()
        };
        let s = batch_stats(&records, 1).unwrap();
        assert!((s.throughput_tok_s - 6.0).abs() < 1e-9);
        assert!((s.ttft_median_ms - 350.0).abs() < 1e-9);
        assert!(batch_stats(&records, 2).is_none());
    }

    #[test]
    fn closed_loop_script_shape() {
        let mut b = ScriptBuilder::new(3, &PromptSource::random_tokens(50).unwrap());
        let shape = LoadShape {
            concurrency: 3,
            batches: 2,
            prompt_tokens: 10,
            output_tokens: 4,
        };
        closed_loop(&mut b, shape);
        let script = b.build();
        assert_eq!(script.requests.len(), 1 + 2 * 2 * 3);
        let starts = script.requests.iter().filter(|r| {
            r.gate
                == Gate::After {
                    deps: vec![0],
                    delay_s: 0.0,
                }
        });
        assert_eq!(starts.count(), 3, "c clients start after the warm-up");
        assert!(script.requests[1..]
            .iter()
            .all(|r| r.prompt.len() == 10 && r.max_tokens == 4));
    }
}
