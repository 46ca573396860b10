//! Steady state: the rate search of [`super::search`] repeated on longer
//! runs until its answer stops moving.
//!
//! Why: a run of `n` requests that starts on an empty engine measures a
//! transient. Short runs overstate the sustainable rate (the queue has not
//! had time to build), by a factor of 30 at 100 requests on the H200 and by
//! 10 % at 1,000; the answer settles as `n` grows.
//!
//! Contract ([`search_steady`]):
//! - Each search bisects to a quarter of `precision_pct`, so that the
//!   difference of two answers is measured finer than the precision stated.
//! - A synthetic workload is searched at `requests` requests per run, then
//!   at twice as many, and so on, each search starting from the previous
//!   answer ([`Start::Hint`]). It stops at the first length whose answer is
//!   within half of `precision_pct` of the one before
//!   ([`Steady::Converged`]); the longer run's answer is reported. Why half:
//!   the transient's share of the answer falls about as `1/n` (measured on
//!   the H200 profile: 1,000 → 40,000 requests), so what is left after the
//!   last doubling is about the last move, and the reported rate is within
//!   `precision_pct` of the steady state's. A length past `max_requests` is not
//!   tried: the last answer is then reported as [`Steady::NotConverged`],
//!   with a note saying so and what to raise.
//! - A trace is searched once, replayed whole ([`Steady::WholeTrace`]).
//! - A setting that no rate serves (unusable, or the SLO is missed by
//!   requests running alone) is not grown ([`Steady::NoRate`]): its reason
//!   does not depend on the run length.
//! - `runs` sums the simulated runs of every length tried.

use super::search::{search_setting, SearchMethod, SettingResult, Start, Steady};
use super::slo::Slo;
use crate::backend::{BackendError, SimBackend};
use engine::EngineConfig;
use sim::Arrival;

/// Relative difference of two rates, against the larger.
fn moved(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.max(b)
}

/// The steady-state search for one setting over `unit` (at least
/// `method.max_requests` arrivals for a synthetic workload, the whole trace
/// otherwise). See the module docs.
pub fn search_steady(
    target: &SimBackend,
    base: &EngineConfig,
    setting: (usize, usize),
    unit: &[Arrival],
    slo: &Slo,
    method: &SearchMethod,
    whole_trace: bool,
) -> Result<SettingResult, BackendError> {
    let fine = SearchMethod {
        precision_pct: method.precision_pct / 4.0,
        ..*method
    };
    // The user's precision, for the convergence test and the notes.
    let precision_pct = method.precision_pct;
    let method = &fine;
    if whole_trace {
        let mut r = search_setting(
            target,
            base,
            setting,
            (unit, unit.len()),
            slo,
            method,
            Start::Cold,
        )?;
        if r.max_qps > 0.0 {
            r.steady = Steady::WholeTrace;
        }
        return Ok(r);
    }
    let longest = method.max_requests.min(unit.len());
    let mut n = method.requests.min(longest);
    let mut last = search_setting(target, base, setting, (unit, n), slo, method, Start::Cold)?;
    let mut runs = last.runs;
    if last.max_qps <= 0.0 {
        return Ok(last);
    }
    loop {
        let next_n = 2 * n;
        if next_n > longest {
            let (note, steady) = match last.steady {
                Steady::NotConverged { previous_max_qps } => (
                    format!(
                        "not at steady state: {} req/s at {n} requests per run against {} at \
                         {}, more than {}% apart; raise max_requests (now {}) for a settled \
                         answer",
                        fmt_rate(last.max_qps),
                        fmt_rate(previous_max_qps),
                        n / 2,
                        precision_pct / 2.0,
                        method.max_requests
                    ),
                    last.steady,
                ),
                _ => (
                    format!(
                        "steady state not checked: max_requests = {} leaves no room to double \
                         the run of {n} requests; raise max_requests",
                        method.max_requests
                    ),
                    Steady::NotConverged {
                        previous_max_qps: f64::NAN,
                    },
                ),
            };
            return Ok(SettingResult {
                note: Some(join_notes(last.note.take(), note)),
                steady,
                runs,
                ..last
            });
        }
        let mut next = search_setting(
            target,
            base,
            setting,
            (unit, next_n),
            slo,
            method,
            Start::Hint(last.max_qps),
        )?;
        runs += next.runs;
        if next.max_qps > 0.0 && moved(next.max_qps, last.max_qps) <= precision_pct / 200.0 {
            next.steady = Steady::Converged {
                previous_requests: n,
                previous_max_qps: last.max_qps,
            };
            next.runs = runs;
            return Ok(next);
        }
        next.steady = Steady::NotConverged {
            previous_max_qps: last.max_qps,
        };
        last = next;
        n = next_n;
    }
}

fn fmt_rate(r: f64) -> String {
    if r.is_finite() {
        format!("{r:.3}")
    } else {
        "-".into()
    }
}

fn join_notes(first: Option<String>, second: String) -> String {
    match first {
        Some(f) => format!("{f}; {second}"),
        None => second,
    }
}
