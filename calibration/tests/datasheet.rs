//! The built-in GPU table and user entry files.

use std::path::PathBuf;

use calibration::datasheet::{self, DatasheetError, GpuSpec};

const REQUIRED: [&str; 12] = [
    "h200-sxm",
    "h100-sxm",
    "h100-pcie",
    "a100-80gb-sxm",
    "a100-40gb-pcie",
    "l40s",
    "l4",
    "a10g",
    "rtx-4090",
    "rtx-3090",
    "rtx-4070-laptop",
    "rtx-4060-laptop",
];

fn flops(name: &str) -> f64 {
    datasheet::lookup(name).expect("known GPU").bf16_flops
}

fn bandwidth(name: &str) -> f64 {
    datasheet::lookup(name).expect("known GPU").mem_bandwidth
}

#[test]
fn table_has_every_required_gpu_once() {
    let names = datasheet::known_names();
    for required in REQUIRED {
        assert_eq!(
            names.iter().filter(|n| *n == required).count(),
            1,
            "{required} in {names:?}"
        );
    }
    assert_eq!(datasheet::all().len(), names.len());
}

#[test]
fn every_entry_has_usable_figures_and_a_cited_source() {
    for gpu in datasheet::all() {
        assert_eq!(datasheet::invalid_field(&gpu), None, "{}", gpu.name);
        assert!(gpu.source.contains("https://"), "{} cites no URL", gpu.name);
        // Machine balance (FLOP per byte) of real GPUs sits within these
        // bounds; a unit slip (TB vs GB, T vs G) lands far outside them.
        let balance = gpu.bf16_flops / gpu.mem_bandwidth;
        assert!((30.0..1000.0).contains(&balance), "{}: {balance}", gpu.name);
        assert!(
            gpu.mem_bytes >= 8.0 * 1024.0 * 1024.0 * 1024.0,
            "{}",
            gpu.name
        );
    }
}

#[test]
fn geforce_entries_use_the_fp32_accumulate_rate() {
    // The FP16-accumulate (or sparse) figures are 330 and 142 TFLOPS.
    assert!(flops("rtx-4090") < 200e12, "{}", flops("rtx-4090"));
    assert!(flops("rtx-3090") < 100e12, "{}", flops("rtx-3090"));
}

#[test]
fn figures_are_dense_not_sparse() {
    // Sparse peaks are twice the dense ones; A100 dense is below H100 dense
    // by about 3x, and no part in the table reaches 1 PFLOP/s dense.
    for gpu in datasheet::all() {
        assert!(gpu.bf16_flops < 1e15, "{}: {}", gpu.name, gpu.bf16_flops);
    }
    assert!(flops("h100-sxm") > 3.0 * flops("a100-80gb-sxm"));
}

#[test]
fn same_silicon_orders_as_documented() {
    assert_eq!(flops("h200-sxm"), flops("h100-sxm"));
    assert!(bandwidth("h200-sxm") > bandwidth("h100-sxm"));
    assert!(bandwidth("h100-sxm") > bandwidth("h100-pcie"));
    assert!(flops("h100-sxm") > flops("h100-pcie"));
    assert!(bandwidth("a100-80gb-sxm") > bandwidth("a100-40gb-pcie"));
    assert!(flops("rtx-4070-laptop") > flops("rtx-4060-laptop"));
}

#[test]
fn estimates_and_gaps_are_labelled_in_the_source() {
    for name in ["rtx-4070-laptop", "rtx-4060-laptop"] {
        let source = datasheet::lookup(name).expect("known").source;
        assert!(
            source.contains("DERIVED") && source.contains("TGP"),
            "{name}"
        );
    }
    assert!(datasheet::lookup("a10g")
        .expect("known")
        .source
        .contains("UNVERIFIED"));
}

#[test]
fn lookup_unknown_name_lists_the_known_ones() {
    let err = datasheet::lookup("h300").expect_err("unknown");
    match &err {
        DatasheetError::UnknownGpu { name, known } => {
            assert_eq!(name, "h300");
            assert_eq!(known, &datasheet::known_names());
        }
        other => panic!("unexpected {other:?}"),
    }
    let message = err.to_string();
    for required in REQUIRED {
        assert!(message.contains(required), "{message}");
    }
}

#[test]
fn lookup_is_exact() {
    assert!(datasheet::lookup("H100-SXM").is_err());
    assert_eq!(datasheet::lookup("l4").expect("known").name, "l4");
}

// ---- user entry files ----

struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "calibration-datasheet-{}-{name}.ron",
            std::process::id()
        ));
        std::fs::write(&path, text).expect("write temp file");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn user_entry(name: &str, flops: &str, sm_count: &str) -> String {
    format!(
        "(name: \"{name}\", bf16_flops: {flops}, mem_bandwidth: 1.0e12, mem_bytes: 2.0e10, \
         sm_count: {sm_count}, source: \"lab measurement\")"
    )
}

#[test]
fn loads_a_valid_user_file() {
    let text = format!(
        "[\n  {},\n  {},\n]\n",
        user_entry("lab-a", "1.5e14", "40"),
        user_entry("lab-b", "2.5e14", "60")
    );
    let file = TempFile::new("valid", &text);
    let entries = datasheet::load_user_entries(&file.0).expect("valid file");
    assert_eq!(
        entries.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
        ["lab-a", "lab-b"]
    );
    assert_eq!(
        entries[1],
        GpuSpec {
            name: "lab-b".into(),
            bf16_flops: 2.5e14,
            mem_bandwidth: 1.0e12,
            mem_bytes: 2.0e10,
            sm_count: 60,
            source: "lab measurement".into(),
        }
    );
}

#[test]
fn bad_ron_reports_file_line_and_column() {
    // Line 3 has a field name the struct does not have.
    let text = format!(
        "[\n  {},\n  (name: \"x\", bogus_field: 1.0),\n]\n",
        user_entry("lab-a", "1.5e14", "40")
    );
    let file = TempFile::new("bad-ron", &text);
    let err = datasheet::load_user_entries(&file.0).expect_err("bad RON");
    match &err {
        DatasheetError::Parse {
            path, line, column, ..
        } => {
            assert_eq!(path, &file.0);
            assert_eq!(*line, 3, "{err}");
            assert!(*column > 1, "{err}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&format!("{}:3:", file.0.display())),
        "{message}"
    );
}

#[test]
fn non_positive_figures_are_rejected_naming_the_field() {
    for (flops, sm, field) in [
        ("0.0", "40", "bf16_flops"),
        ("-1.0e14", "40", "bf16_flops"),
        ("NaN", "40", "bf16_flops"),
        ("1.0e14", "0", "sm_count"),
    ] {
        let text = format!("[{}]", user_entry("lab-bad", flops, sm));
        let file = TempFile::new(&format!("bad-{field}-{sm}-{}", flops.len()), &text);
        let err = datasheet::load_user_entries(&file.0).expect_err("must reject");
        match &err {
            DatasheetError::NonPositive {
                name, field: got, ..
            } => {
                assert_eq!(name, "lab-bad");
                assert_eq!(*got, field, "{flops} {sm}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn empty_and_duplicate_names_are_rejected() {
    let empty = TempFile::new("empty-name", &format!("[{}]", user_entry(" ", "1e14", "4")));
    assert!(matches!(
        datasheet::load_user_entries(&empty.0),
        Err(DatasheetError::EmptyName { index: 0, .. })
    ));
    let dup = TempFile::new(
        "dup-name",
        &format!(
            "[{}, {}]",
            user_entry("twin", "1e14", "4"),
            user_entry("twin", "2e14", "8")
        ),
    );
    match datasheet::load_user_entries(&dup.0) {
        Err(DatasheetError::DuplicateName { name, .. }) => assert_eq!(name, "twin"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn missing_file_is_a_read_error_naming_it() {
    let path = std::env::temp_dir().join("calibration-datasheet-does-not-exist.ron");
    let err = datasheet::load_user_entries(&path).expect_err("missing");
    assert!(matches!(err, DatasheetError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("does-not-exist"), "{err}");
}
