//! Discrete-event simulation: virtual clock, `SimRunner` priced by a cost model.

use super::{Backend, BackendError, BackendInfo, LoadedModel, ResolvedCost};
use crate::script::{Script, ScriptWorkload};
use engine::{EngineConfig, EngineCore};
use sim::{RunRecords, SimRunner, VirtualClock};

pub struct SimBackend {
    cost: ResolvedCost,
    model_name: String,
    vocab: u32,
    /// KV blocks of every engine when set (`--mode both`: the real runner's
    /// capacity); otherwise the simulated GPU's memory decides.
    fixed_kv_blocks: Option<usize>,
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
}

impl Backend for SimBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            mode: "sim",
            cost_model: self.cost.description.clone(),
            gpu: Some(self.cost.gpu.clone()),
            model: self.model_name.clone(),
            runner: None,
        }
    }

    fn vocab(&self) -> u32 {
        self.vocab
    }

    fn as_parallel(&self) -> Option<&(dyn Backend + Sync)> {
        Some(self)
    }

    fn kv_blocks(&self, engine_cfg: &EngineConfig) -> Option<usize> {
        Some(
            engine_cfg
                .num_gpu_blocks
                .or(self.fixed_kv_blocks)
                .unwrap_or_else(|| self.cost.kv_blocks(engine_cfg)),
        )
    }

    fn run(&self, engine_cfg: &EngineConfig, script: &Script) -> Result<RunRecords, BackendError> {
        let blocks = self.kv_blocks(engine_cfg).unwrap_or(0);
        let runner = SimRunner::new(self.cost.model.clone(), blocks);
        let mut engines = vec![EngineCore::new(engine_cfg.clone(), runner)?];
        let mut workload = ScriptWorkload::new(script.clone());
        let mut clock = VirtualClock::new();
        Ok(sim::run(&mut engines, &mut clock, &mut workload)?)
    }
}
