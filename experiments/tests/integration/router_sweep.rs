//! router_sweep: routers over simulated fleets of replicas.

use crate::common;

use common::{evaluate_sim, scratch, values, TINY_CPU};
use experiments::catalogue;
use experiments::run_cli;
use experiments::table::Cell;

/// A smaller workload than the default, for the tests that only need some
/// routing to happen.
const SMALL: &[&str] = &["requests=40", "output_tokens=8", "prefix_tokens=512"];

#[test]
fn at_one_replica_every_router_gives_the_same_metrics() {
    let mut sets = SMALL.to_vec();
    sets.push("replicas=1");
    let e = evaluate_sim("router_sweep", &sets, 7);
    let t = &e.report.summary;
    let metrics = &t.columns[e.report.key_columns..];
    let row = |r: usize| -> Vec<Option<f64>> {
        metrics
            .iter()
            .map(|c| t.get(r, c).and_then(Cell::as_f64))
            .collect()
    };
    assert_eq!(t.rows.len(), 5, "one row per router");
    let first = row(0);
    assert!(first.iter().all(Option::is_some), "{first:?}");
    for r in 1..t.rows.len() {
        assert_eq!(row(r), first, "row {r}");
    }
}

#[test]
fn prefix_aware_beats_round_robin_at_four_replicas() {
    let e = evaluate_sim(
        "router_sweep",
        &["routers=round_robin,prefix_aware", "replicas=4"],
        0,
    );
    let t = &e.report.summary;
    let at = |router: &str, column: &str| values(t, "router", router, column)[0];
    let (rr_hits, pa_hits) = (
        at("round_robin", "prefix_hit_rate"),
        at("prefix_aware", "prefix_hit_rate"),
    );
    assert!(pa_hits > rr_hits + 0.1, "{pa_hits} vs {rr_hits}");
    let (rr_ttft, pa_ttft) = (
        at("round_robin", "ttft_p50_ms"),
        at("prefix_aware", "ttft_p50_ms"),
    );
    assert!(pa_ttft < rr_ttft, "{pa_ttft} vs {rr_ttft}");
}

#[test]
fn every_request_is_tagged_with_a_replica_of_its_fleet() {
    let mut sets = SMALL.to_vec();
    sets.extend(["routers=round_robin", "replicas=4"]);
    let e = evaluate_sim("router_sweep", &sets, 1);
    let mut seen = [0usize; 4];
    for r in &e.runs[0].requests {
        let (_, replica) = experiments::fleet::replica_of_tag(&r.tag).expect("replica tag");
        seen[replica] += 1;
    }
    assert_eq!(seen, [10, 10, 10, 10], "round robin deals evenly");
    let imbalance = values(&e.report.summary, "router", "round_robin", "load_imbalance");
    assert_eq!(imbalance, [1.0]);
}

#[test]
fn bad_parameters_are_errors_naming_the_key() {
    let exp = catalogue::find("router_sweep").unwrap();
    let prompts = sim::workload::PromptSource::random_tokens(1000).expect("a vocabulary of 1000");
    for (set, key) in [
        ("routers=random", "routers"),
        ("replicas=2,0", "replicas"),
        ("lambda=-1", "lambda"),
        ("rate=0", "rate"),
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

#[test]
fn real_mode_refuses_a_fleet() {
    let out = scratch("router-sweep-real");
    let mut args = vec![
        "exp",
        "run",
        "router_sweep",
        "--mode",
        "real",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "replicas=2",
    ];
    args.extend_from_slice(TINY_CPU);
    let err = run_cli(args.iter().copied()).expect_err("one CPU runner is no fleet");
    let text = format!("{err:#}");
    assert!(text.contains("--mode sim"), "{text}");
    assert!(text.contains("2 replica"), "{text}");
}
