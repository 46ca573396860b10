//! servetwin's experiments and the `exp` command-line tool.
//!
//! Layout: [`catalogue`] holds the five experiments of docs/experiments.md and the
//! validation workload `poisson_mix`, each a plan of conditions (engine
//! settings + seeded [`script`]) and a summary of their records; [`backend`]
//! runs a condition (sim: virtual clock and a cost model; real: wall clock
//! and a CPU or CUDA runner); [`driver`] runs the conditions (in parallel when
//! simulated) and writes `summary.csv`, `requests.csv`, `steps.csv`,
//! `meta.ron` and the [`charts`] (subtitled by [`caption`]); [`settings`] and [`config_file`] turn
//! `--set key=value` and RON files into validated settings; [`cli`] is the
//! `exp` front end ([`run_cmd`]: `exp run`, whose folder [`run_dir`] stages
//! and replaces whole, with [`seeds`] for `--seeds N` and [`progress`] for
//! its bar), with [`calibrate`] (`exp calibrate`, and [`calibrate_endpoint`] for a
//! server) and [`validate`]
//! (`exp validate`); [`memory`] estimates the host memory a run needs.

pub mod backend;
pub mod bands;
pub mod calibrate;
pub mod calibrate_endpoint;
pub mod calibrate_operators;
pub mod caption;
pub mod catalogue;
pub mod charts;
pub mod cli;
pub mod cli_args;
pub mod compare;
pub mod config_file;
pub mod driver;
pub mod fleet;
pub mod generate;
pub mod memory;
pub mod output;
pub mod plan;
pub mod progress;
pub mod run_cmd;
pub mod run_dir;
pub mod run_shard;
pub mod script;
pub mod seeds;
pub mod serve_cmd;
pub mod settings;
pub mod shard;
pub mod stats;
pub mod table;
pub mod transfer_check;
pub mod validate;

pub use cli::run_cli;
