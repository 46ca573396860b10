//! `exp plan --set qps=..` / `--trace`: fleet sizing, prices, and the
//! input checks of both. Small grids and short runs keep each plan to about
//! a second.

use crate::common;

use common::scratch;
use experiments::plan::fleet_output::FLEET_COLUMNS;
use experiments::run_cli;
use std::path::Path;

fn run(args: &[&str]) -> anyhow::Result<()> {
    run_cli(std::iter::once("exp").chain(args.iter().copied()))
}

fn error_of(args: &[&str]) -> String {
    format!("{:#}", run(args).expect_err("command should fail"))
}

/// A small search: short synthetic requests, two settings, tiny cb_sweep.
pub const SMALL: &[&str] = &[
    "--set",
    "requests=40",
    "--set",
    "max_requests=400",
    "--set",
    "max_num_batched_tokens=1024",
    "--set",
    "max_num_seqs=16,32",
    "--set",
    "precision_pct=10",
    "--set",
    "prefix_caching_hash_algo=xxhash",
    "--cb-set",
    "concurrency=1,2",
    "--cb-set",
    "batches=2",
    "--cb-set",
    "prompt_tokens=32",
    "--cb-set",
    "output_tokens=4",
    "--quiet",
];

/// Writes the short synthetic workload next to `out` and returns its path.
pub fn short_workload(out: &Path) -> String {
    let path = format!("{}-workload.ron", out.display());
    std::fs::write(
        &path,
        "(prompt_tokens: Fixed(128), output_tokens: Fixed(16))",
    )
    .unwrap();
    path
}

fn plan_args<'a>(out: &'a str, workload: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["plan", "--out", out, "--workload", workload];
    args.extend_from_slice(SMALL);
    args.extend_from_slice(extra);
    args
}

fn cell<'a>(header: &[String], row: &'a [String], column: &str) -> &'a str {
    let i = header.iter().position(|c| c == column).expect(column);
    &row[i]
}

#[test]
fn a_fleet_is_sized_priced_and_consistent_with_its_search() {
    let out = scratch("plan_fleet");
    let workload = short_workload(&out);
    let o = out.to_str().unwrap();
    // Above what one H100 serves of these short requests (about 950 req/s).
    let args = plan_args(o, &workload, &["--gpu", "h100-sxm", "--set", "qps=2500"]);
    run(&args).expect("fleet plan runs");
    let text = std::fs::read_to_string(out.join("fleet_plan.csv")).unwrap();
    let (header, rows) = common::csv_rows(&text);
    assert_eq!(header, FLEET_COLUMNS);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    let n: usize = cell(&header, r, "replicas")
        .parse()
        .expect("a fleet is found");
    let single: f64 = cell(&header, r, "single_engine_max_qps").parse().unwrap();
    assert!(n >= 2 && single > 0.0, "{r:?}");
    assert_eq!(cell(&header, r, "router"), "least_outstanding");
    let price: f64 = cell(&header, r, "usd_per_gpu_hour").parse().unwrap();
    let per_hour: f64 = cell(&header, r, "usd_per_hour").parse().unwrap();
    assert!(
        (per_hour - n as f64 * price).abs() < 2e-3,
        "{per_hour} vs {n} x {price}"
    );
    let tokens: f64 = cell(&header, r, "output_tokens_per_s").parse().unwrap();
    assert!((tokens - 2500.0 * 16.0).abs() < 1e-6);
    let per_mtok: f64 = cell(&header, r, "usd_per_million_output_tokens")
        .parse()
        .unwrap();
    assert!((per_mtok - per_hour / (tokens * 3600.0) * 1e6).abs() < 2e-3);
    let ttft: f64 = cell(&header, r, "ttft_p99_ms").parse().unwrap();
    assert!(ttft <= 2000.0);

    // The search behind it: the chosen count passed, and one fewer failed
    // or was below the saturation bound.
    let text = std::fs::read_to_string(out.join("fleet_search.csv")).unwrap();
    let (sh, srows) = common::csv_rows(&text);
    let chosen = srows
        .iter()
        .find(|s| {
            cell(&sh, s, "max_num_seqs") == cell(&header, r, "max_num_seqs")
                && cell(&sh, s, "max_num_batched_tokens")
                    == cell(&header, r, "max_num_batched_tokens")
        })
        .expect("the chosen setting's search");
    let probes = cell(&sh, chosen, "probes");
    assert!(probes.contains(&format!("{n}:yes")), "{probes}");
    let bound: usize = cell(&sh, chosen, "lower_bound").parse().unwrap();
    assert!(
        n == bound || probes.contains(&format!("{}:no", n - 1)),
        "{n} replicas, lower bound {bound}, probes {probes}"
    );
    for stem in [
        "fleet_usd_per_hour",
        "fleet_usd_per_million_output_tokens",
        "fleet_ttft_p99",
        "fleet_itl_p99",
    ] {
        assert!(out.join(format!("{stem}.png")).exists(), "{stem}");
    }
    let meta = std::fs::read_to_string(out.join("meta.ron")).unwrap();
    assert!(meta.contains("fleet:") && meta.contains("least_outstanding"));
    let assumptions = std::fs::read_to_string(out.join("assumptions.txt")).unwrap();
    assert!(assumptions.contains("tensor parallelism is not modelled"));
    // The single-engine plan is still there, unchanged in form.
    assert!(out.join("plan.csv").exists() && out.join("plan_search.csv").exists());
}

#[test]
fn without_a_rate_no_fleet_is_sized() {
    let out = scratch("plan_no_fleet");
    let workload = short_workload(&out);
    let o = out.to_str().unwrap();
    run(&plan_args(o, &workload, &["--gpu", "h100-sxm"])).unwrap();
    assert!(out.join("plan.csv").exists());
    assert!(!out.join("fleet_plan.csv").exists());
    let meta = std::fs::read_to_string(out.join("meta.ron")).unwrap();
    assert!(!meta.contains("fleet:"), "{meta}");
}

#[test]
fn a_gpu_without_a_price_names_the_gpu_and_the_file() {
    let out = scratch("plan_fleet_prices");
    let workload = short_workload(&out);
    let o = out.to_str().unwrap();
    let msg = error_of(&plan_args(
        o,
        &workload,
        &["--gpu", "rtx-4070-laptop", "--set", "qps=5"],
    ));
    assert!(
        msg.contains("rtx-4070-laptop")
            && msg.contains("gpu_prices.ron")
            && msg.contains("--prices"),
        "{msg}"
    );
    // A user table pricing it works, and its price is the one used.
    let prices = out.with_extension("prices.ron");
    std::fs::write(
        &prices,
        "[(gpu: \"h200-sxm\", usd_per_gpu_hour: 10.0, source: \"test\", month: \"2026-12\")]",
    )
    .unwrap();
    let p = prices.to_str().unwrap();
    let extra = ["--gpu", "h200-sxm", "--set", "qps=5", "--prices", p];
    run(&plan_args(o, &workload, &extra)).unwrap();
    let text = std::fs::read_to_string(out.join("fleet_plan.csv")).unwrap();
    let (header, rows) = common::csv_rows(&text);
    assert_eq!(cell(&header, &rows[0], "usd_per_gpu_hour"), "10.0000");
    assert!(cell(&header, &rows[0], "price_source").contains("test, 2026-12"));
}

#[test]
fn gpu_all_sizes_unpriced_gpus_with_a_warning_instead_of_failing() {
    let out = scratch("plan_fleet_all");
    let args = experiments::plan::PlanArgs {
        gpu: Some("all".into()),
        gpu_file: None,
        model: "qwen3-0.6b".into(),
        profile: None,
        profiles_dir: None,
        cost_model: Default::default(),
        operator_profile: None,
        workload: Some(short_workload(&out).into()),
        trace: None,
        router: None,
        prices: None,
        shard: None,
        slo: None,
        out: out.clone(),
        seed: 0,
        set: vec!["qps=5".into()],
        cb_set: Vec::new(),
        quiet: true,
    };
    let inputs = experiments::plan::inputs::read(&args).expect("every GPU, priced or not");
    let fleet = inputs.fleet.as_ref().expect("a fleet is sized");
    let unpriced: Vec<&str> = inputs
        .targets
        .iter()
        .zip(&fleet.prices)
        .filter(|(_, p)| p.is_none())
        .map(|(t, _)| t.cost().gpu.name.as_str())
        .collect();
    assert_eq!(unpriced, ["rtx-4070-laptop", "rtx-4060-laptop"]);
    let warnings = fleet.unpriced_warnings(&inputs.targets);
    assert_eq!(warnings.len(), 2);
    assert!(
        warnings[0].starts_with("warning: no list price for GPU rtx-4070-laptop")
            && warnings[0].contains("gpu_prices.ron")
            && warnings[0].contains("unpriced"),
        "{warnings:?}"
    );
    assert!(fleet.prices.iter().flatten().any(|p| p.gpu == "h200-sxm"));
}

#[test]
fn bad_fleet_inputs_fail_before_anything_runs() {
    let out = scratch("plan_fleet_bad");
    let workload = short_workload(&out);
    let out = out.join("out");
    let o = out.to_str().unwrap();
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../sim/tests/data/traces/azure_llm_2023_conv_head300.csv"
    );
    for (extra, needle) in [
        (vec!["--set", "qps=0"], "above 0"),
        (vec!["--set", "rate_scale=2"], "rate_scale scales a trace"),
        (vec!["--set", "qps=5", "--set", "rate_scale=2"], "not both"),
        (
            vec!["--set", "qps=5", "--router", "random"],
            "unknown router",
        ),
        (vec!["--router", "round_robin"], "--router and --prices"),
        (
            vec!["--set", "qps=5", "--set", "max_replicas=0"],
            "max_replicas",
        ),
        (vec!["--trace", trace], "cannot be used with"),
    ] {
        let mut args = plan_args(o, &workload, &["--gpu", "h100-sxm"]);
        args.extend(extra.iter().copied());
        let msg = error_of(&args);
        assert!(msg.contains(needle), "{extra:?}: {msg}");
    }
    assert!(!out.exists(), "nothing is written");
}
