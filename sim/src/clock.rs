//! Clocks for the event loop.
//!
//! Contract: `now()` is seconds since the run started. The loop calls
//! `seek(t)` before handling an event due at `t` (an arrival, or the start of
//! an engine's step), `wait_until(t)` is the plain "idle until `t`", and
//! `step_finished(modeled)` is called after each engine step. The virtual clock
//! jumps (to `t`, or forward by the modeled step time); the wall clock sleeps or
//! measures and ignores the model.
//!
//! Several engines on a virtual clock each have their own timeline: the loop
//! handles events in order of their start time, so after one engine's step has
//! advanced the clock to that step's end, `seek` may move it back to the start
//! of another engine's step that began earlier. The sequence of `seek` targets
//! never decreases. On the wall clock engines step one after another, so
//! `seek` into the past is a no-op there.

use std::time::{Duration, Instant};

pub trait Clock {
    fn now(&self) -> f64;
    /// Idle until `t` (no-op if `t` is in the past or not finite).
    fn wait_until(&mut self, t: f64);
    /// Called after each step with the runner's predicted duration, if any.
    fn step_finished(&mut self, modeled_seconds: Option<f64>);
    /// Go to the time `t` of the next event. Defaults to [`Clock::wait_until`];
    /// a virtual clock also goes backwards (see the module docs).
    fn seek(&mut self, t: f64) {
        self.wait_until(t);
    }
}

/// Discrete-event time: only moves when told to.
///
/// A step whose runner reports no modeled time (a real runner driven by a
/// virtual clock) takes zero time.
#[derive(Debug, Default, Clone)]
pub struct VirtualClock {
    pub(crate) now: f64,
}

impl VirtualClock {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> f64 {
        self.now
    }
    fn wait_until(&mut self, t: f64) {
        if t > self.now {
            self.now = t;
        }
    }
    fn step_finished(&mut self, modeled_seconds: Option<f64>) {
        if let Some(s) = modeled_seconds {
            if s > 0.0 {
                self.now += s;
            }
        }
    }
    fn seek(&mut self, t: f64) {
        self.now = t;
    }
}

/// Real time since construction.
#[derive(Debug, Clone)]
pub struct WallClock {
    pub(crate) start: std::time::Instant,
}

impl WallClock {
    /// Time zero is now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
        }
    }
}

impl Default for WallClock {
    fn default() -> Self {
        Self::new()
    }
}

/// Below this, `wait_until` spins instead of sleeping: a sleep overshoots by
/// tens of microseconds, which would skew open-loop arrival times.
const SPIN_BELOW_S: f64 = 200e-6;

impl Clock for WallClock {
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
    fn wait_until(&mut self, t: f64) {
        if !t.is_finite() {
            return;
        }
        loop {
            let left = t - self.now();
            if left <= 0.0 {
                return;
            }
            if left > SPIN_BELOW_S {
                std::thread::sleep(Duration::from_secs_f64(left - SPIN_BELOW_S));
            } else {
                std::hint::spin_loop();
            }
        }
    }
    fn step_finished(&mut self, _modeled_seconds: Option<f64>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_clock_jumps_forward_and_seeks_back() {
        let mut c = VirtualClock::new();
        c.wait_until(2.0);
        assert_eq!(c.now(), 2.0);
        c.wait_until(1.0);
        assert_eq!(c.now(), 2.0, "wait_until never goes back");
        c.step_finished(Some(0.5));
        assert_eq!(c.now(), 2.5);
        c.step_finished(None);
        assert_eq!(c.now(), 2.5);
        c.seek(2.25);
        assert_eq!(c.now(), 2.25);
    }

    #[test]
    fn wall_clock_waits_and_ignores_the_model() {
        let mut c = WallClock::new();
        c.wait_until(0.002);
        let t = c.now();
        assert!(t >= 0.002, "woke at {t}");
        c.step_finished(Some(100.0));
        assert!(c.now() < 50.0);
        c.seek(0.0);
        assert!(c.now() >= t, "the wall clock never goes back");
    }
}
