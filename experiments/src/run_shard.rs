//! `exp run NAME --mode sim --shard K/N`, and `exp merge` of its shards.
//!
//! Contract:
//! - The work units are the experiment's conditions in plan order, split
//!   as [`crate::shard`] says (condition `i` goes to shard `i mod N + 1`).
//!   A shard runs only its conditions (memory checked for those) and
//!   writes only `OUT/NAME/shard.ron` ([`RunShard`]: the run's arguments
//!   without `--out` and `--shard`, a [`fingerprint`] of what they resolved
//!   to, the date the shard started and each of its conditions' full
//!   records, numbers exactly as computed), replacing `OUT/NAME/` as a run
//!   does ([`crate::run_dir`]).
//! - Sharding splits simulated runs only: `--mode real|both`, `--endpoint`
//!   and `--seeds N > 1` are refused, saying what to run instead.
//! - [`merge`] checks the shards are one complete set, resolves the run's
//!   arguments again (so it runs where their paths lead to the same files),
//!   refuses inputs that differ now from the shards' (naming the first
//!   difference), and summarizes and writes the conditions' records through
//!   the driver exactly as an unsharded run does ([`driver::write_evaluated`]):
//!   `summary.csv`, `requests.csv`, `steps.csv`, `meta.ron` and the figures,
//!   byte for byte, with `date_utc` the earliest shard's.

use crate::backend::{Backend, Mode};
use crate::catalogue::Condition;
use crate::driver::{self, prepare, run_conditions, RunOutput};
use crate::output::git_commit;
use crate::plan::merge::MergeArgs;
use crate::run_cmd::{mode_of, print_run, resolve, RunArgs};
use crate::run_dir::StagedRun;
use crate::settings::Settings;
use crate::shard::{self, first_difference, ShardFile, ShardKind, ShardSpec, SHARD_FORMAT};
use crate::{memory, progress};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sim::RunRecords;
use std::path::PathBuf;

/// One condition's records, as a shard keeps them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionRecords {
    /// Position in the experiment's plan.
    pub index: usize,
    pub label: String,
    pub records: RunRecords,
}

/// What a run's shard writes ([`shard::SHARD_FILE`]).
pub type RunShard = ShardFile<RunArgs, ConditionRecords>;

/// `args` as every shard of one run has them.
fn shared_args(args: &RunArgs) -> RunArgs {
    RunArgs {
        out: PathBuf::new(),
        shard: None,
        quiet: false,
        ..args.clone()
    }
}

/// Refuses what sharding cannot split (module docs).
fn check_shardable(args: &RunArgs, spec: &str) -> anyhow::Result<()> {
    if let Some(url) = &args.endpoint {
        bail!(
            "--shard {spec} splits simulated runs only; --endpoint {url} runs against a server, \
             which one process drives: leave --shard out"
        );
    }
    let mode = mode_of(args);
    if mode != Mode::Sim {
        bail!(
            "--shard {spec} splits simulated runs only, not --mode {}: use --mode sim, or \
             leave --shard out",
            mode.dir_name()
        );
    }
    if args.seeds != 1 {
        bail!(
            "--shard {spec} with --seeds {}: shard one seed at a time (--seed S, one sharded \
             run per seed), or leave --shard out",
            args.seeds
        );
    }
    Ok(())
}

/// Writes `text` into `h` without building it as one string.
struct HashWriter<'a>(&'a mut Sha256);

impl std::fmt::Write for HashWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.update(s.as_bytes());
        Ok(())
    }
}

/// SHA-256 of a condition's script and fleet, as Rust's `Debug` prints them.
fn condition_digest(c: &Condition) -> String {
    use std::fmt::Write as _;
    let mut h = Sha256::new();
    // Writing into a hash cannot fail.
    let _ = write!(
        HashWriter(&mut h),
        "{:?}{:?}{:?}",
        c.script,
        c.fleet,
        c.disagg
    );
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Serialize)]
struct ConditionPrint<'a> {
    label: &'a str,
    engine: &'a engine::EngineConfig,
    seed: u64,
    requests: usize,
    kv_blocks: Option<usize>,
    script_sha256: String,
}

#[derive(Serialize)]
struct Fingerprint<'a> {
    commit: String,
    experiment: &'a str,
    settings: &'a Settings,
    backend: crate::backend::BackendInfo,
    conditions: Vec<ConditionPrint<'a>>,
}

/// The resolved inputs, one item a line (RON), and exp's commit: shards
/// with equal fingerprints ran conditions of the same run.
pub fn fingerprint(
    experiment: &str,
    settings: &Settings,
    backend: &dyn Backend,
    conditions: &[Condition],
) -> anyhow::Result<String> {
    let f = Fingerprint {
        commit: git_commit(),
        experiment,
        settings,
        backend: backend.info(),
        conditions: conditions
            .iter()
            .map(|c| ConditionPrint {
                label: &c.label,
                engine: &c.engine,
                seed: c.seed,
                requests: c.script.requests.len(),
                kv_blocks: backend.kv_blocks(&c.engine),
                script_sha256: condition_digest(c),
            })
            .collect(),
    };
    Ok(ron::ser::to_string_pretty(
        &f,
        ron::ser::PrettyConfig::default(),
    )?)
}

/// The one backend of a sim run.
fn sim_backend(backends: &[Box<dyn Backend>]) -> anyhow::Result<&dyn Backend> {
    match backends {
        [one] => Ok(one.as_ref()),
        _ => bail!("a sharded run has one (sim) backend"),
    }
}

/// `exp run ... --shard SPEC`.
pub fn run(args: &RunArgs, spec_text: &str) -> anyhow::Result<()> {
    check_shardable(args, spec_text)?;
    let spec = ShardSpec::parse(spec_text)?;
    let resolved = resolve(args)?;
    let (exp, settings, opts) = (resolved.exp, &resolved.settings, &resolved.opts);
    let backend = sim_backend(&resolved.backends)?;
    let context = || format!("experiment {}", args.name);
    let conditions =
        prepare(exp, settings, backend, opts.seed, opts.prompts.as_ref()).with_context(context)?;
    let total = conditions.len();
    let units = spec.units(total, "conditions")?;
    let print = fingerprint(exp.name(), settings, backend, &conditions)?;
    let (indices, mine): (Vec<usize>, Vec<Condition>) = conditions
        .into_iter()
        .enumerate()
        .filter(|(i, _)| units.binary_search(i).is_ok())
        .unzip();
    memory::check(exp, &mine, backend)
        .map_err(Box::new)
        .with_context(context)?;
    let staged = StagedRun::begin(&opts.out, exp.name()).with_context(context)?;
    let bar = progress::conditions_bar(opts.quiet, exp.name());
    bar.set_length(mine.len() as u64);
    let runs = run_conditions(backend, &mine, &bar).with_context(context)?;
    bar.finish_and_clear();
    let results = indices
        .iter()
        .zip(mine.iter().zip(runs))
        .map(|(&index, (c, records))| ConditionRecords {
            index,
            label: c.label.clone(),
            records,
        })
        .collect();
    let file = RunShard {
        format: SHARD_FORMAT,
        kind: ShardKind::Run,
        shard: spec,
        args: shared_args(args),
        fingerprint: print,
        units: total,
        date_utc: opts.date_utc.clone(),
        results,
    };
    let path = shard::write(staged.path(), &file)?;
    let written = staged.commit(&[path]).with_context(context)?;
    if !args.quiet {
        for path in &written {
            eprintln!(
                "shard {spec}: {} of {total} conditions run; wrote {} (join the shards with \
                 `exp merge OUT1/{name} OUT2/{name} ... --out OUT`)",
                units.len(),
                path.display(),
                name = exp.name()
            );
        }
    }
    Ok(())
}

/// `exp merge` of the shards of one `exp run --shard` (module docs).
pub fn merge(args: &MergeArgs) -> anyhow::Result<RunOutput> {
    let shards = shard::read_set::<RunArgs, ConditionRecords>(&args.dirs, ShardKind::Run)?;
    let (first_dir, first) = &shards[0];
    let run_args = RunArgs {
        out: args.out.clone(),
        quiet: args.quiet,
        ..first.args.clone()
    };
    let mut resolved = resolve(&run_args)?;
    resolved.opts.date_utc = shard::earliest_date(&shards);
    let (exp, settings, opts) = (resolved.exp, &resolved.settings, &resolved.opts);
    let backend = sim_backend(&resolved.backends)?;
    let context = || format!("experiment {}", exp.name());
    let conditions =
        prepare(exp, settings, backend, opts.seed, opts.prompts.as_ref()).with_context(context)?;
    let now = fingerprint(exp.name(), settings, backend, &conditions)?;
    if now != first.fingerprint {
        bail!(
            "exp merge: the inputs differ from those the shards in {} ran ({}): a file was \
             edited since, or this is another exp build; rerun the shards",
            first_dir.display(),
            first_difference(&first.fingerprint, &now)
        );
    }
    let results = shard::results_in_order(shards, conditions.len(), |r| r.index)?;
    if let Some((c, r)) = conditions
        .iter()
        .zip(&results)
        .find(|(c, r)| c.label != r.label)
    {
        bail!(
            "exp merge: condition {} is `{}` in the shards but `{}` now: rerun the shards",
            r.index,
            r.label,
            c.label
        );
    }
    let runs = results.into_iter().map(|r| r.records).collect();
    let evaluation = driver::summarize(exp, settings, conditions, runs).with_context(context)?;
    let staged = StagedRun::begin(&opts.out, exp.name()).with_context(context)?;
    let output = driver::write_evaluated(
        exp,
        settings,
        backend,
        opts,
        &evaluation,
        staged.path(),
        &resolved.seeds,
    )
    .with_context(context)?;
    let output = driver::commit(staged, output).with_context(context)?;
    print_run(
        args.quiet,
        &output.report.summary.to_csv(),
        &output,
        &[backend],
    )?;
    Ok(output)
}
