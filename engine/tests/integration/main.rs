//! The engine's integration tests, one module per topic. They build as one
//! test binary (not one per file), so a release test build links it once.

mod common;
mod cpu_runner_support;

mod config_only_model;
mod config_validation;
mod cpu_runner;
mod cpu_runner_engine;
mod cpu_runner_hf_fixture;
mod cpu_runner_reference;
mod cuda_piecewise;
mod cuda_synthetic;
mod end_to_end;
mod invariants;
mod model_loading;
mod model_memory;
mod model_presets;
mod prompt_hashes;
mod remote_prefill;
mod requests;
mod runner_impls;
mod scheduler_rules;
mod vocabulary;
