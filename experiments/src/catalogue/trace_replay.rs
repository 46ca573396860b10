//! trace_replay: a request trace replayed at its recorded arrival times.
//!
//! Contract: one condition. The trace (`trace`, from `exp run --trace FILE`)
//! is read by `sim::workload::load_trace_as` in `format` (`auto` sniffs it
//! from the first line), keeping the rows of the window
//! `window_start_s <= t < window_start_s + window_s` (trace seconds, `all`
//! for no end) and dividing every arrival by `rate_scale` (2 replays at twice
//! the rate: the same requests over half the span). After the warm-up
//! request finishes, request `i` of the kept rows arrives at its scaled time;
//! prompts given as lengths are filled from the run's prompt source
//! (`sim::workload::TraceReplay`), Mooncake `hash_ids` become shared blocks
//! with token ids below the model's vocabulary. The script is open loop, so
//! it runs the same on the simulator and on the real engine.
//!
//! A row whose prompt plus output exceeds `max_model_len` can never run: it
//! is skipped and counted in `summary.csv`'s `too_long` (public traces hold
//! prompts longer than any one engine setting; an error would make them
//! unreplayable without editing the file). A trace with no row left to
//! replay is an error saying which rows were dropped and why. A trace that
//! cannot be read (missing file, unknown format, malformed row) is an error
//! naming the file, line and field, from the trace reader.
//!
//! Metrics are over every replayed request (the warm-up left out): output
//! throughput over first arrival to last completion, TTFT and ITL
//! percentiles (`crate::stats`), the peaks of the waiting and running queues
//! and of KV-cache occupancy over the steps, preemptions and the prefix-cache
//! hit rate. [`figures`] draws the distributions and the queues over time.

mod figures;
mod load;

use super::latency::latencies;
use super::{condition, Condition, Experiment, ExperimentError, Report};
use crate::script::{condition_seed, Gate, ScriptBuilder};
use crate::settings::{ParamKind, ParamSpec, Settings};
use crate::stats::percentile;
use crate::table::{Cell, Table};
use load::{bad, file_name, load, vocab_of};
use sim::workload::{PromptSource, TraceEntry, TraceReplay};
use sim::{RunRecords, Workload};

pub struct TraceReplayExp;

/// `format`'s choices: `auto`, then every reader's name.
const FORMATS: &[&str] = &["auto", "servetwin", "azure", "mooncake", "burstgpt"];

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "trace",
        kind: ParamKind::Path,
        default: "",
        help: "the trace file (exp run --trace FILE sets it)",
    },
    ParamSpec {
        key: "format",
        kind: ParamKind::Choice(FORMATS),
        default: "auto",
        help: "trace format; auto sniffs it from the first line",
    },
    ParamSpec {
        key: "rate_scale",
        kind: ParamKind::Positive,
        default: "1",
        help: "arrivals divided by it: 2 replays at twice the rate",
    },
    ParamSpec {
        key: "window_start_s",
        kind: ParamKind::Number,
        default: "0",
        help: "first trace second kept (before rate_scale)",
    },
    ParamSpec {
        key: "window_s",
        kind: ParamKind::PositiveOrAll,
        default: "all",
        help: "trace seconds kept from window_start_s on (all: to the end)",
    },
];

const COLUMNS: &[&str] = &[
    "trace",
    "format",
    "rows",
    "outside_window",
    "failed_or_empty",
    "too_long",
    "requests",
    "duration_s",
    "throughput_tok_s",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p90_ms",
    "itl_p99_ms",
    "waiting_peak",
    "running_peak",
    "kv_usage_peak_pct",
    "preemptions",
    "prefix_cache_hit_pct",
];

/// The replay's script: the warm-up, then every kept row `delay_s` after it
/// finished, `delay_s` being the row's scaled arrival.
fn script(
    entries: Vec<TraceEntry>,
    seed: u64,
    prompts: &PromptSource,
) -> Result<ScriptBuilder, ExperimentError> {
    let mut b = ScriptBuilder::new(seed, prompts);
    let warm = b.warmup();
    let mut replay =
        TraceReplay::new(entries, prompts, seed, 1, 1).map_err(|e| bad(e.to_string()))?;
    for a in replay.initial() {
        let r = a.request;
        let gate = Gate::After {
            deps: vec![warm],
            delay_s: r.arrival_time,
        };
        b.push(a.tag, r.prompt_token_ids, r.max_tokens, r.cache_salt, gate);
    }
    Ok(b)
}

/// Metrics of the replayed requests (every request but the warm-up, id 0).
struct Metrics {
    requests: usize,
    duration_s: Option<f64>,
    throughput: Option<f64>,
    ttft_ms: Vec<f64>,
    itl_ms: Vec<f64>,
    /// `None` when the backend saw no steps (an endpoint).
    waiting_peak: Option<usize>,
    running_peak: Option<usize>,
    kv_peak_pct: Option<f64>,
    preemptions: usize,
    hit_pct: Option<f64>,
}

fn metrics(rec: &RunRecords, label: &str) -> Result<Metrics, ExperimentError> {
    let reqs: Vec<_> = rec.requests.iter().filter(|r| r.id != 0).collect();
    let lat = latencies(&reqs, label)?;
    let kv_peak_pct = rec
        .steps
        .iter()
        .filter(|s| s.kv_blocks_total > 0)
        .map(|s| s.kv_blocks_used as f64 / s.kv_blocks_total as f64 * 100.0)
        .reduce(f64::max);
    Ok(Metrics {
        requests: reqs.len(),
        duration_s: lat.span_s.filter(|d| *d > 0.0),
        throughput: lat.throughput(),
        ttft_ms: lat.ttft_ms,
        itl_ms: lat.itl_ms,
        waiting_peak: rec.steps.iter().map(|s| s.waiting_seqs).max(),
        running_peak: rec.steps.iter().map(|s| s.running_seqs).max(),
        kv_peak_pct,
        preemptions: reqs.iter().map(|r| r.preemptions).sum(),
        hit_pct: (rec.prefix_cache_queries > 0).then(|| rec.prefix_cache_hit_rate() * 100.0),
    })
}

impl Experiment for TraceReplayExp {
    fn name(&self) -> &'static str {
        "trace_replay"
    }

    fn description(&self) -> &'static str {
        "a request trace (servetwin, Azure, Mooncake, BurstGPT) at its recorded times, rate-scaled"
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
        let loaded = load(settings, vocab_of(prompts))?;
        let seed = condition_seed(seed, 0);
        let label = format!("trace={}", file_name(&loaded.path));
        let b = script(loaded.entries, seed, prompts)?;
        Ok(vec![condition(
            label,
            settings.engine.clone(),
            b.build(),
            seed,
        )?])
    }

    fn summarize(
        &self,
        settings: &Settings,
        conditions: &[Condition],
        runs: &[RunRecords],
    ) -> Result<Report, ExperimentError> {
        let (Some(cond), Some(rec)) = (conditions.first(), runs.first()) else {
            return Err(bad("no condition ran".into()));
        };
        // The row counts: the plan keeps only the script, so read them again
        // (token contents do not change which rows are kept).
        let loaded = load(settings, 2)?;
        let m = metrics(rec, &cond.label)?;
        let p = |v: &[f64], q: f64| Cell::num(percentile(v, q));
        let mut table = Table::new(COLUMNS);
        table.push(vec![
            Cell::text(file_name(&loaded.path)),
            Cell::text(loaded.format.name()),
            Cell::int(loaded.rows),
            Cell::int(loaded.outside_window),
            Cell::int(loaded.failed_or_empty),
            Cell::int(loaded.too_long),
            Cell::int(m.requests),
            Cell::num(m.duration_s),
            Cell::num(m.throughput),
            p(&m.ttft_ms, 50.0),
            p(&m.ttft_ms, 90.0),
            p(&m.ttft_ms, 99.0),
            p(&m.itl_ms, 50.0),
            p(&m.itl_ms, 90.0),
            p(&m.itl_ms, 99.0),
            m.waiting_peak.map_or(Cell::Empty, Cell::int),
            m.running_peak.map_or(Cell::Empty, Cell::int),
            Cell::num(m.kv_peak_pct),
            Cell::int(m.preemptions),
            Cell::num(m.hit_pct),
        ]);
        let what = format!(
            "{}, rate ×{}",
            file_name(&loaded.path),
            settings.number("rate_scale")?
        );
        Ok(Report {
            summary: table,
            key_columns: 2,
            charts: figures::charts(&what, &m.ttft_ms, &m.itl_ms, rec),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::default_settings;
    use crate::script::WARMUP_TAG;
    use std::path::{Path, PathBuf};

    fn trace_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("trace-replay-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn settings(path: &Path, sets: &[&str]) -> Settings {
        let mut s = default_settings(&TraceReplayExp).unwrap();
        s.set("trace", &path.to_string_lossy()).unwrap();
        for kv in sets {
            s.set_arg(kv).unwrap();
        }
        s
    }

    const TRACE: &str = "arrival_s,prompt_tokens,output_tokens\n\
                         0.0,100,10\n1.0,200,20\n2.0,5000,30\n3.0,300,40\n";

    #[test]
    fn rows_arrive_after_the_warmup_at_scaled_times_and_too_long_ones_are_skipped() {
        let path = trace_file("scaled.csv", TRACE);
        let prompts = PromptSource::random_tokens(1000).unwrap();
        let conds = TraceReplayExp
            .plan(&settings(&path, &["rate_scale=2"]), 3, &prompts)
            .unwrap();
        assert_eq!(conds.len(), 1);
        let reqs = &conds[0].script.requests;
        assert_eq!(reqs[0].tag, WARMUP_TAG);
        let got: Vec<(usize, usize, f64)> = reqs[1..]
            .iter()
            .map(|r| {
                let Gate::After { deps, delay_s } = &r.gate else {
                    panic!("trace rows follow the warm-up")
                };
                assert_eq!(deps, &vec![0]);
                (r.prompt.len(), r.max_tokens, *delay_s)
            })
            .collect();
        assert_eq!(got, vec![(100, 10, 0.0), (200, 20, 0.5), (300, 40, 1.5)]);
        let loaded = load(&settings(&path, &[]), 1000).unwrap();
        assert_eq!((loaded.rows, loaded.too_long), (4, 1));
    }

    #[test]
    fn no_trace_or_nothing_to_replay_is_an_error_saying_what_to_do() {
        let prompts = PromptSource::random_tokens(1000).unwrap();
        let s = default_settings(&TraceReplayExp).unwrap();
        let e = TraceReplayExp
            .plan(&s, 0, &prompts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("trace_replay needs --trace FILE"), "{e}");
        assert!(e.contains("servetwin, azure, mooncake, burstgpt"), "{e}");
        let path = trace_file(
            "long.csv",
            "arrival_s,prompt_tokens,output_tokens\n0,5000,1\n",
        );
        let e = TraceReplayExp
            .plan(&settings(&path, &[]), 0, &prompts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 need more than max_model_len = 4096"), "{e}");
        let path = trace_file("late.csv", TRACE);
        let e = TraceReplayExp
            .plan(&settings(&path, &["window_start_s=10"]), 0, &prompts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("4 are outside the window"), "{e}");
    }
}
