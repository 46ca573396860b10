//! `exp plan`'s parts: KV capacity by hand, workload drawing and rescaling,
//! the choice of the best setting, and `exp run --gpu` for every table GPU.

use crate::common;

use common::scratch;
use engine::EngineConfig;
use experiments::backend::{cost_for, LoadedModel, ModelChoice, ProfileLookup, SimBackend};
use experiments::plan::cost::kv_capacity_tokens;
use experiments::run_cli;
use sim::{GpuSpec, ModelShape};
use std::path::Path;

/// The plan's sim backend for Qwen3-0.6B on `gpu`, priced by its roofline.
fn roofline_target(gpu: &GpuSpec) -> SimBackend {
    let model = LoadedModel::config_only(&ModelChoice::Preset("qwen3-0.6b".into())).unwrap();
    let cost = cost_for(&ModelShape::qwen3_0_6b(), gpu, &ProfileLookup::Roofline).unwrap();
    SimBackend::new(cost, &model, None)
}

fn run(args: &[&str]) -> anyhow::Result<()> {
    run_cli(std::iter::once("exp").chain(args.iter().copied()))
}

/// `plan.csv`'s `kv_capacity_tokens` of the first GPU.
fn planned_kv_capacity(out: &Path) -> String {
    let text = std::fs::read_to_string(out.join("plan.csv")).expect("plan.csv");
    let (header, rows) = common::csv_rows(&text);
    let i = header
        .iter()
        .position(|c| c == "kv_capacity_tokens")
        .expect("column");
    rows.first().expect("row")[i].clone()
}

#[test]
fn kv_capacity_matches_a_hand_computation() {
    // h200-sxm, Qwen3-0.6B bf16, defaults gpu_memory_utilization 0.9,
    // max_num_batched_tokens 2048, max_num_seqs 256, block 16:
    //   memory      141 GiB            = 151_397_597_184 B
    //   x 0.9                          = 136_257_837_465.6 B
    //   weights: linear 28 x (1024 x (2048 + 2 x 1024) + 2048 x 1024
    //            + 3 x 1024 x 3072) = 440_401_920 params, norms
    //            28 x (2 x 1024 + 2 x 128) + 1024 = 65_536, embedding (tied)
    //            151_936 x 1024 = 155_582_464; 596_049_920 x 2 B
    //                                  =   1_192_099_840 B
    //   reserve: runtime 512 MiB       =     536_870_912 B
    //            activations 2048 tokens x (4 x 1024 + 2048 + 2 x 1024
    //            + 3 x 3072) x 2 B     =      71_303_168 B
    //            fp32 logits 256 x 151_936 x 4 B = 155_582_464 B
    //   budget                         = 134_301_981_081.6 B
    //   block: 16 tokens x 2 (K, V) x 28 layers x 8 heads x 128 x 2 B
    //                                  =       1_835_008 B
    //   blocks = floor(budget / block) = 73_188 (null block included)
    //   tokens = (73_188 - 1) x 16     = 1_170_992
    let h200 = calibration::datasheet::lookup("h200-sxm").unwrap();
    let target = roofline_target(&h200);
    let config = EngineConfig::default();
    assert_eq!(target.capacity_blocks(&config), 73_188);
    assert_eq!(
        sim::cost::kv_cache_blocks(&h200, &ModelShape::qwen3_0_6b(), &config),
        73_188
    );
    assert_eq!(kv_capacity_tokens(73_188, 16), 1_170_992);
    // The same figure reaches plan.csv when the grid is that one setting.
    let out = scratch("plan_kv");
    let mut args = vec!["plan", "--gpu", "h200-sxm", "--out", out.to_str().unwrap()];
    // One setting (the engine defaults), few requests, tiny cb_sweep.
    args.extend([
        "--set",
        "requests=40",
        "--set",
        "prefix_caching_hash_algo=xxhash",
        "--set",
        "max_num_batched_tokens=2048",
        "--set",
        "max_num_seqs=256",
        "--cb-set",
        "concurrency=1",
        "--cb-set",
        "batches=2",
        "--cb-set",
        "output_tokens=2",
        "--quiet",
    ]);
    run(&args).expect("plan runs");
    assert_eq!(planned_kv_capacity(&out), "1170992");
    // gpu_memory_utilization goes through the shared settings parser:
    // 0.8 x 141 GiB gives floor((121_118_077_747.2 - 1_192_099_840
    // - 763_756_544) / 1_835_008) = 64_938 blocks.
    let mut lower = config.clone();
    lower.gpu_memory_utilization = 0.8;
    assert_eq!(target.capacity_blocks(&lower), 64_938);
    args.extend(["--set", "gpu_memory_utilization=0.8"]);
    run(&args).expect("plan runs");
    assert_eq!(planned_kv_capacity(&out), (64_937 * 16).to_string());
}

#[test]
fn exp_run_sim_accepts_every_table_gpu() {
    use experiments::backend::{make_backends, CostSource, Mode};
    use experiments::{catalogue, driver};
    // Through the command line for one GPU (files written, GPU in meta.ron) ...
    let out = scratch("run_every_gpu");
    let sets = [
        "concurrency=1",
        "batches=2",
        "prompt_tokens=16",
        "output_tokens=2",
    ];
    let mut args = vec!["run", "cb_sweep", "--mode", "sim", "--gpu", "l4", "--quiet"];
    args.extend(["--out", out.to_str().unwrap()]);
    for s in &sets {
        args.extend(["--set", s]);
    }
    run(&args).expect("exp run --gpu l4");
    let meta = std::fs::read_to_string(out.join("cb_sweep/sim/meta.ron")).unwrap();
    assert!(meta.contains("\"l4\""), "{meta}");
    // ... and for every table GPU through the same backend, without files.
    let exp = catalogue::find("cb_sweep").unwrap();
    let mut settings = catalogue::default_settings(exp).unwrap();
    for s in &sets {
        settings.set_arg(s).unwrap();
    }
    let ttft = |gpu: &str| {
        let backends = make_backends(Mode::Sim, &CostSource::Datasheet(gpu.into()))
            .unwrap_or_else(|e| panic!("{gpu}: {e}"));
        let bar = indicatif::ProgressBar::hidden();
        let eval = driver::evaluate(exp, &settings, backends[0].as_ref(), 0, None, &bar)
            .unwrap_or_else(|e| panic!("{gpu}: {e}"));
        let t = &eval.report.summary;
        t.get(0, "ttft_median_ms").and_then(|c| c.as_f64()).unwrap()
    };
    let all: Vec<(String, f64)> = calibration::datasheet::known_names()
        .into_iter()
        .map(|g| {
            let t = ttft(&g);
            (g, t)
        })
        .collect();
    let of = |name: &str| all.iter().find(|(g, _)| g == name).unwrap().1;
    assert!(
        of("rtx-4060-laptop") > of("h200-sxm"),
        "a laptop GPU answers slower than an H200: {all:?}"
    );
}

#[test]
fn workload_requests_are_drawn_once_and_only_rescaled_by_rate() {
    use experiments::plan::workload::{at_rate, PlanWorkload};
    let dir = scratch("plan_workload_unit");
    let path = dir.join("w.ron");
    std::fs::write(
        &path,
        "(prompt_tokens: Choices([(100, 1.0), (300, 3.0)]), output_tokens: Uniform(min: 2, max: 5))",
    )
    .unwrap();
    let w = PlanWorkload::load(&path).unwrap();
    let unit = w.unit_rate_entries(4000, 7);
    assert_eq!(
        unit,
        w.unit_rate_entries(4000, 7),
        "same seed, same requests"
    );
    let mean_gap = unit.last().unwrap().arrival_s / unit.len() as f64;
    assert!((0.95..1.05).contains(&mean_gap), "mean gap {mean_gap}");
    let prompts: Vec<usize> = unit
        .iter()
        .map(|e| match e.prompt {
            sim::workload::TracePrompt::Length(n) => n,
            _ => panic!("lengths only"),
        })
        .collect();
    assert!(prompts.iter().all(|p| *p == 100 || *p == 300));
    let long = prompts.iter().filter(|p| **p == 300).count() as f64 / prompts.len() as f64;
    assert!((0.70..0.80).contains(&long), "weight 3:1 gives {long}");
    assert!(unit.iter().all(|e| (2..=5).contains(&e.output_tokens)));
    let fast = at_rate(&unit, 4.0);
    for (a, b) in unit.iter().zip(&fast) {
        assert!((b.arrival_s * 4.0 - a.arrival_s).abs() < 1e-9);
        assert_eq!((&a.prompt, a.output_tokens), (&b.prompt, b.output_tokens));
    }

    // A trace keeps its shape, shifted to 0 and scaled to one request per second.
    let trace = dir.join("t.jsonl");
    std::fs::write(
        &trace,
        "{\"arrival_s\": 10.0, \"prompt_tokens\": 8, \"output_tokens\": 2}\n\
         {\"arrival_s\": 10.5, \"prompt_tokens\": 8, \"output_tokens\": 2}\n\
         {\"arrival_s\": 12.0, \"prompt_tokens\": 8, \"output_tokens\": 2}\n",
    )
    .unwrap();
    let t = PlanWorkload::load(&trace).unwrap();
    let times: Vec<f64> = t
        .unit_rate_entries(1, 0)
        .iter()
        .map(|e| e.arrival_s)
        .collect();
    assert_eq!(times, vec![0.0, 0.5, 2.0]);
}

#[test]
fn best_setting_is_the_highest_rate_with_ties_to_fewer_resources() {
    use experiments::plan::search::{best, grid, SettingResult, Steady};
    let result = |b, s, qps| SettingResult {
        max_num_batched_tokens: b,
        max_num_seqs: s,
        kv_blocks: 100,
        max_qps: qps,
        at_max: None,
        saturation_rps: None,
        note: None,
        runs: 1,
        requests: 10,
        steady: Steady::NoRate,
    };
    assert_eq!(grid(&[512, 1024], &[16, 32]).len(), 4);
    let results = vec![
        result(1024, 64, 10.0),
        result(512, 64, 12.0),
        result(2048, 32, 12.0),
        result(512, 16, 3.0),
    ];
    let b = best(&results).unwrap();
    assert_eq!((b.max_num_batched_tokens, b.max_num_seqs), (2048, 32));
    assert!(best(&[result(512, 16, 0.0)]).is_none(), "0 is no setting");
}

#[test]
fn a_tighter_slo_gives_a_lower_rate_that_meets_it() {
    use experiments::plan::search::{measure, search_setting, SearchMethod, Start, ISOLATED_RATE};
    use experiments::plan::slo::Slo;
    use experiments::plan::workload::{Lengths, PlanWorkload, SyntheticWorkload};
    use sim::workload::{PromptSource, TraceReplay};
    let l4 = calibration::datasheet::lookup("l4").unwrap();
    let target = roofline_target(&l4);
    let workload = PlanWorkload::Synthetic {
        shape: SyntheticWorkload {
            prompt_tokens: Lengths::Uniform { min: 64, max: 512 },
            output_tokens: Lengths::Fixed(16),
        },
        file: None,
    };
    let entries = workload.unit_rate_entries(80, 3);
    let source = PromptSource::random_tokens(1000).unwrap();
    let unit = TraceReplay::new(entries, &source, 3, 1, 0)
        .unwrap()
        .arrivals()
        .to_vec();
    let method = SearchMethod {
        requests: 80,
        max_requests: 80,
        warmup_pct: 10.0,
        precision_pct: 2.0,
        seed: 3,
    };
    let mut engine = EngineConfig::default();
    engine.prefix_caching_hash_algo = engine::HashAlgo::Xxhash;
    let setting = (1024, 32);
    let run = (&unit[..], 80);
    let loose = search_setting(
        &target,
        &engine,
        setting,
        run,
        &Slo::default(),
        &method,
        Start::Cold,
    )
    .unwrap();
    let at_loose = loose.at_max.clone().expect("the default SLO is met");
    let alone = measure(
        &target,
        &engine,
        &unit,
        ISOLATED_RATE,
        &Slo::default(),
        10.0,
    )
    .unwrap();
    // Halfway between an idle engine's TTFT and the TTFT at the loose maximum.
    let tight_slo = Slo {
        ttft_p99_ms: (alone.ttft_p99_ms + at_loose.ttft_p99_ms) / 2.0,
        itl_p99_ms: 100.0,
    };
    let tight = search_setting(
        &target,
        &engine,
        setting,
        run,
        &tight_slo,
        &method,
        Start::Cold,
    )
    .unwrap();
    let at_tight = tight.at_max.clone().expect("met above the idle TTFT");
    assert!(tight.max_qps < loose.max_qps, "{tight:?} vs {loose:?}");
    assert!(at_tight.ttft_p99_ms <= tight_slo.ttft_p99_ms);
    // The bisection stopped within its precision of a failing rate.
    let above = measure(
        &target,
        &engine,
        &unit,
        tight.max_qps * 1.05,
        &tight_slo,
        10.0,
    )
    .unwrap();
    assert!(!above.meets_slo, "{above:?} at 5 % above {}", tight.max_qps);
}
