//! pd_sweep: aggregated serving against prefill/decode disaggregation on the
//! same number of GPUs, over request rates (simulated fleets only).
//!
//! Every request has a long prompt of its own (`prompt_tokens` random ids,
//! no shared prefix) and `output_tokens` outputs; arrivals are an open-loop
//! Poisson process at each rate. At every rate one script (seeded from
//! `(seed, rate index)`) runs on each split of `gpus` engines: all of them
//! aggregated behind the router ([`crate::fleet::FleetSpec`]), and, for
//! each `prefill_replicas` P, P prefill and `gpus - P` decode replicas
//! behind one router per pool, the prompt's K/V crossing a link of
//! `link_gb_s` GB/s and `link_latency_us` µs per transfer
//! ([`crate::fleet::DisaggSpec`]). Reported per (split, rate): throughput
//! (output tokens over first arrival to last finish), TTFT and ITL p50/p99,
//! and the median gap between the first and the second token.
//! Disaggregated TTFT ends at the prefill replica's first token; the first
//! inter-token gap after it spans the K/V transfer.

use super::latency::latencies;
use super::{at_least, condition, ms, Condition, Experiment, ExperimentError, Report};
use crate::charts::ChartSpec;
use crate::fleet::{DisaggSpec, FleetSpec, RouterChoice, ROUTER_NAMES};
use crate::script::{condition_seed, Gate, ScriptBuilder};
use crate::settings::{ParamKind, ParamSpec, Settings};
use crate::stats::{percentile, unit_exponential};
use crate::table::{Cell, Table};
use figures::YScale;
use rand::Rng;
use sim::cluster::KvLink;
use sim::workload::PromptSource;
use sim::RunRecords;

pub struct PdSweep;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "gpus",
        kind: ParamKind::Count,
        default: "4",
        help: "engines in every split (aggregated replicas, or prefill + decode)",
    },
    ParamSpec {
        key: "prefill_replicas",
        kind: ParamKind::CountList,
        default: "1,2,3",
        help: "prefill replicas of the disaggregated splits (the rest of `gpus` decode)",
    },
    ParamSpec {
        key: "rates",
        kind: ParamKind::PositiveList,
        default: "20,40,60,80,100,120,140,160",
        help: "arrival rates swept (requests per second, Poisson)",
    },
    ParamSpec {
        key: "requests",
        kind: ParamKind::Count,
        default: "800",
        help: "requests per condition",
    },
    ParamSpec {
        key: "prompt_tokens",
        kind: ParamKind::Count,
        default: "3072",
        help: "prompt length (unique prompts, no shared prefix)",
    },
    ParamSpec {
        key: "output_tokens",
        kind: ParamKind::Count,
        default: "128",
        help: "output tokens per request",
    },
    ParamSpec {
        key: "router",
        kind: ParamKind::Choice(ROUTER_NAMES),
        default: "least_outstanding",
        help: "router of the aggregated fleet and of each pool",
    },
    ParamSpec {
        key: "link_gb_s",
        kind: ParamKind::PositiveOrInf,
        default: "50",
        help: "KV link bandwidth per prefill replica (GB/s, 1e9 bytes/s; `inf`: no time per byte)",
    },
    ParamSpec {
        key: "link_latency_us",
        kind: ParamKind::Number,
        default: "50",
        help: "KV link latency per transfer (µs)",
    },
];

const COLUMNS: &[&str] = &[
    "split",
    "rate_req_s",
    "gpus",
    "throughput_tok_s",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "first_gap_p50_ms",
];

/// The label of the aggregated split in the summary and the figures.
const AGGREGATED: &str = "aggregated";

fn bad(key: &'static str, message: String) -> ExperimentError {
    ExperimentError::BadParameter { key, message }
}

/// The prefill replica counts, each leaving at least one decode replica.
fn prefill_counts(settings: &Settings, gpus: usize) -> Result<Vec<usize>, ExperimentError> {
    let counts = settings.counts("prefill_replicas")?;
    if let Some(&p) = counts.iter().find(|&&p| p >= gpus) {
        return Err(bad(
            "prefill_replicas",
            format!(
                "{p} prefill replicas leave no decode replica of {gpus} gpus; use 1 to {}",
                gpus - 1
            ),
        ));
    }
    Ok(counts)
}

fn link(settings: &Settings) -> Result<KvLink, ExperimentError> {
    let gb_s = settings.number("link_gb_s")?;
    let latency_us = settings.number("link_latency_us")?;
    KvLink::new(gb_s * 1e9, latency_us * 1e-6).map_err(|e| bad("link_gb_s", e.to_string()))
}

impl Experiment for PdSweep {
    fn name(&self) -> &'static str {
        "pd_sweep"
    }

    fn description(&self) -> &'static str {
        "4 GPUs aggregated vs prefill/decode splits 1P3D, 2P2D, 3P1D, 3,072-token prompts at 20-160 req/s, 50 GB/s KV link (sim only)"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn sim_only(&self) -> bool {
        true
    }

    fn plan(
        &self,
        settings: &Settings,
        seed: u64,
        prompts: &PromptSource,
    ) -> Result<Vec<Condition>, ExperimentError> {
        let gpus = at_least(settings, "gpus", 2)?;
        let prefills = prefill_counts(settings, gpus)?;
        let rates = settings.numbers("rates")?;
        let requests = at_least(settings, "requests", 1)?;
        let prompt_len = at_least(settings, "prompt_tokens", 1)?;
        let output = at_least(settings, "output_tokens", 1)?;
        let router = RouterChoice::from_name(&settings.word("router")?, 0.0)
            .ok_or_else(|| bad("router", format!("use one of {}", ROUTER_NAMES.join(", "))))?;
        let link = link(settings)?;
        let max_len = settings.engine.max_model_len;
        if prompt_len + output > max_len {
            return Err(bad(
                "prompt_tokens",
                format!(
                    "{prompt_len} prompt + {output} output tokens exceed max_model_len {max_len}; \
                     shorten them or raise max_model_len"
                ),
            ));
        }

        let mut out = Vec::new();
        for (i, &rate) in rates.iter().enumerate() {
            let seed = condition_seed(seed, i);
            let mut b = ScriptBuilder::new(seed, prompts);
            let mut t = 0.0;
            for _ in 0..requests {
                let u: f64 = b.rng().random();
                t += unit_exponential(u) / rate;
                let prompt = b.random_tokens(prompt_len);
                b.push("long", prompt, output, None, Gate::At(t));
            }
            let script = b.build();
            let label = format!("split={AGGREGATED} rate={rate}");
            let mut c = condition(label, settings.engine.clone(), script.clone(), seed)?;
            c.fleet = Some(FleetSpec {
                replicas: gpus,
                router,
            });
            out.push(c);
            for &p in &prefills {
                let spec =
                    DisaggSpec::new(p, gpus - p, (router, router), link).ok_or_else(|| {
                        bad(
                            "prefill_replicas",
                            format!("{p} of {gpus}: both pools need a replica"),
                        )
                    })?;
                let label = format!("split={} rate={rate}", spec.split_name());
                let mut c = condition(label, settings.engine.clone(), script.clone(), seed)?;
                c.disagg = Some(spec);
                out.push(c);
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
        let mut rows: Vec<Row> = Vec::with_capacity(conditions.len());
        for (c, rec) in conditions.iter().zip(runs) {
            let (split, gpus) = match (&c.fleet, &c.disagg) {
                (_, Some(d)) => (d.split_name(), d.replicas()),
                (Some(f), None) => (AGGREGATED.to_string(), f.replicas),
                (None, None) => {
                    return Err(ExperimentError::Incomplete {
                        label: c.label.clone(),
                        message: "pd_sweep conditions run on a fleet".into(),
                    })
                }
            };
            rows.push(row(rec, &c.label, split, gpus, rate_of(c)?)?);
        }
        // Grouped by split, in plan order, rates ascending within each.
        let mut splits: Vec<String> = Vec::new();
        for r in &rows {
            if !splits.contains(&r.split) {
                splits.push(r.split.clone());
            }
        }
        let mut table = Table::new(COLUMNS);
        for split in &splits {
            for r in rows.iter().filter(|r| &r.split == split) {
                table.push(vec![
                    Cell::text(&r.split),
                    Cell::num(Some(r.rate)),
                    Cell::int(r.gpus),
                    Cell::num(r.throughput),
                    Cell::num(r.ttft_p50),
                    Cell::num(r.ttft_p99),
                    Cell::num(r.itl_p50),
                    Cell::num(r.itl_p99),
                    Cell::num(r.first_gap_p50),
                ]);
            }
        }
        Ok(Report {
            summary: table,
            key_columns: 3,
            charts: charts(&splits, &rows, &link_words(settings)?),
        })
    }
}

/// One condition's metrics.
struct Row {
    split: String,
    rate: f64,
    gpus: usize,
    throughput: Option<f64>,
    ttft_p50: Option<f64>,
    ttft_p99: Option<f64>,
    itl_p50: Option<f64>,
    itl_p99: Option<f64>,
    /// Median gap between the first and the second token.
    first_gap_p50: Option<f64>,
}

/// The rate a condition's label names (`... rate=R`).
fn rate_of(c: &Condition) -> Result<f64, ExperimentError> {
    c.label
        .rsplit_once("rate=")
        .and_then(|(_, r)| r.parse().ok())
        .ok_or_else(|| ExperimentError::Incomplete {
            label: c.label.clone(),
            message: "the label names no rate".into(),
        })
}

fn row(
    rec: &RunRecords,
    label: &str,
    split: String,
    gpus: usize,
    rate: f64,
) -> Result<Row, ExperimentError> {
    let all: Vec<_> = rec.requests.iter().collect();
    let lat = latencies(&all, label)?;
    let first_gaps: Vec<f64> = rec
        .requests
        .iter()
        .filter_map(|r| r.itls_s().next())
        .map(ms)
        .collect();
    Ok(Row {
        split,
        rate,
        gpus,
        throughput: lat.throughput(),
        ttft_p50: percentile(&lat.ttft_ms, 50.0),
        ttft_p99: percentile(&lat.ttft_ms, 99.0),
        itl_p50: percentile(&lat.itl_ms, 50.0),
        itl_p99: percentile(&lat.itl_ms, 99.0),
        first_gap_p50: percentile(&first_gaps, 50.0),
    })
}

/// `KV link 50 GB/s + 50 µs`, for the figure titles.
fn link_words(settings: &Settings) -> Result<String, ExperimentError> {
    let gb_s = settings.number("link_gb_s")?;
    let bandwidth = if gb_s.is_finite() {
        format!("{gb_s} GB/s")
    } else {
        "no time per byte".to_string()
    };
    let latency = settings.number("link_latency_us")?;
    Ok(format!("KV link {bandwidth} + {latency} µs"))
}

fn charts(splits: &[String], rows: &[Row], link: &str) -> Vec<ChartSpec> {
    let metric = |stem: &str, what: &str, y: &str, pick: fn(&Row) -> Option<f64>| {
        let title = format!("pd_sweep: {what} vs request rate, per split ({link})");
        let x = "request rate (req/s)";
        let mut chart = ChartSpec::new(stem, &title, x, y).y_scale(YScale::Auto);
        for split in splits {
            let points = rows
                .iter()
                .filter(|r| &r.split == split)
                .map(|r| (r.rate, pick(r).unwrap_or(f64::NAN)))
                .collect();
            chart = chart.series(split.clone(), points);
        }
        chart
    };
    vec![
        metric("pd_sweep_ttft_p99", "TTFT p99", "TTFT p99 (ms)", |r| {
            r.ttft_p99
        }),
        metric("pd_sweep_itl_p99", "ITL p99", "ITL p99 (ms)", |r| r.itl_p99),
        metric(
            "pd_sweep_throughput",
            "output throughput",
            "throughput (output tokens/s)",
            |r| r.throughput,
        ),
    ]
}
