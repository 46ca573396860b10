//! The calibrated cost profiles shipped with `exp`, embedded in the binary.
//!
//! Contract: [`SHIPPED`] holds every `calibration/profiles/*.ron` of the
//! source tree, sorted by file name (a test checks the list against the
//! folder), compiled in with `include_str!`, so an `exp` copied anywhere finds
//! them without the source tree. Records name one `shipped:<file name>`
//! ([`ShippedProfile::label`]). A shipped profile that does not parse is an
//! error naming it, as a broken file in a searched folder is.
//! [`SHIPPED_OPERATORS`] is the operator model's profile, embedded the same way.

use calibration::{CostProfile, ProfileError};

/// One profile compiled into the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShippedProfile {
    /// File name under `calibration/profiles/`.
    pub name: &'static str,
    /// The file's contents at build time.
    pub text: &'static str,
}

impl ShippedProfile {
    /// How records and messages name it: `shipped:<file name>`.
    pub fn label(&self) -> String {
        format!("shipped:{}", self.name)
    }

    pub fn load(&self) -> Result<CostProfile, ProfileError> {
        CostProfile::from_ron(self.text, &self.label())
    }
}

/// `ShippedProfile`s of files under `calibration/profiles/`, by file name.
macro_rules! shipped {
    ($($name:literal),* $(,)?) => {
        &[$(ShippedProfile {
            name: $name,
            text: include_str!(concat!("../../../calibration/profiles/", $name)),
        }),*]
    };
}

/// Every shipped profile, sorted by file name. A profile added to
/// `calibration/profiles/` must be listed here (a test fails until it is).
pub const SHIPPED: &[ShippedProfile] = shipped!["h200-qwen3-0.6b.ron"];

/// The operator profile (`calibration/operators/h200-sxm.ron`, written by
/// `exp transfer-check`) that `--cost-model operators` uses by default.
pub const SHIPPED_OPERATORS: ShippedProfile = ShippedProfile {
    name: "h200-sxm.ron",
    text: include_str!("../../../calibration/operators/h200-sxm.ron"),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_the_profiles_folder_sorted_and_every_profile_loads() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../calibration/profiles");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".ron"))
            .collect();
        files.sort();
        let listed: Vec<&str> = SHIPPED.iter().map(|p| p.name).collect();
        assert_eq!(
            listed, files,
            "SHIPPED must list calibration/profiles/*.ron"
        );
        for p in SHIPPED {
            let on_disk = std::fs::read_to_string(format!("{dir}/{}", p.name)).unwrap();
            assert_eq!(p.text, on_disk, "{} is embedded as it is on disk", p.name);
            p.load().unwrap_or_else(|e| panic!("{e}"));
        }
    }

    #[test]
    fn a_shipped_profile_is_labelled_by_its_file_name() {
        let p = ShippedProfile {
            name: "x.ron",
            text: "(provenance: oops",
        };
        assert_eq!(p.label(), "shipped:x.ron");
        let err = p.load().unwrap_err().to_string();
        assert!(err.starts_with("shipped:x.ron: line 1"), "{err}");
    }
}
