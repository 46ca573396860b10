//! `exp merge DIR... --out DIR` for the shards of one `exp plan --shard`:
//! the files an unsharded run writes.
//!
//! Contract: every `DIR` holds a plan shard's `shard.ron`; [`crate::shard`]
//! checks they are one complete set (same `N`, arguments and fingerprint,
//! each shard once, none missing). The merge reads the plan's inputs again
//! from the shards' arguments, so it runs where their paths lead to the
//! same files (relative paths from the same folder), and fails when the
//! inputs read now differ from the shards' (a workload, profile or price
//! file edited since, or another exp build). Then, with the shards' grid
//! points put back in grid order, it makes every output as the unsharded
//! run does ([`super::complete`]): the CSVs, curves, cb_sweep and figures
//! from the same deterministic runs, byte for byte; `date_utc` in every
//! `meta.ron` is the earliest shard's ([`crate::shard::earliest_date`]).

use super::error::PlanError;
use super::evaluate::{grid_points, unit_arrivals, PointResult};
use super::{complete, inputs, PlanArgs, PlanOutput};
use crate::shard::{self, first_difference, ShardKind};
use std::path::PathBuf;

/// Arguments of `exp merge`.
#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// The folders the shards wrote (exp plan: its --out; exp run: OUT/NAME), in any order.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Where the merged files go, as the sharded command's --out: exp plan's
    /// folder itself, exp run's OUT (the files land in OUT/NAME/).
    #[arg(long)]
    pub out: PathBuf,
    /// No progress bar and nothing on stdout.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `exp merge` on the shards of a plan.
pub fn run(args: &MergeArgs) -> Result<PlanOutput, PlanError> {
    let shards = shard::read_set::<PlanArgs, PointResult>(&args.dirs, ShardKind::Plan)?;
    let (first_dir, first) = &shards[0];
    let plan_args = PlanArgs {
        out: args.out.clone(),
        quiet: args.quiet,
        ..first.args.clone()
    };
    let mut inputs = inputs::read(&plan_args)?;
    let now = super::shard::fingerprint(&inputs)?;
    if now != first.fingerprint {
        return Err(PlanError::Merge(format!(
            "the inputs differ from those the shards in {} searched ({}): a file was edited \
             since, or this is another exp build; rerun the shards",
            first_dir.display(),
            first_difference(&first.fingerprint, &now)
        )));
    }
    let total = grid_points(&inputs).len();
    inputs.date_utc = shard::earliest_date(&shards);
    let points = shard::results_in_order(shards, total, |p| p.index)?;
    let unit = unit_arrivals(&inputs)?;
    complete(&inputs, &unit, points)
}
