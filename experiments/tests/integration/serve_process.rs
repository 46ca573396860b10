//! `exp serve` as a process: it prints its address, answers, and exits 0
//! on SIGINT after draining; bad arguments fail with messages naming them.
//! The helpers that start it and wait for it serve `serve_real` too.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The `exp` binary cargo built for these tests.
pub(crate) fn exp_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_exp"))
}

/// Starts `exp serve ARGS --port 0` and returns it with its address.
pub(crate) fn spawn_server(args: &[&str]) -> (Child, String) {
    let (child, line) = spawn_server_line(args);
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (child, addr)
}

/// Starts `exp serve ARGS --port 0` and returns it with its first line of stdout.
pub(crate) fn spawn_server_line(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(exp_binary())
        .arg("serve")
        .args(args)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("exp starts");
    let stdout = child.stdout.take().expect("stdout piped");
    let (lines, first) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = lines.send(line);
    });
    // Seconds at most; the bound only stops a broken binary hanging the test.
    let line = first
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_default();
    (child, line)
}

/// The exit status; a process still running after 60 s (a drain that never
/// ends) is killed and the test fails.
pub(crate) fn wait_bounded(mut child: Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait on exp") {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("exp serve did not exit after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub(crate) fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exp_serve_answers_and_exits_cleanly_on_sigint() {
    let (child, addr) = spawn_server(&[
        "--mode",
        "sim",
        "--set",
        "time_scale=0.01",
        "--set",
        "max_model_len=512",
    ]);
    let client = reqwest::Client::new();
    let body = json!({"model": "qwen3-0.6b", "prompt": "Hello, world", "max_tokens": 8});
    let reply: Value = client
        .post(format!("http://{addr}/v1/completions"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["usage"]["prompt_tokens"], 12, "{reply}");
    assert_eq!(reply["usage"]["completion_tokens"], 8);
    let models: Value = client
        .get(format!("http://{addr}/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["max_model_len"], 512);
    let metrics = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("vllm:generation_tokens_total{model_name=\"qwen3-0.6b\"} 8"),
        "{metrics}"
    );
    interrupt(&child);
    let status = tokio::task::spawn_blocking(move || wait_bounded(child))
        .await
        .unwrap();
    assert!(status.success(), "exp serve exited with {status}");
}

/// The stderr of `exp serve ARGS --port 0`, which must fail.
pub(crate) fn failure(args: &[&str]) -> String {
    let out = Command::new(exp_binary())
        .arg("serve")
        .args(args)
        .args(["--port", "0"])
        .output()
        .expect("exp runs");
    assert!(!out.status.success(), "exp serve {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_settings_fail_with_messages_naming_them() {
    let text = failure(&["--set", "time_scale=fast"]);
    assert!(text.contains("time_scale"), "{text}");
    let text = failure(&["--set", "time_scale=0"]);
    assert!(text.contains("time_scale = 0"), "{text}");
    let text = failure(&["--set", "no_such_option=1"]);
    assert!(text.contains("no_such_option"), "{text}");
}
