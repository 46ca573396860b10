//! The settings search: for each (`max_num_batched_tokens`, `max_num_seqs`)
//! the highest Poisson request rate whose latencies meet the SLO.
//!
//! Method (also written to `assumptions.txt`):
//! - One search runs `n` requests per probed rate: the first `n` of the same
//!   requests (same seed, same prompts, arrival gaps only rescaled, see
//!   [`super::workload`]), driven through the engine with sim's virtual
//!   clock. How `n` grows until the answer is the steady state's is
//!   [`super::steady`]'s part. The first `warmup_pct` percent of requests by arrival are left
//!   out of the percentiles (they meet an empty engine). TTFT p99 over the
//!   remaining requests and ITL p99 over all their inter-token gaps must both
//!   be within the SLO.
//! - First the requests are run nearly alone (`ISOLATED_RATE`, gaps of
//!   hours): if that already misses the SLO, no rate can meet it and the
//!   setting's maximum is 0, with the reason.
//! - Otherwise, bracket: start at half the saturation rate (1 request/s when
//!   the run is too short to show one) and double while the SLO holds
//!   (or halve while it does not); or, given the answer of a shorter run as
//!   a hint, start there and step by a factor of `1 + 4 x precision` (a
//!   longer run moves the answer by little). Then bisect between the highest passing
//!   and lowest failing rate until they are within `precision_pct` of each
//!   other. The reported rate is the highest one that passed.
//! - A finite run at a rate above what the engine can sustain may still meet
//!   the SLO (at an infinite rate it is just a burst of `n`), so the
//!   engine's saturation rate is measured first ([`saturation_rps`]: a burst
//!   of `max(n, SATURATION_BATCHES x max_num_seqs)` requests queued at once,
//!   so that a full batch turns over many times) and rates at or above it
//!   fail without a run.
//!   Just below saturation, queues grow slowly and the TTFT target decides.
//! - Every run is [`SimBackend::run_arrivals`] on the GPU's sim backend.
//! - Settings run in parallel (rayon); each search is sequential and fully
//!   determined by its inputs, so results do not depend on thread count.

use super::slo::Slo;
use crate::backend::{BackendError, SimBackend};
use crate::fleet::FleetSpec;
use crate::stats::percentile;
use engine::EngineConfig;
use serde::{Deserialize, Serialize};
use sim::{Arrival, RunRecords};

/// Rate at which requests practically never overlap (mean gap ~2.8 hours).
pub const ISOLATED_RATE: f64 = 1e-4;
/// Requests run in the isolated check.
const ISOLATED_REQUESTS: usize = 64;
const START_RATE: f64 = 1.0;
/// A saturation burst holds at least this many full batches.
pub const SATURATION_BATCHES: usize = 16;
/// Beyond these the search stops and says so.
const MAX_RATE: f64 = 1e6;
const MIN_RATE: f64 = 1.0 / 1024.0;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SearchMethod {
    /// Requests per run of the first search.
    pub requests: usize,
    /// Longest run the steady-state growth may reach (see [`super::steady`]).
    pub max_requests: usize,
    pub warmup_pct: f64,
    pub precision_pct: f64,
    pub seed: u64,
}

/// Latencies of one run at one rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatePoint {
    pub rate_per_s: f64,
    pub ttft_p99_ms: f64,
    /// `None` when no request has two output tokens.
    pub itl_p99_ms: Option<f64>,
    pub preemptions: usize,
    pub measured_requests: usize,
    pub meets_slo: bool,
}

/// The outcome for one setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingResult {
    pub max_num_batched_tokens: usize,
    pub max_num_seqs: usize,
    pub kv_blocks: usize,
    /// Highest rate found to meet the SLO; 0 when none does.
    pub max_qps: f64,
    pub at_max: Option<RatePoint>,
    /// Completion rate with every request queued at once (the rate no
    /// stable queue can reach); `None` when the run was too short to see it.
    pub saturation_rps: Option<f64>,
    /// Why `max_qps` is 0 (or capped, or not at steady state).
    pub note: Option<String>,
    /// Simulated runs, summed over every run length tried.
    pub runs: usize,
    /// Requests per run of the search that gave `max_qps`.
    pub requests: usize,
    pub steady: Steady,
}

/// Whether `max_qps` is the steady state's (see [`super::steady`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Steady {
    /// A run half as long gave `previous_max_qps`, within the precision.
    Converged {
        previous_requests: usize,
        previous_max_qps: f64,
    },
    /// The longest allowed run still moved the answer by more than the
    /// precision (from `previous_max_qps` at half the length).
    NotConverged { previous_max_qps: f64 },
    /// A trace, replayed whole: its length is the user's.
    WholeTrace,
    /// Nothing to converge: no rate meets the SLO, or the setting is unusable.
    NoRate,
}

impl Steady {
    /// The `steady_state` cell of the CSV files.
    pub fn word(self) -> &'static str {
        match self {
            Steady::Converged { .. } => "converged",
            Steady::NotConverged { .. } => "not converged",
            Steady::WholeTrace => "whole trace",
            Steady::NoRate => "",
        }
    }
}

impl SettingResult {
    pub fn label(&self) -> String {
        format!(
            "max_num_batched_tokens={} max_num_seqs={}",
            self.max_num_batched_tokens, self.max_num_seqs
        )
    }
}

/// Requests per second the engine completes when every request of `burst`
/// arrives at once: finishes between the 10th and the 90th percentile of
/// completion order over the time between them (the full engine's service
/// rate, without the start-up and drain at either end).
pub fn saturation_rps(
    target: &SimBackend,
    engine: &EngineConfig,
    burst: &[Arrival],
) -> Result<f64, BackendError> {
    let burst = burst
        .iter()
        .map(|a| {
            let mut a = a.clone();
            a.request.arrival_time = 0.0;
            a
        })
        .collect();
    let records = target.run_arrivals(engine, burst)?;
    let mut finishes: Vec<f64> = records.requests.iter().filter_map(|r| r.finish_s).collect();
    finishes.sort_by(f64::total_cmp);
    let n = finishes.len();
    let (lo, hi) = if n >= 10 {
        (n / 10, n - 1 - n / 10)
    } else {
        (0, n.saturating_sub(1))
    };
    if hi <= lo || finishes[hi] <= finishes[lo] {
        // Too few requests to see a rate: no cap from saturation.
        return Ok(f64::INFINITY);
    }
    Ok((hi - lo) as f64 / (finishes[hi] - finishes[lo]))
}

/// `unit` (arrivals at one request per second on average) at `rate`.
fn at_rate(unit: &[Arrival], rate: f64) -> Vec<Arrival> {
    unit.iter()
        .map(|a| {
            let mut a = a.clone();
            a.request.arrival_time /= rate;
            a
        })
        .collect()
}

/// Runs `unit` (arrivals at one request per second on average) at `rate`.
pub fn measure(
    target: &SimBackend,
    engine: &EngineConfig,
    unit: &[Arrival],
    rate: f64,
    slo: &Slo,
    warmup_pct: f64,
) -> Result<RatePoint, BackendError> {
    let records = target.run_arrivals(engine, at_rate(unit, rate))?;
    Ok(score(&records, rate, slo, warmup_pct))
}

/// [`measure`] on a fleet of `fleet.replicas` engines behind its router.
pub fn measure_fleet(
    target: &SimBackend,
    engine: &EngineConfig,
    fleet: &FleetSpec,
    unit: &[Arrival],
    rate: f64,
    slo: &Slo,
    warmup_pct: f64,
) -> Result<RatePoint, BackendError> {
    let records = target.run_arrivals_fleet(engine, fleet, at_rate(unit, rate))?;
    Ok(score(&records, rate, slo, warmup_pct))
}

/// A run's p99 latencies after the warm-up, against the SLO.
fn score(records: &RunRecords, rate: f64, slo: &Slo, warmup_pct: f64) -> RatePoint {
    let mut requests: Vec<&sim::RequestRecord> = records.requests.iter().collect();
    requests.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s).then(a.id.cmp(&b.id)));
    let skip = (requests.len() as f64 * warmup_pct / 100.0).floor() as usize;
    let measured = if skip < requests.len() {
        &requests[skip..]
    } else {
        &requests[..]
    };
    let ttfts: Vec<f64> = measured
        .iter()
        .map(|r| r.ttft_s().map_or(f64::INFINITY, |t| t * 1e3))
        .collect();
    let itls: Vec<f64> = measured
        .iter()
        .flat_map(|r| r.itls_s())
        .map(|t| t * 1e3)
        .collect();
    let ttft_p99_ms = percentile(&ttfts, 99.0).unwrap_or(f64::INFINITY);
    let itl_p99_ms = percentile(&itls, 99.0);
    RatePoint {
        rate_per_s: rate,
        ttft_p99_ms,
        itl_p99_ms,
        preemptions: measured.iter().map(|r| r.preemptions).sum(),
        measured_requests: measured.len(),
        meets_slo: slo.met_by(ttft_p99_ms, itl_p99_ms),
    }
}

/// Where a search starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Start {
    /// Half the saturation rate, stepping by factors of 2.
    Cold,
    /// A shorter run's answer, stepping by `1 + 4 x precision`.
    Hint(f64),
}

/// The search for one setting at `n` requests per run, out of `unit` (see
/// the module docs).
pub fn search_setting(
    target: &SimBackend,
    base: &EngineConfig,
    (max_num_batched_tokens, max_num_seqs): (usize, usize),
    (unit, n): (&[Arrival], usize),
    slo: &Slo,
    method: &SearchMethod,
    start: Start,
) -> Result<SettingResult, BackendError> {
    let n = n.min(unit.len());
    let mut engine = base.clone();
    engine.max_num_batched_tokens = max_num_batched_tokens;
    engine.max_num_seqs = max_num_seqs;
    let kv_blocks = target.capacity_blocks(&engine);
    let mut result = SettingResult {
        max_num_batched_tokens,
        max_num_seqs,
        kv_blocks,
        max_qps: 0.0,
        at_max: None,
        saturation_rps: None,
        note: None,
        runs: 0,
        requests: n,
        steady: Steady::NoRate,
    };
    let invalid = engine
        .validate()
        .and_then(|()| engine.validate_num_blocks(kv_blocks));
    if let Err(e) = invalid {
        result.note = Some(format!("setting not usable: {e}"));
        return Ok(result);
    }
    let runs = std::cell::Cell::new(0);
    let probe = |rate: f64, n: usize| {
        runs.set(runs.get() + 1);
        measure(
            target,
            &engine,
            &unit[..n.min(unit.len())],
            rate,
            slo,
            method.warmup_pct,
        )
    };
    let alone = probe(ISOLATED_RATE, ISOLATED_REQUESTS)?;
    if !alone.meets_slo {
        let note = format!(
            "SLO cannot be met: requests running alone already have TTFT p99 {:.1} ms, ITL p99 {} ms",
            alone.ttft_p99_ms,
            alone.itl_p99_ms.map_or("-".into(), |v| format!("{v:.1}"))
        );
        return Ok(SettingResult {
            note: Some(note),
            runs: runs.get(),
            ..result
        });
    }
    runs.set(runs.get() + 1);
    let burst = n.max(SATURATION_BATCHES * max_num_seqs).min(unit.len());
    let saturation = saturation_rps(target, &engine, &unit[..burst])?;
    result.saturation_rps = saturation.is_finite().then_some(saturation);
    // A rate at or above saturation has a queue that grows without bound:
    // it fails whatever a finite run's percentiles say.
    let passes = |rate: f64| -> Result<Option<RatePoint>, BackendError> {
        if rate >= saturation {
            return Ok(None);
        }
        let p = probe(rate, n)?;
        Ok(p.meets_slo.then_some(p))
    };
    let (start, step) = match start {
        Start::Hint(rate) if rate > 0.0 => (
            rate.min(saturation * (1.0 - method.precision_pct / 100.0)),
            1.0 + 4.0 * method.precision_pct / 100.0,
        ),
        _ if saturation.is_finite() => (saturation / 2.0, 2.0),
        _ => (START_RATE, 2.0),
    };
    let (mut pass, mut fail) = match passes(start)? {
        Some(mut pass) => loop {
            let rate = pass.rate_per_s * step;
            if rate > MAX_RATE {
                return Ok(SettingResult {
                    max_qps: pass.rate_per_s,
                    note: Some(format!(
                        "SLO still met at {} req/s; search stopped",
                        pass.rate_per_s
                    )),
                    at_max: Some(pass),
                    runs: runs.get(),
                    ..result
                });
            }
            match passes(rate.min(saturation))? {
                Some(p) => pass = p,
                None => break (pass, rate.min(saturation)),
            }
        },
        None => {
            let mut fail = start;
            loop {
                let rate = fail / step;
                if rate < MIN_RATE {
                    return Ok(SettingResult {
                        note: Some(format!(
                            "SLO cannot be met at any rate down to {MIN_RATE} req/s"
                        )),
                        runs: runs.get(),
                        ..result
                    });
                }
                match passes(rate)? {
                    Some(p) => break (p, fail),
                    None => fail = rate,
                }
            }
        }
    };
    while (fail - pass.rate_per_s) / pass.rate_per_s > method.precision_pct / 100.0 {
        let mid = (pass.rate_per_s + fail) / 2.0;
        match passes(mid)? {
            Some(p) => pass = p,
            None => fail = mid,
        }
    }
    Ok(SettingResult {
        max_qps: pass.rate_per_s,
        at_max: Some(pass),
        runs: runs.get(),
        ..result
    })
}

/// Every (max_num_batched_tokens, max_num_seqs) pair, batched tokens outer.
pub fn grid(batched_tokens: &[usize], num_seqs: &[usize]) -> Vec<(usize, usize)> {
    batched_tokens
        .iter()
        .flat_map(|&b| num_seqs.iter().map(move |&s| (b, s)))
        .collect()
}

/// The setting with the highest rate (> 0); ties go to fewer sequences, then
/// fewer batched tokens (less memory for the same rate).
pub fn best(results: &[SettingResult]) -> Option<&SettingResult> {
    results.iter().filter(|r| r.max_qps > 0.0).min_by(|a, b| {
        b.max_qps
            .total_cmp(&a.max_qps)
            .then(a.max_num_seqs.cmp(&b.max_num_seqs))
            .then(a.max_num_batched_tokens.cmp(&b.max_num_batched_tokens))
    })
}
