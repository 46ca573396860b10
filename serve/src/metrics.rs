//! Prometheus metrics under vLLM's names.
//!
//! Contract: the engine loop is the only writer ([`Metrics::update`] after
//! every step or event it handles); `/metrics` reads a consistent snapshot
//! ([`Metrics::render`], Prometheus text format 0.0.4). Every series carries
//! the label `model_name`, as vLLM's do. Names and meanings:
//! - `vllm:num_requests_running`, `vllm:num_requests_waiting` (gauges);
//! - `vllm:kv_cache_usage_perc` (gauge): KV blocks held by requests over the
//!   pool (null block excluded), a fraction in 0..1 as in vLLM; blocks that
//!   only hold cached prefixes count as free;
//! - `vllm:prefix_cache_queries_total`, `vllm:prefix_cache_hits_total`
//!   (counters, tokens): prompt tokens looked up in the prefix cache and
//!   found there;
//! - `vllm:num_preemptions_total` (counter): requests preempted (recompute);
//! - `vllm:prompt_tokens_total` (prompt tokens of requests that produced a
//!   first token), `vllm:generation_tokens_total` (output tokens sent);
//! - `vllm:time_to_first_token_seconds` (arrival at the server to first token)
//!   and `vllm:inter_token_latency_seconds` (gap between consecutive tokens
//!   of a request) as histograms with vLLM's buckets.
//!
//! Times are wall-clock seconds as the server saw them: with a time scale
//! below 1 they shrink with it.

use std::fmt::Write;
use std::sync::Mutex;

/// vLLM's buckets for `time_to_first_token_seconds`.
const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's buckets for `inter_token_latency_seconds`.
const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

#[derive(Debug, Clone)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations at or below each bound (not cumulative; summed on render).
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|b| value <= *b) {
            self.counts[i] += 1;
        }
        self.sum += value;
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum(&self) -> f64 {
        self.sum
    }
}

/// Every value `/metrics` reports.
#[derive(Debug, Clone)]
pub struct MetricsState {
    pub num_requests_running: usize,
    pub num_requests_waiting: usize,
    pub kv_cache_usage: f64,
    pub prefix_cache_queries: u64,
    pub prefix_cache_hits: u64,
    pub num_preemptions: u64,
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    pub time_to_first_token: Histogram,
    pub inter_token_latency: Histogram,
}

impl Default for MetricsState {
    fn default() -> Self {
        Self {
            num_requests_running: 0,
            num_requests_waiting: 0,
            kv_cache_usage: 0.0,
            prefix_cache_queries: 0,
            prefix_cache_hits: 0,
            num_preemptions: 0,
            prompt_tokens: 0,
            generation_tokens: 0,
            time_to_first_token: Histogram::new(TTFT_BUCKETS),
            inter_token_latency: Histogram::new(ITL_BUCKETS),
        }
    }
}

#[derive(Debug)]
pub struct Metrics {
    model_name: String,
    state: Mutex<MetricsState>,
}

impl Metrics {
    pub fn new(model_name: &str) -> Self {
        Self {
            model_name: model_name.to_string(),
            state: Mutex::new(MetricsState::default()),
        }
    }

    /// Changes the values under the lock.
    pub fn update(&self, change: impl FnOnce(&mut MetricsState)) {
        // A writer that panicked left plain numbers behind; they are still readable.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut state);
    }

    pub fn snapshot(&self) -> MetricsState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Prometheus text exposition of the current values.
    pub fn render(&self) -> String {
        let s = self.snapshot();
        let label = format!("model_name=\"{}\"", escape_label(&self.model_name));
        let mut out = String::new();
        let mut scalar = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            let _ = writeln!(out, "{name}{{{label}}} {value}");
        };
        scalar(
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            s.num_requests_running.to_string(),
        );
        scalar(
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            s.num_requests_waiting.to_string(),
        );
        scalar(
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage. 1 means 100 percent usage.",
            s.kv_cache_usage.to_string(),
        );
        scalar(
            "vllm:prefix_cache_queries_total",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
            s.prefix_cache_queries.to_string(),
        );
        scalar(
            "vllm:prefix_cache_hits_total",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
            s.prefix_cache_hits.to_string(),
        );
        scalar(
            "vllm:num_preemptions_total",
            "counter",
            "Cumulative number of preemptions from the engine.",
            s.num_preemptions.to_string(),
        );
        scalar(
            "vllm:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            s.prompt_tokens.to_string(),
        );
        scalar(
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            s.generation_tokens.to_string(),
        );
        histogram(
            &mut out,
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            &label,
            &s.time_to_first_token,
        );
        histogram(
            &mut out,
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            &label,
            &s.inter_token_latency,
        );
        out
    }
}

fn histogram(out: &mut String, name: &str, help: &str, label: &str, h: &Histogram) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    let mut cumulative = 0;
    for (bound, count) in h.bounds.iter().zip(&h.counts) {
        cumulative += count;
        let _ = writeln!(
            out,
            "{name}_bucket{{{label},le=\"{bound:?}\"}} {cumulative}"
        );
    }
    let _ = writeln!(out, "{name}_bucket{{{label},le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum{{{label}}} {}", h.sum);
    let _ = writeln!(out, "{name}_count{{{label}}} {}", h.count);
}

/// Prometheus label values escape backslash, quote and newline.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::new("my\"model");
        m.update(|s| {
            s.generation_tokens = 7;
            s.time_to_first_token.observe(0.003);
            s.time_to_first_token.observe(0.05);
            s.time_to_first_token.observe(5000.0);
        });
        let text = m.render();
        assert!(text.contains("vllm:generation_tokens_total{model_name=\"my\\\"model\"} 7"));
        let label = "model_name=\"my\\\"model\"";
        assert!(text.contains(&format!(
            "vllm:time_to_first_token_seconds_bucket{{{label},le=\"0.001\"}} 0"
        )));
        assert!(text.contains(&format!(
            "vllm:time_to_first_token_seconds_bucket{{{label},le=\"0.005\"}} 1"
        )));
        assert!(text.contains(&format!(
            "vllm:time_to_first_token_seconds_bucket{{{label},le=\"2560.0\"}} 2"
        )));
        assert!(text.contains(&format!(
            "vllm:time_to_first_token_seconds_bucket{{{label},le=\"+Inf\"}} 3"
        )));
        assert!(text.contains(&format!(
            "vllm:time_to_first_token_seconds_count{{{label}}} 3"
        )));
    }
}
