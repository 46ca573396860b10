//! Building the CPU runner's tensors: from host weights (shapes checked up
//! front) or generated one tensor at a time from a seed, widened to f32; and
//! the host's memory, the CPU runner's default budget.

use super::ops::device_error;
use crate::model::{
    synthetic, tensor_specs, DeviceMemory, HostTensor, Qwen3Config, Qwen3Weights, WeightSource,
};
use crate::runner::RunnerError;
use candle_core::{Device, Tensor};
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::HashMap;

pub(super) fn widen(t: &HostTensor) -> Vec<f32> {
    t.data.par_iter().map(|v| v.to_f32()).collect()
}

pub(super) fn matrix(t: &HostTensor) -> Result<Tensor, RunnerError> {
    Tensor::from_vec(widen(t), t.shape.as_slice(), &Device::Cpu).map_err(device_error)
}

pub(super) fn fused(parts: &[&HostTensor]) -> Result<Tensor, RunnerError> {
    let parts = parts
        .iter()
        .map(|t| matrix(t))
        .collect::<Result<Vec<_>, _>>()?;
    Tensor::cat(&parts, 0).map_err(device_error)
}

/// The weights must have the shapes `config` implies.
fn check_shapes(config: &Qwen3Config, weights: &Qwen3Weights) -> Result<(), RunnerError> {
    let specs = tensor_specs(config);
    let found = weights.named_tensors();
    if specs.len() != found.len() {
        return Err(RunnerError::Model(format!(
            "weights have {} tensors, the config implies {} (layer count or LM head tying differ)",
            found.len(),
            specs.len()
        )));
    }
    for ((name, shape), (_, t)) in specs.iter().zip(&found) {
        if &t.shape != shape || t.data.len() != t.numel() {
            return Err(RunnerError::Model(format!(
                "tensor {name}: shape {:?}, config implies {shape:?}",
                t.shape
            )));
        }
    }
    Ok(())
}

/// The tensors a runner is built from, one at a time by Hugging Face name:
/// borrowed from host weights (whose shapes are checked up front), or
/// generated.
pub(super) struct Tensors<'a> {
    shapes: HashMap<String, Vec<usize>>,
    host: Option<HashMap<String, &'a HostTensor>>,
    seed: u64,
}

impl<'a> Tensors<'a> {
    pub(super) fn new(config: &Qwen3Config, source: WeightSource<'a>) -> Result<Self, RunnerError> {
        let shapes = tensor_specs(config).into_iter().collect();
        Ok(match source {
            WeightSource::Host(weights) => {
                check_shapes(config, weights)?;
                Self {
                    shapes,
                    host: Some(weights.named_tensors().into_iter().collect()),
                    seed: 0,
                }
            }
            WeightSource::Synthetic { seed } => Self {
                shapes,
                host: None,
                seed,
            },
        })
    }

    pub(super) fn get(&self, name: &str) -> Result<Cow<'a, HostTensor>, RunnerError> {
        let missing = || RunnerError::Model(format!("tensor {name}: not in the model"));
        match &self.host {
            Some(host) => host
                .get(name)
                .map(|t| Cow::Borrowed(*t))
                .ok_or_else(missing),
            None => {
                let shape = self.shapes.get(name).ok_or_else(missing)?;
                Ok(Cow::Owned(synthetic::tensor(self.seed, name, shape)))
            }
        }
    }
}

/// The host's memory: `MemTotal` and `MemAvailable` of `/proc/meminfo`
/// (`None` where that file is missing or unreadable).
pub fn host_memory() -> Option<DeviceMemory> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    Some(DeviceMemory {
        total_bytes: field("MemTotal:")?,
        free_bytes: field("MemAvailable:")?,
    })
}
