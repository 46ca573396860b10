//! timing_leak: what an attacker learns from TTFT about another tenant's prompt.
//!
//! Trials run one after another. In each, a victim sends a fresh document
//! (in exactly half the trials, shuffled) or a decoy of the same length, and
//! then the attacker probes with the document's prefix plus its own suffix.
//! Background tenants send random requests at random moments, so steps the
//! probe shares vary in size. The attacker guesses "victim sent it" when the
//! probe's TTFT is below a threshold. Policy `shared`: nobody is salted;
//! `per_tenant_salt`: every tenant has its own salt.
//!
//! `attacker_accuracy` is honest: the threshold is chosen on half the trials
//! and scored on the other half (2-fold, both ways, averaged), since the best
//! threshold scored on the trials it was fitted to overstates what leaks.

use super::{at_least, condition, ms, tagged, Condition, Experiment, ExperimentError, Report};
use crate::charts::ChartSpec;
use crate::script::{condition_seed, Gate, ScriptBuilder};
use crate::settings::{ParamKind, ParamSpec, Settings};
use crate::stats::median;
use crate::table::{Cell, Table};
use rand::seq::SliceRandom;
use rand::Rng;
use sim::workload::PromptSource;
use sim::RunRecords;

mod threshold;

use threshold::{best_threshold, cross_validated_accuracy, Sample};

pub struct TimingLeak;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "policies",
        kind: ParamKind::Choices(&["shared", "per_tenant_salt"]),
        default: "shared,per_tenant_salt",
        help: "cache policies compared",
    },
    ParamSpec {
        key: "trials",
        kind: ParamKind::Count,
        default: "200",
        help: "trials per policy, half with the victim's document",
    },
    ParamSpec {
        key: "doc_tokens",
        kind: ParamKind::Count,
        default: "2048",
        help: "document (guessed prefix) length",
    },
    ParamSpec {
        key: "suffix_tokens",
        kind: ParamKind::Count,
        default: "16",
        help: "tokens after the document in victim and probe requests",
    },
    ParamSpec {
        key: "noise_per_trial",
        kind: ParamKind::Count,
        default: "2",
        help: "background requests released per trial at random moments",
    },
    ParamSpec {
        key: "noise_max_prompt_tokens",
        kind: ParamKind::Count,
        default: "2048",
        help: "background prompts are uniform in 16..=this",
    },
    ParamSpec {
        key: "noise_max_output_tokens",
        kind: ParamKind::Count,
        default: "64",
        help: "background outputs are uniform in 1..=this",
    },
    ParamSpec {
        key: "window_ms",
        kind: ParamKind::Number,
        default: "10",
        help:
            "victim and background requests arrive uniformly within this window of a trial's start",
    },
];

const COLUMNS: &[&str] = &[
    "policy",
    "trials",
    "attacker_accuracy",
    "in_sample_accuracy",
    "threshold_ms",
    "hit_ttft_median_ms",
    "miss_ttft_median_ms",
    "hit_probe_cached_tokens",
];

const HIT: &str = "probe_hit";
const MISS: &str = "probe_miss";

fn salt(policy: &str, tenant: &str) -> Option<String> {
    (policy == "per_tenant_salt").then(|| tenant.to_string())
}

fn trial_script(
    settings: &Settings,
    policy: &str,
    seed: u64,
    prompts: &PromptSource,
) -> Result<ScriptBuilder, ExperimentError> {
    let trials = at_least(settings, "trials", 4)?;
    let doc_len = at_least(settings, "doc_tokens", 1)?;
    let suffix = settings.count("suffix_tokens")?;
    let noise_n = settings.count("noise_per_trial")?;
    let noise_prompt = at_least(settings, "noise_max_prompt_tokens", 16)?;
    let noise_out = at_least(settings, "noise_max_output_tokens", 1)?;
    let window_s = settings.number("window_ms")? / 1e3;
    let mut b = ScriptBuilder::new(seed, prompts);
    let mut sent = vec![true; trials / 2];
    sent.resize(trials, false);
    sent.shuffle(b.rng());
    let mut previous = b.warmup();
    for (t, &victim_sent) in sent.iter().enumerate() {
        for n in 0..noise_n {
            let len = b.rng().random_range(16..=noise_prompt);
            let out = b.rng().random_range(1..=noise_out);
            let delay_s = b.rng().random_range(0.0..=window_s);
            let prompt = b.random_tokens(len);
            let gate = Gate::After {
                deps: vec![previous],
                delay_s,
            };
            b.push(
                "noise",
                prompt,
                out,
                salt(policy, &format!("bg-{t}-{n}")),
                gate,
            );
        }
        let document = b.random_tokens(doc_len);
        let mut victim_prompt = if victim_sent {
            document.clone()
        } else {
            b.random_tokens(doc_len)
        };
        victim_prompt.extend(b.random_tokens(suffix));
        let delay_s = b.rng().random_range(0.0..=window_s);
        let gate = Gate::After {
            deps: vec![previous],
            delay_s,
        };
        let tag = if victim_sent { "victim" } else { "decoy" };
        let victim = b.push(tag, victim_prompt, 1, salt(policy, "victim"), gate);
        let mut probe = document;
        probe.extend(b.random_tokens(suffix));
        let gate = Gate::After {
            deps: vec![victim],
            delay_s: 0.0,
        };
        let tag = if victim_sent { HIT } else { MISS };
        previous = b.push(tag, probe, 1, salt(policy, "attacker"), gate);
    }
    Ok(b)
}

impl Experiment for TimingLeak {
    fn name(&self) -> &'static str {
        "timing_leak"
    }

    fn description(&self) -> &'static str {
        "TTFT side channel: attacker accuracy with a shared cache vs per-tenant salts"
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
        let mut out = Vec::new();
        for policy in settings.words("policies")? {
            let seed = condition_seed(seed, out.len());
            let b = trial_script(settings, &policy, seed, prompts)?;
            out.push(condition(
                format!("policy={policy}"),
                settings.engine.clone(),
                b.build(),
                seed,
            )?);
        }
        Ok(out)
    }

    fn summarize(
        &self,
        _settings: &Settings,
        conditions: &[Condition],
        runs: &[RunRecords],
    ) -> Result<Report, ExperimentError> {
        let mut table = Table::new(COLUMNS);
        let (mut names, mut acc_pts) = (Vec::new(), Vec::new());
        let mut cdf = ChartSpec::new(
            "timing_leak_ttft_cdf",
            "timing_leak: distribution of the attacker's probe TTFT",
            "probe TTFT (ms)",
            "fraction of trials (cumulative)",
        );
        for (cond, rec) in conditions.iter().zip(runs) {
            let policy = cond.label.trim_start_matches("policy=");
            let ttfts = |tag: &str| -> Vec<f64> {
                tagged(rec, tag)
                    .iter()
                    .filter_map(|r| r.ttft_s())
                    .map(ms)
                    .collect()
            };
            let (hits, misses) = (ttfts(HIT), ttfts(MISS));
            // Trial order, so the folds alternate trials as they ran.
            let mut samples: Vec<(u64, Sample)> = rec
                .requests
                .iter()
                .filter(|r| r.tag == HIT || r.tag == MISS)
                .filter_map(|r| {
                    Some((
                        r.id,
                        Sample {
                            ttft_ms: ms(r.ttft_s()?),
                            hit: r.tag == HIT,
                        },
                    ))
                })
                .collect();
            samples.sort_by_key(|s| s.0);
            let samples: Vec<Sample> = samples.into_iter().map(|s| s.1).collect();
            if samples.len() < 4 {
                return Err(ExperimentError::Incomplete {
                    label: cond.label.clone(),
                    message: "fewer than 4 probes produced a token".into(),
                });
            }
            let (threshold, in_sample) = best_threshold(&samples);
            let accuracy = cross_validated_accuracy(&samples);
            let cached: Vec<f64> = tagged(rec, HIT)
                .iter()
                .map(|r| r.cached_tokens as f64)
                .collect();
            table.push(vec![
                Cell::text(policy),
                Cell::int(samples.len()),
                Cell::num(Some(accuracy)),
                Cell::num(Some(in_sample)),
                Cell::num(Some(threshold)),
                Cell::num(median(&hits)),
                Cell::num(median(&misses)),
                Cell::num(median(&cached)),
            ]);
            acc_pts.push((names.len() as f64, accuracy * 100.0));
            names.push(policy.to_string());
            for (what, mut v) in [("victim sent", hits), ("victim did not", misses)] {
                v.sort_by(f64::total_cmp);
                let n = v.len() as f64;
                let pts = v
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (*t, (i + 1) as f64 / n))
                    .collect();
                cdf = cdf.series(format!("{policy}: {what}"), pts);
            }
        }
        let accuracy_chart = ChartSpec::new(
            "timing_leak_accuracy",
            "timing_leak: attacker accuracy from probe TTFT (50% = nothing leaks)",
            "cache policy",
            "accuracy (%)",
        )
        .categories(&names)
        .bars()
        .reference("chance: 50% (nothing leaks)", 50.0)
        .series("attacker accuracy (held-out threshold)", acc_pts);
        Ok(Report {
            summary: table,
            key_columns: 1,
            charts: vec![accuracy_chart, cdf],
        })
    }
}
