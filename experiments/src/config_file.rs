//! RON settings files (`--config FILE.ron`).
//!
//! Contract: the file is one RON struct or map of `key: value` pairs, with
//! the same keys as `--set`: `(max_num_seqs: [1, 256], concurrency: [1, 4],
//! chunk_tokens: [512, "off"], enable_prefix_caching: false)`. Lists become
//! comma-separated text and every value goes through [`Settings::set`], so the
//! file and the command line are validated identically. Syntax errors report
//! the file, line and column; content errors name the key and its line.

use crate::settings::{Settings, SettingsError};
use ron::Value;
use std::path::Path;

/// Reads `path` and applies every entry to `settings`.
pub fn apply_file(settings: &mut Settings, path: &Path) -> Result<(), SettingsError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| SettingsError::Io {
        path: label.clone(),
        message: e.to_string(),
    })?;
    apply_text(settings, &text, &label)
}

/// Applies RON `text` (named `label` in errors) to `settings`.
pub fn apply_text(settings: &mut Settings, text: &str, label: &str) -> Result<(), SettingsError> {
    let value: Value = ron::from_str(text).map_err(|e| SettingsError::RonSyntax {
        path: label.to_string(),
        line: e.position.line,
        column: e.position.col,
        message: e.code.to_string(),
    })?;
    let content_err = |message: String| SettingsError::RonContent {
        path: label.to_string(),
        message,
    };
    let Value::Map(map) = value else {
        return Err(content_err(
            "expected a struct or map of settings, e.g. (max_num_seqs: 1, concurrency: [1, 4])"
                .into(),
        ));
    };
    for (key, value) in map.iter() {
        let Value::String(key) = key else {
            return Err(content_err(format!(
                "setting names must be identifiers or strings, found {key:?}"
            )));
        };
        let line = line_of(text, key);
        let text_value = value_text(value).ok_or_else(|| {
            content_err(format!(
                "line {line}: `{key}` must be a number, bool, string or list of those"
            ))
        })?;
        settings.set(key, &text_value).map_err(|e| match e {
            SettingsError::UnknownKey { .. } | SettingsError::BadValue { .. } => {
                content_err(format!("line {line}: {e}"))
            }
            other => other,
        })?;
    }
    Ok(())
}

/// The 1-based line where `key` first appears as a field name, for messages.
fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches(['(', '{', '"']);
            t.starts_with(key)
                && t[key.len()..]
                    .trim_start_matches('"')
                    .trim_start()
                    .starts_with(':')
        })
        .map_or(0, |i| i + 1)
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => ron::to_string(n).ok(),
        Value::Option(None) => Some("auto".into()),
        Value::Option(Some(v)) => scalar_text(v),
        _ => None,
    }
}

fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::Seq(items) => items
            .iter()
            .map(scalar_text)
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(",")),
        other => scalar_text(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{ParamKind, ParamSpec};

    const SPECS: &[ParamSpec] = &[
        ParamSpec {
            key: "concurrency",
            kind: ParamKind::CountList,
            default: "1",
            help: "",
        },
        ParamSpec {
            key: "chunk_tokens",
            kind: ParamKind::ChunkList,
            default: "512",
            help: "",
        },
    ];

    #[test]
    fn struct_file_sets_engine_and_params() {
        let mut s = Settings::new(SPECS).unwrap();
        let text = "(\n  concurrency: [1, 4],\n  chunk_tokens: [512, \"off\"],\n  \
                    enable_prefix_caching: false,\n  num_gpu_blocks: Some(900),\n)";
        apply_text(&mut s, text, "t.ron").unwrap();
        assert_eq!(s.counts("concurrency").unwrap(), vec![1, 4]);
        assert_eq!(s.chunks("chunk_tokens").unwrap(), vec![Some(512), None]);
        assert!(!s.engine.enable_prefix_caching);
        assert_eq!(s.engine.num_gpu_blocks, Some(900));
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let mut s = Settings::new(SPECS).unwrap();
        let err = apply_text(&mut s, "(\n  concurrency: [1, 4\n", "bad.ron").unwrap_err();
        let SettingsError::RonSyntax { line, column, .. } = &err else {
            panic!("expected a syntax error, got {err:?}");
        };
        assert!(*line >= 2 && *column > 0, "{err}");
        assert!(err.to_string().starts_with("bad.ron:"), "{err}");
    }

    #[test]
    fn unknown_key_in_file_names_key_and_line() {
        let mut s = Settings::new(SPECS).unwrap();
        let err = apply_text(&mut s, "(\n  concurrency: 4,\n  bogus: 1,\n)", "f.ron").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("bogus") && msg.contains("line 3"), "{msg}");
    }
}
