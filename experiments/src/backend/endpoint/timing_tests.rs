//! The client's timing definition on a scripted stream (vLLM's
//! benchmark_serving's): a request's clock starts right before its POST
//! unless it waited for a place under the cap (then at its due time), TTFT
//! ends at the first chunk with a token, and every later chunk with tokens
//! makes one inter-token gap however many tokens it carries. Bounds are
//! one-sided (the script's pauses), so a loaded machine cannot fail them.

use super::*;
use crate::script::{Gate, ScriptBuilder};
use engine::EngineConfig;
use sim::workload::PromptSource;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::thread::sleep;

/// Pause before the first token, and between the later chunks.
const FIRST: Duration = Duration::from_millis(20);
const GAP: Duration = Duration::from_millis(30);

/// Serves `connections` completions one after another, each as: headers,
/// [`FIRST`], a one-token chunk, [`GAP`], a chunk of three tokens (by
/// `token_ids`), [`GAP`], a one-token chunk and in the same write the
/// closing chunk (no text), usage (5 tokens) and `[DONE]`.
fn scripted_server(connections: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for _ in 0..connections {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream);
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let _ = reader.read_exact(&mut vec![0; length]);
            let mut out = reader.into_inner();
            let chunk = |body: &str| format!("data: {body}\n\n");
            let parts = [
                (Duration::ZERO, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_string()),
                (FIRST, chunk(r#"{"choices": [{"text": "a", "finish_reason": null}]}"#)),
                (GAP, chunk(r#"{"choices": [{"text": "bcd", "token_ids": [1, 2, 3], "finish_reason": null}]}"#)),
                (
                    GAP,
                    chunk(r#"{"choices": [{"text": "e", "finish_reason": null}]}"#)
                        + &chunk(r#"{"choices": [{"text": "", "finish_reason": "length"}]}"#)
                        + &chunk(r#"{"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}}}"#)
                        + &chunk("[DONE]"),
                ),
            ];
            for (pause, text) in parts {
                sleep(pause);
                if out.write_all(text.as_bytes()).is_err() {
                    break;
                }
            }
        }
    });
    format!("http://{addr}")
}

/// `requests` requests due at 0 played against the scripted server with
/// `max_num_seqs`; their records by id.
fn play_scripted(requests: usize, max_num_seqs: usize) -> Vec<RequestRecord> {
    let url = scripted_server(requests);
    let http = Arc::new(Http::new(&url).unwrap());
    let prompts = PromptSource::random_tokens(100).unwrap();
    let mut b = ScriptBuilder::new(1, &prompts);
    for _ in 0..requests {
        let prompt = b.random_tokens(4);
        b.push("r", prompt, 5, None, Gate::At(0.0));
    }
    let engine = EngineConfig {
        max_num_seqs,
        ..EngineConfig::default()
    };
    let policy = Policy::of(&engine);
    let salts = Salts::new("t", 0, policy);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let played = runtime
        .block_on(play(&http, "m", &b.build(), policy, &salts, &|_| {}))
        .unwrap();
    played.records.requests
}

#[test]
fn ttft_ends_at_the_first_token_and_each_later_chunk_is_one_gap() {
    let records = play_scripted(1, 1);
    let r = &records[0];
    assert_eq!(r.output_tokens(), 5);
    let t = &r.token_times_s;
    assert!(
        t[1] == t[2] && t[2] == t[3],
        "a chunk's tokens share its time: {t:?}"
    );
    assert!(r.ttft_s().unwrap() >= FIRST.as_secs_f64(), "{r:?}");
    let gaps: Vec<f64> = r.itls_s().collect();
    assert_eq!(
        gaps.len(),
        2,
        "one gap per later chunk with tokens: {gaps:?}"
    );
    assert!(gaps.iter().all(|g| *g >= GAP.as_secs_f64()), "{gaps:?}");
    // The closing chunk (no text) is no token; the finish is its time.
    assert!(r.finish_s.unwrap() >= t[4]);
    assert_eq!(r.finish_reason, "length");
}

#[test]
fn the_clock_starts_at_the_post_unless_the_request_waited_for_a_place() {
    let records = play_scripted(2, 1);
    let (first, second) = (&records[0], &records[1]);
    // The first found a place at once: its clock started when its POST went
    // out, after it was due at 0.
    assert!(first.arrival_s > 0.0, "{first:?}");
    // The second waited for the first to end (the engine queue a cap of 1
    // stands for): its clock started when it was due.
    assert_eq!(second.arrival_s, 0.0);
    let finish = first.finish_s.unwrap();
    assert!(
        second.ttft_s().unwrap() >= finish + FIRST.as_secs_f64(),
        "{records:?}"
    );
}
