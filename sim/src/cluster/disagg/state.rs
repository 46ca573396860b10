//! The disaggregated loop's state: where every request is, its records on
//! the fleet and on each replica, and what happens at each delivery and step.

use super::link::LinkQueue;
use super::run::{Engines, Routers};
use super::{DisaggConfig, Placement, Transfer};
use crate::clock::Clock;
use crate::cluster::{Fleet, Router};
use crate::event_loop::queue::{ArrivalQueue, RecordIndex, TimedQueue};
use crate::event_loop::step_record::{finish_reason, step_record, Occupancy};
use crate::records::{RequestRecord, RunRecords};
use crate::workload::{Arrival, Workload};
use crate::RunError;
use engine::{FinishReason, ModelRunner, Request, RequestError, RequestId};

/// A request whose K/V is on its way to the decode pool.
pub(super) struct Handoff {
    /// As the workload sent it (all of `max_tokens`).
    request: Request,
    /// Tokens its prefill replica sampled (the first token).
    outputs: Vec<u32>,
    /// When the K/V has arrived.
    arrive_s: f64,
    /// Its record in the fleet's records.
    record: usize,
}

pub(super) struct State {
    pub(super) num_prefill: usize,
    pub(super) keep_shapes: bool,
    pub(super) kv_bytes_per_token: u64,
    pub(super) arrivals: ArrivalQueue,
    pub(super) handoffs: TimedQueue<Handoff>,
    pub(super) link: LinkQueue,
    /// When each engine is next free to start a step.
    pub(super) free_at: Vec<f64>,
    pub(super) empty_steps: Vec<u8>,
    /// The time of the event being handled; never decreases.
    pub(super) event_time: f64,
    pub(super) records: RunRecords,
    pub(super) placement: Vec<Placement>,
    pub(super) transfers: Vec<Transfer>,
    pub(super) index: RecordIndex,
    /// Per fleet record: the request as sent, until its prefill finishes.
    pub(super) originals: Vec<Option<Request>>,
    /// Per fleet record: its record's index on its prefill replica, and on
    /// its decode replica once it got there.
    pub(super) on_replica: Vec<(usize, Option<usize>)>,
    /// Per engine: the records of the requests it served.
    pub(super) replicas: Vec<Vec<RequestRecord>>,
}

impl State {
    pub(super) fn new(
        num_prefill: usize,
        num_engines: usize,
        start: f64,
        config: &DisaggConfig,
    ) -> Self {
        Self {
            num_prefill,
            keep_shapes: true,
            kv_bytes_per_token: config.kv_bytes_per_token,
            arrivals: ArrivalQueue::default(),
            handoffs: TimedQueue::default(),
            link: LinkQueue::new(config.link, num_prefill, start),
            free_at: vec![start; num_engines],
            empty_steps: vec![0; num_engines],
            event_time: start,
            records: RunRecords::default(),
            placement: Vec::new(),
            transfers: Vec::new(),
            index: RecordIndex::default(),
            originals: Vec::new(),
            on_replica: Vec::new(),
            replicas: vec![Vec::new(); num_engines],
        }
    }

    pub(super) fn enqueue(&mut self, arrival: Arrival) -> Result<(), RunError> {
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

    /// Moves the clock to the event at `t` and hands every arrival and every
    /// K/V delivery due by then to a replica of its pool.
    pub(super) fn deliver_at<R: ModelRunner, C: Clock>(
        &mut self,
        t: f64,
        engines: &mut Engines<'_, R>,
        clock: &mut C,
        routers: &mut Routers<'_>,
    ) -> Result<(), RunError> {
        self.event_time = self.event_time.max(t);
        clock.seek(self.event_time);
        let now = clock.now();
        while let Some(arrival) = self.arrivals.pop_due(now) {
            self.start_prefill(arrival, now, engines, routers.prefill)?;
        }
        while let Some(handoff) = self.handoffs.pop_due(now) {
            self.start_decode(handoff, now, engines, routers.decode)?;
        }
        Ok(())
    }

    fn start_prefill<R: ModelRunner>(
        &mut self,
        arrival: Arrival,
        now: f64,
        engines: &mut Engines<'_, R>,
        router: &mut dyn Router,
    ) -> Result<(), RunError> {
        let replica = router.route(&arrival, &Fleet::of_engines(engines.prefill));
        let id = arrival.request.id.0;
        if replica >= engines.prefill.len() {
            return Err(RunError::NoSuchEngine {
                id,
                engine: replica,
                engines: engines.prefill.len(),
            });
        }
        let index = self.records.requests.len();
        if !self.index.insert(id, index) {
            return Err(RequestError::DuplicateId(RequestId(id)).into());
        }
        let request = arrival.request;
        let record = RequestRecord {
            id,
            tag: arrival.tag,
            arrival_s: request.arrival_time,
            prompt_tokens: request.prompt_token_ids.len(),
            max_tokens: request.max_tokens,
            cached_tokens: 0,
            preemptions: 0,
            token_times_s: Vec::with_capacity(request.max_tokens),
            finish_s: None,
            finish_reason: "unfinished".to_string(),
        };
        // The prefill replica computes the prompt and the first token only.
        let mut prefill = request.clone();
        prefill.max_tokens = 1;
        engines.prefill[replica].add_request(prefill)?;
        let on_prefill = RequestRecord {
            max_tokens: 1,
            token_times_s: Vec::with_capacity(1),
            ..record.clone()
        };
        self.records.requests.push(record);
        self.replicas[replica].push(on_prefill);
        self.on_replica
            .push((self.replicas[replica].len() - 1, None));
        self.originals.push(Some(request));
        self.placement.push(Placement {
            prefill: replica,
            decode: None,
        });
        self.free_at[replica] = self.free_at[replica].max(now);
        Ok(())
    }

    fn start_decode<R: ModelRunner>(
        &mut self,
        handoff: Handoff,
        now: f64,
        engines: &mut Engines<'_, R>,
        router: &mut dyn Router,
    ) -> Result<(), RunError> {
        let i = handoff.record;
        let fleet_record = &self.records.requests[i];
        let arrival = Arrival {
            request: handoff.request,
            engine: 0,
            tag: fleet_record.tag.clone(),
        };
        let replica = router.route(&arrival, &Fleet::of_engines(engines.decode));
        if replica >= engines.decode.len() {
            return Err(RunError::NoSuchEngine {
                id: fleet_record.id,
                engine: replica,
                engines: engines.decode.len(),
            });
        }
        let on_decode = RequestRecord {
            arrival_s: handoff.arrive_s,
            max_tokens: fleet_record
                .max_tokens
                .saturating_sub(handoff.outputs.len()),
            cached_tokens: 0,
            preemptions: 0,
            token_times_s: Vec::with_capacity(fleet_record.max_tokens),
            finish_s: None,
            finish_reason: "unfinished".to_string(),
            ..fleet_record.clone()
        };
        engines.decode[replica].add_remote_prefilled(arrival.request, &handoff.outputs)?;
        let engine = self.num_prefill + replica;
        self.replicas[engine].push(on_decode);
        self.on_replica[i].1 = Some(self.replicas[engine].len() - 1);
        self.placement[i].decode = Some(replica);
        self.free_at[engine] = self.free_at[engine].max(now);
        Ok(())
    }

    /// The fleet record of request `id` and its record on `engine`.
    fn records_of(&self, engine: usize, id: RequestId) -> Result<(usize, usize), RunError> {
        let unknown = || RunError::UnknownRequest { engine, id: id.0 };
        let i = self.index.get(id.0).ok_or_else(unknown)?;
        let (on_prefill, on_decode) = self.on_replica[i];
        let on_engine = if engine < self.num_prefill {
            Some(on_prefill)
        } else {
            on_decode
        };
        on_engine.map(|r| (i, r)).ok_or_else(unknown)
    }

    pub(super) fn step<R: ModelRunner, C: Clock>(
        &mut self,
        engine_index: usize,
        engines: &mut Engines<'_, R>,
        clock: &mut C,
        workload: &mut dyn Workload,
    ) -> Result<(), RunError> {
        let engine = engines.get_mut(engine_index);
        let start = clock.now();
        let outcome = engine.step()?;
        clock.step_finished(outcome.modeled_seconds);
        let end = clock.now();
        self.free_at[engine_index] = end;
        if outcome.shape.seqs.is_empty() {
            self.empty_steps[engine_index] += 1;
            if self.empty_steps[engine_index] >= 2 && engine.has_unfinished() {
                let mut requests: Vec<u64> = engine
                    .running_ids()
                    .chain(engine.waiting_ids())
                    .map(|r| r.0)
                    .collect();
                requests.sort_unstable();
                return Err(RunError::Stuck {
                    engine: engine_index,
                    requests,
                });
            }
            return Ok(());
        }
        self.empty_steps[engine_index] = 0;
        let on_prefill = engine_index < self.num_prefill;
        for &(id, cached) in &outcome.admitted {
            let (i, r) = self.records_of(engine_index, id)?;
            self.replicas[engine_index][r].cached_tokens = cached;
            if on_prefill {
                self.records.requests[i].cached_tokens = cached;
            }
        }
        for &id in &outcome.preempted {
            let (i, r) = self.records_of(engine_index, id)?;
            self.replicas[engine_index][r].preemptions += 1;
            self.records.requests[i].preemptions += 1;
        }
        for &(id, _) in &outcome.tokens {
            let (i, r) = self.records_of(engine_index, id)?;
            self.replicas[engine_index][r].token_times_s.push(end);
            self.records.requests[i].token_times_s.push(end);
        }
        let occupancy = Occupancy::of(engine, outcome.kv_blocks_used);
        for &(id, reason) in &outcome.finished {
            let (i, r) = self.records_of(engine_index, id)?;
            set_finished(&mut self.replicas[engine_index][r], end, reason);
            if on_prefill {
                let outputs = outcome.tokens.iter().filter(|t| t.0 == id).map(|t| t.1);
                self.prefilled(i, outputs.collect(), end, workload)?;
            } else {
                self.finished(i, end, reason, workload)?;
            }
        }
        let shape = outcome.shape;
        let record = step_record(
            engine_index,
            (start, end),
            shape,
            occupancy,
            self.keep_shapes,
        );
        self.records.steps.push(record);
        Ok(())
    }

    /// Request `i`'s prefill replica sampled `outputs` at `end`: it finishes
    /// there, or its K/V goes over the link.
    fn prefilled(
        &mut self,
        i: usize,
        outputs: Vec<u32>,
        end: f64,
        workload: &mut dyn Workload,
    ) -> Result<(), RunError> {
        let Some(request) = self.originals[i].take() else {
            return Err(RunError::UnknownRequest {
                engine: self.placement[i].prefill,
                id: self.records.requests[i].id,
            });
        };
        let stopped = !request.ignore_eos
            && request.eos_token_id.is_some()
            && outputs.last().copied() == request.eos_token_id;
        if outputs.len() >= request.max_tokens {
            return self.finished(i, end, FinishReason::Length, workload);
        }
        if stopped {
            return self.finished(i, end, FinishReason::Stop, workload);
        }
        let prefill = self.placement[i].prefill;
        let tokens = request.prompt_token_ids.len() as u64;
        let bytes = tokens.saturating_mul(self.kv_bytes_per_token);
        let (start_s, end_s) = self.link.send(prefill, end, bytes);
        self.transfers.push(Transfer {
            id: request.id.0,
            prefill,
            bytes,
            start_s,
            end_s,
        });
        let handoff = Handoff {
            request,
            outputs,
            arrive_s: end_s,
            record: i,
        };
        self.handoffs.push_at(end_s, handoff);
        Ok(())
    }

    /// Request `i` produced its last token at `end`.
    fn finished(
        &mut self,
        i: usize,
        end: f64,
        reason: FinishReason,
        workload: &mut dyn Workload,
    ) -> Result<(), RunError> {
        let record = &mut self.records.requests[i];
        set_finished(record, end, reason);
        for arrival in workload.on_finish(record.id, end) {
            self.enqueue(arrival)?;
        }
        Ok(())
    }
}

fn set_finished(record: &mut RequestRecord, end: f64, reason: FinishReason) {
    record.finish_s = Some(end);
    record.finish_reason.clear();
    record.finish_reason.push_str(finish_reason(reason));
}
