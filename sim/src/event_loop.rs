//! The one event loop shared by real and simulated runs.
//!
//! Contract ([`run`]):
//! - Arrivals due at or before the clock's time join their engine before that
//!   engine's next step; an arrival that falls during a step waits for it to
//!   end, as in a real engine loop.
//! - Each engine has its own timeline: the loop always handles the earliest
//!   event (an arrival, or the moment an engine with work is free), so on a
//!   virtual clock several engines run side by side; on the wall clock they
//!   take turns. When no engine has work, the clock waits for the next arrival.
//! - A step's record starts when the step starts and lasts as the clock says
//!   (the cost model's time on a virtual clock, the measured time on the wall
//!   clock). Every token of the step, and every finish, is stamped at the
//!   step's end, and finished requests are reported to the workload then.
//! - Before each step but an engine's first in this run, its runner is told
//!   how long the engine sat idle since its last step ended
//!   ([`engine::ModelRunner::idle`]; a simulated GPU runs faster rested).
//! - Engines may be reused from an earlier run (a warm prefix cache), but
//!   must have no unfinished requests; the prefix-cache counters in the
//!   records count this run only, and time starts at the clock's `now()`.
//! - With a router ([`run_routed`]) each arrival's replica is the router's
//!   pick when the arrival is handed to an engine, not the arrival's
//!   `engine`; without one, runs are exactly as if routing did not exist.
//! - Steps that schedule nothing are not recorded; an engine with unfinished
//!   requests that schedules nothing twice in a row is stuck, and the run
//!   fails naming those requests ([`RunError::Stuck`]).

pub(crate) mod queue;
pub(crate) mod step_record;

use crate::clock::Clock;
use crate::cluster::{Fleet, Router};
use crate::records::{RequestRecord, RunRecords};
use crate::workload::{Arrival, Workload};
use engine::{EngineCore, ModelRunner, RequestError, RequestId, StepOutcome};
use queue::{ArrivalQueue, RecordIndex};
use step_record::{finish_reason, step_record, Occupancy};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    #[error(transparent)]
    Request(#[from] engine::RequestError),
    #[error("request {id} is for engine {engine}, but the run has {engines} engine(s)")]
    NoSuchEngine {
        id: u64,
        engine: usize,
        engines: usize,
    },
    #[error(
        "engine {engine} scheduled nothing in two steps in a row while requests {requests:?} \
         are unfinished; the KV cache is probably too small for them"
    )]
    Stuck { engine: usize, requests: Vec<u64> },
    #[error("a routed run needs at least one engine to route to")]
    EmptyFleet,
    #[error(
        "a disaggregated fleet needs at least one {pool} replica, and its {pool} pool is \
         empty; give it one or more"
    )]
    EmptyPool { pool: &'static str },
    #[error("request {id} arrives at {time} s: arrival times must be finite")]
    BadArrivalTime { id: u64, time: f64 },
    #[error("engine {engine} reported request {id}, which the run never sent it")]
    UnknownRequest { engine: usize, id: u64 },
}

/// Settings of a run that are not the engines' or the workload's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// Keep every step's full [`engine::BatchShape`] in its record (needed to
    /// re-price a run with another cost model; costs memory on long runs).
    pub record_step_shapes: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            record_step_shapes: true,
        }
    }
}

/// Runs `workload` through `engines` on `clock` until every request has
/// finished, with the default [`RunOptions`].
pub fn run<R: ModelRunner, C: Clock>(
    engines: &mut [EngineCore<R>],
    clock: &mut C,
    workload: &mut dyn Workload,
) -> Result<RunRecords, RunError> {
    run_with(engines, clock, workload, &RunOptions::default())
}

/// [`run`] with explicit options.
pub fn run_with<R: ModelRunner, C: Clock>(
    engines: &mut [EngineCore<R>],
    clock: &mut C,
    workload: &mut dyn Workload,
    options: &RunOptions,
) -> Result<RunRecords, RunError> {
    drive(engines, clock, workload, options, None).map(|(records, _)| records)
}

/// A routed run's records and where each request went.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutedRun {
    pub records: RunRecords,
    /// `replica_of[i]` is the replica of `records.requests[i]`.
    pub replica_of: Vec<usize>,
}

/// [`run_with`], with `router` choosing each request's replica among
/// `engines` (see [`crate::cluster`]). Fails on an empty fleet.
pub fn run_routed<R: ModelRunner, C: Clock>(
    engines: &mut [EngineCore<R>],
    clock: &mut C,
    workload: &mut dyn Workload,
    router: &mut dyn Router,
    options: &RunOptions,
) -> Result<RoutedRun, RunError> {
    if engines.is_empty() {
        return Err(RunError::EmptyFleet);
    }
    let (records, replica_of) = drive(engines, clock, workload, options, Some(router))?;
    Ok(RoutedRun {
        records,
        replica_of,
    })
}

fn drive<R: ModelRunner, C: Clock>(
    engines: &mut [EngineCore<R>],
    clock: &mut C,
    workload: &mut dyn Workload,
    options: &RunOptions,
    mut router: Option<&mut dyn Router>,
) -> Result<(RunRecords, Vec<usize>), RunError> {
    let stats_before: Vec<(u64, u64)> = engines.iter().map(|e| e.prefix_cache_stats()).collect();
    let mut state = LoopState::new(engines.len(), clock.now(), options.clone());
    state.routed = router.is_some();
    for arrival in workload.initial() {
        state.enqueue(arrival)?;
    }
    loop {
        let next_step = engines
            .iter()
            .enumerate()
            .filter(|(_, e)| e.has_unfinished())
            .map(|(i, _)| (state.free_at[i], i))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        match (next_step, state.arrivals.next_time()) {
            (None, None) => break,
            (None, Some(t)) => state.deliver_at(t, engines, clock, &mut router)?,
            (Some((s, _)), Some(t)) if t <= s => {
                state.deliver_at(t, engines, clock, &mut router)?
            }
            (Some((s, engine)), _) => {
                state.deliver_at(s, engines, clock, &mut router)?;
                state.step(engine, &mut engines[engine], clock, workload)?;
            }
        }
    }
    let mut records = state.records;
    for (e, (queries_before, hits_before)) in engines.iter().zip(stats_before) {
        let (queries, hits) = e.prefix_cache_stats();
        records.prefix_cache_queries += queries.saturating_sub(queries_before);
        records.prefix_cache_hits += hits.saturating_sub(hits_before);
    }
    Ok((records, state.engine_of))
}

struct LoopState {
    options: RunOptions,
    arrivals: ArrivalQueue,
    /// When each engine is next free to start a step.
    free_at: Vec<f64>,
    /// When each engine's last step ended (its runner is told the idle
    /// time before the next); none before the first.
    last_end: Vec<Option<f64>>,
    empty_steps: Vec<u8>,
    /// The time of the event being handled; never decreases.
    event_time: f64,
    records: RunRecords,
    /// Engine of each request record.
    engine_of: Vec<usize>,
    index: RecordIndex,
    /// A router picks each arrival's engine, so `Arrival::engine` is unused.
    routed: bool,
}

impl LoopState {
    fn new(num_engines: usize, start: f64, options: RunOptions) -> Self {
        Self {
            options,
            arrivals: ArrivalQueue::default(),
            free_at: vec![start; num_engines],
            last_end: vec![None; num_engines],
            empty_steps: vec![0; num_engines],
            event_time: start,
            records: RunRecords::default(),
            engine_of: Vec::new(),
            index: RecordIndex::default(),
            routed: false,
        }
    }

    fn enqueue(&mut self, arrival: Arrival) -> Result<(), RunError> {
        if !self.routed && arrival.engine >= self.free_at.len() {
            return Err(RunError::NoSuchEngine {
                id: arrival.request.id.0,
                engine: arrival.engine,
                engines: self.free_at.len(),
            });
        }
        let time = arrival.request.arrival_time;
        if !time.is_finite() {
            return Err(RunError::BadArrivalTime {
                id: arrival.request.id.0,
                time,
            });
        }
        self.arrivals.push(arrival);
        Ok(())
    }

    /// Moves the clock to the event at `t` and hands every arrival due by
    /// then to its engine.
    fn deliver_at<R: ModelRunner, C: Clock>(
        &mut self,
        t: f64,
        engines: &mut [EngineCore<R>],
        clock: &mut C,
        router: &mut Option<&mut dyn Router>,
    ) -> Result<(), RunError> {
        self.event_time = self.event_time.max(t);
        clock.seek(self.event_time);
        let now = clock.now();
        while let Some(mut a) = self.arrivals.pop_due(now) {
            let id = a.request.id.0;
            let mut hashes = None;
            if let Some(router) = router.as_deref_mut() {
                let fleet = Fleet::of_engines(engines);
                a.engine = router.route(&a, &fleet);
                hashes = fleet.take_prompt_hashes(&a.request);
                if a.engine >= engines.len() {
                    return Err(RunError::NoSuchEngine {
                        id,
                        engine: a.engine,
                        engines: engines.len(),
                    });
                }
            }
            let index = self.records.requests.len();
            if !self.index.insert(id, index) {
                return Err(RequestError::DuplicateId(RequestId(id)).into());
            }
            let record = RequestRecord {
                id,
                tag: a.tag,
                arrival_s: a.request.arrival_time,
                prompt_tokens: a.request.prompt_token_ids.len(),
                max_tokens: a.request.max_tokens,
                cached_tokens: 0,
                preemptions: 0,
                token_times_s: Vec::with_capacity(a.request.max_tokens),
                finish_s: None,
                finish_reason: "unfinished".to_string(),
            };
            match hashes {
                Some(h) => engines[a.engine].add_request_hashed(a.request, &h)?,
                None => engines[a.engine].add_request(a.request)?,
            }
            self.records.requests.push(record);
            self.engine_of.push(a.engine);
            self.free_at[a.engine] = self.free_at[a.engine].max(now);
        }
        Ok(())
    }

    fn step<R: ModelRunner, C: Clock>(
        &mut self,
        engine_index: usize,
        engine: &mut EngineCore<R>,
        clock: &mut C,
        workload: &mut dyn Workload,
    ) -> Result<(), RunError> {
        let start = clock.now();
        if let Some(last) = self.last_end[engine_index] {
            engine.runner_mut().idle(start - last);
        }
        let outcome = engine.step()?;
        clock.step_finished(outcome.modeled_seconds);
        let end = clock.now();
        self.free_at[engine_index] = end;
        self.last_end[engine_index] = Some(end);

        if outcome.shape.seqs.is_empty() {
            self.empty_steps[engine_index] += 1;
            if self.empty_steps[engine_index] >= 2 && engine.has_unfinished() {
                return Err(self.stuck(engine_index));
            }
            return Ok(());
        }
        self.empty_steps[engine_index] = 0;
        let StepOutcome {
            shape,
            tokens,
            finished,
            preempted,
            admitted,
            kv_blocks_used,
            ..
        } = outcome;

        let index = &self.index;
        // A match, not `ok_or`: building the error eagerly costs a drop per token.
        let record_of = |id: RequestId| match index.get(id.0) {
            Some(i) => Ok(i),
            None => Err(RunError::UnknownRequest {
                engine: engine_index,
                id: id.0,
            }),
        };
        let requests = &mut self.records.requests;
        for (id, cached) in admitted {
            requests[record_of(id)?].cached_tokens = cached;
        }
        for id in preempted {
            requests[record_of(id)?].preemptions += 1;
        }
        for (id, _token) in &tokens {
            requests[record_of(*id)?].token_times_s.push(end);
        }
        for &(id, reason) in &finished {
            let record = &mut requests[record_of(id)?];
            record.finish_s = Some(end);
            // Reuses the "unfinished" string's allocation.
            record.finish_reason.clear();
            record.finish_reason.push_str(finish_reason(reason));
        }
        let occupancy = Occupancy::of(engine, kv_blocks_used);
        let keep = self.options.record_step_shapes;
        let record = step_record(engine_index, (start, end), shape, occupancy, keep);
        self.records.steps.push(record);
        for (id, _) in finished {
            for arrival in workload.on_finish(id.0, end) {
                self.enqueue(arrival)?;
            }
        }
        Ok(())
    }

    fn stuck(&self, engine: usize) -> RunError {
        let requests = self
            .records
            .requests
            .iter()
            .zip(&self.engine_of)
            .filter(|(r, &e)| e == engine && r.finish_s.is_none())
            .map(|(r, _)| r.id)
            .collect();
        RunError::Stuck { engine, requests }
    }
}
