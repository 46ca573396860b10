//! router_sweep: request routers × replica counts on a prefix-heavy
//! multi-tenant workload (simulated fleets only).
//!
//! Every request belongs to one tenant (its cache salt) and one of that
//! tenant's prefix groups: its prompt is the group's shared prefix followed by
//! its own random suffix. Arrivals are an open-loop Poisson process at `rate`.
//! Each condition runs the one workload on `replicas` copies of the engine
//! behind one router ([`crate::fleet`]). Unlike other experiments every
//! condition plays the same script (seeded from `(seed, 0)`): the routers are
//! compared on identical arrivals, so at one replica they must agree exactly.
//! Reported per (router, replicas): throughput, TTFT and ITL p50/p99, the
//! prefix-cache hit rate (cached over prompt tokens) and the load imbalance
//! (most requests on one replica over the mean per replica).

use super::latency::latencies;
use super::{at_least, condition, Condition, Experiment, ExperimentError, Report};
use crate::charts::ChartSpec;
use crate::fleet::{replica_of_tag, FleetSpec, RouterChoice, ROUTER_NAMES};
use crate::script::{condition_seed, Gate, ScriptBuilder};
use crate::settings::{ParamKind, ParamSpec, Settings};
use crate::stats::{percentile, unit_exponential};
use crate::table::{Cell, Table};
use figures::YScale;
use rand::Rng;
use sim::workload::PromptSource;
use sim::RunRecords;

pub struct RouterSweep;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "routers",
        kind: ParamKind::Choices(ROUTER_NAMES),
        default: "round_robin,least_outstanding,least_kv,prefix_aware,affinity",
        help: "routers compared",
    },
    ParamSpec {
        key: "replicas",
        kind: ParamKind::CountList,
        default: "1,2,4",
        help: "replica counts swept (engines behind the router)",
    },
    ParamSpec {
        key: "tenants",
        kind: ParamKind::Count,
        default: "8",
        help: "tenants, each with its own cache salt",
    },
    ParamSpec {
        key: "prefix_groups",
        kind: ParamKind::Count,
        default: "4",
        help: "shared prefixes per tenant",
    },
    ParamSpec {
        key: "prefix_tokens",
        kind: ParamKind::Count,
        default: "2048",
        help: "shared prefix length",
    },
    ParamSpec {
        key: "suffix_tokens",
        kind: ParamKind::Count,
        default: "64",
        help: "tokens unique to each request after its prefix",
    },
    ParamSpec {
        key: "output_tokens",
        kind: ParamKind::Count,
        default: "32",
        help: "output tokens per request",
    },
    ParamSpec {
        key: "rate",
        kind: ParamKind::Positive,
        default: "20",
        help: "arrival rate (requests per second, Poisson)",
    },
    ParamSpec {
        key: "requests",
        kind: ParamKind::Count,
        default: "160",
        help: "requests per condition",
    },
    ParamSpec {
        key: "lambda",
        kind: ParamKind::Number,
        default: "256",
        help: "prefix_aware's load weight: cached tokens one outstanding request is worth",
    },
];

const COLUMNS: &[&str] = &[
    "router",
    "replicas",
    "throughput_tok_s",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "prefix_hit_rate",
    "load_imbalance",
];

/// The routers named by `routers`, in the order given.
fn routers(settings: &Settings) -> Result<Vec<RouterChoice>, ExperimentError> {
    let load_weight = settings.number("lambda")?;
    if !load_weight.is_finite() {
        return Err(ExperimentError::BadParameter {
            key: "lambda",
            message: format!("{load_weight} is not a finite number; use a value >= 0"),
        });
    }
    settings
        .words("routers")?
        .iter()
        .map(|name| {
            RouterChoice::from_name(name, load_weight).ok_or_else(|| {
                ExperimentError::BadParameter {
                    key: "routers",
                    message: format!("unknown router `{name}`; use {}", ROUTER_NAMES.join(", ")),
                }
            })
        })
        .collect()
}

fn replica_counts(settings: &Settings) -> Result<Vec<usize>, ExperimentError> {
    let counts = settings.counts("replicas")?;
    if let Some(zero) = counts.iter().find(|&&n| n == 0) {
        return Err(ExperimentError::BadParameter {
            key: "replicas",
            message: format!("{zero} replicas cannot serve a request; use at least 1"),
        });
    }
    Ok(counts)
}

impl Experiment for RouterSweep {
    fn name(&self) -> &'static str {
        "router_sweep"
    }

    fn description(&self) -> &'static str {
        "routers x replica counts (1, 2, 4) on 8 salted tenants x 4 shared 2,048-token prefixes at 20 req/s (sim only)"
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
        let routers = routers(settings)?;
        let replicas = replica_counts(settings)?;
        let tenants = at_least(settings, "tenants", 1)?;
        let groups = at_least(settings, "prefix_groups", 1)?;
        let prefix_len = at_least(settings, "prefix_tokens", 1)?;
        let suffix_len = at_least(settings, "suffix_tokens", 1)?;
        let output = at_least(settings, "output_tokens", 1)?;
        let requests = at_least(settings, "requests", 1)?;
        let rate = settings.number("rate")?;

        let seed = condition_seed(seed, 0);
        let mut b = ScriptBuilder::new(seed, prompts);
        let prefixes: Vec<Vec<u32>> = (0..tenants * groups)
            .map(|_| b.random_tokens(prefix_len))
            .collect();
        let mut t = 0.0;
        for _ in 0..requests {
            let u: f64 = b.rng().random();
            t += unit_exponential(u) / rate;
            let tenant = b.rng().random_range(0..tenants);
            let group = b.rng().random_range(0..groups);
            let mut prompt = prefixes[tenant * groups + group].clone();
            prompt.extend(b.random_tokens(suffix_len));
            let salt = Some(format!("tenant{tenant}"));
            b.push(
                format!("t{tenant}_g{group}"),
                prompt,
                output,
                salt,
                Gate::At(t),
            );
        }
        let script = b.build();

        let mut out = Vec::new();
        for router in &routers {
            for &n in &replicas {
                let label = format!("router={} replicas={n}", router.name());
                let mut c = condition(label, settings.engine.clone(), script.clone(), seed)?;
                c.fleet = Some(FleetSpec {
                    replicas: n,
                    router: *router,
                });
                out.push(c);
            }
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
        // Routers in plan order, with their points.
        let mut per_router: Vec<RouterPoints> = Vec::new();
        for (cond, rec) in conditions.iter().zip(runs) {
            let fleet = cond.fleet.ok_or_else(|| ExperimentError::Incomplete {
                label: cond.label.clone(),
                message: "router_sweep conditions run on a fleet".into(),
            })?;
            let m = metrics(rec, fleet.replicas, &cond.label)?;
            table.push(vec![
                Cell::text(fleet.router.name()),
                Cell::int(fleet.replicas),
                Cell::num(m.throughput),
                Cell::num(m.ttft_p50),
                Cell::num(m.ttft_p99),
                Cell::num(m.itl_p50),
                Cell::num(m.itl_p99),
                Cell::num(Some(m.hit_rate)),
                Cell::num(Some(m.imbalance)),
            ]);
            let name = fleet.router.name();
            let k = match per_router.iter().position(|p| p.router == name) {
                Some(k) => k,
                None => {
                    per_router.push(RouterPoints {
                        router: name,
                        ttft_p50: Vec::new(),
                        hit_rate: Vec::new(),
                    });
                    per_router.len() - 1
                }
            };
            let x = fleet.replicas as f64;
            per_router[k]
                .ttft_p50
                .push((x, m.ttft_p50.unwrap_or(f64::NAN)));
            per_router[k].hit_rate.push((fleet.replicas, m.hit_rate));
        }
        Ok(Report {
            summary: table,
            key_columns: 2,
            charts: charts(&per_router),
        })
    }
}

/// One router's points for the figures.
struct RouterPoints {
    router: &'static str,
    /// (replicas, TTFT p50 in ms).
    ttft_p50: Vec<(f64, f64)>,
    /// (replicas, hit rate).
    hit_rate: Vec<(usize, f64)>,
}

fn charts(per_router: &[RouterPoints]) -> Vec<ChartSpec> {
    let mut ttft = ChartSpec::new(
        "router_sweep_ttft",
        "router_sweep: median TTFT vs replicas",
        "replicas",
        "TTFT p50 (ms)",
    )
    .y_scale(YScale::Auto);
    let names: Vec<String> = per_router.iter().map(|p| p.router.to_string()).collect();
    let mut hits = ChartSpec::new(
        "router_sweep_hit_rate",
        "router_sweep: prefix-cache hit rate per router",
        "router",
        "hit rate (cached / prompt tokens)",
    )
    .bars()
    .categories(&names);
    let mut counts: Vec<usize> = per_router
        .iter()
        .flat_map(|p| p.hit_rate.iter().map(|(n, _)| *n))
        .collect();
    counts.sort_unstable();
    counts.dedup();
    for p in per_router {
        ttft = ttft.series(p.router, p.ttft_p50.clone());
    }
    // One bar per replica count in each router's group.
    for n in counts {
        let points = per_router
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                p.hit_rate
                    .iter()
                    .find(|(m, _)| *m == n)
                    .map(|(_, rate)| (i as f64, *rate))
            })
            .collect();
        hits = hits.series(
            format!("{n} replica{}", if n == 1 { "" } else { "s" }),
            points,
        );
    }
    vec![ttft, hits]
}

struct FleetMetrics {
    throughput: Option<f64>,
    ttft_p50: Option<f64>,
    ttft_p99: Option<f64>,
    itl_p50: Option<f64>,
    itl_p99: Option<f64>,
    hit_rate: f64,
    imbalance: f64,
}

fn metrics(
    rec: &RunRecords,
    replicas: usize,
    label: &str,
) -> Result<FleetMetrics, ExperimentError> {
    let incomplete = |message: String| ExperimentError::Incomplete {
        label: label.to_string(),
        message,
    };
    let mut per_replica = vec![0usize; replicas];
    for r in &rec.requests {
        let (_, replica) = replica_of_tag(&r.tag)
            .filter(|(_, i)| *i < replicas)
            .ok_or_else(|| incomplete(format!("request {} has no replica in its tag", r.id)))?;
        per_replica[replica] += 1;
        if r.token_times_s.is_empty() {
            return Err(incomplete(format!(
                "request {} produced no output token",
                r.id
            )));
        }
    }
    let all: Vec<_> = rec.requests.iter().collect();
    let lat = latencies(&all, label)?;
    let prompt: usize = rec.requests.iter().map(|r| r.prompt_tokens).sum();
    let cached: usize = rec.requests.iter().map(|r| r.cached_tokens).sum();
    let mean = rec.requests.len() as f64 / replicas as f64;
    let most = per_replica.iter().copied().max().unwrap_or(0) as f64;
    Ok(FleetMetrics {
        throughput: lat.throughput(),
        ttft_p50: percentile(&lat.ttft_ms, 50.0),
        ttft_p99: percentile(&lat.ttft_ms, 99.0),
        itl_p50: percentile(&lat.itl_ms, 50.0),
        itl_p99: percentile(&lat.itl_ms, 99.0),
        hit_rate: if prompt == 0 {
            0.0
        } else {
            cached as f64 / prompt as f64
        },
        imbalance: if mean > 0.0 { most / mean } else { 0.0 },
    })
}
