//! `exp plan` on bad input: a GPU, SLO, model, setting or workload file
//! it cannot use fails naming the problem; a workload file or a trace plans.

use super::*;

#[test]
fn bad_gpu_slo_model_and_settings_fail_naming_the_problem() {
    let out = scratch("plan_bad");
    let o = out.to_str().unwrap();
    let msg = error_of(&["plan", "--gpu", "h200-sxm,gtx-9999", "--out", o]);
    assert!(
        msg.contains("gtx-9999") && msg.contains("known GPUs"),
        "{msg}"
    );
    let msg = error_of(&["plan", "--out", o]);
    assert!(msg.contains("--gpu"), "{msg}");
    let msg = error_of(&["plan", "--gpu", "all", "--slo", "ttft_p99=9", "--out", o]);
    assert!(msg.contains("--slo") && msg.contains("ttft_p99"), "{msg}");
    let msg = error_of(&[
        "plan",
        "--gpu",
        "all",
        "--slo",
        "itl_p99_ms=soon",
        "--out",
        o,
    ]);
    assert!(msg.contains("itl_p99_ms") && msg.contains("soon"), "{msg}");
    let msg = error_of(&["plan", "--gpu", "all", "--model", "llama", "--out", o]);
    assert!(msg.contains("llama"), "{msg}");
    let msg = error_of(&[
        "plan",
        "--gpu",
        "all",
        "--set",
        "gpu_memory_utilization=1.5",
        "--out",
        o,
    ]);
    assert!(msg.contains("gpu_memory_utilization"), "{msg}");
    let msg = error_of(&["plan", "--gpu", "all", "--set", "max_num_seq=4", "--out", o]);
    assert!(
        msg.contains("max_num_seq") && msg.contains("valid keys"),
        "{msg}"
    );
    let bad = out.join("bad_gpus.ron");
    std::fs::write(&bad, "[(name: \"x\", bf16_flops: -1.0, mem_bandwidth: 1e12, mem_bytes: 1e10, sm_count: 1, source: \"t\")]").unwrap();
    let msg = error_of(&["plan", "--gpu-file", bad.to_str().unwrap(), "--out", o]);
    assert!(
        msg.contains("bf16_flops") && msg.contains("bad_gpus.ron"),
        "{msg}"
    );
    assert!(!out.join("plan.csv").exists(), "nothing ran");
}

fn workload_error(name: &str, text: &str) -> String {
    let dir = scratch("plan_workloads");
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let out = dir.join("out");
    error_of(&[
        "plan",
        "--gpu",
        "h200-sxm",
        "--workload",
        path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn bad_workload_files_fail_naming_file_line_and_field() {
    let msg = workload_error(
        "w1.ron",
        "(\n  prompt_tokens: Fixed(512),\n  output_tokens: Fixed(0),\n)",
    );
    assert!(
        msg.contains("w1.ron:3") && msg.contains("output_tokens") && msg.contains("Fixed(0)"),
        "{msg}"
    );
    let msg = workload_error(
        "w2.ron",
        "(\n  prompt_tokens: Uniform(min: 900, max: 100),\n  output_tokens: Fixed(1),\n)",
    );
    assert!(
        msg.contains("w2.ron:2") && msg.contains("prompt_tokens"),
        "{msg}"
    );
    let msg = workload_error(
        "w3.ron",
        "(\n  prompt_tokens: Fixed(512),\n  outputs: Fixed(4),\n)",
    );
    assert!(msg.contains("w3.ron:3") && msg.contains("outputs"), "{msg}");
    let msg = workload_error(
        "w4.ron",
        "(prompt_tokens: Fixed(4000), output_tokens: Fixed(200))",
    );
    assert!(
        msg.contains("max_model_len") && msg.contains("prompt_tokens"),
        "{msg}"
    );
    let msg = workload_error(
        "w5.csv",
        "arrival_s,prompt_tokens,output_tokens\n0.0,10,4\n0.5,ten,4\n",
    );
    assert!(
        msg.contains("w5.csv:3") && msg.contains("prompt_tokens"),
        "{msg}"
    );
    let msg = workload_error(
        "w6.csv",
        "arrival_s,prompt_tokens,output_tokens\n1.0,10,4\n",
    );
    assert!(
        msg.contains("arrival_s") && msg.contains("two distinct"),
        "{msg}"
    );
    let msg = workload_error("w7.yaml", "x");
    assert!(msg.contains("w7.yaml") && msg.contains(".ron"), "{msg}");
    let msg = error_of(&[
        "plan",
        "--gpu",
        "h200-sxm",
        "--workload",
        "/nonexistent/w.ron",
    ]);
    assert!(msg.contains("/nonexistent/w.ron"), "{msg}");
}

#[test]
fn a_workload_file_and_a_trace_both_plan() {
    let dir = scratch("plan_workload_ok");
    let ron = dir.join("mixed.ron");
    std::fs::write(
        &ron,
        "(prompt_tokens: Choices([(128, 3.0), (1024, 1.0)]), output_tokens: Uniform(min: 16, max: 64))",
    )
    .unwrap();
    let trace = dir.join("t.csv");
    let mut csv = String::from("arrival_s,prompt_tokens,output_tokens\n");
    for i in 0..30 {
        csv.push_str(&format!("{},{},{}\n", i as f64 * 0.1, 64 + i, 8));
    }
    std::fs::write(&trace, csv).unwrap();
    for (name, path) in [("ron", &ron), ("trace", &trace)] {
        let out = dir.join(name);
        small_plan(
            &out,
            &["--gpu", "h200-sxm", "--workload", path.to_str().unwrap()],
        )
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let (header, rows) = read_plan(&out);
        assert!(num(&header, &rows[0], "max_qps_under_slo") > 0.0, "{name}");
        let meta = std::fs::read_to_string(out.join("meta.ron")).unwrap();
        assert!(
            meta.contains(path.file_name().unwrap().to_str().unwrap()),
            "{meta}"
        );
    }
}
