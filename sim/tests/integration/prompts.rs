//! Prompts made of English words through a tokenizer.json.

use rand::rngs::StdRng;
use rand::SeedableRng;
use sim::workload::{PromptError, PromptSource};

/// A word-level tokenizer knowing three of the built-in words; everything
/// else is `[UNK]` (id 0). Its whitespace pre-tokenizer is a regex, so loading
/// it exercises the pure-Rust regex backend.
const TOKENIZER_JSON: &str = r#"{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": [],
  "normalizer": null,
  "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": null,
  "decoder": null,
  "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "the": 1, "of": 2, "and": 3}, "unk_token": "[UNK]"}
}"#;

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sim-prompts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_tokenizer_file_gives_word_prompts_of_the_exact_length() {
    let path = temp_file("tokenizer.json", TOKENIZER_JSON);
    let source = PromptSource::from_tokenizer_file(&path).unwrap();
    let PromptSource::Words { words } = &source else {
        panic!("expected word prompts");
    };
    assert!(words.len() > 150, "every built-in word encodes to a token");
    assert!(words.contains(&vec![1]) && words.contains(&vec![0]));
    let prompt = source.make(&mut StdRng::seed_from_u64(4), 1000);
    assert_eq!(prompt.len(), 1000);
    assert!(prompt.iter().all(|&t| t <= 3));
    assert!(prompt.contains(&1), "'the' is among the words drawn");
    assert_eq!(prompt, source.make(&mut StdRng::seed_from_u64(4), 1000));
}

#[test]
fn a_bad_tokenizer_file_is_named_in_the_error() {
    let path = temp_file("broken.json", "{\"model\": 3}");
    let err = PromptSource::from_tokenizer_file(&path).unwrap_err();
    assert!(matches!(err, PromptError::Tokenizer { .. }));
    assert!(err.to_string().contains("broken.json"), "{err}");
    let missing = PromptSource::from_tokenizer_file(&path.with_file_name("absent.json"));
    assert!(missing.unwrap_err().to_string().contains("absent.json"));
}
