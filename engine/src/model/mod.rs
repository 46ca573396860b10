//! Qwen3: configuration, presets, weights and memory planning, shared by
//! every runner.
//!
//! Contract: weights live on the host as bf16 [`HostTensor`]s with Hugging Face
//! names and shapes (`[out_features, in_features]` for linear layers). They come
//! from `*.safetensors` files or from a seed; synthetic weights are a
//! counter-based function of (seed, tensor, index) that the host and the CUDA
//! runner's kernel compute to the same bits, so every backend gets identical
//! values and their outputs can be compared. [`ModelSpec`] resolves what
//! `--model` names; [`memory::plan`] says whether a model fits a device.

pub mod config;
pub mod memory;
pub mod presets;
pub mod safetensors_loader;
pub mod spec;
pub mod synthetic;
pub mod weights;

pub use config::{ModelError, Qwen3Config};
pub use memory::{DeviceMemory, KvSettings, MemoryError, MemoryPlan, Precision, Shortfall};
pub use presets::PRESETS;
pub use spec::{ModelSpec, ModelWeights, WeightsOrigin};
pub use weights::{tensor_specs, HostTensor, LayerWeights, Qwen3Weights, WeightSource};
