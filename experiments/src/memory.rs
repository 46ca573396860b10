//! Host memory a run needs, checked against what the machine has before the
//! run starts.
//!
//! Contract: [`estimate`] prices the planned conditions of one mode in bytes:
//! what every condition keeps until the summary (a record per request with
//! its token times, a record per step with its batch shape), what each
//! condition running at once holds (its script's copy, the engine's request
//! tokens and block hashes, the KV pool's per-block bookkeeping), and the
//! `requests.csv` / `steps.csv` text. Steps are not known before running;
//! they are counted as if every decode step were as full as `max_num_seqs`
//! (or the condition's request count) allows, plus one step per
//! `max_num_batched_tokens` of prompt: exact for `max_num_seqs = 1`, a lower
//! bound otherwise, so a run with fewer clients than `max_num_seqs` needs
//! more than estimated. [`check`] compares the estimate (of the whole
//! process) with `/proc/meminfo`'s `MemAvailable` plus the process's own
//! `VmRSS`, and refuses a run whose estimate exceeds it, naming both figures and the settings that size the run; where
//! `MemAvailable` cannot be read (not Linux) nothing is refused.
//!
//! Accuracy: against the peak RSS (`VmHWM`, through `/usr/bin/time`) of
//! `exp run --mode sim` on the 2-core development machine (2026-12-03), the
//! estimate was 196 / 918 / 2,410 MB against 173 / 893 / 2,043 MB measured
//! for cb_sweep with `max_num_seqs=1` at concurrency 512 / 2,048 / 4,096,
//! and 99 / 665 MB against 81 / 742 MB for poisson_mix at 2,000 / 20,000
//! requests: −10 % to +18 % from 150 MB up. Small runs are overestimated by
//! up to 25 MB (65 MB against 50 MB for the default cb_sweep).
//!
//! [`check`] belongs after planning and before running. Closed-loop
//! scripts, whose dependencies grow with concurrency squared, are refused
//! earlier, before they are built (`catalogue::load::check_fits`).

use crate::backend::Backend;
use crate::catalogue::{Condition, Experiment};
use crate::script::Gate;
use thiserror::Error;

/// Resident memory of `exp` before any condition runs (binary, embedded
/// profiles and fonts, thread stacks): the peak RSS of a tiny run.
pub const BASE_BYTES: u64 = 25 << 20;

// Per-item costs, from the types' sizes plus allocator overhead, and
// checked against measured peaks (see the module docs).
/// `RequestRecord` and its tag, `requests.csv` row, script entry, engine request.
const PER_REQUEST: u64 = 600;
/// A prompt token of the planned script (`u32`).
const PER_PROMPT_TOKEN: u64 = 4;
/// A script dependency (`usize`), in the plan, the running copy and the
/// running index of dependents.
const PER_DEPENDENCY: u64 = 8;
/// A token time in the request record (`f64`).
const PER_OUTPUT_TOKEN: u64 = 8;
/// `StepRecord` with its `BatchShape` allocation and its `steps.csv` row.
const PER_STEP: u64 = 210;
/// A sequence in a step's recorded shape (`SeqShape`).
const PER_STEP_SEQ: u64 = 12;
/// A prompt or output token held by a running condition: the script's copy,
/// the engine request's token list, its share of block hashes.
const PER_LIVE_TOKEN: u64 = 12;
/// A KV-cache block's bookkeeping in the engine (pool entry, free-queue links).
const PER_KV_BLOCK: u64 = 64;

#[derive(Debug, Error)]
pub enum MemoryError {
    #[error(
        "{experiment} needs about {needed} of host memory ({requests} requests, about {steps} \
         steps over {conditions} conditions; the largest is `{largest}`) but {available} is \
         available (MemAvailable in /proc/meminfo); lower {settings}, or run on a machine \
         with more memory"
    )]
    TooLarge {
        experiment: String,
        needed: Bytes,
        available: Bytes,
        requests: u64,
        steps: u64,
        conditions: usize,
        largest: String,
        settings: String,
    },
}

/// A byte count shown in GiB (MiB below one GiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl std::fmt::Display for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gib = self.0 as f64 / (1u64 << 30) as f64;
        if gib >= 1.0 {
            write!(f, "{gib:.1} GiB")
        } else {
            write!(f, "{:.0} MiB", self.0 as f64 / (1u64 << 20) as f64)
        }
    }
}

/// What one condition is expected to cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConditionCost {
    /// Kept until the summary: request and step records, CSV rows.
    pub kept: u64,
    /// Held only while the condition runs.
    pub running: u64,
    pub requests: u64,
    pub steps: u64,
}

/// The cost of `c` with `kv_blocks` KV blocks (see the module docs).
pub fn condition_cost(c: &Condition, kv_blocks: usize) -> ConditionCost {
    let requests = c.script.requests.len() as u64;
    let prompt: u64 = c
        .script
        .requests
        .iter()
        .map(|r| r.prompt.len() as u64)
        .sum();
    let output: u64 = c.script.requests.iter().map(|r| r.max_tokens as u64).sum();
    let batch = (c.engine.max_num_seqs as u64).min(requests).max(1);
    let chunk = c.engine.max_num_batched_tokens.max(1) as u64;
    let steps = output.div_ceil(batch) + prompt.div_ceil(chunk);
    // Every output token and every prefill chunk is one sequence in one step.
    let step_seqs = output + prompt.div_ceil(chunk).max(requests);
    let deps: u64 = c
        .script
        .requests
        .iter()
        .map(|r| match &r.gate {
            Gate::After { deps, .. } => deps.len() as u64,
            _ => 0,
        })
        .sum();
    ConditionCost {
        kept: requests * PER_REQUEST
            + prompt * PER_PROMPT_TOKEN
            + deps * PER_DEPENDENCY
            + output * PER_OUTPUT_TOKEN
            + steps * PER_STEP
            + step_seqs * PER_STEP_SEQ,
        // The running copy of the script and its index of dependents.
        running: 2 * deps * PER_DEPENDENCY
            + (prompt + output) * PER_LIVE_TOKEN
            + kv_blocks as u64 * PER_KV_BLOCK,
        requests,
        steps,
    }
}

/// KV blocks of every engine `c` runs on: one per replica of a fleet (both
/// pools of a disaggregated one).
fn fleet_kv_blocks(c: &Condition, backend: &dyn Backend) -> usize {
    let replicas = match (c.fleet, c.disagg) {
        (_, Some(d)) => d.replicas(),
        (Some(f), None) => f.replicas,
        (None, None) => 1,
    };
    backend.kv_blocks(&c.engine).unwrap_or(0) * replicas
}

/// Bytes a run of `conditions` on `backend` needs at its peak: every
/// condition's kept records, plus what the conditions running at once hold
/// (as many as rayon has threads when the backend runs them in parallel,
/// else one), plus [`BASE_BYTES`].
pub fn estimate(conditions: &[Condition], backend: &dyn Backend) -> u64 {
    let costs: Vec<ConditionCost> = conditions
        .iter()
        .map(|c| condition_cost(c, fleet_kv_blocks(c, backend)))
        .collect();
    let at_once = if backend.as_parallel().is_some() {
        rayon::current_num_threads().max(1)
    } else {
        1
    };
    let mut running: Vec<u64> = costs.iter().map(|c| c.running).collect();
    running.sort_unstable_by(|a, b| b.cmp(a));
    let kept: u64 = costs.iter().map(|c| c.kept).sum();
    BASE_BYTES + kept + running.iter().take(at_once).sum::<u64>()
}

/// `MemAvailable` of `/proc/meminfo`, in bytes; `None` where it cannot be read.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

/// What this process may reach: `MemAvailable` plus what it already holds
/// (`VmRSS`), since [`estimate`] counts the whole process, planned scripts
/// included.
pub fn reachable_bytes() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| status_kib(&t, "VmRSS:"))
        .unwrap_or(0);
    Some(available_bytes()? + own * 1024)
}

/// A `kB` field of a `/proc/self/status` text.
fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Parameters that set how many requests or tokens a run has, in the order
/// they are suggested.
const SIZING_KEYS: &[&str] = &[
    "concurrency",
    "requests",
    "batches",
    "rounds",
    "warm_requests",
    "trials",
    "noise_per_trial",
    "long_prompts",
    "output_tokens",
    "decode_tokens",
];

/// Refuses `conditions` of `exp` when their estimate exceeds `available`
/// bytes (see the module docs); `None` refuses nothing.
pub fn check_against(
    exp: &dyn Experiment,
    conditions: &[Condition],
    backend: &dyn Backend,
    available: Option<u64>,
) -> Result<(), MemoryError> {
    let Some(available) = available else {
        return Ok(());
    };
    let needed = estimate(conditions, backend);
    if needed <= available {
        return Ok(());
    }
    let costs: Vec<(usize, ConditionCost)> = conditions
        .iter()
        .enumerate()
        .map(|(i, c)| (i, condition_cost(c, fleet_kv_blocks(c, backend))))
        .collect();
    let largest = costs
        .iter()
        .max_by_key(|(_, c)| c.kept + c.running)
        .map_or_else(String::new, |(i, _)| conditions[*i].label.clone());
    let params: Vec<&str> = exp.params().iter().map(|p| p.key).collect();
    let sizing: Vec<&str> = SIZING_KEYS
        .iter()
        .copied()
        .filter(|k| params.contains(k))
        .collect();
    let settings = if sizing.is_empty() {
        "the experiment's sizes".to_string()
    } else {
        sizing.join(", ")
    };
    Err(MemoryError::TooLarge {
        experiment: exp.name().to_string(),
        needed: Bytes(needed),
        available: Bytes(available),
        requests: costs.iter().map(|(_, c)| c.requests).sum(),
        steps: costs.iter().map(|(_, c)| c.steps).sum(),
        conditions: conditions.len(),
        largest,
        settings,
    })
}

/// [`check_against`] this machine's `MemAvailable` (plus this process's
/// resident memory, which the estimate includes): the call the driver
/// makes after planning and before running.
pub fn check(
    exp: &dyn Experiment,
    conditions: &[Condition],
    backend: &dyn Backend,
) -> Result<(), MemoryError> {
    check_against(exp, conditions, backend, reachable_bytes())
}
