//! Records the commit the `exp` binary is built from, so that meta.ron and
//! calibration profiles name it even where the binary runs without the
//! repository (a GPU machine it was copied to).
//!
//! Contract: sets `SERVETWIN_BUILD_COMMIT` for the crate to the full commit
//! hash, with `-dirty` appended when tracked files have uncommitted changes,
//! or `unknown` when there is no git or no repository at build time. vergen
//! (`vergen-gitcl`) asks git; this script only combines its answers. The
//! script reruns when HEAD, the branch's ref or the index changes, and for
//! nothing else, so only this crate rebuilds after a commit.

use std::path::{Path, PathBuf};
use vergen_gitcl::{Emitter, GitclBuilder};

fn main() {
    let asked = GitclBuilder::default()
        .sha(false)
        .dirty(false)
        .build()
        .map_err(|e| e.to_string())
        .and_then(|git| {
            // Quiet: no git is an expected case (`unknown`), not a warning.
            Emitter::default()
                .quiet()
                .add_instructions(&git)
                .and_then(|e| e.emit_and_set())
                .map_err(|e| e.to_string())
        });
    // Without git, vergen sets placeholders: only a hash is a hash.
    let sha = std::env::var("VERGEN_GIT_SHA")
        .ok()
        .filter(|s| asked.is_ok() && s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()));
    let dirty = std::env::var("VERGEN_GIT_DIRTY").is_ok_and(|d| d == "true");
    let commit = match sha {
        Some(hash) if dirty => format!("{hash}-dirty"),
        Some(hash) => hash,
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=SERVETWIN_BUILD_COMMIT={commit}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for path in git_files(&root) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// The files a commit or `git add` rewrites: HEAD and the index of the git
/// directory, and the branch's ref and `packed-refs` in the common directory.
/// A linked worktree's `.git` is a file naming its git directory, whose
/// `commondir` names the repository's (vergen watches HEAD and the ref of
/// plain checkouts only). Only existing files are listed: cargo reruns on
/// every build for a missing one.
fn git_files(root: &Path) -> Vec<PathBuf> {
    let dot_git = root.join(".git");
    let git_dir = match std::fs::read_to_string(&dot_git) {
        Ok(text) => match text.trim().strip_prefix("gitdir:") {
            Some(dir) => root.join(dir.trim()),
            None => return Vec::new(),
        },
        Err(_) => dot_git,
    };
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .map_or_else(|_| git_dir.clone(), |dir| git_dir.join(dir.trim()));
    let head = std::fs::read_to_string(git_dir.join("HEAD")).unwrap_or_default();
    let mut files = vec![git_dir.join("HEAD"), git_dir.join("index")];
    if let Some(branch) = head.trim().strip_prefix("ref:") {
        files.push(common.join(branch.trim()));
    }
    files.push(common.join("packed-refs"));
    files.retain(|f| f.exists());
    files
}
