//! Every figure of a run says what ran: the subtitle under its title names
//! the GPU, the cost model, the model and the workload.

use crate::common;

use common::scratch;
use experiments::run_cli;

#[test]
fn every_figure_of_a_sim_run_names_the_gpu_cost_model_and_model() {
    let out = scratch("subtitles");
    let args = [
        "exp",
        "run",
        "chunk_sweep",
        "--mode",
        "sim",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "decode_tokens=200",
        "--set",
        "long_prompts=2",
        "--set",
        "batches=2",
        "--set",
        "output_tokens=8",
    ];
    run_cli(args.iter().copied()).expect("chunk_sweep runs");
    let dir = out.join("chunk_sweep");
    let mut svgs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    svgs.sort();
    let stems: Vec<String> = svgs
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        stems,
        [
            "chunk_sweep_load",
            "chunk_sweep_load_throughput",
            "chunk_sweep_stall"
        ]
    );
    for svg in &svgs {
        let text = std::fs::read_to_string(svg).unwrap();
        let name = svg.display();
        // Text elements hold one subtitle line each; the names are words of it.
        let words: Vec<&str> = text.split_whitespace().collect();
        for word in ["h200-sxm", "h200-qwen3-0.6b.ron", "qwen3-0.6b", "sim:"] {
            assert!(words.contains(&word), "{name} lacks {word:?}");
        }
        assert!(text.contains("output tokens"), "{name}: workload");
        assert!(text.contains("<rect"), "{name}: chunk sizes are bars");
        assert!(!text.contains("(real)"), "{name}: sim only");
    }
}

#[test]
fn every_svg_of_every_experiment_names_the_gpu_and_the_model() {
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/traces/servetwin_two_tenants.csv");
    let trace = trace.to_str().unwrap();
    let out = scratch("subtitles-every-experiment");
    let out = out.to_str().unwrap();
    let mut figures = 0;
    for exp in experiments::catalogue::all() {
        let name = exp.name();
        let mut args = vec!["exp", "run", name, "--mode", "sim", "--quiet", "--out", out];
        if name == "trace_replay" {
            args.extend_from_slice(&["--trace", trace]);
        }
        run_cli(args.iter().copied()).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let dir = std::path::Path::new(out).join(name);
        let svgs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "svg"))
            .collect();
        assert!(!svgs.is_empty(), "{name} drew no figure");
        for svg in &svgs {
            let words: Vec<String> = std::fs::read_to_string(svg)
                .unwrap()
                .split_whitespace()
                .map(str::to_string)
                .collect();
            for word in ["h200-sxm", "qwen3-0.6b"] {
                assert!(
                    words.iter().any(|w| w == word),
                    "{} lacks {word:?}",
                    svg.display()
                );
            }
        }
        figures += svgs.len();
    }
    // 2 + 3 + 1 + 2 + 2 + 1 + 4 + 2 + 3 figures across the nine experiments.
    assert_eq!(figures, 20);
}
