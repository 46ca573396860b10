//! Inputs that are physically impossible or do not match the run are
//! refused before anything runs, each with an error naming the value and
//! the fix; nothing is clamped.

use crate::common;

use common::scratch;
use experiments::backend::cost::{check_compares_with, resolve};
use experiments::backend::{
    make_backends, CostSource, LoadedModel, Mode, ModelChoice, RunnerKind, SHIPPED,
};
use experiments::catalogue::{self, Condition};
use experiments::memory::{self, Bytes, MemoryError};
use experiments::run_cli;
use sim::workload::PromptSource;

fn error_of(args: &[&str]) -> String {
    let args = std::iter::once("exp").chain(args.iter().copied());
    format!("{:#}", run_cli(args).expect_err("command should fail"))
}

/// The conditions `name` plans with `sets` applied, or its error's text.
fn plan(name: &str, sets: &[&str]) -> Result<Vec<Condition>, String> {
    let exp = catalogue::find(name).expect("experiment exists");
    let mut settings = catalogue::default_settings(exp).expect("defaults parse");
    for s in sets {
        settings.set_arg(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    let prompts = PromptSource::random_tokens(151_936).expect("prompts");
    exp.plan(&settings, 0, &prompts).map_err(|e| e.to_string())
}

#[test]
fn a_percentage_above_100_is_an_error_not_clamped() {
    let msg = plan("poisson_mix", &["shared_pct=150"]).unwrap_err();
    assert!(
        msg.contains("shared_pct") && msg.contains("150") && msg.contains("from 0 to 100"),
        "{msg}"
    );
    plan("poisson_mix", &["shared_pct=100", "requests=30"]).expect("100 % is a percentage");
}

#[test]
fn a_shared_prefix_not_shorter_than_every_prompt_is_an_error() {
    let msg = plan("poisson_mix", &["prefix_tokens=3000", "prompt_max=3000"]).unwrap_err();
    assert!(
        msg.contains("prefix_tokens")
            && msg.contains("3000")
            && msg.contains("prompt_max")
            && msg.contains("lower prefix_tokens"),
        "{msg}"
    );
    // Without shared prompts the prefix length is not used.
    plan(
        "poisson_mix",
        &["prefix_tokens=3000", "shared_pct=0", "requests=30"],
    )
    .expect("no prompt shares a prefix");
    plan("poisson_mix", &["prefix_tokens=2999", "requests=30"]).expect("one token shorter");
}

#[test]
fn a_closed_loop_too_large_for_memory_is_refused_before_its_scripts_are_built() {
    // 10^7 clients: 10^14 dependencies a batch, far beyond any machine.
    let msg = plan("cb_sweep", &["concurrency=10000000"]).unwrap_err();
    assert!(
        msg.contains("concurrency")
            && msg.contains("10000000 clients")
            && msg.contains("is available")
            && msg.contains("lower concurrency"),
        "{msg}"
    );
    let msg = plan("chunk_sweep", &["part=load", "concurrency=10000000"]).unwrap_err();
    assert!(msg.contains("lower concurrency"), "{msg}");
}

#[test]
fn a_run_larger_than_the_available_memory_is_refused_naming_both_figures() {
    let exp = catalogue::find("cb_sweep").unwrap();
    let conditions = plan("cb_sweep", &["max_num_seqs=1", "concurrency=256"]).unwrap();
    let backends = make_backends(Mode::Sim, &CostSource::Datasheet("h200-sxm".into())).unwrap();
    let backend = backends[0].as_ref();
    let needed = memory::estimate(&conditions, backend);
    // 2,049 requests of 128 outputs, one a step: about 2,000 × 128 step records.
    assert!(needed > 50 << 20 && needed < 500 << 20, "{needed}");
    memory::check_against(exp, &conditions, backend, Some(needed)).expect("fits exactly");
    memory::check_against(exp, &conditions, backend, None).expect("unknown: nothing refused");
    let err = memory::check_against(exp, &conditions, backend, Some(needed / 2)).unwrap_err();
    let MemoryError::TooLarge {
        needed: shown,
        available,
        ..
    } = &err;
    assert_eq!((*shown, *available), (Bytes(needed), Bytes(needed / 2)));
    let msg = err.to_string();
    assert!(
        msg.contains(&Bytes(needed).to_string())
            && msg.contains(&Bytes(needed / 2).to_string())
            && msg.contains("MemAvailable")
            && msg.contains("max_num_seqs=1 concurrency=256")
            && msg.contains("lower concurrency, batches, output_tokens"),
        "{msg}"
    );
}

#[test]
fn the_memory_estimate_grows_with_the_run() {
    let backends = make_backends(Mode::Sim, &CostSource::Datasheet("h200-sxm".into())).unwrap();
    let at = |c: &str| {
        let conditions = plan("cb_sweep", &["max_num_seqs=1", &format!("concurrency={c}")]);
        memory::estimate(&conditions.unwrap(), backends[0].as_ref())
    };
    let (small, large) = (at("64"), at("1024"));
    assert!(small >= memory::BASE_BYTES && large > 8 * (small - memory::BASE_BYTES));
    assert_eq!(
        memory::parse_mem_available("MemTotal: 10 kB\nMemAvailable:   2048 kB\n"),
        Some(2 << 20)
    );
    assert_eq!(memory::parse_mem_available("MemTotal: 10 kB\n"), None);
    assert_eq!(Bytes(3 << 29).to_string(), "1.5 GiB");
    assert_eq!(Bytes(5 << 20).to_string(), "5 MiB");
}

#[test]
fn both_modes_on_the_cpu_runner_need_a_profile_measured_on_the_cpu() {
    let out = scratch("checks-both-cpu");
    let msg = error_of(&[
        "run",
        "prefix_cache",
        "--mode",
        "both",
        "--backend",
        "cpu",
        "--model",
        "tiny",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        msg.contains("--backend cpu")
            && msg.contains("roofline")
            && msg.contains("exp calibrate --backend cpu")
            && msg.contains("--mode real"),
        "{msg}"
    );
    assert!(
        !out.join("prefix_cache").exists(),
        "nothing is written before the check"
    );
}

#[test]
fn a_cost_model_is_compared_only_with_the_kind_of_runner_it_was_measured_on() {
    let model = LoadedModel::config_only(&ModelChoice::parse("qwen3-0.6b").unwrap()).unwrap();
    let shipped = resolve(&CostSource::Default("h200-sxm".into()), &model).unwrap();
    check_compares_with(&shipped, RunnerKind::Cuda).expect("a GPU profile for the GPU runner");
    let msg = check_compares_with(&shipped, RunnerKind::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("h200-qwen3-0.6b.ron") && msg.contains("--profile P.ron"),
        "{msg}"
    );

    let dir = scratch("checks-cpu-profile");
    let mut cpu = SHIPPED[0].load().unwrap();
    cpu.provenance.device = "cpu (2 threads)".into();
    let path = dir.join("cpu.ron");
    cpu.save(&path).unwrap();
    let measured = resolve(&CostSource::Profile(path), &model).unwrap();
    check_compares_with(&measured, RunnerKind::Cpu).expect("a CPU profile for the CPU runner");
    let msg = check_compares_with(&measured, RunnerKind::Cuda)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("cpu.ron")
            && msg.contains("measured on the CPU")
            && msg.contains("--backend cpu"),
        "{msg}"
    );
}

#[cfg(not(feature = "cuda"))]
#[test]
fn real_mode_without_cuda_and_without_backend_cpu_is_an_error() {
    let out = scratch("checks-no-cuda");
    for mode in ["real", "both"] {
        let msg = error_of(&[
            "run",
            "cb_sweep",
            "--mode",
            mode,
            "--model",
            "tiny",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            msg.contains("--features cuda") && msg.contains("--backend cpu"),
            "{mode}: {msg}"
        );
    }
    assert!(!out.join("cb_sweep").exists(), "nothing was written");
}

#[test]
fn calibrate_with_zero_reps_is_an_error() {
    let out = scratch("checks-reps");
    let profile = out.join("p.ron");
    let msg = error_of(&[
        "calibrate",
        "--out",
        profile.to_str().unwrap(),
        "--reps",
        "0",
        "--backend",
        "cpu",
        "--model",
        "tiny",
        "--grid",
        "small",
        "--quiet",
    ]);
    assert!(
        msg.contains("--reps 0") && msg.contains("--reps 1 or more"),
        "{msg}"
    );
    assert!(!profile.exists());
}
