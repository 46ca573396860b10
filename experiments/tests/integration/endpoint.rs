//! `exp run NAME --endpoint URL` against `exp serve --mode sim`'s server
//! (the serve crate, in-process on an ephemeral loopback port, 20× faster
//! than modeled): every request completes with its token count, the
//! prefix-cache condition that should hit does and caching off does not,
//! salts isolate tenants, steps.csv is absent and meta.ron says why;
//! `--mode both` writes compare.csv. A fake server on loopback gives the
//! failures: non-2xx with a vLLM error body, malformed SSE; a closed port
//! and a wrong model name fail before anything runs.

use crate::common::{csv_rows, scratch};
use crate::sim_server::SimServer;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

fn exp_run(args: &[&str]) -> anyhow::Result<()> {
    experiments::run_cli(["exp", "run"].iter().chain(args).copied())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (column index of `name`, rows) of a CSV file.
fn column(text: &str, name: &str) -> (usize, Vec<Vec<String>>) {
    let (header, rows) = csv_rows(text);
    let i = header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no {name} in {header:?}"));
    (i, rows)
}

/// Every request of `requests.csv` finished at its `max_tokens`.
fn assert_all_complete(requests: &str) -> usize {
    let (header, rows) = csv_rows(requests);
    let at = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (out, max, reason) = (at("output_tokens"), at("max_tokens"), at("finish_reason"));
    for row in &rows {
        assert_eq!(row[out], row[max], "{row:?}");
        assert_eq!(row[reason], "length", "{row:?}");
    }
    rows.len()
}

#[test]
fn cb_sweep_over_http_completes_every_request_and_writes_no_steps() {
    let server = SimServer::start(0.05);
    let out = scratch("endpoint-cb-sweep");
    let o = out.to_str().unwrap();
    let sets = [
        "max_num_seqs=1,256",
        "concurrency=1,4",
        "prompt_tokens=48",
        "output_tokens=6",
        "batches=2",
    ];
    let mut args = vec!["cb_sweep", "--endpoint", &server.url, "--out", o, "--quiet"];
    for s in &sets {
        args.extend(["--set", s]);
    }
    exp_run(&args).expect("cb_sweep runs against the endpoint");
    let dir = out.join("cb_sweep/real");
    // 4 conditions, each a warm-up and 2 batches of 2c requests.
    assert_eq!(
        assert_all_complete(&read(&dir.join("requests.csv"))),
        2 * (1 + 4 + 1 + 16)
    );
    assert!(
        !dir.join("steps.csv").exists(),
        "steps cannot be seen over HTTP"
    );
    let meta = read(&dir.join("meta.ron"));
    for needed in [
        "endpoint:",
        "not observable from outside the server",
        &server.url,
    ] {
        assert!(meta.contains(needed), "{needed} not in {meta}");
    }
    let (tp, rows) = column(&read(&dir.join("summary.csv")), "throughput_tok_s");
    assert_eq!(rows.len(), 4);
    assert!(
        rows.iter().all(|r| r[tp].parse::<f64>().unwrap() > 0.0),
        "{rows:?}"
    );
}

#[test]
fn prefix_cache_hits_only_with_caching_on_and_salts_isolate_tenants() {
    let server = SimServer::start(0.05);
    let out = scratch("endpoint-prefix");
    let o = out.to_str().unwrap();
    let mut args = vec![
        "prefix_cache",
        "--endpoint",
        &server.url,
        "--out",
        o,
        "--quiet",
    ];
    args.extend([
        "--set",
        "rounds=2",
        "--set",
        "warm_requests=2",
        "--set",
        "prefix_tokens=64",
    ]);
    args.extend(["--set", "unique_tokens=16", "--set", "output_tokens=2"]);
    exp_run(&args).expect("prefix_cache runs against the endpoint");
    let dir = out.join("prefix_cache/real");
    assert_all_complete(&read(&dir.join("requests.csv")));
    let (warm, rows) = column(&read(&dir.join("summary.csv")), "warm_cached_tokens");
    for row in &rows {
        let cached: f64 = row[warm].parse().unwrap();
        match row[0].as_str() {
            "on" => assert_eq!(cached, 64.0, "the shared prefix is found: {row:?}"),
            _ => assert_eq!(cached, 0.0, "caching off finds nothing: {row:?}"),
        }
    }
    // The same run again on the same (now warm) server starts cold: every
    // run gets its own salt namespace.
    exp_run(&args).expect("second run");
    let (cold, rows) = column(&read(&dir.join("summary.csv")), "cold_cached_tokens");
    assert!(rows.iter().all(|r| r[cold] == "0"), "{rows:?}");

    let out = scratch("endpoint-salts");
    let o = out.to_str().unwrap();
    let mut args = vec![
        "salt_isolation",
        "--endpoint",
        &server.url,
        "--out",
        o,
        "--quiet",
    ];
    args.extend([
        "--set",
        "cases=same_salt,different_salt",
        "--set",
        "rounds=1",
    ]);
    args.extend(["--set", "prefix_tokens=64", "--set", "unique_tokens=16"]);
    exp_run(&args).expect("salt_isolation runs against the endpoint");
    let (cached, rows) = column(
        &read(&out.join("salt_isolation/real/summary.csv")),
        "cached_tokens",
    );
    let by_case: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[cached].as_str()))
        .collect();
    assert_eq!(by_case, [("same_salt", "64"), ("different_salt", "0")]);
}

#[test]
fn both_modes_compare_the_server_with_its_twin() {
    let server = SimServer::start(0.05);
    let out = scratch("endpoint-both");
    let o = out.to_str().unwrap();
    let mut args = vec![
        "cb_sweep",
        "--endpoint",
        &server.url,
        "--mode",
        "both",
        "--out",
        o,
    ];
    args.extend([
        "--quiet",
        "--set",
        "max_num_seqs=256",
        "--set",
        "concurrency=2",
    ]);
    args.extend([
        "--set",
        "prompt_tokens=32",
        "--set",
        "output_tokens=4",
        "--set",
        "batches=2",
    ]);
    exp_run(&args).expect("both modes run");
    let exp = out.join("cb_sweep");
    assert!(exp.join("real/summary.csv").exists() && exp.join("sim/steps.csv").exists());
    let compare = read(&exp.join("compare.csv"));
    assert!(compare.lines().count() > 1, "{compare}");
}

#[test]
fn unreachable_servers_unknown_models_and_sweeps_of_server_options_fail_clearly() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{closed}");
    let err = exp_run(&["cb_sweep", "--endpoint", &url, "--quiet"]).unwrap_err();
    let text = format!("{err:#}");
    assert!(
        text.contains(&format!("cannot reach {url}/v1/models")),
        "{text}"
    );
    assert!(text.contains("is the server running"), "{text}");

    let server = SimServer::start(0.05);
    let args = [
        "cb_sweep",
        "--endpoint",
        &server.url,
        "--model-name",
        "qwen3-8b",
        "--quiet",
    ];
    let text = format!("{:#}", exp_run(&args).unwrap_err());
    assert!(
        text.contains("--model-name qwen3-8b") && text.contains("serves qwen3-0.6b"),
        "{text}"
    );

    let out = scratch("endpoint-refused");
    let args = [
        "chunk_sweep",
        "--endpoint",
        &server.url,
        "--out",
        out.to_str().unwrap(),
    ];
    let text = format!("{:#}", exp_run(&args).unwrap_err());
    assert!(text.contains("a server fixes its own"), "{text}");
    let args = ["cb_sweep", "--endpoint", &server.url, "--mode", "sim"];
    let text = format!("{:#}", exp_run(&args).unwrap_err());
    assert!(text.contains("use --mode real"), "{text}");
}

/// A loopback server answering `/v1/models` with model `m` and every
/// completion with `completion` (a whole HTTP response); it stops by
/// itself after `lifetime`.
fn fake_server(completion: &'static str, lifetime: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let end = Instant::now() + lifetime;
        while Instant::now() < end {
            let Ok((stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                head.push_str(&line);
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let response = if head.starts_with("GET /v1/models") {
                let models = r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#;
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{models}",
                    models.len()
                )
            } else {
                completion.to_string()
            };
            let _ = reader.get_mut().write_all(response.as_bytes());
        }
    });
    addr
}

fn fails_with(completion: &'static str, name: &str) -> String {
    let addr = fake_server(completion, Duration::from_secs(30));
    let out = scratch(name);
    let url = format!("http://{addr}");
    let args = [
        "cb_sweep",
        "--endpoint",
        &url,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    let err = exp_run(&args).expect_err("the server fails every completion");
    format!("{err:#}")
}

#[test]
fn error_bodies_and_malformed_streams_name_the_request_and_the_cause() {
    let too_long = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n\
        {\"object\":\"error\",\"message\":\"This model's maximum context length is 16 tokens.\",\"type\":\"BadRequestError\",\"code\":400}";
    let text = fails_with(too_long, "endpoint-400");
    assert!(
        text.contains(
            "request 0 (warmup): HTTP 400: This model's maximum context length is 16 tokens."
        ),
        "{text}"
    );
    let garbage = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
        data: {\"choices\": [{\"text\": \"a\"\n\n";
    let text = fails_with(garbage, "endpoint-bad-sse");
    assert!(
        text.contains("malformed server-sent event (not JSON"),
        "{text}"
    );
    let cut = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
        data: {\"choices\": [{\"text\": \"a\"}]}\n\n";
    let text = fails_with(cut, "endpoint-cut");
    assert!(
        text.contains("ended before `data: [DONE]`, after 1 output token"),
        "{text}"
    );
}
