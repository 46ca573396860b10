//! The disaggregated event loop (contract in the parent module). Like the
//! single-pool loop it always handles the earliest event: an arrival from
//! the workload, a request whose K/V has reached the decode pool, or the
//! moment an engine with work is free; deliveries due by the start of a step
//! join before it.

use super::state::State;
use super::{DisaggConfig, DisaggFleet, DisaggRun};
use crate::clock::Clock;
use crate::cluster::Router;
use crate::workload::Workload;
use crate::{RunError, RunOptions};
use engine::{EngineCore, ModelRunner};

/// Both pools, engines numbered prefill first.
pub(super) struct Engines<'a, R: ModelRunner> {
    pub prefill: &'a mut [EngineCore<R>],
    pub decode: &'a mut [EngineCore<R>],
}

impl<R: ModelRunner> Engines<'_, R> {
    pub(super) fn get_mut(&mut self, engine: usize) -> &mut EngineCore<R> {
        match engine.checked_sub(self.prefill.len()) {
            None => &mut self.prefill[engine],
            Some(d) => &mut self.decode[d],
        }
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &EngineCore<R>> {
        self.prefill.iter().chain(self.decode.iter())
    }
}

pub(super) struct Routers<'a> {
    pub prefill: &'a mut dyn Router,
    pub decode: &'a mut dyn Router,
}

pub(super) fn drive<R: ModelRunner, C: Clock>(
    fleet: DisaggFleet<'_, R>,
    clock: &mut C,
    workload: &mut dyn Workload,
    config: &DisaggConfig,
    options: &RunOptions,
) -> Result<DisaggRun, RunError> {
    let mut engines = Engines {
        prefill: fleet.prefill,
        decode: fleet.decode,
    };
    let mut routers = Routers {
        prefill: fleet.prefill_router,
        decode: fleet.decode_router,
    };
    let stats_before: Vec<(u64, u64)> = engines.all().map(|e| e.prefix_cache_stats()).collect();
    let mut state = State::new(
        engines.prefill.len(),
        stats_before.len(),
        clock.now(),
        config,
    );
    state.keep_shapes = options.record_step_shapes;
    for arrival in workload.initial() {
        state.enqueue(arrival)?;
    }
    loop {
        let next_step = engines
            .all()
            .enumerate()
            .filter(|(_, e)| e.has_unfinished())
            .map(|(i, _)| (state.free_at[i], i))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let next_delivery = match (state.arrivals.next_time(), state.handoffs.next_time()) {
            (Some(a), Some(h)) => Some(a.min(h)),
            (a, h) => a.or(h),
        };
        match (next_step, next_delivery) {
            (None, None) => break,
            (None, Some(t)) => state.deliver_at(t, &mut engines, clock, &mut routers)?,
            (Some((s, _)), Some(t)) if t <= s => {
                state.deliver_at(t, &mut engines, clock, &mut routers)?
            }
            (Some((s, engine)), _) => {
                state.deliver_at(s, &mut engines, clock, &mut routers)?;
                state.step(engine, &mut engines, clock, workload)?;
            }
        }
    }
    let num_prefill = engines.prefill.len();
    let mut records = state.records;
    let mut replicas = Vec::with_capacity(stats_before.len());
    for ((engine, before), requests) in engines.all().zip(stats_before).zip(state.replicas) {
        let (queries, hits) = engine.prefix_cache_stats();
        let counters = (
            queries.saturating_sub(before.0),
            hits.saturating_sub(before.1),
        );
        if replicas.len() < num_prefill {
            records.prefix_cache_queries += counters.0;
            records.prefix_cache_hits += counters.1;
        }
        replicas.push((requests, counters));
    }
    Ok(DisaggRun {
        records,
        placement: state.placement,
        transfers: state.transfers,
        num_prefill,
        replicas,
    })
}
