//! cb_sweep: continuous batching on (`max_num_seqs` 256) and off (1) under a
//! closed-loop load of c clients.

use super::load::{self, LoadShape};
use super::{at_least, condition, Condition, Experiment, ExperimentError, Report};
use crate::charts::ChartSpec;
use crate::script::{condition_seed, ScriptBuilder};
use crate::settings::{ParamKind, ParamSpec, Settings};
use crate::table::{Cell, Table};
use figures::YScale;
use sim::workload::PromptSource;
use sim::RunRecords;

pub struct CbSweep;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "max_num_seqs",
        kind: ParamKind::CountList,
        default: "1,256",
        help: "max_num_seqs values swept (1 = one request at a time)",
    },
    ParamSpec {
        key: "concurrency",
        kind: ParamKind::CountList,
        default: "1,4,16,64",
        help: "closed-loop clients",
    },
    ParamSpec {
        key: "prompt_tokens",
        kind: ParamKind::Count,
        default: "256",
        help: "prompt length of every request",
    },
    ParamSpec {
        key: "output_tokens",
        kind: ParamKind::Count,
        default: "128",
        help: "output tokens of every request",
    },
    ParamSpec {
        key: "batches",
        kind: ParamKind::Count,
        default: "4",
        help: "batches of 2c requests per condition, the first a warm-up",
    },
];

const COLUMNS: &[&str] = &[
    "max_num_seqs",
    "concurrency",
    "throughput_tok_s",
    "ttft_median_ms",
    "itl_median_ms",
    "itl_p99_ms",
    "throughput_spread_pct",
    "measured_batches",
    "preemptions",
];

fn shape(settings: &Settings, concurrency: usize) -> Result<LoadShape, ExperimentError> {
    Ok(LoadShape {
        concurrency,
        batches: at_least(settings, "batches", 2)?,
        prompt_tokens: at_least(settings, "prompt_tokens", 1)?,
        output_tokens: at_least(settings, "output_tokens", 1)?,
    })
}

/// (max_num_seqs, concurrency) of every condition, in condition order.
fn grid(settings: &Settings) -> Result<Vec<(usize, usize)>, ExperimentError> {
    let concurrencies = settings.counts("concurrency")?;
    Ok(settings
        .counts("max_num_seqs")?
        .into_iter()
        .flat_map(|m| concurrencies.iter().map(move |&c| (m, c)))
        .collect())
}

impl Experiment for CbSweep {
    fn name(&self) -> &'static str {
        "cb_sweep"
    }

    fn description(&self) -> &'static str {
        "continuous batching on/off: max_num_seqs {1,256} x closed-loop concurrency {1,4,16,64}"
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
        let grid = grid(settings)?;
        if let Some(&(_, c)) = grid.iter().max_by_key(|(_, c)| *c) {
            load::check_fits(shape(settings, c)?, grid.len())?;
        }
        let mut out = Vec::new();
        for (m, c) in grid {
            let index = out.len();
            let seed = condition_seed(seed, index);
            let mut b = ScriptBuilder::new(seed, prompts);
            load::closed_loop(&mut b, shape(settings, c)?);
            let mut engine = settings.engine.clone();
            engine.max_num_seqs = m;
            let label = format!("max_num_seqs={m} concurrency={c}");
            out.push(condition(label, engine, b.build(), seed)?);
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
        let mut points: Vec<(usize, usize, load::LoadSummary)> = Vec::new();
        let concurrencies = settings.counts("concurrency")?;
        let grid = grid(settings)?;
        if grid.len() != conditions.len() || runs.len() != conditions.len() {
            return Err(ExperimentError::Incomplete {
                label: self.name().into(),
                message: format!(
                    "{} settings pairs, {} conditions, {} runs",
                    grid.len(),
                    conditions.len(),
                    runs.len()
                ),
            });
        }
        for ((&(m, c), cond), rec) in grid.iter().zip(conditions).zip(runs) {
            let s = load::summarize(rec, shape(settings, c)?, &cond.label)?;
            table.push(vec![
                Cell::int(m),
                Cell::int(c),
                Cell::num(Some(s.throughput_tok_s)),
                Cell::num(Some(s.ttft_median_ms)),
                Cell::num(Some(s.itl_median_ms)),
                Cell::num(Some(s.itl_p99_ms)),
                Cell::num(Some(s.throughput_spread_pct)),
                Cell::int(s.measured_batches),
                Cell::int(s.preemptions),
            ]);
            points.push((m, c, s));
        }
        let ticks: Vec<(f64, String)> = concurrencies
            .iter()
            .map(|c| (*c as f64, c.to_string()))
            .collect();
        let chart =
            |stem: &str, title: &str, y: &str, scale: YScale, f: fn(&load::LoadSummary) -> f64| {
                let mut spec = ChartSpec::new(stem, title, "concurrency (clients)", y)
                    .log_x()
                    .y_scale(scale);
                spec.x_ticks = Some(ticks.clone());
                let mut seen: Vec<usize> = points.iter().map(|p| p.0).collect();
                seen.dedup();
                for m in seen {
                    let pts = points
                        .iter()
                        .filter(|p| p.0 == m)
                        .map(|p| (p.1 as f64, f(&p.2)))
                        .collect();
                    spec = spec.series(format!("max_num_seqs={m}"), pts);
                }
                spec
            };
        Ok(Report {
            summary: table,
            key_columns: 2,
            charts: vec![
                chart(
                    "cb_sweep_throughput",
                    "cb_sweep: output throughput vs concurrency",
                    "output throughput (tok/s)",
                    YScale::Linear,
                    |s| s.throughput_tok_s,
                ),
                chart(
                    "cb_sweep_ttft",
                    "cb_sweep: median TTFT vs concurrency",
                    "median TTFT (ms)",
                    // One request at a time queues for seconds at 64
                    // clients, batching answers in milliseconds: decades.
                    YScale::Auto,
                    |s| s.ttft_median_ms,
                ),
            ],
        })
    }
}
