//! `--shard K/N`: one share of a command's work units, the file a shard
//! writes, and the checks `exp merge` makes before joining shards.
//!
//! Contract:
//! - A command's work units are numbered `0..total` (`exp plan`: its (GPU,
//!   setting) grid points; `exp run`: the experiment's conditions in plan
//!   order). Shard `K` of `N` takes the units `i` with `i mod N = K - 1`
//!   (round robin, so every shard gets some of each kind). `K` counts from
//!   1; `N` may not exceed `total` (a shard with nothing to do is a
//!   mistake). Bad specs (`0/N`, `K > N`, `N = 0`, not `K/N`) fail saying
//!   what to give.
//! - A shard writes one [`SHARD_FILE`] ([`ShardFile`]): what command wrote it
//!   ([`ShardKind`]), its spec, the command's arguments as every shard of
//!   one run has them (no `--out`, no `--shard`), a fingerprint of the
//!   inputs they resolved to, the number of units, the date the shard
//!   started (`date_utc`, [`engine::date::output_date`]) and its units'
//!   results.
//! - [`check_set`] accepts shards only as a complete set of one run: the same
//!   kind, `N`, arguments and fingerprint (else it names the two folders and
//!   the first difference), each `K` once, none missing (named). The merged
//!   outputs carry [`earliest_date`], the date the first shard started, as an
//!   unsharded run carries the date it started; with `SOURCE_DATE_EPOCH` set
//!   for every shard that is its date, so the merge equals the unsharded run
//!   byte for byte.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The file a shard writes into its folder.
pub const SHARD_FILE: &str = "shard.ron";
/// Version of [`ShardFile`]'s layout.
pub const SHARD_FORMAT: u32 = 2;

#[derive(Debug, Error)]
pub enum ShardError {
    #[error("--shard {spec:?}: {message}")]
    BadSpec { spec: String, message: String },
    /// `exp merge`: shards missing, repeated, of different runs, unreadable.
    #[error("exp merge: {0}")]
    Merge(String),
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("shard.ron: {0}")]
    Write(String),
}

fn merge_error<T>(message: String) -> Result<T, ShardError> {
    Err(ShardError::Merge(message))
}

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
    pub fn parse(text: &str) -> Result<Self, ShardError> {
        let bad = |message: String| ShardError::BadSpec {
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

    /// This shard's units of `total`; `what` names the units for messages
    /// (e.g. "(GPU, setting) points").
    pub fn units(&self, total: usize, what: &str) -> Result<Vec<usize>, ShardError> {
        if self.count > total {
            return Err(ShardError::BadSpec {
                spec: self.to_string(),
                message: format!(
                    "{} shards for {total} {what} would leave some shards with nothing to do: \
                     use at most {total}",
                    self.count
                ),
            });
        }
        Ok((self.index - 1..total).step_by(self.count).collect())
    }
}

/// The command that wrote a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShardKind {
    /// `exp plan --shard K/N`, merged by `exp merge` into a plan folder.
    Plan,
    /// `exp run NAME --shard K/N`, merged into `OUT/NAME/`.
    Run,
}

impl ShardKind {
    fn command(self) -> &'static str {
        match self {
            Self::Plan => "exp plan ... --shard K/N",
            Self::Run => "exp run NAME --mode sim ... --shard K/N",
        }
    }
}

/// What a shard writes ([`SHARD_FILE`]); `A` are the command's arguments,
/// `R` one unit's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardFile<A, R> {
    pub format: u32,
    pub kind: ShardKind,
    pub shard: ShardSpec,
    /// The command's arguments, `--out` emptied and `--shard` left out: the
    /// same for every shard of one run.
    pub args: A,
    /// The resolved inputs, one item a line, and exp's commit.
    pub fingerprint: String,
    /// Units of the whole run.
    pub units: usize,
    /// When the shard started (or `SOURCE_DATE_EPOCH`).
    pub date_utc: String,
    /// This shard's units' results, in unit order.
    pub results: Vec<R>,
}

/// Shards with the folders they were read from, in shard order.
pub type ShardSet<A, R> = Vec<(PathBuf, ShardFile<A, R>)>;

/// The first fields of every shard file, to tell the kinds apart.
#[derive(Deserialize)]
struct Header {
    format: u32,
    kind: ShardKind,
}

/// Writes `file` into `dir` as [`SHARD_FILE`]; returns its path.
pub fn write<A: Serialize, R: Serialize>(
    dir: &Path,
    file: &ShardFile<A, R>,
) -> Result<PathBuf, ShardError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |error| ShardError::Io { path, error }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let text = ron::ser::to_string_pretty(file, ron::ser::PrettyConfig::default())
        .map_err(|e| ShardError::Write(e.to_string()))?;
    let path = dir.join(SHARD_FILE);
    std::fs::write(&path, text).map_err(io(&path))?;
    Ok(path)
}

fn read_text(dir: &Path) -> Result<(PathBuf, String), ShardError> {
    let path = dir.join(SHARD_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((path, text)),
        Err(e) => merge_error(format!(
            "{}: {e}; give the folders the shards wrote: the --out folder of `{}`, or \
             OUT/NAME of `{}`",
            path.display(),
            ShardKind::Plan.command(),
            ShardKind::Run.command()
        )),
    }
}

fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, ShardError> {
    ron::from_str(text).or_else(|e| {
        merge_error(format!(
            "{}:{}:{}: not a shard file: {}",
            path.display(),
            e.position.line,
            e.position.col,
            e.code
        ))
    })
}

/// The kind of the shard in `dir`, checking its format.
pub fn kind_of(dir: &Path) -> Result<ShardKind, ShardError> {
    let (path, text) = read_text(dir)?;
    let header: Header = parse(&path, &text)?;
    if header.format != SHARD_FORMAT {
        return merge_error(format!(
            "{}: shard format {} but this exp reads {SHARD_FORMAT}: run the shards and the \
             merge with the same exp",
            path.display(),
            header.format
        ));
    }
    Ok(header.kind)
}

/// Reads `dir`'s shard, which must be of `kind`.
pub fn read<A: DeserializeOwned, R: DeserializeOwned>(
    dir: &Path,
    kind: ShardKind,
) -> Result<ShardFile<A, R>, ShardError> {
    let found = kind_of(dir)?;
    if found != kind {
        return merge_error(format!(
            "{} holds a shard of `{}`, not of `{}`: merge the shards of one run",
            dir.display(),
            found.command(),
            kind.command()
        ));
    }
    let (path, text) = read_text(dir)?;
    parse(&path, &text)
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

/// Reads the shards in `dirs` (of `kind`) and checks that they are one
/// complete set (module docs); returns them in shard order.
pub fn read_set<A, R>(dirs: &[PathBuf], kind: ShardKind) -> Result<ShardSet<A, R>, ShardError>
where
    A: DeserializeOwned + PartialEq + std::fmt::Debug,
    R: DeserializeOwned,
{
    let mut shards: ShardSet<A, R> = Vec::new();
    for dir in dirs {
        let file: ShardFile<A, R> = read(dir, kind)?;
        if let Some((first_dir, first)) = shards.first() {
            check_pair((first_dir, first), (dir, &file))?;
        }
        if let Some((other, _)) = shards.iter().find(|(_, s)| s.shard == file.shard) {
            return merge_error(format!(
                "shard {} is given twice ({} and {}): give each shard's folder once",
                file.shard,
                other.display(),
                dir.display()
            ));
        }
        shards.push((dir.clone(), file));
    }
    let Some((_, first)) = shards.first() else {
        return merge_error("no shard folders given".into());
    };
    let count = first.shard.count;
    let missing: Vec<String> = (1..=count)
        .filter(|k| shards.iter().all(|(_, s)| s.shard.index != *k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return merge_error(format!(
            "shard(s) {} missing: run `{}` for each and pass the folder it wrote",
            missing.join(", "),
            kind.command()
        ));
    }
    shards.sort_by_key(|(_, s)| s.shard.index);
    Ok(shards)
}

fn check_pair<A: PartialEq + std::fmt::Debug, R>(
    (first_dir, first): (&Path, &ShardFile<A, R>),
    (dir, file): (&Path, &ShardFile<A, R>),
) -> Result<(), ShardError> {
    let (a, b) = (first_dir.display(), dir.display());
    if file.shard.count != first.shard.count {
        return merge_error(format!(
            "{a} is shard {} but {b} is shard {}: the shards of one run have the same N",
            first.shard, file.shard
        ));
    }
    if file.args != first.args {
        return merge_error(format!(
            "{a} and {b} were run with different arguments ({:?} against {:?}): merge the \
             shards of one run",
            first.args, file.args
        ));
    }
    if file.fingerprint != first.fingerprint {
        return merge_error(format!(
            "{a} and {b} ran on different inputs ({}): rerun the shards with the same inputs \
             and exp",
            first_difference(&first.fingerprint, &file.fingerprint)
        ));
    }
    if file.units != first.units {
        return merge_error(format!(
            "{a} splits {} units but {b} {}: merge the shards of one run",
            first.units, file.units
        ));
    }
    Ok(())
}

/// The date the merged outputs carry: the earliest shard's (stamps
/// `YYYY-MM-DDTHH:MM:SSZ` sort as text).
pub fn earliest_date<A, R>(shards: &[(PathBuf, ShardFile<A, R>)]) -> String {
    shards
        .iter()
        .map(|(_, s)| s.date_utc.as_str())
        .min()
        .unwrap_or_default()
        .to_string()
}

/// Every shard's results put back in unit order, checked to be the
/// `total` units exactly once (`index_of` reads a result's unit).
pub fn results_in_order<A, R>(
    shards: ShardSet<A, R>,
    total: usize,
    index_of: impl Fn(&R) -> usize,
) -> Result<Vec<R>, ShardError> {
    let mut results: Vec<R> = shards.into_iter().flat_map(|(_, s)| s.results).collect();
    results.sort_by_key(&index_of);
    let complete =
        results.len() == total && results.iter().enumerate().all(|(i, r)| index_of(r) == i);
    if !complete {
        return merge_error(format!(
            "the shards hold {} results for {total} units: a shard file was edited or cut \
             short; rerun its shard",
            results.len()
        ));
    }
    Ok(results)
}

#[cfg(test)]
mod tests;
