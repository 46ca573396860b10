//! prefix_cache: reuse of a shared prefix, prefix caching on and off.
//!
//! Each round uses a new random prefix: one cold request, then warm requests
//! with the same prefix and their own unique suffix, each sent when the
//! previous finished. Reported per round: cold TTFT, median warm TTFT, the
//! speedup, and the fewest cached tokens among the warm requests.

use super::{at_least, condition, ms, request, Condition, Experiment, ExperimentError, Report};
use crate::charts::ChartSpec;
use crate::script::{condition_seed, Gate, ScriptBuilder};
use crate::settings::{ParamKind, ParamSpec, Settings};
use crate::stats::median;
use crate::table::{Cell, Table};
use sim::workload::PromptSource;
use sim::RunRecords;

pub struct PrefixCache;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "caching",
        kind: ParamKind::Choices(&["on", "off"]),
        default: "on,off",
        help: "prefix caching settings compared (enable_prefix_caching)",
    },
    ParamSpec {
        key: "rounds",
        kind: ParamKind::Count,
        default: "5",
        help: "rounds, each with a new prefix",
    },
    ParamSpec {
        key: "warm_requests",
        kind: ParamKind::Count,
        default: "4",
        help: "warm requests per round after the cold one",
    },
    ParamSpec {
        key: "prefix_tokens",
        kind: ParamKind::Count,
        default: "3200",
        help: "shared prefix length",
    },
    ParamSpec {
        key: "unique_tokens",
        kind: ParamKind::Count,
        default: "32",
        help: "tokens unique to each request after the prefix",
    },
    ParamSpec {
        key: "output_tokens",
        kind: ParamKind::Count,
        default: "1",
        help: "output tokens per request",
    },
];

const COLUMNS: &[&str] = &[
    "caching",
    "round",
    "cold_ttft_ms",
    "warm_ttft_ms",
    "speedup",
    "warm_cached_tokens",
    "cold_cached_tokens",
];

struct Layout {
    rounds: usize,
    warm: usize,
}

impl Layout {
    fn new(settings: &Settings) -> Result<Self, ExperimentError> {
        Ok(Self {
            rounds: at_least(settings, "rounds", 1)?,
            warm: at_least(settings, "warm_requests", 1)?,
        })
    }
    /// Script id of request `k` of round `r` (k = 0 is the cold one); id 0 is the warm-up.
    fn id(&self, r: usize, k: usize) -> usize {
        1 + r * (1 + self.warm) + k
    }
}

impl Experiment for PrefixCache {
    fn name(&self) -> &'static str {
        "prefix_cache"
    }

    fn description(&self) -> &'static str {
        "shared ~3,200-token prefix: cold vs warm TTFT over 5 rounds, prefix caching on/off"
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
        let layout = Layout::new(settings)?;
        let prefix_len = at_least(settings, "prefix_tokens", 1)?;
        let unique = at_least(settings, "unique_tokens", 1)?;
        let output = at_least(settings, "output_tokens", 1)?;
        let mut out = Vec::new();
        for caching in settings.words("caching")? {
            let seed = condition_seed(seed, out.len());
            let mut b = ScriptBuilder::new(seed, prompts);
            let mut previous = b.warmup();
            for r in 0..layout.rounds {
                let prefix = b.random_tokens(prefix_len);
                for k in 0..=layout.warm {
                    let mut prompt = prefix.clone();
                    prompt.extend(b.random_tokens(unique));
                    let tag = format!("r{}_{}", r + 1, if k == 0 { "cold" } else { "warm" });
                    let gate = Gate::After {
                        deps: vec![previous],
                        delay_s: 0.0,
                    };
                    previous = b.push(tag, prompt, output, None, gate);
                    debug_assert_eq!(previous, layout.id(r, k));
                }
            }
            let mut engine = settings.engine.clone();
            engine.enable_prefix_caching = caching == "on";
            out.push(condition(
                format!("caching={caching}"),
                engine,
                b.build(),
                seed,
            )?);
        }
        Ok(out)
    }

    fn summarize(
        &self,
        settings: &Settings,
        conditions: &[Condition],
        runs: &[RunRecords],
    ) -> Result<Report, ExperimentError> {
        let layout = Layout::new(settings)?;
        let mut table = Table::new(COLUMNS);
        let mut chart = ChartSpec::new(
            "prefix_cache_ttft",
            "prefix_cache: cold vs warm TTFT per round",
            "round",
            "TTFT (ms)",
        )
        .bars()
        .y_scale(figures::YScale::Auto);
        for (cond, rec) in conditions.iter().zip(runs) {
            let caching = cond.label.trim_start_matches("caching=");
            let (mut cold_pts, mut warm_pts) = (Vec::new(), Vec::new());
            for r in 0..layout.rounds {
                let cold = request(rec, layout.id(r, 0), &cond.label)?;
                let warm = (1..=layout.warm)
                    .map(|k| request(rec, layout.id(r, k), &cond.label))
                    .collect::<Result<Vec<_>, _>>()?;
                let cold_ttft = cold.ttft_s().map(ms);
                let warm_ttfts: Vec<f64> = warm.iter().filter_map(|w| w.ttft_s()).map(ms).collect();
                let warm_ttft = median(&warm_ttfts);
                let speedup = cold_ttft.zip(warm_ttft).map(|(c, w)| c / w);
                let warm_cached = warm.iter().map(|w| w.cached_tokens).min().unwrap_or(0);
                table.push(vec![
                    Cell::text(caching),
                    Cell::int(r + 1),
                    Cell::num(cold_ttft),
                    Cell::num(warm_ttft),
                    Cell::num(speedup),
                    Cell::int(warm_cached),
                    Cell::int(cold.cached_tokens),
                ]);
                let x = (r + 1) as f64;
                cold_pts.push((x, cold_ttft.unwrap_or(f64::NAN)));
                warm_pts.push((x, warm_ttft.unwrap_or(f64::NAN)));
            }
            // Without caching a warm request costs what a cold one does, and
            // a cold one costs the same with caching or without: as lines,
            // three of the four series would lie on one another.
            chart = chart
                .series(format!("cold, caching {caching}"), cold_pts)
                .series(format!("warm, caching {caching}"), warm_pts);
        }
        let ticks = (1..=layout.rounds)
            .map(|r| (r as f64, r.to_string()))
            .collect();
        chart.x_ticks = Some(ticks);
        Ok(Report {
            summary: table,
            key_columns: 2,
            charts: vec![chart],
        })
    }
}
