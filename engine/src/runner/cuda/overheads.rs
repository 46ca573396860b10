//! Where a decode step's time goes outside the GPU's work: the host's
//! packing of the metadata, the launch and the wait, against the decode
//! graph's replays queued back to back (engine-bench `--only-decode B
//! --overheads`). A measurement, not a hot path: it replays the graph of the
//! batch's bucket on the metadata of the batch given, which rewrites the
//! same KV slots.

use super::device::{self, dev_err};
use super::meta::{pack_step, Padding};
use super::CudaRunner;
use crate::runner::{RunnerError, ScheduledBatch};
use cudarc::driver::sys;
use statrs::statistics::{Data, OrderStatistics};
use std::time::Instant;

/// Medians in seconds over the repetitions (statrs': for an even count, the
/// mean of the two middle values; results before 2026-12-01 took the upper
/// one), except `graph_back_to_back`.
#[derive(Debug, Clone, Copy)]
pub struct StepOverheads {
    /// Host packing of the metadata alone.
    pub pack: f64,
    /// The graph launched and waited for, without packing.
    pub graph_and_wait: f64,
    /// The whole step as `execute` runs it.
    pub whole_step: f64,
    /// GPU time from before the metadata copy to the end of the graph (events).
    pub gpu_span: f64,
    /// Graph launches queued back to back, one wait at the end: per launch.
    pub graph_back_to_back: f64,
}

impl CudaRunner {
    /// Times the pieces of a decode-only step of `batch` ([`StepOverheads`]),
    /// `reps` times each. The batch's bucket must have its graph already
    /// (a step of that size has run).
    pub fn step_overheads(
        &mut self,
        batch: &ScheduledBatch<'_>,
        reps: usize,
    ) -> Result<StepOverheads, RunnerError> {
        let reps = reps.max(1);
        let b = self
            .bucket_for(batch.seqs.len())
            .filter(|_| self.use_graphs)
            .ok_or_else(|| RunnerError::Model("no decode graph for this batch".into()))?;
        let nsplit = self.decode_splits(b, None);
        if !self.graphs.contains_key(&(b, nsplit)) {
            return Err(RunnerError::Model(format!(
                "the decode graph of bucket {b} is not captured yet: run a step first"
            )));
        }
        let time = |f: &mut dyn FnMut() -> Result<(), RunnerError>| -> Result<f64, RunnerError> {
            let mut v = Vec::with_capacity(reps);
            for _ in 0..reps {
                let t = Instant::now();
                f()?;
                v.push(t.elapsed().as_secs_f64());
            }
            Ok(Data::new(v).median())
        };
        let pack = time(&mut || {
            pack_step(
                batch,
                &self.limits,
                Padding::Sequences(b),
                self.meta_host.as_mut_slice(),
            )
            .map(|_| ())
        })?;
        let graph = &self.graphs[&(b, nsplit)];
        let graph_and_wait = time(&mut || {
            graph.launch().map_err(|e| dev_err("graph launch", e))?;
            device::sync(&self.stream)
        })?;
        let ctx = self.stream.context();
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = ctx.new_event(flags).map_err(|e| dev_err("event", e))?;
        let end = ctx.new_event(flags).map_err(|e| dev_err("event", e))?;
        let mut spans = Vec::with_capacity(reps);
        for _ in 0..reps {
            let lay = pack_step(
                batch,
                &self.limits,
                Padding::Sequences(b),
                self.meta_host.as_mut_slice(),
            )?;
            start
                .record(&self.stream)
                .map_err(|e| dev_err("event record", e))?;
            self.copy_meta(&lay)?;
            graph.launch().map_err(|e| dev_err("graph launch", e))?;
            end.record(&self.stream)
                .map_err(|e| dev_err("event record", e))?;
            device::sync(&self.stream)?;
            let ms = start
                .elapsed_ms(&end)
                .map_err(|e| dev_err("event time", e))?;
            spans.push(f64::from(ms) * 1e-3);
        }
        let t = Instant::now();
        for _ in 0..reps {
            graph.launch().map_err(|e| dev_err("graph launch", e))?;
        }
        device::sync(&self.stream)?;
        let graph_back_to_back = t.elapsed().as_secs_f64() / reps as f64;
        let whole_step = time(&mut || self.run_step(batch).map(|_| ()))?;
        Ok(StepOverheads {
            pack,
            graph_and_wait,
            whole_step,
            gpu_span: Data::new(spans).median(),
            graph_back_to_back,
        })
    }
}
