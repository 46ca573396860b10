//! `exp merge DIR... --out DIR`: joins the shards of one `exp plan --shard`
//! into the files an unsharded run writes.
//!
//! Contract: every `DIR` holds a shard's `shard.ron` ([`super::shard`]).
//! The merge fails, saying what to fix, when a folder holds none, when the
//! shards disagree on `N`, their arguments or their inputs' fingerprint
//! (naming the two folders and the first difference), when a shard is
//! given twice or one is missing (naming which to run), or when the inputs
//! read again now differ from the shards' (a workload, profile or price
//! file edited since, or another exp build). The merge reads the plan's
//! inputs again from the shards' arguments, so it runs where their paths
//! lead to the same files (relative paths from the same folder). Then, with
//! the shards' grid points put back in grid order, it makes every output as
//! the unsharded run does ([`super::complete`]): `plan.csv` and the other
//! CSVs byte for byte the same, the curves, cb_sweep and the figures from
//! the same deterministic runs; only `date_utc` in the `meta.ron` files
//! says when the merge ran.

use super::error::PlanError;
use super::evaluate::{grid_points, unit_arrivals, PointResult};
use super::shard::{self, first_difference, ShardFile};
use super::{complete, inputs, PlanArgs, PlanOutput};
use std::path::PathBuf;

/// Arguments of `exp merge`.
#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// The shards' --out folders, in any order.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Where the merged plan is written.
    #[arg(long)]
    pub out: PathBuf,
    /// No progress bar and nothing on stdout.
    #[arg(long)]
    pub quiet: bool,
}

fn fail<T>(message: String) -> Result<T, PlanError> {
    Err(PlanError::Merge(message))
}

/// Reads and checks the shards against each other; returns them by index.
fn read_shards(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, ShardFile)>, PlanError> {
    let mut shards: Vec<(PathBuf, ShardFile)> = Vec::new();
    for dir in dirs {
        let file = shard::read(dir)?;
        if let Some((first_dir, first)) = shards.first() {
            let (a, b) = (first_dir.display(), dir.display());
            if file.shard.count != first.shard.count {
                return fail(format!(
                    "{a} is shard {} but {b} is shard {}: the shards of one plan have the same N",
                    first.shard, file.shard
                ));
            }
            if file.args != first.args {
                return fail(format!(
                    "{a} and {b} were run with different arguments ({:?} against {:?}): merge \
                     the shards of one plan",
                    first.args, file.args
                ));
            }
            if file.fingerprint != first.fingerprint {
                return fail(format!(
                    "{a} and {b} searched different inputs ({}): rerun the shards with the \
                     same inputs and exp",
                    first_difference(&first.fingerprint, &file.fingerprint)
                ));
            }
        }
        if let Some((other, _)) = shards.iter().find(|(_, s)| s.shard == file.shard) {
            return fail(format!(
                "shard {} is given twice ({} and {}): give each shard's folder once",
                file.shard,
                other.display(),
                dir.display()
            ));
        }
        shards.push((dir.clone(), file));
    }
    let count = shards.first().map_or(0, |(_, s)| s.shard.count);
    let missing: Vec<String> = (1..=count)
        .filter(|k| shards.iter().all(|(_, s)| s.shard.index != *k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return fail(format!(
            "shard(s) {} missing: run `exp plan ... --shard K/N` for each and pass its --out folder",
            missing.join(", ")
        ));
    }
    shards.sort_by_key(|(_, s)| s.shard.index);
    Ok(shards)
}

/// Runs `exp merge`.
pub fn run(args: &MergeArgs) -> Result<PlanOutput, PlanError> {
    let shards = read_shards(&args.dirs)?;
    let Some((first_dir, first)) = shards.first() else {
        return fail("no shard folders given".into());
    };
    let plan_args = PlanArgs {
        out: args.out.clone(),
        quiet: args.quiet,
        ..first.args.clone()
    };
    let inputs = inputs::read(&plan_args)?;
    let now = shard::fingerprint(&inputs)?;
    if now != first.fingerprint {
        return fail(format!(
            "the inputs differ from those the shards in {} searched ({}): a file was edited \
             since, or this is another exp build; rerun the shards",
            first_dir.display(),
            first_difference(&first.fingerprint, &now)
        ));
    }
    let total = grid_points(&inputs).len();
    let mut points: Vec<PointResult> = shards
        .iter()
        .flat_map(|(_, s)| s.points.iter().cloned())
        .collect();
    points.sort_by_key(|p| p.index);
    let complete_grid = points.len() == total
        && first.grid_points == total
        && points.iter().enumerate().all(|(i, p)| p.index == i);
    if !complete_grid {
        return fail(format!(
            "the shards hold {} results for a grid of {total} points: a shard file was \
             edited or cut short; rerun its shard",
            points.len()
        ));
    }
    let unit = unit_arrivals(&inputs)?;
    complete(&inputs, &unit, points)
}
