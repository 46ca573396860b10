//! Records the commit the `exp` binary is built from, so that meta.ron and
//! calibration profiles name it even where the binary runs without the
//! repository (a GPU machine it was copied to). `-dirty` marks uncommitted
//! changes; `unknown` means no git or no repository at build time.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = match git(&["rev-parse", "HEAD"]) {
        Some(hash) if !hash.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{hash}-dirty")
            } else {
                hash
            }
        }
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=SERVETWIN_BUILD_COMMIT={commit}");
    // A commit moves HEAD's branch ref and rewrites the index.
    for path in ["../.git/HEAD", "../.git/index", "../.git/refs/heads"] {
        if Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
