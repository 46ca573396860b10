//! The output folder `OUT/NAME/` of one run, replaced whole.
//!
//! Contract: a run writes into a staging folder beside its destination
//! (`OUT/.NAME.partial-<pid>-<k>`); [`StagedRun::commit`] records the files
//! written in a manifest (`.exp-files`, one path relative to the folder a
//! line, sorted) and puts the staging folder in place of `OUT/NAME` by
//! rename, so a rerun leaves none of the previous run's files behind and a
//! failed run (the staging folder is removed when the [`StagedRun`] drops
//! uncommitted) leaves the previous results intact. An existing `OUT/NAME`
//! is only replaced when every file in it is one exp wrote: listed in its
//! manifest or, for a folder without one (written before manifests
//! existed), one of exp's file names. Anything else is refused with an error
//! naming the folder and the foreign file, and nothing is deleted.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use thiserror::Error;

/// The manifest's file name inside `OUT/NAME/`.
pub const MANIFEST: &str = ".exp-files";

/// Mode folders and the files exp writes in each, for folders without a manifest.
const MODE_DIRS: [&str; 3] = ["real", "sim", "both"];
const MODE_FILES: [&str; 6] = [
    "summary.csv",
    "requests.csv",
    "steps.csv",
    "meta.ron",
    "seeds.csv",
    "summary_seeds.csv",
];

#[derive(Debug, Error)]
pub enum RunDirError {
    #[error(
        "{dir} holds {file}, which exp did not write; move it out of the folder or \
         choose another --out (nothing was deleted)"
    )]
    Foreign { dir: PathBuf, file: PathBuf },
    #[error("{path} is not a folder; remove it or choose another --out")]
    NotAFolder { path: PathBuf },
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunDirError + '_ {
    move |error| RunDirError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Distinguishes the staging folders of several runs in one process.
static NEXT: AtomicUsize = AtomicUsize::new(0);

fn sibling(out: &Path, name: &str, what: &str) -> PathBuf {
    let k = NEXT.fetch_add(1, Ordering::Relaxed);
    out.join(format!(".{name}.{what}-{}-{k}", std::process::id()))
}

/// A run being written; see the module docs.
#[derive(Debug)]
pub struct StagedRun {
    destination: PathBuf,
    staging: PathBuf,
    committed: bool,
}

impl StagedRun {
    /// Checks that `out/name` may be replaced and creates the staging folder.
    pub fn begin(out: &Path, name: &str) -> Result<Self, RunDirError> {
        let destination = out.join(name);
        check_replaceable(&destination, name)?;
        let staging = sibling(out, name, "partial");
        std::fs::create_dir_all(&staging).map_err(io(&staging))?;
        Ok(Self {
            destination,
            staging,
            committed: false,
        })
    }

    /// Where the run writes its files until [`StagedRun::commit`].
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Where `path` (under the staging folder) lies once committed.
    pub fn final_path(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.staging) {
            Ok(rel) => self.destination.join(rel),
            Err(_) => path.to_path_buf(),
        }
    }

    /// Writes the manifest of `files` (paths under the staging folder) and
    /// replaces the destination; returns the files' final paths.
    pub fn commit(mut self, files: &[PathBuf]) -> Result<Vec<PathBuf>, RunDirError> {
        let listed: BTreeSet<String> = files
            .iter()
            .filter_map(|f| f.strip_prefix(&self.staging).ok())
            .map(manifest_line)
            .collect();
        let mut manifest = String::new();
        for line in &listed {
            manifest.push_str(line);
            manifest.push('\n');
        }
        let manifest_path = self.staging.join(MANIFEST);
        std::fs::write(&manifest_path, manifest).map_err(io(&manifest_path))?;
        // Checked again: the folder may have changed while the run ran.
        let name = self
            .destination
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        check_replaceable(&self.destination, name.as_deref().unwrap_or(""))?;
        let parent = self.destination.parent().unwrap_or(Path::new("."));
        let old = sibling(parent, name.as_deref().unwrap_or("run"), "old");
        let had_old = self.destination.exists();
        if had_old {
            std::fs::rename(&self.destination, &old).map_err(io(&self.destination))?;
        }
        if let Err(error) = std::fs::rename(&self.staging, &self.destination) {
            if had_old {
                // Put the previous results back; the staging folder is removed on drop.
                let _ = std::fs::rename(&old, &self.destination);
            }
            return Err(RunDirError::Io {
                path: self.destination.clone(),
                error,
            });
        }
        self.committed = true;
        if had_old {
            std::fs::remove_dir_all(&old).map_err(io(&old))?;
        }
        Ok(files.iter().map(|f| self.final_path(f)).collect())
    }
}

impl Drop for StagedRun {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: a failed run must not leave half a folder behind.
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}

/// A relative path as the manifest holds it: `/`-separated.
fn manifest_line(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every file under `dir`, relative to it, depth first in name order.
fn files_under(dir: &Path, rel: &Path, found: &mut Vec<PathBuf>) -> Result<(), RunDirError> {
    let here = dir.join(rel);
    let mut entries: Vec<_> = std::fs::read_dir(&here)
        .map_err(io(&here))?
        .collect::<Result<_, _>>()
        .map_err(io(&here))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let rel = rel.join(entry.file_name());
        let kind = entry.file_type().map_err(io(&dir.join(&rel)))?;
        if kind.is_dir() {
            files_under(dir, &rel, found)?;
        } else {
            found.push(rel);
        }
    }
    Ok(())
}

/// Whether `rel` is a file exp writes for experiment `name` (folders
/// without a manifest).
fn known_name(rel: &str, name: &str) -> bool {
    match rel.split_once('/') {
        Some((mode, file)) => MODE_DIRS.contains(&mode) && MODE_FILES.contains(&file),
        None => {
            rel == "compare.csv"
                || (rel.starts_with(&format!("{name}_"))
                    && (rel.ends_with(".png") || rel.ends_with(".svg")))
        }
    }
}

/// Ok when `dir` is absent or holds only files exp wrote (module docs).
fn check_replaceable(dir: &Path, name: &str) -> Result<(), RunDirError> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(dir)(e)),
    };
    if !meta.is_dir() {
        return Err(RunDirError::NotAFolder {
            path: dir.to_path_buf(),
        });
    }
    let manifest_path = dir.join(MANIFEST);
    let manifest: Option<BTreeSet<String>> = match std::fs::read_to_string(&manifest_path) {
        Ok(text) => Some(text.lines().map(str::to_string).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(&manifest_path)(e)),
    };
    let mut found = Vec::new();
    files_under(dir, Path::new(""), &mut found)?;
    for rel in found {
        let line = manifest_line(&rel);
        let ours = match &manifest {
            Some(listed) => line == MANIFEST || listed.contains(&line),
            None => known_name(&line, name),
        };
        if !ours {
            return Err(RunDirError::Foreign {
                dir: dir.to_path_buf(),
                file: rel,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_without_a_manifest_accept_only_exp_file_names() {
        assert!(known_name("sim/summary.csv", "cb_sweep"));
        assert!(known_name("cb_sweep_ttft.svg", "cb_sweep"));
        assert!(known_name("compare.csv", "cb_sweep"));
        assert!(!known_name("notes.txt", "cb_sweep"));
        assert!(!known_name("sim/notes.csv", "cb_sweep"));
        assert!(!known_name("other_ttft.svg", "cb_sweep"));
    }
}
