//! The experiments' and `exp`'s integration tests, one module per topic.
//! They build as one test binary (not one per file), so a release test build links it once.

mod common;

mod bands;
mod both_modes;
mod calibrate_operators;
mod cli;
mod endpoint;
mod generate_and_tokenizer;
mod input_checks;
mod pd_sweep;
mod physics;
mod plan;
mod plan_fleet;
mod plan_parts;
mod plan_shard;
mod plan_steady;
mod real_mode;
mod refit_endpoint;
mod router_sweep;
mod run_output;
mod run_shard;
mod serve_process;
mod serve_real;
mod shipped_profiles;
mod sim_server;
mod subtitles;
mod trace_replay;
mod transfer_check;
