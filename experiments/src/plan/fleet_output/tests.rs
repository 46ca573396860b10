use super::*;

#[test]
fn an_unpriced_gpu_has_empty_price_cells() {
    let row = FleetRow {
        gpu: "rtx-4060-laptop".into(),
        qps: 5.0,
        replicas: Some(2),
        router: "least_outstanding",
        max_num_batched_tokens: Some(1024),
        max_num_seqs: Some(16),
        single_engine_max_qps: Some(3.0),
        ttft_p99_ms: Some(100.0),
        itl_p99_ms: Some(10.0),
        requests_per_run: Some(40),
        usd_per_gpu_hour: None,
        usd_per_hour: None,
        output_tokens_per_s: 80.0,
        usd_per_million_output_tokens: None,
        price_source: "unpriced: no entry in p.ron".into(),
        note: None,
    };
    let csv = fleet_table(&[row]).to_csv();
    let line = csv.lines().nth(1).unwrap();
    assert!(
        line.starts_with("rtx-4060-laptop,5.000,2,least_outstanding,")
            && line.ends_with(",40,,,80.000,,unpriced: no entry in p.ron,"),
        "{line}"
    );
}
