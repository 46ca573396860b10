//! Open loop: `requests` requests arriving at a Poisson or a fixed rate,
//! whatever the engine does.
//!
//! Contract: all arrivals are known at the start. With a Poisson process the
//! gaps are exponential with mean `1 / rate` and the first request arrives one
//! gap after `start_s`; with a fixed rate request `i` arrives at
//! `start_s + i / rate`. Arrival times come from their own RNG stream, so
//! changing prompt settings does not move them. Request `i` has id
//! `first_id + i`, goes to engine `i % num_engines`, and is tagged `open`
//! (plus the maker's group/tenant tag).

use super::closed_loop::check_time;
use super::contents::RequestMaker;
use super::{Arrival, Workload, WorkloadError};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArrivalProcess {
    Poisson { rate_per_s: f64 },
    Fixed { rate_per_s: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct OpenLoopConfig {
    pub process: ArrivalProcess,
    pub requests: usize,
    /// Seeds the arrival times (the prompts have the maker's seed).
    pub seed: u64,
    pub num_engines: usize,
    pub first_id: u64,
    pub start_s: f64,
}

impl OpenLoopConfig {
    pub fn new(process: ArrivalProcess, requests: usize, seed: u64) -> Self {
        Self {
            process,
            requests,
            seed,
            num_engines: 1,
            first_id: 0,
            start_s: 0.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpenLoop {
    arrivals: Vec<Arrival>,
}

impl OpenLoop {
    pub fn new(config: OpenLoopConfig, mut maker: RequestMaker) -> Result<Self, WorkloadError> {
        let rate = match config.process {
            ArrivalProcess::Poisson { rate_per_s } | ArrivalProcess::Fixed { rate_per_s } => {
                rate_per_s
            }
        };
        if !(rate.is_finite() && rate > 0.0) {
            return Err(WorkloadError::invalid(
                "rate_per_s",
                rate,
                "use a positive, finite rate",
            ));
        }
        if config.num_engines == 0 {
            return Err(WorkloadError::invalid(
                "num_engines",
                0,
                "use at least one engine",
            ));
        }
        check_time("start_s", config.start_s)?;
        let mut rng = StdRng::seed_from_u64(config.seed);
        let gaps = Exp::new(rate).map_err(|e| {
            WorkloadError::invalid("rate_per_s", rate, format!("exponential gaps: {e}"))
        })?;
        let mut t = config.start_s;
        let mut arrivals = Vec::with_capacity(config.requests);
        for i in 0..config.requests {
            let at = match config.process {
                ArrivalProcess::Poisson { .. } => {
                    t += gaps.sample(&mut rng);
                    t
                }
                ArrivalProcess::Fixed { .. } => config.start_s + i as f64 / rate,
            };
            let (request, group_tag) = maker.make(i, config.first_id + i as u64, at);
            let tag = if group_tag.is_empty() {
                "open".to_string()
            } else {
                format!("open/{group_tag}")
            };
            arrivals.push(Arrival {
                request,
                engine: i % config.num_engines,
                tag,
            });
        }
        Ok(Self { arrivals })
    }

    /// The arrivals not yet handed out.
    pub fn arrivals(&self) -> &[Arrival] {
        &self.arrivals
    }
}

impl Workload for OpenLoop {
    fn initial(&mut self) -> Vec<Arrival> {
        std::mem::take(&mut self.arrivals)
    }
    fn on_finish(&mut self, _id: u64, _now: f64) -> Vec<Arrival> {
        Vec::new()
    }
}
