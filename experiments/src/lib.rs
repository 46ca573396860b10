//! servetwin's experiments and the `exp` command-line tool.
//!
//! Layout: [`catalogue`] holds the five experiments of EXPERIMENTS.md, each a
//! plan of conditions (engine settings + seeded [`script`]) and a summary of
//! their records; [`backend`] runs a condition (sim now; real mode plugs in
//! behind the same trait); [`driver`] runs all conditions in parallel and
//! writes `summary.csv`, `requests.csv`, `steps.csv`, `meta.ron` and the
//! [`charts`]; [`settings`] and [`config_file`] turn `--set key=value` and
//! RON files into validated settings; [`cli`] is the `exp` front end.

pub mod backend;
pub mod catalogue;
pub mod charts;
pub mod cli;
pub mod compare;
pub mod config_file;
pub mod driver;
pub mod output;
pub mod plan;
pub mod script;
pub mod settings;
pub mod stats;
pub mod table;

pub use cli::run_cli;
