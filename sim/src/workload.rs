//! Workloads: where requests come from and when.
//!
//! Contract: a workload is seeded and deterministic. The loop asks for the
//! initial arrivals, then reports each finished request so closed-loop
//! workloads can send the client's next one. Arrival times are absolute
//! seconds on the run's clock; an arrival in the past (during a step) joins
//! before the next step.

use engine::Request;

#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// `request.arrival_time` is the arrival time in seconds.
    pub request: Request,
    /// Which engine (replica) gets it.
    pub engine: usize,
    /// Copied into the request's record.
    pub tag: String,
}

pub trait Workload {
    /// Arrivals known before the run starts (open loop: all of them).
    fn initial(&mut self) -> Vec<Arrival>;
    /// A request finished at `now`; closed-loop workloads return the next one(s).
    fn on_finish(&mut self, id: u64, now: f64) -> Vec<Arrival>;
}
