//! The `--mode both` plumbing (two backends -> two folders, compare.csv,
//! charts with both sources), exercised with a stand-in "real" backend that
//! delegates to the simulator on a slower GPU, so that the test needs neither a GPU
//! nor the minutes a CPU runner would take.

use crate::common;

use common::scratch;
use engine::EngineConfig;
use experiments::backend::{make_backends, Backend, BackendError, BackendInfo, CostSource, Mode};
use experiments::catalogue;
use experiments::driver::{run_experiment, RunOptions};
use experiments::script::Script;
use sim::RunRecords;

struct StandIn(Box<dyn Backend>);

impl Backend for StandIn {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            mode: "real",
            ..self.0.info()
        }
    }
    fn vocab(&self) -> u32 {
        self.0.vocab()
    }
    fn kv_blocks(&self, engine: &EngineConfig) -> Option<usize> {
        self.0.kv_blocks(engine)
    }
    fn run(&self, engine: &EngineConfig, script: &Script) -> Result<RunRecords, BackendError> {
        self.0.run(engine, script)
    }
}

fn sim_on(gpu: &str) -> Box<dyn Backend> {
    make_backends(Mode::Sim, &CostSource::Datasheet(gpu.into()))
        .expect("datasheet GPU")
        .remove(0)
}

#[test]
fn two_backends_write_both_folders_and_compare_csv() {
    let out = scratch("both-modes");
    let exp = catalogue::find("prefix_cache").unwrap();
    let mut settings = catalogue::default_settings(exp).unwrap();
    for s in ["rounds=2", "warm_requests=1", "prefix_tokens=512"] {
        settings.set_arg(s).unwrap();
    }
    let real = StandIn(sim_on("a100-80gb-sxm"));
    let sim = sim_on("h200-sxm");
    let opts = RunOptions {
        out: out.clone(),
        seed: 3,
        quiet: true,
        prompts: None,
        date_utc: "2026-12-04T00:00:00Z".into(),
    };
    run_experiment(exp, &settings, &[&real, sim.as_ref()], &opts).expect("both modes run");
    let dir = out.join("prefix_cache");
    for f in [
        "real/summary.csv",
        "sim/summary.csv",
        "real/meta.ron",
        "prefix_cache_ttft.svg",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let compare = std::fs::read_to_string(dir.join("compare.csv")).unwrap();
    let (header, rows) = common::csv_rows(&compare);
    assert_eq!(header, ["condition", "metric", "real", "sim", "error_pct"]);
    let cold: Vec<&Vec<String>> = rows.iter().filter(|f| f[1] == "cold_ttft_ms").collect();
    assert_eq!(cold.len(), 4, "2 caching settings x 2 rounds: {compare}");
    for f in &cold {
        let (r, s, e): (f64, f64, f64) = (
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
            f[4].parse().unwrap(),
        );
        assert!(r > s, "the A100 stand-in is slower than the H200: {f:?}");
        assert!((e - (s - r) / r * 100.0).abs() < 0.01, "{f:?}");
    }
    let svg = std::fs::read_to_string(dir.join("prefix_cache_ttft.svg")).unwrap();
    assert!(
        svg.contains("(real)") && svg.contains("(sim)"),
        "legend names both modes"
    );
}
