//! `exp run trace_replay --trace FILE`: every shipped trace replays and
//! writes its files and figures, reruns are byte-identical, the rate scale
//! and the window do what docs/traces.md says, and bad input fails naming it.

use crate::common;

use common::{csv_rows, scratch};
use experiments::run_cli;
use std::path::{Path, PathBuf};

fn run(args: &[&str]) -> anyhow::Result<()> {
    run_cli(std::iter::once("exp").chain(args.iter().copied()))
}

fn error_of(args: &[&str]) -> String {
    format!("{:#}", run(args).expect_err("the run fails"))
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// Every shipped trace, with the settings its replay needs.
const SHIPPED: &[(&str, &[&str])] = &[
    ("sim/tests/data/traces/azure_llm_2023_code_head200.csv", &[]),
    ("sim/tests/data/traces/azure_llm_2023_conv_head300.csv", &[]),
    ("sim/tests/data/traces/burstgpt_1_head400.csv", &[]),
    // Its prompts run to 121k tokens: the first 20 s, on a long context.
    (
        "sim/tests/data/traces/mooncake_conversation_head200.jsonl",
        &["max_model_len=131072", "window_s=20"],
    ),
    ("examples/traces/servetwin_two_tenants.csv", &[]),
];

const FIGURES: &[&str] = &[
    "trace_replay_itl_cdf",
    "trace_replay_kv",
    "trace_replay_queue",
    "trace_replay_ttft_cdf",
];

/// Runs the replay of `trace` in sim mode under `out`; returns its folder.
fn replay(out: &Path, trace: &Path, sets: &[&str]) -> PathBuf {
    let mut args = vec![
        "run",
        "trace_replay",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    run(&args).unwrap_or_else(|e| panic!("{}: {e:#}", trace.display()));
    out.join("trace_replay")
}

/// `column` of every row of `dir/file`, as numbers.
fn column(dir: &Path, file: &str, name: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let (header, rows) = csv_rows(&text);
    let i = header.iter().position(|h| h == name).expect(name);
    rows.iter().map(|r| r[i].parse().unwrap()).collect()
}

/// The replayed requests' `name` column (the warm-up, id 0, left out).
fn replayed(dir: &Path, name: &str) -> Vec<f64> {
    let ids = column(dir, "requests.csv", "id");
    let values = column(dir, "requests.csv", name);
    ids.iter()
        .zip(values)
        .filter(|(id, _)| **id != 0.0)
        .map(|(_, v)| v)
        .collect()
}

fn summary_value(dir: &Path, name: &str) -> f64 {
    column(dir, "summary.csv", name)[0]
}

#[test]
fn every_shipped_trace_replays_with_its_files_and_figures() {
    let out = scratch("trace-replay-shipped");
    for (trace, sets) in SHIPPED {
        let dir = replay(&out.join(trace.replace('/', "_")), &repo(trace), sets);
        for f in ["summary.csv", "requests.csv", "steps.csv", "meta.ron"] {
            assert!(dir.join("sim").join(f).is_file(), "{trace}: {f}");
        }
        for stem in FIGURES {
            for ext in ["png", "svg"] {
                let f = dir.join(format!("{stem}.{ext}"));
                assert!(f.is_file(), "{trace}: {}", f.display());
            }
        }
        let sim = dir.join("sim");
        let requests = summary_value(&sim, "requests");
        assert_eq!(requests as usize, replayed(&sim, "id").len(), "{trace}");
        assert!(requests > 10.0, "{trace}: {requests} requests");
        let kept = summary_value(&sim, "rows")
            - summary_value(&sim, "outside_window")
            - summary_value(&sim, "failed_or_empty")
            - summary_value(&sim, "too_long");
        assert_eq!(kept, requests, "{trace}: every row accounted for");
        for col in [
            "ttft_p50_ms",
            "ttft_p99_ms",
            "itl_p90_ms",
            "throughput_tok_s",
        ] {
            assert!(summary_value(&sim, col) > 0.0, "{trace}: {col}");
        }
        let peak = summary_value(&sim, "kv_usage_peak_pct");
        assert!(peak > 0.0 && peak <= 100.0, "{trace}: KV peak {peak} %");
        let totals = column(&sim, "steps.csv", "kv_blocks_total");
        let used = column(&sim, "steps.csv", "kv_blocks_used");
        assert!(totals.iter().zip(&used).all(|(t, u)| u <= t && *t > 0.0));
        // After a step its finished requests have left the running batch.
        let running = column(&sim, "steps.csv", "running_seqs");
        assert!(running.iter().any(|r| *r >= 1.0), "{trace}: requests run");
        if trace.contains("mooncake") {
            let hit = summary_value(&sim, "prefix_cache_hit_pct");
            assert!(hit > 0.0, "{trace}: shared hash_ids hit the cache");
        }
        // Every figure says what ran (GPU, cost model, model) and on what trace.
        let name = Path::new(trace).file_name().unwrap().to_str().unwrap();
        for stem in FIGURES {
            let svg = std::fs::read_to_string(dir.join(format!("{stem}.svg"))).unwrap();
            let words: Vec<&str> = svg.split_whitespace().collect();
            for word in ["h200-sxm", "h200-qwen3-0.6b.ron", "qwen3-0.6b", "sim:"] {
                assert!(
                    words.contains(&word),
                    "{trace} {stem}: subtitle lacks {word}"
                );
            }
            assert!(
                svg.contains(name),
                "{trace} {stem}: the title names the trace"
            );
            assert!(
                svg.contains("requests"),
                "{trace} {stem}: the workload line"
            );
        }
    }
}

#[test]
fn public_rows_no_engine_can_run_are_skipped_and_counted() {
    let out = scratch("trace-replay-too-long");
    let trace = "sim/tests/data/traces/mooncake_conversation_head200.jsonl";
    let dir = replay(&out, &repo(trace), &["window_s=20"]).join("sim");
    let too_long = summary_value(&dir, "too_long");
    assert!(too_long > 0.0, "prompts beyond max_model_len 4096");
    let prompts = replayed(&dir, "prompt_tokens");
    let outputs = replayed(&dir, "max_tokens");
    assert!(prompts.iter().zip(&outputs).all(|(p, o)| p + o <= 4096.0));
    assert!(!prompts.is_empty());
}

/// A few short requests on the CPU runner with the tiny model, real then sim.
#[test]
fn the_replay_runs_on_the_real_engine_and_compares_with_sim() {
    let out = scratch("trace-replay-both");
    let trace = out.join("short.csv");
    let mut text = String::from("arrival_s,prompt_tokens,output_tokens\n");
    for t in 0..4 {
        text.push_str(&format!("{}.0,{},4\n", t / 2, 16 + 8 * t));
    }
    std::fs::write(&trace, text).unwrap();
    let args = [
        "run",
        "trace_replay",
        "--mode",
        "both",
        "--backend",
        "cpu",
        "--model",
        "tiny",
        "--quiet",
        "--profile",
        common::tiny_cpu_profile(),
        "--out",
        out.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--set",
        "max_model_len=256",
        "--set",
        "max_num_batched_tokens=256",
        "--set",
        "rate_scale=100",
    ];
    run(&args).unwrap_or_else(|e| panic!("{e:#}"));
    let dir = out.join("trace_replay");
    for mode in ["real", "sim"] {
        let d = dir.join(mode);
        assert_eq!(summary_value(&d, "requests"), 4.0, "{mode}");
        assert_eq!(replayed(&d, "prompt_tokens"), [16.0, 24.0, 32.0, 40.0]);
        let total = column(&d, "steps.csv", "kv_blocks_total");
        assert!(total.iter().all(|t| *t == total[0] && *t > 0.0), "{mode}");
    }
    let compare = std::fs::read_to_string(dir.join("compare.csv")).unwrap();
    assert!(compare.contains("ttft_p50_ms"), "{compare}");
    let svg = std::fs::read_to_string(dir.join("trace_replay_ttft_cdf.svg")).unwrap();
    assert!(
        svg.contains("(real)") && svg.contains("(sim)"),
        "both modes drawn"
    );
}

#[test]
fn same_seed_gives_byte_identical_files_and_figures() {
    let out = scratch("trace-replay-rerun");
    let trace = repo("sim/tests/data/traces/azure_llm_2023_conv_head300.csv");
    let a = replay(&out.join("a"), &trace, &["window_s=60"]);
    let b = replay(&out.join("b"), &trace, &["window_s=60"]);
    let mut files = vec![];
    for f in ["summary.csv", "requests.csv", "steps.csv"] {
        files.push(format!("sim/{f}"));
    }
    for stem in FIGURES {
        files.push(format!("{stem}.svg"));
        files.push(format!("{stem}.png"));
    }
    for f in &files {
        let (x, y) = (
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
        );
        assert!(x == y, "{f} differs between reruns");
    }
}

#[test]
fn rate_scale_two_halves_the_arrival_span() {
    let out = scratch("trace-replay-rate");
    let trace = repo("sim/tests/data/traces/azure_llm_2023_code_head200.csv");
    let span = |dir: PathBuf| {
        let arrivals = replayed(&dir.join("sim"), "arrival_ms");
        let (lo, hi) = arrivals
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), a| {
                (l.min(*a), h.max(*a))
            });
        (arrivals.len(), hi - lo)
    };
    let (n1, s1) = span(replay(&out.join("x1"), &trace, &[]));
    let (n2, s2) = span(replay(&out.join("x2"), &trace, &["rate_scale=2"]));
    assert_eq!(n1, n2, "the same requests");
    assert!(s1 > 100_000.0, "the sample spans minutes: {s1} ms");
    assert!((s2 - s1 / 2.0).abs() < 1e-3, "{s2} ms against {s1} / 2");
}

#[test]
fn the_window_keeps_its_rows_rebased_to_its_start() {
    let out = scratch("trace-replay-window");
    let trace = out.join("ten.csv");
    let mut text = String::from("arrival_s,prompt_tokens,output_tokens\n");
    for t in 0..10 {
        text.push_str(&format!("{t},{},{}\n", 100 + t, 5 + t));
    }
    std::fs::write(&trace, text).unwrap();
    let sets = ["window_start_s=3", "window_s=4", "rate_scale=0.5"];
    let dir = replay(&out, &trace, &sets).join("sim");
    let prompts = replayed(&dir, "prompt_tokens");
    assert_eq!(prompts, [103.0, 104.0, 105.0, 106.0], "t in [3, 7)");
    assert_eq!(replayed(&dir, "max_tokens"), [8.0, 9.0, 10.0, 11.0]);
    let arrivals = replayed(&dir, "arrival_ms");
    for (i, a) in arrivals.iter().enumerate() {
        let offset = a - arrivals[0];
        let want = 2000.0 * i as f64;
        assert!(
            (offset - want).abs() < 1e-3,
            "1 s apart at half rate: {arrivals:?}"
        );
    }
    assert_eq!(summary_value(&dir, "outside_window"), 6.0);
}

#[test]
fn a_trace_is_needed_and_bad_input_fails_naming_it() {
    let out = scratch("trace-replay-errors");
    let o = out.to_str().unwrap();
    let e = error_of(&["run", "trace_replay", "--quiet", "--out", o]);
    assert!(e.contains("trace_replay needs --trace FILE"), "{e}");
    assert!(e.contains("servetwin, azure, mooncake, burstgpt"), "{e}");

    let missing = out.join("nowhere.csv");
    let m = missing.to_str().unwrap();
    let e = error_of(&["run", "trace_replay", "--quiet", "--out", o, "--trace", m]);
    assert!(e.contains("nowhere.csv"), "{e}");

    let good = repo("examples/traces/servetwin_two_tenants.csv");
    let g = good.to_str().unwrap();
    let with = |set: &str| {
        error_of(&[
            "run",
            "trace_replay",
            "--out",
            o,
            "--trace",
            g,
            "--set",
            set,
        ])
    };
    let e = with("format=parquet");
    assert!(
        e.contains("parquet") && e.contains("auto, servetwin, azure"),
        "{e}"
    );
    for bad in ["0", "-1", "nan"] {
        let e = with(&format!("rate_scale={bad}"));
        assert!(
            e.contains(&format!("`rate_scale` = `{bad}`")) && e.contains("> 0"),
            "{e}"
        );
    }
    let e = with("window_s=0");
    assert!(e.contains("`window_s` = `0`"), "{e}");
    let e = with("format=azure");
    assert!(
        e.contains("servetwin_two_tenants.csv") && e.contains("TIMESTAMP"),
        "{e}"
    );

    let broken = out.join("broken.csv");
    let text = "arrival_s,prompt_tokens,output_tokens\n0,10,5\n# note\n1,ten,5\n";
    std::fs::write(&broken, text).unwrap();
    let b = broken.to_str().unwrap();
    let e = error_of(&["run", "trace_replay", "--out", o, "--trace", b]);
    assert!(
        e.contains("broken.csv:4") && e.contains("prompt_tokens"),
        "{e}"
    );

    let e = error_of(&["run", "poisson_mix", "--out", o, "--trace", g]);
    assert!(
        e.contains("--trace FILE is read by trace_replay only"),
        "{e}"
    );
}
