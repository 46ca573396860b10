//! What the readers' tests share: measurement files written to a scratch
//! folder of the test process, and the H200's table of slices.

use super::slices::CopyBandwidths;
use std::path::PathBuf;

/// `body` written to `name` in this process's scratch folder for the tests
/// of `module` (so that tests of different modules running at once do not
/// share files); the file's path.
pub fn write(module: &str, name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{module}-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write");
    path
}

/// The H200's whole GPU and its measured slices ([`CopyBandwidths::h200`]).
pub fn h200() -> CopyBandwidths {
    CopyBandwidths::h200(&crate::datasheet::lookup("h200-sxm").expect("h200 in the table"))
}
