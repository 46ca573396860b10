//! salt_isolation: tenants with different cache salts must not share blocks.
//!
//! Each case is one condition. Every round uses a fresh prefix: a cold
//! reference request (another random prefix, no salt), then the writer sends
//! prefix + suffix with its salt, then the reader sends the same prefix with
//! another suffix and its salt, each after the previous finished. Reported:
//! the reader's cached tokens and TTFT, and the cold TTFT of the round.

use super::{at_least, condition, ms, request, Condition, Experiment, ExperimentError, Report};
use crate::charts::ChartSpec;
use crate::script::{condition_seed, Gate, ScriptBuilder};
use crate::settings::{ParamKind, ParamSpec, Settings};
use crate::stats::median;
use crate::table::{Cell, Table};
use sim::workload::PromptSource;
use sim::RunRecords;

pub struct SaltIsolation;

const CASES: &[&str] = &[
    "same_salt",
    "different_salt",
    "none_after_salted",
    "salted_after_none",
];

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "cases",
        kind: ParamKind::Choices(CASES),
        default: "same_salt,different_salt,none_after_salted,salted_after_none",
        help: "writer/reader salt cases",
    },
    ParamSpec {
        key: "rounds",
        kind: ParamKind::Count,
        default: "5",
        help: "rounds per case, each with a new prefix",
    },
    ParamSpec {
        key: "prefix_tokens",
        kind: ParamKind::Count,
        default: "3200",
        help: "prefix shared by writer and reader",
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
    "case",
    "round",
    "writer_salt",
    "reader_salt",
    "cached_tokens",
    "ttft_ms",
    "cold_ttft_ms",
];

const SALT_A: &str = "tenant-a";
const SALT_B: &str = "tenant-b";

/// (writer salt, reader salt) of a case.
fn salts(case: &str) -> (Option<&'static str>, Option<&'static str>) {
    match case {
        "same_salt" => (Some(SALT_A), Some(SALT_A)),
        "different_salt" => (Some(SALT_A), Some(SALT_B)),
        "none_after_salted" => (Some(SALT_A), None),
        _ => (None, Some(SALT_A)),
    }
}

/// Script id of request `k` (0 cold, 1 writer, 2 reader) of round `r`; 0 is the warm-up.
fn id(r: usize, k: usize) -> usize {
    1 + 3 * r + k
}

impl Experiment for SaltIsolation {
    fn name(&self) -> &'static str {
        "salt_isolation"
    }

    fn description(&self) -> &'static str {
        "cache salts: cached tokens and TTFT of a reader after a writer, per salt case"
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
        let rounds = at_least(settings, "rounds", 1)?;
        let prefix_len = at_least(settings, "prefix_tokens", 1)?;
        let unique = at_least(settings, "unique_tokens", 1)?;
        let output = at_least(settings, "output_tokens", 1)?;
        let mut out = Vec::new();
        for case in settings.words("cases")? {
            let seed = condition_seed(seed, out.len());
            let (writer, reader) = salts(&case);
            let mut b = ScriptBuilder::new(seed, prompts);
            let mut previous = b.warmup();
            for r in 0..rounds {
                let prefix = b.random_tokens(prefix_len);
                let cold_prefix = b.random_tokens(prefix_len);
                let requests = [
                    ("cold", cold_prefix, None),
                    ("writer", prefix.clone(), writer),
                    ("reader", prefix, reader),
                ];
                for (k, (role, mut prompt, salt)) in requests.into_iter().enumerate() {
                    prompt.extend(b.random_tokens(unique));
                    let gate = Gate::After {
                        deps: vec![previous],
                        delay_s: 0.0,
                    };
                    let tag = format!("r{}_{role}", r + 1);
                    previous = b.push(tag, prompt, output, salt.map(String::from), gate);
                    debug_assert_eq!(previous, id(r, k));
                }
            }
            out.push(condition(
                format!("case={case}"),
                settings.engine.clone(),
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
        let rounds = at_least(settings, "rounds", 1)?;
        let mut table = Table::new(COLUMNS);
        let (mut names, mut reader_pts, mut cold_pts, mut cached_pts) =
            (vec![], vec![], vec![], vec![]);
        for (cond, rec) in conditions.iter().zip(runs) {
            let case = cond.label.trim_start_matches("case=");
            let (writer, reader) = salts(case);
            let (mut ttfts, mut colds, mut cached) = (vec![], vec![], vec![]);
            for r in 0..rounds {
                let cold = request(rec, id(r, 0), &cond.label)?;
                let read = request(rec, id(r, 2), &cond.label)?;
                let (ttft, cold_ttft) = (read.ttft_s().map(ms), cold.ttft_s().map(ms));
                table.push(vec![
                    Cell::text(case),
                    Cell::int(r + 1),
                    Cell::text(writer.unwrap_or("none")),
                    Cell::text(reader.unwrap_or("none")),
                    Cell::int(read.cached_tokens),
                    Cell::num(ttft),
                    Cell::num(cold_ttft),
                ]);
                ttfts.extend(ttft);
                colds.extend(cold_ttft);
                cached.push(read.cached_tokens as f64);
            }
            let x = names.len() as f64;
            // Short tick labels: the full case names do not fit under the axis.
            let short = |salt: Option<&str>| {
                if salt == Some(SALT_B) {
                    "b"
                } else if salt.is_some() {
                    "a"
                } else {
                    "none"
                }
            };
            names.push(format!("{} then {}", short(writer), short(reader)));
            reader_pts.push((x, median(&ttfts).unwrap_or(f64::NAN)));
            cold_pts.push((x, median(&colds).unwrap_or(f64::NAN)));
            cached_pts.push((x, median(&cached).unwrap_or(f64::NAN)));
        }
        let x_label = "writer salt then reader salt (a, b: tenant salts; none: unsalted)";
        let ttft_chart = ChartSpec::new(
            "salt_isolation_ttft",
            "salt_isolation: reader TTFT vs cold TTFT per case (median over rounds)",
            x_label,
            "TTFT (ms)",
        )
        .categories(&names)
        .bars()
        .series("reader", reader_pts)
        .series("cold reference", cold_pts);
        let cached_chart = ChartSpec::new(
            "salt_isolation_cached",
            "salt_isolation: prompt tokens the reader found cached",
            x_label,
            "cached tokens (tokens)",
        )
        .categories(&names)
        .bars()
        .series("reader cached tokens", cached_pts);
        Ok(Report {
            summary: table,
            key_columns: 4,
            charts: vec![ttft_chart, cached_chart],
        })
    }
}
