//! The simulator's integration tests, one module per topic. They build as one
//! test binary (not one per file), so a release test build links it once.

mod common;

mod cluster;
mod disagg;
mod event_loop;
mod loop_properties;
mod prompts;
mod public_traces;
mod roofline;
mod traces;
mod wall_clock;
mod workloads;
