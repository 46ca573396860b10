//! `exp plan --shard K/N`: one share of the grid, and the file it writes.
//!
//! Contract:
//! - The grid points are every (GPU, setting) pair in
//!   [`super::evaluate::grid_points`] order; shard `K` of `N` takes the
//!   points whose position `i` has `i mod N = K - 1` (round robin, so each
//!   shard gets some of every GPU). `K` counts from 1; `N` may not exceed
//!   the number of points (a shard with nothing to do is a mistake).
//! - A shard searches its points (single-engine search, and fleet sizing
//!   when a fleet is sized) and writes only `DIR/shard.ron`
//!   ([`ShardFile`]): the plan's arguments (without `--out` and `--shard`),
//!   a [`fingerprint`] of the inputs they resolved to, and its points'
//!   results. The best settings, curves, cb_sweep, CSVs and figures are
//!   made by `exp merge` ([`super::merge`]) from all shards together, exactly
//!   as an unsharded run makes them.
//! - Bad specs (`0/N`, `K > N`, `N = 0`, not `K/N`) fail saying what to give.

use super::error::PlanError;
use super::evaluate::PointResult;
use super::inputs::PlanInputs;
use super::workload::PlanWorkload;
use super::PlanArgs;
use crate::output::git_commit;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The file a shard writes into its `--out` folder.
pub const SHARD_FILE: &str = "shard.ron";
/// Version of [`ShardFile`]'s layout.
pub const SHARD_FORMAT: u32 = 1;

/// Shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSpec {
    pub index: usize,
    pub count: usize,
}

impl std::fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl ShardSpec {
    /// Parses `K/N`.
    pub fn parse(text: &str) -> Result<Self, PlanError> {
        let bad = |message: String| PlanError::BadShard {
            spec: text.to_string(),
            message,
        };
        let (k, n) = text
            .split_once('/')
            .ok_or_else(|| bad("expected K/N, e.g. 2/4 for the second of four shares".into()))?;
        let parse = |part: &str, what: &str| {
            part.trim().parse::<usize>().map_err(|_| {
                bad(format!(
                    "{what} `{}` is not a whole number; expected K/N, e.g. 2/4",
                    part.trim()
                ))
            })
        };
        let (index, count) = (parse(k, "K")?, parse(n, "N")?);
        if count == 0 {
            return Err(bad("N = 0: give the number of shards, at least 1".into()));
        }
        if index == 0 {
            return Err(bad(format!(
                "shards count from 1: give 1/{count} to {count}/{count} (a Kubernetes \
                 JOB_COMPLETION_INDEX starts at 0: pass $((JOB_COMPLETION_INDEX+1))/{count})"
            )));
        }
        if index > count {
            return Err(bad(format!(
                "K = {index} is more than N = {count}: give 1/{count} to {count}/{count}"
            )));
        }
        Ok(Self { index, count })
    }

    /// This shard's grid points, of `total`.
    pub fn points(&self, total: usize) -> Result<Vec<usize>, PlanError> {
        if self.count > total {
            return Err(PlanError::BadShard {
                spec: self.to_string(),
                message: format!(
                    "{} shards for a grid of {total} (GPU, setting) points would leave some \
                     shards with nothing to do: use at most {total}",
                    self.count
                ),
            });
        }
        Ok((self.index - 1..total).step_by(self.count).collect())
    }
}

/// What a shard writes ([`SHARD_FILE`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardFile {
    pub format: u32,
    pub shard: ShardSpec,
    /// The plan's arguments, `--out` emptied and `--shard` left out: the same
    /// for every shard of one plan.
    pub args: PlanArgs,
    /// [`fingerprint`] of the inputs the arguments resolved to.
    pub fingerprint: String,
    /// Points in the whole grid.
    pub grid_points: usize,
    /// This shard's points, in grid order.
    pub points: Vec<PointResult>,
}

/// `args` as every shard of one plan has them.
pub fn shared_args(args: &PlanArgs) -> PlanArgs {
    PlanArgs {
        out: PathBuf::new(),
        shard: None,
        quiet: false,
        ..args.clone()
    }
}

fn workload_digest(workload: &PlanWorkload) -> String {
    let mut h = Sha256::new();
    match workload {
        PlanWorkload::Synthetic { shape, .. } => h.update(format!("{shape:?}")),
        PlanWorkload::Trace { entries, .. } => {
            for e in entries {
                h.update(format!("{e:?}\n"));
            }
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Serialize)]
struct Fingerprint<'a> {
    commit: String,
    model: &'a str,
    engine: &'a engine::EngineConfig,
    grid: (&'a [usize], &'a [usize]),
    method: &'a super::search::SearchMethod,
    slo: &'a super::slo::Slo,
    workload: String,
    workload_sha256: String,
    /// Each GPU and what prices its steps.
    gpus: Vec<(&'a sim::GpuSpec, &'a str)>,
    cb_settings: &'a crate::settings::Settings,
    /// Rate, router, largest fleet, prices.
    fleet: Option<(f64, &'static str, usize, &'a [super::prices::GpuPrice])>,
}

/// The resolved inputs, one item a line (RON), and the code's commit:
/// shards with equal fingerprints searched the same plan.
pub fn fingerprint(inputs: &PlanInputs) -> Result<String, PlanError> {
    let f = Fingerprint {
        commit: git_commit(),
        model: &inputs.model_name,
        engine: &inputs.engine,
        grid: (&inputs.batched_tokens, &inputs.num_seqs),
        method: &inputs.method,
        slo: &inputs.slo,
        workload: inputs.workload.describe(),
        workload_sha256: workload_digest(&inputs.workload),
        gpus: inputs
            .targets
            .iter()
            .map(|t| (&t.cost().gpu, t.cost().description.as_str()))
            .collect(),
        cb_settings: &inputs.cb_settings,
        fleet: inputs.fleet.as_ref().map(|f| {
            (
                f.goal.rate,
                f.goal.router.name(),
                f.goal.max_replicas,
                f.prices.as_slice(),
            )
        }),
    };
    ron::ser::to_string_pretty(&f, ron::ser::PrettyConfig::default())
        .map_err(|e| PlanError::Meta(e.to_string()))
}

/// The first line where two fingerprints differ, for messages.
pub fn first_difference(a: &str, b: &str) -> String {
    let (mut la, mut lb) = (a.lines(), b.lines());
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (x, y) => {
                return format!(
                    "`{}` against `{}`",
                    x.unwrap_or("(end)").trim(),
                    y.unwrap_or("(end)").trim()
                )
            }
        }
    }
}

/// Writes `file` into `dir` as [`SHARD_FILE`]; returns its path.
pub fn write(dir: &Path, file: &ShardFile) -> Result<PathBuf, PlanError> {
    std::fs::create_dir_all(dir).map_err(|error| PlanError::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let text = ron::ser::to_string_pretty(file, ron::ser::PrettyConfig::default())
        .map_err(|e| PlanError::Meta(e.to_string()))?;
    let path = dir.join(SHARD_FILE);
    std::fs::write(&path, text).map_err(|error| PlanError::Io {
        path: path.clone(),
        error,
    })?;
    Ok(path)
}

/// Reads `dir`'s [`SHARD_FILE`].
pub fn read(dir: &Path) -> Result<ShardFile, PlanError> {
    let path = dir.join(SHARD_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        PlanError::Merge(format!(
            "{}: {e}; give the --out folders of `exp plan --shard K/N` runs",
            path.display()
        ))
    })?;
    let file: ShardFile = ron::from_str(&text).map_err(|e| {
        PlanError::Merge(format!(
            "{}:{}:{}: not a shard file: {}",
            path.display(),
            e.position.line,
            e.position.col,
            e.code
        ))
    })?;
    if file.format != SHARD_FORMAT {
        return Err(PlanError::Merge(format!(
            "{}: shard format {} but this exp reads {SHARD_FORMAT}: run the shards and the \
             merge with the same exp",
            path.display(),
            file.format
        )));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_split_the_grid_round_robin() {
        let s = ShardSpec::parse("2/3").unwrap();
        assert_eq!((s.index, s.count), (2, 3));
        assert_eq!(s.points(8).unwrap(), vec![1, 4, 7]);
        let mut all: Vec<usize> = (1..=3)
            .flat_map(|k| ShardSpec { index: k, count: 3 }.points(8).unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
        assert_eq!(
            ShardSpec::parse("1/1").unwrap().points(3).unwrap(),
            [0, 1, 2]
        );
    }

    #[test]
    fn bad_specs_say_what_to_give() {
        for (text, needle) in [
            ("0/4", "count from 1"),
            ("5/4", "more than N"),
            ("1/0", "N = 0"),
            ("3", "expected K/N"),
            ("a/4", "not a whole number"),
            ("-1/4", "not a whole number"),
        ] {
            let msg = ShardSpec::parse(text).unwrap_err().to_string();
            assert!(
                msg.contains(needle) && msg.contains("--shard"),
                "{text}: {msg}"
            );
        }
        let msg = ShardSpec::parse("3/9")
            .unwrap()
            .points(4)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("at most 4"), "{msg}");
    }

    #[test]
    fn first_difference_names_both_lines() {
        assert_eq!(first_difference("a\nb\n", "a\nc\n"), "`b` against `c`");
        assert_eq!(first_difference("a", "a\nx"), "`(end)` against `x`");
    }
}
