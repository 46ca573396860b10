//! pd_sweep: aggregated against prefill/decode disaggregated fleets of the
//! same size, over request rates.

use crate::common;

use common::{evaluate_sim, values};
use experiments::catalogue;
use experiments::fleet::placement_of_tag;
use experiments::table::Cell;

/// A small sweep: 3 engines, two disaggregated splits, two rates.
const SMALL: &[&str] = &[
    "gpus=3",
    "prefill_replicas=1,2",
    "rates=10,40",
    "requests=24",
    "prompt_tokens=1024",
    "output_tokens=8",
];

#[test]
fn a_small_sweep_has_one_row_per_split_and_rate() {
    let e = evaluate_sim("pd_sweep", SMALL, 3);
    let t = &e.report.summary;
    let key = |r: usize, c: &str| t.get(r, c).map(Cell::to_string).unwrap_or_default();
    let rows: Vec<(String, String, String)> = (0..t.rows.len())
        .map(|r| (key(r, "split"), key(r, "rate_req_s"), key(r, "gpus")))
        .collect();
    let expected: Vec<(String, String, String)> = ["aggregated", "1P2D", "2P1D"]
        .iter()
        .flat_map(|s| ["10.000", "40.000"].map(|r| (s.to_string(), r.to_string(), "3".into())))
        .collect();
    assert_eq!(rows, expected);
    for column in &t.columns[e.report.key_columns..] {
        for r in 0..t.rows.len() {
            assert!(
                t.get(r, column).and_then(Cell::as_f64).is_some(),
                "row {r} has no {column}"
            );
        }
    }
    // Disaggregated runs place every request on both pools.
    let c = e
        .conditions
        .iter()
        .position(|c| c.disagg.is_some())
        .expect("a split");
    for r in &e.runs[c].requests {
        let (base, placement) = placement_of_tag(&r.tag).expect("placement tag");
        assert_eq!(base, "long");
        assert!(placement.prefill < 1 && placement.decode.is_some_and(|d| d < 2));
    }
    assert_eq!(e.report.charts.len(), 3);
}

#[test]
fn a_slower_link_leaves_ttft_and_stretches_the_gap_after_the_first_token() {
    let run = |link: &str| {
        let mut sets = SMALL.to_vec();
        sets.extend(["prefill_replicas=1", "rates=10", link]);
        evaluate_sim("pd_sweep", &sets, 5)
    };
    let (instant, slow) = (run("link_gb_s=inf"), run("link_gb_s=1"));
    let at = |e: &experiments::driver::Evaluation, column: &str| {
        values(&e.report.summary, "split", "1P2D", column)[0]
    };
    assert_eq!(at(&instant, "ttft_p50_ms"), at(&slow, "ttft_p50_ms"));
    // 1,024 tokens of Qwen3-0.6B K/V (112 KiB a token) at 1 GB/s: 117 ms.
    let gap = at(&slow, "itl_p99_ms") - at(&instant, "itl_p99_ms");
    assert!(gap > 100.0, "{gap}");
    let aggregated = |e: &experiments::driver::Evaluation| {
        values(&e.report.summary, "split", "aggregated", "itl_p99_ms")[0]
    };
    assert_eq!(aggregated(&instant), aggregated(&slow), "no link there");
}

#[test]
fn bad_parameters_are_errors_naming_the_key() {
    let exp = catalogue::find("pd_sweep").unwrap();
    let prompts = sim::workload::PromptSource::random_tokens(1000).expect("a vocabulary of 1000");
    for (set, key) in [
        ("prefill_replicas=1,4", "prefill_replicas"),
        ("gpus=1", "gpus"),
        ("link_gb_s=0", "link_gb_s"),
        ("link_gb_s=nan", "link_gb_s"),
        ("link_latency_us=-1", "link_latency_us"),
        ("rates=10,0", "rates"),
        ("prompt_tokens=4090", "prompt_tokens"),
        ("router=random", "router"),
    ] {
        let mut settings = catalogue::default_settings(exp).unwrap();
        let err = match settings.set_arg(set) {
            Err(e) => e.to_string(),
            Ok(()) => match exp.plan(&settings, 0, &prompts) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{set} was accepted"),
            },
        };
        assert!(err.contains(key), "{set}: {err}");
    }
}
