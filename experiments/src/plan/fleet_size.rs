//! Fleet sizing: the fewest replicas of one (GPU, setting) that meet the
//! SLO at the target rate, each replica one GPU behind the router.
//!
//! Contract ([`size_fleet`]):
//! - A setting whose single-engine search found no rate meeting the SLO is
//!   not sized (`None`): requests running alone already miss it, or the
//!   setting is unusable, and more replicas change neither.
//! - Lower bound: `N` replicas complete at most `N` times one engine's
//!   saturation rate, so a fleet with `N x saturation_rps <= rate` fails
//!   without a run (as a rate at or above saturation fails on one engine);
//!   the smallest `N` left is `lower_bound`.
//! - First probe: `max(lower_bound, ceil(rate / max_qps))`, the count of
//!   independent engines each at its own highest rate under the SLO
//!   (a router that balances load usually needs no more). If it passes,
//!   bisect between `lower_bound - 1` (known to fail) and it; if it fails,
//!   double until one passes (or `max_replicas` fails), then bisect. The
//!   search takes fewer replicas to be no better, which holds for the
//!   load-balancing routers; `probes` keeps every fleet run, in order.
//! - Each probe runs the plan's requests at `rate` on the fleet
//!   ([`super::search::measure_fleet`]): a trace whole; a synthetic workload
//!   `N x requests_per_run` requests (each replica sees about as many as the
//!   single-engine search needed for its steady state), at most all the
//!   arrivals drawn (`max_requests`). Scoring (warm-up, p99s) is the
//!   single-engine search's.
//! - Deterministic: each search is sequential and depends only on its inputs.

use super::search::{measure_fleet, RatePoint, SearchMethod, SettingResult};
use super::slo::Slo;
use crate::backend::{BackendError, SimBackend};
use crate::fleet::{FleetSpec, RouterChoice};
use engine::EngineConfig;
use serde::{Deserialize, Serialize};
use sim::Arrival;

/// One fleet run of the search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetProbe {
    pub replicas: usize,
    /// Requests in the run.
    pub requests: usize,
    pub point: RatePoint,
}

/// The outcome of sizing one setting's fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetSearch {
    pub lower_bound: usize,
    pub first_probe: usize,
    /// The fewest replicas meeting the SLO; `None` when up to
    /// `max_replicas` do not.
    pub replicas: Option<usize>,
    pub probes: Vec<FleetProbe>,
    pub note: Option<String>,
}

impl FleetSearch {
    /// The run at the fewest replicas meeting the SLO.
    pub fn at_min(&self) -> Option<&FleetProbe> {
        let n = self.replicas?;
        self.probes.iter().find(|p| p.replicas == n)
    }
}

/// What the fleet is sized for, besides the SLO.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetGoal {
    pub rate: f64,
    pub router: RouterChoice,
    pub max_replicas: usize,
}

/// Sizes the fleet of one setting (see the module docs). `unit` is the
/// single-engine search's arrivals at one request per second.
#[allow(clippy::too_many_arguments)]
pub fn size_fleet(
    target: &SimBackend,
    base: &EngineConfig,
    single: &SettingResult,
    unit: &[Arrival],
    whole_trace: bool,
    goal: &FleetGoal,
    slo: &Slo,
    method: &SearchMethod,
) -> Result<Option<FleetSearch>, BackendError> {
    if single.max_qps <= 0.0 {
        return Ok(None);
    }
    let mut engine = base.clone();
    engine.max_num_batched_tokens = single.max_num_batched_tokens;
    engine.max_num_seqs = single.max_num_seqs;
    let rate = goal.rate;
    let bound = single
        .saturation_rps
        .map_or(1.0, |s| (rate / s).floor() + 1.0);
    let first = bound.max((rate / single.max_qps).ceil());
    let mut search = FleetSearch {
        lower_bound: bound.min(usize::MAX as f64) as usize,
        first_probe: first.min(goal.max_replicas as f64) as usize,
        replicas: None,
        probes: Vec::new(),
        note: None,
    };
    if bound > goal.max_replicas as f64 {
        search.note = Some(format!(
            "needs more than max_replicas = {}: {rate} req/s is at least {} times one \
             engine's saturation rate; raise max_replicas",
            goal.max_replicas, goal.max_replicas
        ));
        return Ok(Some(search));
    }
    let mut passes = |replicas: usize| -> Result<bool, BackendError> {
        let requests = if whole_trace {
            unit.len()
        } else {
            replicas.saturating_mul(single.requests).min(unit.len())
        };
        let fleet = FleetSpec {
            replicas,
            router: goal.router,
        };
        let point = measure_fleet(
            target,
            &engine,
            &fleet,
            &unit[..requests],
            rate,
            slo,
            method.warmup_pct,
        )?;
        let ok = point.meets_slo;
        search.probes.push(FleetProbe {
            replicas,
            requests,
            point,
        });
        Ok(ok)
    };
    let start = first.min(goal.max_replicas as f64) as usize;
    let (mut fail, mut pass) = if passes(start)? {
        (search.lower_bound - 1, start)
    } else {
        let mut fail = start;
        loop {
            let next = fail.saturating_mul(2).min(goal.max_replicas);
            if next == fail {
                search.note = Some(format!(
                    "the SLO is not met with up to max_replicas = {} replicas; raise max_replicas",
                    goal.max_replicas
                ));
                return Ok(Some(search));
            }
            if passes(next)? {
                break (fail, next);
            }
            fail = next;
        }
    };
    while pass - fail > 1 {
        let mid = fail + (pass - fail) / 2;
        if passes(mid)? {
            pass = mid;
        } else {
            fail = mid;
        }
    }
    search.replicas = Some(pass);
    Ok(Some(search))
}

/// Of one GPU's sized settings, the cheapest fleet: fewest replicas, then
/// the highest single-engine rate, then fewer sequences, then fewer batched
/// tokens. Returns its index in `sized`.
pub fn cheapest(sized: &[(&SettingResult, Option<&FleetSearch>)]) -> Option<usize> {
    sized
        .iter()
        .enumerate()
        .filter_map(|(i, (s, f))| Some((i, *s, f.as_ref()?.replicas?)))
        .min_by(|(_, a, na), (_, b, nb)| {
            na.cmp(nb)
                .then(b.max_qps.total_cmp(&a.max_qps))
                .then(a.max_num_seqs.cmp(&b.max_num_seqs))
                .then(a.max_num_batched_tokens.cmp(&b.max_num_batched_tokens))
        })
        .map(|(i, _, _)| i)
}
