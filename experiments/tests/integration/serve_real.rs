//! `exp serve --mode real` on the CPU runner and the tiny model, driven over
//! HTTP: a streamed completion gives exactly `max_tokens` tokens, the same
//! greedy tokens `exp generate` gives for the prompt, and SIGINT ends it
//! with status 0; options that mean nothing in real mode are refused.

use crate::serve_process::{exp_binary, failure, interrupt, spawn_server_line, wait_bounded};
use serde_json::{json, Value};
use std::process::Command;

const PROMPT: [u32; 12] = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8];
const MAX_TOKENS: usize = 10;

/// The `data:` payloads of a server-sent event body, `[DONE]` included.
fn events(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

/// `exp generate`'s greedy output ids for `PROMPT` on the CPU runner.
fn generated_ids() -> Vec<u32> {
    let prompt: Vec<String> = PROMPT.iter().map(u32::to_string).collect();
    let out = Command::new(exp_binary())
        .args([
            "generate",
            "--model",
            "tiny",
            "--backend",
            "cpu",
            "--ignore-eos",
        ])
        .args(["--max-tokens", &MAX_TOKENS.to_string()])
        .args(["--prompt", &prompt.join(" ")])
        .output()
        .expect("exp generate runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let ids = text
        .lines()
        .find_map(|l| l.strip_prefix("output ids: "))
        .unwrap_or_else(|| panic!("no output ids in {text}"));
    ids.split_whitespace().map(|t| t.parse().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_completion_gives_the_engine_s_greedy_tokens() {
    let (child, line) = spawn_server_line(&[
        "--mode",
        "real",
        "--backend",
        "cpu",
        "--model",
        "tiny",
        "--set",
        "max_model_len=256",
    ]);
    for needed in [
        "serving tiny on http://",
        "(real: cpu on cpu (",
        "KV blocks)",
    ] {
        assert!(line.contains(needed), "{needed} not in {line:?}");
    }
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .unwrap()
        .to_string();
    let body = json!({
        "model": "tiny", "prompt": PROMPT, "max_tokens": MAX_TOKENS, "ignore_eos": true,
        "stream": true, "stream_options": {"include_usage": true}, "return_token_ids": true,
    });
    let reply = reqwest::Client::new()
        .post(format!("http://{addr}/v1/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let events = events(&reply.text().await.unwrap());
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let streamed: Vec<u32> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["token_ids"].as_array())
        .flatten()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect();
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], MAX_TOKENS, "{usage}");
    assert_eq!(usage["prompt_tokens"], PROMPT.len(), "{usage}");
    assert_eq!(streamed.len(), MAX_TOKENS);
    let text_chunks = chunks.iter().filter(|c| {
        c["choices"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    });
    assert_eq!(text_chunks.count(), MAX_TOKENS, "one chunk per token");
    let expected = tokio::task::spawn_blocking(generated_ids).await.unwrap();
    assert_eq!(streamed, expected, "served and in-process greedy tokens");
    interrupt(&child);
    let status = tokio::task::spawn_blocking(move || wait_bounded(child))
        .await
        .unwrap();
    assert!(status.success(), "exp serve exited with {status}");
}

#[test]
fn options_without_meaning_in_the_mode_are_refused() {
    let real = ["--mode", "real", "--backend", "cpu", "--model", "tiny"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        real.iter().chain(extra).copied().collect()
    };
    let text = failure(&with(&["--set", "time_scale=2"]));
    assert!(
        text.contains("time_scale paces the simulated runner")
            && text.contains("leave --set time_scale out"),
        "{text}"
    );
    let text = failure(&with(&["--gpu", "h100-sxm"]));
    assert!(
        text.contains("--gpu, --profile and --profiles-dir"),
        "{text}"
    );
    let text = failure(&["--mode", "sim", "--backend", "cpu"]);
    assert!(text.contains("add --mode real"), "{text}");
    // An engine the runner cannot be built for fails before anything binds.
    let text = failure(&with(&["--set", "max_num_seqs=0"]));
    assert!(text.contains("max_num_seqs"), "{text}");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn the_default_cuda_runner_is_refused_by_a_binary_without_it() {
    let text = failure(&["--mode", "real", "--model", "tiny"]);
    assert!(
        text.contains("building the engine") && text.contains("--features cuda"),
        "{text}"
    );
}
