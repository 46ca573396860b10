//! servetwin's simulator and run harness.
//!
//! One event loop ([`event_loop::run`]) drives `EngineCore`s through a
//! workload on a [`clock::Clock`]: the virtual clock makes it a discrete-event
//! simulation (time jumps to the next arrival or to the end of the step the
//! cost model predicts), the wall clock makes it a real run. Both produce the
//! same [`records::RunRecords`].
//! [`cluster`] routes requests over a fleet of replicas ([`run_routed`]).

pub mod clock;
pub mod cluster;
pub mod cost;
pub mod event_loop;
pub mod gpu;
pub mod records;
pub mod sim_runner;
pub mod workload;

pub use clock::{Clock, VirtualClock, WallClock};
pub use cost::{CostModel, CostTerms, GpuHistory, ModelShape, RooflineEfficiencies, RooflineModel};
pub use event_loop::{run, run_routed, run_with, RoutedRun, RunError, RunOptions};
pub use gpu::GpuSpec;
pub use records::{RequestRecord, RunRecords, StepRecord};
pub use sim_runner::SimRunner;
pub use workload::{Arrival, Workload, WorkloadError};
