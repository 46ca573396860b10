//! Discrete-event simulation: virtual clock, `SimRunner` priced by a cost model.
//!
//! Contract: [`SimBackend`] is the one sim backend of the crate: `exp run
//! --mode sim|both` runs scripts on it, and `exp plan` runs its settings
//! search ([`SimBackend::run_arrivals`]) and its cb_sweep on it. KV capacity
//! is an explicit `num_gpu_blocks`, else the fixed capacity given at
//! construction (`--mode both`: the real runner's), else what the simulated
//! GPU's memory holds ([`ResolvedCost::kv_blocks`]). A fleet condition
//! ([`Backend::run_fleet`]) runs that many engines of the same settings, each
//! with that capacity, through `sim::run_routed`; `exp plan`'s fleet sizing
//! runs a fixed list of arrivals that way ([`SimBackend::run_arrivals_fleet`]);
//! a disaggregated one ([`Backend::run_disagg`]) a prefill and a decode pool of such engines
//! through `sim::cluster::run_disaggregated`, the link carrying the
//! priced model's K/V (`ModelShape::kv_bytes_per_token`).

use super::step_error::StepErrorCost;
use super::{Backend, BackendError, BackendInfo, LoadedModel, ResolvedCost};
use crate::fleet::{tag_with_placement, tag_with_replica, DisaggSpec, FleetSpec};
use crate::script::{Script, ScriptWorkload};
use engine::{EngineConfig, EngineCore};
use sim::cluster::{run_disaggregated, DisaggConfig, DisaggFleet};
use sim::{Arrival, RunRecords, SimRunner, VirtualClock, Workload};
use std::sync::Arc;

#[derive(Clone)]
pub struct SimBackend {
    cost: ResolvedCost,
    model_name: String,
    vocab: u32,
    /// KV blocks of every engine when set (`--mode both`: the real runner's
    /// capacity); otherwise the simulated GPU's memory decides.
    fixed_kv_blocks: Option<usize>,
}

/// Hands out a fixed list of arrivals (open loop).
struct Arrivals(Vec<Arrival>);

impl Workload for Arrivals {
    fn initial(&mut self) -> Vec<Arrival> {
        std::mem::take(&mut self.0)
    }
    fn on_finish(&mut self, _id: u64, _now: f64) -> Vec<Arrival> {
        Vec::new()
    }
}

impl SimBackend {
    pub fn new(cost: ResolvedCost, model: &LoadedModel, fixed_kv_blocks: Option<usize>) -> Self {
        Self {
            cost,
            model_name: model.name(),
            vocab: model.prompt_vocab(),
            fixed_kv_blocks,
        }
    }

    /// This backend with every step off by `share` of its cost model's
    /// held-out error ([`Backend::with_step_error`]); `None` without one.
    pub fn off_by(&self, share: f64) -> Result<Option<SimBackend>, BackendError> {
        let Some(error) = &self.cost.expected_error else {
            return Ok(None);
        };
        let mut cost = self.cost.clone();
        cost.model = Arc::new(StepErrorCost::new(self.cost.model.clone(), error, share)?);
        Ok(Some(Self {
            cost,
            ..self.clone()
        }))
    }

    /// The cost model pricing the steps, with its GPU and description.
    pub fn cost(&self) -> &ResolvedCost {
        &self.cost
    }

    /// KV-cache blocks (null block included) an engine with `engine_cfg` gets.
    pub fn capacity_blocks(&self, engine_cfg: &EngineConfig) -> usize {
        engine_cfg
            .num_gpu_blocks
            .or(self.fixed_kv_blocks)
            .unwrap_or_else(|| self.cost.kv_blocks(engine_cfg))
    }

    fn simulate(
        &self,
        engine_cfg: &EngineConfig,
        workload: &mut dyn Workload,
        options: &sim::RunOptions,
    ) -> Result<RunRecords, BackendError> {
        let runner = SimRunner::new(self.cost.model.clone(), self.capacity_blocks(engine_cfg));
        let mut engines = vec![EngineCore::new(engine_cfg.clone(), runner)?];
        Ok(sim::run_with(
            &mut engines,
            &mut VirtualClock::new(),
            workload,
            options,
        )?)
    }

    /// `n` engines of `engine_cfg`, each with its own KV cache.
    fn replicas(
        &self,
        engine_cfg: &EngineConfig,
        n: usize,
    ) -> Result<Vec<EngineCore<SimRunner>>, BackendError> {
        (0..n)
            .map(|_| {
                let runner =
                    SimRunner::new(self.cost.model.clone(), self.capacity_blocks(engine_cfg));
                Ok(EngineCore::new(engine_cfg.clone(), runner)?)
            })
            .collect()
    }

    /// Runs a fixed list of arrivals (open loop) without recording step
    /// shapes: the many short runs of a rate search need only the requests.
    pub fn run_arrivals(
        &self,
        engine_cfg: &EngineConfig,
        arrivals: Vec<Arrival>,
    ) -> Result<RunRecords, BackendError> {
        let options = sim::RunOptions {
            record_step_shapes: false,
        };
        self.simulate(engine_cfg, &mut Arrivals(arrivals), &options)
    }

    /// [`SimBackend::run_arrivals`] on a fleet: `fleet.replicas` engines of
    /// `engine_cfg` behind `fleet.router`. Request tags are left as they are.
    pub fn run_arrivals_fleet(
        &self,
        engine_cfg: &EngineConfig,
        fleet: &FleetSpec,
        arrivals: Vec<Arrival>,
    ) -> Result<RunRecords, BackendError> {
        let options = sim::RunOptions {
            record_step_shapes: false,
        };
        Ok(self
            .simulate_fleet(engine_cfg, fleet, &mut Arrivals(arrivals), &options)?
            .records)
    }

    fn simulate_fleet(
        &self,
        engine_cfg: &EngineConfig,
        fleet: &FleetSpec,
        workload: &mut dyn Workload,
        options: &sim::RunOptions,
    ) -> Result<sim::RoutedRun, BackendError> {
        let mut router = fleet.router.build()?;
        // Every replica gets its own copy of the engine and its own KV cache.
        let mut engines = self.replicas(engine_cfg, fleet.replicas)?;
        Ok(sim::run_routed(
            &mut engines,
            &mut VirtualClock::new(),
            workload,
            router.as_mut(),
            options,
        )?)
    }
}

impl Backend for SimBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            mode: "sim",
            cost_model: self.cost.description.clone(),
            gpu: Some(self.cost.gpu.clone()),
            model: self.model_name.clone(),
            runner: None,
            cost_label: self.cost.short_label(),
            endpoint: None,
            expected_error: self.cost.expected_error.clone(),
        }
    }

    fn vocab(&self) -> u32 {
        self.vocab
    }

    fn as_parallel(&self) -> Option<&(dyn Backend + Sync)> {
        Some(self)
    }

    fn kv_blocks(&self, engine_cfg: &EngineConfig) -> Option<usize> {
        Some(self.capacity_blocks(engine_cfg))
    }

    fn with_step_error(&self, share: f64) -> Result<Option<Box<dyn Backend>>, BackendError> {
        Ok(self.off_by(share)?.map(|b| Box::new(b) as Box<dyn Backend>))
    }

    fn run(&self, engine_cfg: &EngineConfig, script: &Script) -> Result<RunRecords, BackendError> {
        let mut workload = ScriptWorkload::new(script.clone());
        self.simulate(engine_cfg, &mut workload, &sim::RunOptions::default())
    }

    fn run_fleet(
        &self,
        engine_cfg: &EngineConfig,
        fleet: &FleetSpec,
        script: &Script,
    ) -> Result<RunRecords, BackendError> {
        let routed = self.simulate_fleet(
            engine_cfg,
            fleet,
            &mut ScriptWorkload::new(script.clone()),
            &sim::RunOptions::default(),
        )?;
        let mut records = routed.records;
        for (request, &replica) in records.requests.iter_mut().zip(&routed.replica_of) {
            request.tag = tag_with_replica(&request.tag, replica);
        }
        Ok(records)
    }

    fn run_disagg(
        &self,
        engine_cfg: &EngineConfig,
        disagg: &DisaggSpec,
        script: &Script,
    ) -> Result<RunRecords, BackendError> {
        let mut prefill_router = disagg.prefill_router.build()?;
        let mut decode_router = disagg.decode_router.build()?;
        let mut prefill = self.replicas(engine_cfg, disagg.prefill())?;
        let mut decode = self.replicas(engine_cfg, disagg.decode())?;
        let fleet = DisaggFleet {
            prefill: &mut prefill,
            decode: &mut decode,
            prefill_router: prefill_router.as_mut(),
            decode_router: decode_router.as_mut(),
        };
        let config = DisaggConfig::for_model(disagg.link, &self.cost.shape);
        let run = run_disaggregated(
            fleet,
            &mut VirtualClock::new(),
            &mut ScriptWorkload::new(script.clone()),
            &config,
            &sim::RunOptions::default(),
        )?;
        let mut records = run.records;
        for (request, placement) in records.requests.iter_mut().zip(&run.placement) {
            request.tag = tag_with_placement(&request.tag, placement);
        }
        Ok(records)
    }
}
