//! Clocks for the event loop.
//!
//! Contract: `now()` is seconds since the run started. The loop calls
//! `wait_until(t)` when the engine is idle and the next arrival is at `t`, and
//! `step_finished(modeled)` after each engine step. The virtual clock jumps
//! (to `t`, or forward by the modeled step time); the wall clock sleeps /
//! measures and ignores the model.

pub trait Clock {
    fn now(&self) -> f64;
    /// Idle until `t` (no-op if `t` is in the past).
    fn wait_until(&mut self, t: f64);
    /// Called after each step with the runner's predicted duration, if any.
    fn step_finished(&mut self, modeled_seconds: Option<f64>);
}

/// Discrete-event time.
#[derive(Debug, Default, Clone)]
pub struct VirtualClock {
    pub(crate) now: f64,
}

/// Real time since construction.
#[derive(Debug, Clone)]
pub struct WallClock {
    pub(crate) start: std::time::Instant,
}
