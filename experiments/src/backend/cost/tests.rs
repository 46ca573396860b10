//! `cost_for` and `resolve`: shipped, folder and file profiles, the roofline
//! fallback, and KV capacity.

use super::*;
use crate::backend::ModelChoice;
use calibration::features::NUM_FEATURES;
use calibration::Provenance;

fn model(name: &str) -> LoadedModel {
    LoadedModel::config_only(&ModelChoice::Preset(name.into())).unwrap()
}

fn write_profile(dir: &Path, shape: ModelShape) -> PathBuf {
    write_profile_as(dir, "p.ron", "tiny", shape)
}

fn write_profile_as(dir: &Path, file: &str, label: &str, shape: ModelShape) -> PathBuf {
    let provenance = Provenance {
        device: "test".into(),
        model: label.into(),
        engine_commit: "x".into(),
        date: "2026-01-01".into(),
        method: "measured".into(),
        samples: 0,
        holdout_error_pct_median: 1.0,
        holdout_error_pct_p90: 2.0,
    };
    let gpu = calibration::datasheet::lookup("h200-sxm").unwrap();
    let p = CostProfile::from_coefficients(&[1e-5; NUM_FEATURES], gpu, shape, provenance);
    let path = dir.join(file);
    p.save(&path).unwrap();
    path
}

#[test]
fn default_uses_the_shipped_profile_only_when_it_applies() {
    let tiny = resolve(&CostSource::Default("h200-sxm".into()), &model("tiny")).unwrap();
    assert!(tiny.description.starts_with("roofline"), "{tiny:?}");
    let qwen = resolve(
        &CostSource::Default("h100-sxm".into()),
        &model("qwen3-0.6b"),
    )
    .unwrap();
    assert!(
        qwen.description
            .starts_with("calibrated profile shipped:h200-qwen3-0.6b.ron (measured on h200-sxm, transferred to h100-sxm"),
        "{qwen:?}"
    );
    assert!(matches!(&qwen.basis, CostBasis::Profile { source, .. }
        if source == "shipped:h200-qwen3-0.6b.ron"));
    assert_eq!(qwen.gpu.name, "h100-sxm");
}

#[test]
fn profiles_load_transfer_and_must_match_the_model() {
    let dir = std::env::temp_dir().join(format!("cost-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tiny = model("tiny");
    let path = write_profile(&dir, ModelShape::from_qwen3(&tiny.config));
    let own = resolve(&CostSource::Profile(path.clone()), &tiny).unwrap();
    assert!(own.description.contains("as measured"), "{own:?}");
    assert_eq!(own.gpu.name, "h200-sxm");
    let moved = resolve(
        &CostSource::ProfileOn(path.clone(), "a100-80gb-sxm".into()),
        &tiny,
    )
    .unwrap();
    assert!(moved.description.contains("transferred"), "{moved:?}");
    assert_eq!(moved.gpu.name, "a100-80gb-sxm");
    let batch = engine::BatchShape {
        seqs: vec![engine::SeqShape {
            new_tokens: 1,
            context_before: 100,
            samples: true,
        }],
    };
    assert!(moved.model.step_seconds(&batch) > own.model.step_seconds(&batch));
    let e = resolve(&CostSource::Profile(path.clone()), &model("qwen3-0.6b")).unwrap_err();
    assert!(
        e.to_string().contains("p.ron") && e.to_string().contains("shape"),
        "{e}"
    );
    let e = resolve(&CostSource::ProfileOn(path, "gtx-1".into()), &tiny).unwrap_err();
    assert!(e.to_string().contains("gtx-1"), "{e}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_folder_profile_is_matched_by_model_shape_not_by_its_label() {
    let dir = std::env::temp_dir().join(format!("cost-folder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let qwen = ModelShape::qwen3_0_6b();
    let mut other = qwen.clone();
    other.num_layers = 12;
    // Sorted first, labelled as the model, but of another shape: skipped.
    write_profile_as(&dir, "a.ron", "qwen3-0.6b", other);
    // Labelled unlike any --model name, of the model's shape: used.
    write_profile_as(
        &dir,
        "b.ron",
        "qwen3-0.6b (synthetic weights, seed 0)",
        qwen.clone(),
    );
    let l4 = calibration::datasheet::lookup("l4").unwrap();
    let folder = ProfileLookup::Folder(dir.clone());
    let got = cost_for(&qwen, &l4, &folder).unwrap();
    assert!(
        got.description.contains("b.ron")
            && got
                .description
                .contains("measured on h200-sxm, transferred to l4"),
        "{got:?}"
    );
    assert!(got.is_transferred());
    assert_eq!(got.gpu.name, "l4");
    let tiny = ModelShape::from_qwen3(&model("tiny").config);
    let fallback = cost_for(&tiny, &l4, &folder).unwrap();
    assert_eq!(fallback.basis, CostBasis::Roofline);
    let none = cost_for(&qwen, &l4, &ProfileLookup::Folder(dir.join("absent"))).unwrap();
    assert_eq!(none.basis, CostBasis::Roofline);
    // A file in the folder that does not load is a broken tree: an error.
    std::fs::write(dir.join("c.ron"), "(not a profile").unwrap();
    let e = cost_for(&tiny, &l4, &folder).unwrap_err();
    assert!(e.to_string().contains("c.ron"), "{e}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn kv_blocks_come_from_memory_unless_set_explicitly() {
    let h200 = calibration::datasheet::lookup("h200-sxm").unwrap();
    let shape = ModelShape::qwen3_0_6b();
    let cost = cost_for(&shape, &h200, &ProfileLookup::Roofline).unwrap();
    let mut engine = engine::EngineConfig::default();
    assert_eq!(
        cost.kv_blocks(&engine),
        sim::cost::kv_cache_blocks(&h200, &shape, &engine)
    );
    engine.num_gpu_blocks = Some(123);
    assert_eq!(cost.kv_blocks(&engine), 123);
}

#[test]
fn a_profiles_folder_replaces_the_shipped_profiles() {
    let dir = std::env::temp_dir().join(format!("cost-override-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let qwen = model("qwen3-0.6b");
    // An empty folder: the roofline, not the shipped profile.
    let empty = resolve(&CostSource::Folder(dir.clone(), "h200-sxm".into()), &qwen).unwrap();
    assert_eq!(empty.basis, CostBasis::Roofline);
    let path = write_profile_as(&dir, "mine.ron", "mine", ModelShape::qwen3_0_6b());
    let got = resolve(&CostSource::Folder(dir.clone(), "h200-sxm".into()), &qwen).unwrap();
    let source = path.display().to_string();
    assert!(
        matches!(&got.basis, CostBasis::Profile { source: s, .. } if *s == source),
        "{got:?}"
    );
    assert!(got.description.contains("mine.ron") && !got.description.contains("shipped:"));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn short_labels_name_the_profile_file_or_the_roofline() {
    let qwen = model("qwen3-0.6b");
    let on = |gpu: &str| resolve(&CostSource::Default(gpu.into()), &qwen).unwrap();
    assert_eq!(on("h200-sxm").short_label(), "profile h200-qwen3-0.6b.ron");
    assert_eq!(
        on("h100-sxm").short_label(),
        "profile h200-qwen3-0.6b.ron (measured on h200-sxm, transferred)"
    );
    let roofline = resolve(&CostSource::Datasheet("h200-sxm".into()), &qwen).unwrap();
    assert_eq!(roofline.short_label(), "roofline");
    let dir = std::env::temp_dir().join(format!("cost-label-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tiny = model("tiny");
    let path = write_profile(&dir, ModelShape::from_qwen3(&tiny.config));
    let file = resolve(&CostSource::Profile(path), &tiny).unwrap();
    assert_eq!(
        file.short_label(),
        "profile p.ron",
        "the file name, not its folder"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_operator_model_prices_any_size_on_any_gpu_with_its_held_out_error() {
    let source = |gpu: &str| CostSource::Operators {
        gpu: gpu.into(),
        file: None,
        conflicting: None,
    };
    let on_l4 = resolve(&source("l4"), &model("qwen3-8b")).unwrap();
    assert!(
        matches!(&on_l4.basis, CostBasis::Operators { source } if source.starts_with("shipped:"))
    );
    assert_eq!(on_l4.gpu.name, "l4");
    let e = on_l4
        .expected_error
        .clone()
        .expect("the operator model has held-out errors");
    assert!(e.decode_pct > 0.0 && e.prefill_pct > 0.0, "{e:?}");
    // The L4 is another architecture: no hold-out covers that.
    assert!(
        e.off_ground.iter().any(|n| n.contains("architecture")),
        "{e:?}"
    );
    // On the calibration GPU a family size is on measured ground, and its
    // error is smaller than on a GPU no hold-out resembles.
    let home = resolve(&source("h200-sxm"), &model("qwen3-8b")).unwrap();
    let h = home.expected_error.clone().unwrap();
    assert!(h.off_ground.is_empty(), "{h:?}");
    assert!(h.decode_pct < e.decode_pct);
    let batch = engine::BatchShape {
        seqs: vec![
            engine::SeqShape {
                new_tokens: 1,
                context_before: 300,
                samples: true,
            };
            16
        ],
    };
    // A third of the H200's bandwidth and fewer SMs: a slower decode step.
    assert!(on_l4.model.step_seconds(&batch) > 3.0 * home.model.step_seconds(&batch));
}

#[test]
fn the_operator_model_refuses_a_calibrated_profile_beside_it() {
    let err = resolve(
        &CostSource::Operators {
            gpu: "h200-sxm".into(),
            file: None,
            conflicting: Some("mine.ron".into()),
        },
        &model("qwen3-0.6b"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("mine.ron") && err.contains("--cost-model profile"),
        "{err}"
    );
    let dir = std::env::temp_dir().join(format!("cost-operators-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let old = dir.join("params.ron");
    std::fs::write(&old, "(read_bandwidth_share: 1.0)").unwrap();
    let err = resolve(
        &CostSource::Operators {
            gpu: "h200-sxm".into(),
            file: Some(old),
            conflicting: None,
        },
        &model("qwen3-0.6b"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("exp transfer-check"), "{err}");
}

#[test]
fn both_modes_sim_must_price_the_gpu_the_real_runner_ran_on() {
    let qwen = model("qwen3-0.6b");
    let on = |gpu: &str| resolve(&CostSource::Datasheet(gpu.into()), &qwen).unwrap();
    // An H100's runner beside the default H200 sim: refused, naming the fix.
    let err = check_same_gpu(&on("h200-sxm"), "NVIDIA H100 80GB HBM3")
        .expect_err("another GPU")
        .to_string();
    assert!(err.contains("NVIDIA H100 80GB HBM3"), "{err}");
    assert!(err.contains("pass --gpu h100-sxm"), "{err}");
    // The same GPU, or a device the datasheet keys do not know: fine.
    assert!(check_same_gpu(&on("h100-sxm"), "NVIDIA H100 80GB HBM3").is_ok());
    assert!(check_same_gpu(&on("h200-sxm"), "NVIDIA H200").is_ok());
    assert!(check_same_gpu(&on("h200-sxm"), "NVIDIA GB200").is_ok());
    // A slice of the runner's GPU (--sm-count) is that GPU.
    let mut slice = on("h100-sxm");
    slice.gpu = calibration::operators::slices::slice_of(&slice.gpu, 16, 1.4);
    assert_eq!(slice.gpu.name, "h100-sxm@16sm");
    assert!(check_same_gpu(&slice, "NVIDIA H100 80GB HBM3").is_ok());
    assert!(check_same_gpu(&slice, "NVIDIA H200").is_err());
}
