use super::*;
use crate::operators::fit::HeldOutRow;

fn row(held_out: &str, target: &str, quantity: &str, error_pct: f64) -> HeldOutRow {
    HeldOutRow {
        held_out: held_out.into(),
        target: target.into(),
        quantity: quantity.into(),
        predicted_ms: 1.0,
        measured_ms: 1.0,
        error_pct,
    }
}

fn profile() -> OperatorProfile {
    let rows = [
        row("model", "qwen3-8b@132sm", "decode b=1 ctx=300", -3.0),
        row("model", "qwen3-8b@132sm", "decode b=64 ctx=300", 5.0),
        row("model", "qwen3-8b@132sm", "prefill 512", 2.0),
        row("model", "qwen3-8b@16sm", "decode b=1 ctx=300", 40.0),
        row("model", "qwen3-0.6b@132sm", "decode b=1 ctx=300", 12.0),
        row("model", "qwen3-0.6b@132sm", "prefill 512", -7.0),
        row("sm_count", "qwen3-8b@64sm", "decode b=1 ctx=300", -9.0),
        row("sm_count", "qwen3-8b@64sm", "prefill 512", 4.0),
        row("sm_count", "qwen3-0.6b@64sm", "decode b=1 ctx=300", 20.0),
        row("sm_count", "qwen3-8b@8sm", "decode b=1 ctx=300", 50.0),
    ];
    OperatorProfile {
        format: FORMAT,
        gpu: "h200-sxm".into(),
        fitted_on: "test".into(),
        params: OperatorParams::initial(),
        held_out: summarise(&rows),
    }
}

fn family() -> Vec<(String, ModelShape)> {
    ["qwen3-0.6b", "qwen3-8b"]
        .iter()
        .map(|m| {
            let c = engine::model::Qwen3Config::preset(m).expect("preset");
            (m.to_string(), ModelShape::from_qwen3(&c))
        })
        .collect()
}

fn gpu(name: &str) -> GpuSpec {
    crate::datasheet::lookup(name).expect("datasheet GPU")
}

#[test]
fn rows_are_summarised_per_hold_out_model_slice_and_kind() {
    let p = profile();
    let decode_8b = p
        .held_out
        .iter()
        .find(|e| {
            e.held_out == "model"
                && e.model == "qwen3-8b"
                && e.sm_count == 132
                && e.kind == "decode"
        })
        .expect("summarised");
    assert_eq!(decode_8b.steps, 2);
    assert_eq!(decode_8b.max_abs_pct, 5.0);
    assert_eq!(decode_8b.median_abs_pct, 5.0); // the upper middle of 3 and 5
}

#[test]
fn a_family_size_on_the_calibration_gpu_gets_its_own_hold_out() {
    let p = profile();
    let f = family();
    let e = p.expected_error(Some("qwen3-8b"), &f[1].1, &gpu("h200-sxm"), &f);
    // Its whole-GPU steps only (the 40 % on 16 SMs is another GPU's).
    assert_eq!((e.decode_pct, e.prefill_pct), (5.0, 2.0));
    assert!(e.off_ground.is_empty(), "{:?}", e.off_ground);
}

#[test]
fn another_gpu_adds_the_nearest_slice_and_says_what_was_never_held_out() {
    let p = profile();
    let f = family();
    // The L4 has 58 SMs: the 64-SM slice is nearest.
    let e = p.expected_error(Some("qwen3-8b"), &f[1].1, &gpu("l4"), &f);
    assert_eq!((e.decode_pct, e.prefill_pct), (5.0 + 9.0, 2.0 + 4.0));
    assert!(e.basis.contains("64-SM"), "{}", e.basis);
    assert!(
        e.off_ground.iter().any(|n| n.contains("architecture")),
        "{:?}",
        e.off_ground
    );
    // An H100 is a Hopper as the H200 is.
    let h100 = p.expected_error(Some("qwen3-8b"), &f[1].1, &gpu("h100-sxm"), &f);
    assert!(h100.off_ground.is_empty(), "{:?}", h100.off_ground);
    // A size never run on a slice takes every size's error there: without
    // 0.6b's own slice rows, its 12 % on the whole GPU plus the 64-SM slice's
    // worst over the other sizes (8b's 9 %).
    let mut q = profile();
    q.held_out
        .retain(|e| !(e.held_out == "sm_count" && e.model == "qwen3-0.6b"));
    let e = q.expected_error(Some("qwen3-0.6b"), &f[0].1, &gpu("l4"), &f);
    assert_eq!(e.decode_pct, 12.0 + 9.0);
}

#[test]
fn a_shape_outside_the_family_is_off_the_measured_ground() {
    let p = profile();
    let f = family();
    let big = engine::model::Qwen3Config::preset("qwen3-32b").expect("preset");
    let e = p.expected_error(None, &ModelShape::from_qwen3(&big), &gpu("h200-sxm"), &f);
    // The largest over every held-out size on the whole GPU.
    assert_eq!((e.decode_pct, e.prefill_pct), (12.0, 7.0));
    assert!(
        e.off_ground.iter().any(|n| n.contains("outside")),
        "{:?}",
        e.off_ground
    );
}

#[test]
fn an_old_or_foreign_file_says_how_to_refit() {
    let text = ron::ser::to_string(&OperatorParams::initial()).expect("ron");
    let err = OperatorProfile::parse(&text, "old.ron").expect_err("bare params are not a profile");
    assert!(err.to_string().contains("exp transfer-check"), "{err}");
    // The format before this one, and one after it.
    for found in [FORMAT - 1, FORMAT + 1] {
        let mut p = profile();
        p.format = found;
        let text = ron::ser::to_string(&p).expect("ron");
        let err = OperatorProfile::parse(&text, "other.ron").expect_err("another format");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("format {found}, this exp reads format {FORMAT}"))
                && msg.contains("exp transfer-check"),
            "{msg}"
        );
    }
}

#[test]
fn the_shipped_profile_is_the_one_transfer_check_wrote() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let shipped = std::fs::read_to_string(format!("{root}/calibration/operators/h200-sxm.ron"))
        .expect("shipped profile");
    let written = std::fs::read_to_string(format!("{root}/results/h200/operator_profile.ron"))
        .expect("transfer-check output");
    assert_eq!(
        shipped, written,
        "copy results/h200/operator_profile.ron over the shipped one"
    );
    let p = OperatorProfile::parse(&shipped, "shipped").expect("loads");
    assert!(p.params.is_valid());
}

#[test]
fn pricing_on_the_calibration_gpu_is_the_operator_model_itself() {
    // The GPU is an input: nothing is moved, so the cost model on the
    // calibration GPU prices a step exactly as the fitted model does.
    let p = profile();
    let shape = family()[1].1.clone();
    let h200 = gpu("h200-sxm");
    let model = OperatorCostModel {
        params: p.params,
        shape: shape.clone(),
        gpu: h200.clone(),
    };
    let batch = BatchShape {
        seqs: vec![
            engine::SeqShape {
                new_tokens: 1,
                context_before: 300,
                samples: true,
            };
            8
        ],
    };
    let direct = step_time(&p.params, &shape, &h200, &batch).total();
    assert_eq!(model.step_seconds(&batch), direct);
    assert!(direct > 0.0);
}

#[test]
fn a_gpu_measured_and_held_out_gets_its_own_errors() {
    let mut p = profile();
    let measured = [
        row("gpu", "qwen3-8b@h100-sxm@132sm", "decode b=1 ctx=300", -2.0),
        row("gpu", "qwen3-8b@h100-sxm@132sm", "prefill 512", 3.0),
        row(
            "gpu",
            "qwen3-0.6b@h100-sxm@132sm",
            "decode b=1 ctx=300",
            11.0,
        ),
        row("gpu", "qwen3-0.6b@h100-sxm@132sm", "prefill 512", 13.0),
        row("gpu", "qwen3-8b@h100-sxm@16sm", "decode b=1 ctx=300", 30.0),
    ];
    p.held_out.extend(summarise(&measured));
    let held = p
        .held_out
        .iter()
        .find(|e| e.held_out == "gpu" && e.sm_count == 16)
        .expect("the slice's row");
    assert_eq!(
        (held.gpu.as_deref(), held.model.as_str()),
        (Some("h100-sxm"), "qwen3-8b")
    );
    let f = family();
    // A size measured there: its own errors there, and no slice added.
    let e = p.expected_error(Some("qwen3-8b"), &f[1].1, &gpu("h100-sxm"), &f);
    assert_eq!((e.decode_pct, e.prefill_pct), (2.0, 3.0));
    assert!(e.basis.contains("measured on the h100-sxm"), "{}", e.basis);
    // Another shape: the larger of the sizes' hold-out and every size there.
    let shape = ModelShape {
        hidden: 3072,
        ..f[1].1.clone()
    };
    let e = p.expected_error(None, &shape, &gpu("h100-sxm"), &f);
    assert_eq!((e.decode_pct, e.prefill_pct), (12.0, 13.0));
    // The measured slice of it: that slice's rows.
    let slice = crate::operators::slices::slice_of(&gpu("h100-sxm"), 16, 1.5);
    let e = p.expected_error(Some("qwen3-8b"), &f[1].1, &slice, &f);
    assert_eq!(e.decode_pct, 30.0);
    assert!(
        e.basis.contains("h100-sxm limited to 16 SMs"),
        "{}",
        e.basis
    );
    // A GPU nobody held out keeps the slice rule.
    let e = p.expected_error(Some("qwen3-8b"), &f[1].1, &gpu("a100-80gb-sxm"), &f);
    assert!(e.basis.contains("slices"), "{}", e.basis);
}
