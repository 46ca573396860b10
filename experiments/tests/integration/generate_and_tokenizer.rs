//! `exp generate` and `exp run --tokenizer`, through the built binary.

use crate::common;

use common::scratch;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A word-level tokenizer knowing three common words (ids 1-3); every other
/// word is `[UNK]` (id 0).
const TOKENIZER_JSON: &str = r###"{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": [],
  "normalizer": null,
  "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": null,
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "the": 1, "of": 2, "and": 3}, "unk_token": "[UNK]"}
}"###;

fn exp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_exp"))
        .args(args)
        .output()
        .expect("exp runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The committed transformers fixture plus the word-level tokenizer.
fn model_dir_with_tokenizer(name: &str) -> PathBuf {
    let dir = scratch(name);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/data/hf_qwen3_tiny");
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(fixture.join(file), dir.join(file)).expect("fixture copies");
    }
    std::fs::write(dir.join("tokenizer.json"), TOKENIZER_JSON).unwrap();
    dir
}

#[test]
fn generate_with_token_ids_on_a_preset_gives_exactly_max_tokens() {
    let out = exp(&[
        "generate",
        "--model",
        "tiny",
        "--backend",
        "cpu",
        "--prompt",
        "1, 2 3",
        "--max-tokens",
        "5",
    ]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("3 prompt tokens"), "{shown}");
    let ids = shown
        .lines()
        .find_map(|l| l.strip_prefix("output ids: "))
        .expect("output ids line");
    assert_eq!(ids.split_whitespace().count(), 5, "{shown}");
    assert!(shown.contains("TTFT"), "{shown}");
}

#[test]
fn generate_with_text_goes_through_the_model_directory_tokenizer() {
    let dir = model_dir_with_tokenizer("generate-tokenizer");
    let out = exp(&[
        "generate",
        "--model",
        dir.to_str().unwrap(),
        "--backend",
        "cpu",
        "--prompt",
        "the of and the",
        "--max-tokens",
        "3",
    ]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("4 prompt tokens"), "{shown}");
    assert!(shown.contains("output text:"), "{shown}");
}

#[test]
fn generate_rejects_text_without_a_tokenizer_and_ids_outside_the_vocabulary() {
    let out = exp(&[
        "generate",
        "--model",
        "tiny",
        "--backend",
        "cpu",
        "--prompt",
        "hello",
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("must be token ids"), "{}", text(&out));
    let out = exp(&[
        "generate",
        "--model",
        "tiny",
        "--backend",
        "cpu",
        "--prompt",
        "1 99999",
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("99999"), "{}", text(&out));
}

#[test]
fn run_with_a_tokenizer_uses_word_prompts_and_names_a_bad_file() {
    let dir = scratch("run-tokenizer");
    let tokenizer = dir.join("tokenizer.json");
    std::fs::write(&tokenizer, TOKENIZER_JSON).unwrap();
    let base = [
        "run",
        "prefix_cache",
        "--mode",
        "sim",
        "--set",
        "rounds=1",
        "--quiet",
        "--out",
    ];
    let out_dir = dir.join("out");
    let mut args: Vec<&str> = base.to_vec();
    args.extend([
        out_dir.to_str().unwrap(),
        "--tokenizer",
        tokenizer.to_str().unwrap(),
    ]);
    let out = exp(&args);
    assert!(out.status.success(), "{}", text(&out));
    // Word prompts (ids 0..=3 here) still share the prefix block by block.
    let summary =
        std::fs::read_to_string(out_dir.join("prefix_cache/sim/summary.csv")).expect("summary.csv");
    let (header, rows) = common::csv_rows(&summary);
    let col = header
        .iter()
        .position(|h| h == "warm_cached_tokens")
        .unwrap();
    let caching = header.iter().position(|h| h == "caching").unwrap();
    let on = rows
        .iter()
        .find(|r| r[caching] == "on")
        .expect("a caching=on row");
    assert_eq!(on[col].parse::<f64>().unwrap() as usize % 16, 0);
    assert!(on[col].parse::<f64>().unwrap() >= 3_000.0, "{summary}");

    let mut bad: Vec<&str> = base.to_vec();
    let missing = dir.join("absent-tokenizer.json");
    bad.extend([
        out_dir.to_str().unwrap(),
        "--tokenizer",
        missing.to_str().unwrap(),
    ]);
    let out = exp(&bad);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("absent-tokenizer.json"),
        "{}",
        text(&out)
    );
}
