//! A profile whose GPU or model figures are physically impossible is refused
//! when it is read, with an error naming the field, the value and what to fix.

use calibration::{CostProfile, ProfileError};

/// The shipped H200 profile's text.
fn shipped_text() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/h200-qwen3-0.6b.ron");
    std::fs::read_to_string(path).expect("shipped profile")
}

/// `text` with the first `field: <value>` line's value replaced.
fn with_field(text: &str, field: &str, value: &str) -> String {
    let mut done = false;
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if !done && trimmed.starts_with(&format!("{field}: ")) {
                done = true;
                let indent = &line[..line.len() - trimmed.len()];
                format!("{indent}{field}: {value},")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_shipped_profile_passes_the_checks() {
    CostProfile::from_ron(&shipped_text(), "h200.ron").expect("shipped profile loads");
}

#[test]
fn a_gpu_with_zero_or_non_finite_figures_is_refused() {
    let text = shipped_text();
    for (field, value) in [
        ("mem_bandwidth", "0.0"),
        ("bf16_flops", "-1.0"),
        ("mem_bytes", "inf"),
        ("sm_count", "0"),
    ] {
        let bad = with_field(&text, field, value);
        assert_ne!(bad, text, "{field} is in the profile");
        let err = CostProfile::from_ron(&bad, "p.ron").unwrap_err();
        assert!(
            matches!(&err, ProfileError::BadGpu { field: f, .. } if *f == field),
            "{field}: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with("p.ron: ")
                && msg.contains(field)
                && msg.contains("fix the profile's `gpu`"),
            "{msg}"
        );
    }
}

#[test]
fn a_model_shape_with_a_zero_dimension_is_refused() {
    let text = shipped_text();
    for field in [
        "num_layers",
        "hidden",
        "head_dim",
        "vocab",
        "bytes_per_param",
    ] {
        let bad = with_field(&text, field, "0");
        assert_ne!(bad, text, "{field} is in the profile");
        let err = CostProfile::from_ron(&bad, "p.ron").unwrap_err();
        assert!(
            matches!(&err, ProfileError::BadModel { field: f, .. } if *f == field),
            "{field}: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("model.{field}"))
                && msg.contains("found 0")
                && msg.contains("fix the profile's `model`"),
            "{msg}"
        );
    }
}
