//! Trace files: one request per CSV row or JSONL line.
//!
//! Fields (CSV: a header row names the columns, in any order; JSONL: one
//! object per line):
//! - `arrival_s` (required): arrival time in seconds, >= 0;
//! - `prompt_tokens` or `token_ids` (exactly one): a prompt length to fill
//!   with made-up tokens, or the prompt itself (CSV: ids separated by spaces;
//!   JSONL: an array);
//! - `output_tokens` (required, >= 1);
//! - `salt` (optional): the request's cache salt;
//! - `prefix_group` (optional, with `prompt_tokens` only): prompts of one group
//!   are cut from the same token stream, so they share their first
//!   `prefix_tokens` tokens (default: the whole prompt) and the rest is fresh;
//! - `prefix_tokens` (optional, needs `prefix_group`, at most `prompt_tokens`);
//! - `tag` (optional): copied into the request's record.
//!
//! CSV is read and written by the `csv` crate ([`parse_csv`], [`write_csv`]):
//! a field holding a comma, a quote or a line break is quoted (RFC 4180);
//! fields are trimmed, an empty field is an absent one, and blank lines and
//! lines starting with `#` are skipped. JSONL skips blank lines and lines
//! starting with `#` too. Errors name the file, the line (1-based; for CSV,
//! the line its row starts on) and the field.
//!
//! Public production traces (Azure LLM inference 2023, Mooncake FAST'25,
//! BurstGPT) are read into the same entries by [`load_trace_as`], with a
//! [`TraceFormat`] named or sniffed, a rate scale and a time window: see
//! [`format`](mod@format).

mod azure;
mod burstgpt;
mod columns;
mod csv;
pub mod format;
mod mooncake;

pub use self::csv::{parse_csv, write_csv};
pub use self::format::{
    load_trace_as, parse_trace_as, TraceFormat, TraceLoad, TraceOptions, TraceWindow,
};
pub use self::mooncake::MOONCAKE_BLOCK_TOKENS;

use serde_json::Value;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TraceError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: unknown trace format: use a .csv or .jsonl file", path.display())]
    Format { path: PathBuf },
    #[error("{}:{line}: {message}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}:{line}: field `{field}`: {message}", path.display())]
    Field {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
    #[error("unknown trace format {name:?}; known formats: {known}")]
    UnknownFormat { name: String, known: String },
    #[error(
        "{}: cannot tell the trace format from its first line {first:?}; \
         name the format (known formats: {known})",
        path.display()
    )]
    Sniff {
        path: PathBuf,
        first: String,
        known: String,
    },
    #[error("trace option {option} = {value} is invalid: {expected}")]
    Option {
        option: &'static str,
        value: String,
        expected: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum TracePrompt {
    Length(usize),
    Tokens(Vec<u32>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TraceEntry {
    pub arrival_s: f64,
    pub prompt: TracePrompt,
    pub output_tokens: usize,
    pub salt: Option<String>,
    pub prefix_group: Option<String>,
    pub prefix_tokens: Option<usize>,
    pub tag: Option<String>,
}

impl TraceEntry {
    /// A request with no salt, prefix group or tag: what the public traces
    /// and synthetic workloads give.
    pub fn new(arrival_s: f64, prompt: TracePrompt, output_tokens: usize) -> Self {
        Self {
            arrival_s,
            prompt,
            output_tokens,
            salt: None,
            prefix_group: None,
            prefix_tokens: None,
            tag: None,
        }
    }
}

const FIELDS: &[&str] = &[
    "arrival_s",
    "prompt_tokens",
    "token_ids",
    "output_tokens",
    "salt",
    "prefix_group",
    "prefix_tokens",
    "tag",
];

/// Reads a `.csv` or `.jsonl` trace, by extension.
pub fn load_trace(path: &Path) -> Result<Vec<TraceEntry>, TraceError> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let parse = match ext.to_ascii_lowercase().as_str() {
        "csv" => parse_csv,
        "jsonl" | "ndjson" => parse_jsonl,
        _ => {
            return Err(TraceError::Format {
                path: path.to_path_buf(),
            })
        }
    };
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// A raw field value from either format.
enum Raw<'a> {
    Text(&'a str),
    Json(&'a Value),
}

impl Raw<'_> {
    fn number(&self) -> Result<f64, String> {
        match self {
            Raw::Text(s) => s
                .parse::<f64>()
                .map_err(|_| format!("{s:?} is not a number")),
            Raw::Json(v) => v.as_f64().ok_or_else(|| format!("{v} is not a number")),
        }
    }
    fn count(&self) -> Result<usize, String> {
        match self {
            Raw::Text(s) => s
                .parse::<usize>()
                .map_err(|_| format!("{s:?} is not a whole number >= 0")),
            Raw::Json(v) => v
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| format!("{v} is not a whole number >= 0")),
        }
    }
    fn text(&self) -> Result<String, String> {
        match self {
            Raw::Text(s) => Ok(s.to_string()),
            Raw::Json(Value::String(s)) => Ok(s.clone()),
            Raw::Json(v @ Value::Number(_)) => Ok(v.to_string()),
            Raw::Json(v) => Err(format!("{v} is not a string")),
        }
    }
    fn token_ids(&self) -> Result<Vec<u32>, String> {
        let id = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| format!("{s:?} is not a token id"))
        };
        match self {
            Raw::Text(s) => s.split_whitespace().map(id).collect(),
            Raw::Json(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| format!("{v} is not a token id"))
                })
                .collect(),
            Raw::Json(v) => Err(format!("{v} is not an array of token ids")),
        }
    }
}

/// Builds and checks one entry from its fields.
fn entry<'a>(
    get: impl Fn(&str) -> Option<Raw<'a>>,
    path: &Path,
    line: usize,
) -> Result<TraceEntry, TraceError> {
    let err = |field: &str, message: String| TraceError::Field {
        path: path.to_path_buf(),
        line,
        field: field.to_string(),
        message,
    };
    let field = |name: &str| get(name);
    let required = |name: &str| field(name).ok_or_else(|| err(name, "missing".to_string()));

    let arrival_s = required("arrival_s")?
        .number()
        .map_err(|m| err("arrival_s", m))?;
    if !(arrival_s.is_finite() && arrival_s >= 0.0) {
        return Err(err(
            "arrival_s",
            format!("{arrival_s} must be finite and >= 0"),
        ));
    }
    let output_tokens = required("output_tokens")?
        .count()
        .map_err(|m| err("output_tokens", m))?;
    if output_tokens == 0 {
        return Err(err("output_tokens", "must be at least 1".to_string()));
    }
    let prompt = match (field("prompt_tokens"), field("token_ids")) {
        (Some(n), None) => {
            let n = n.count().map_err(|m| err("prompt_tokens", m))?;
            if n == 0 {
                return Err(err("prompt_tokens", "must be at least 1".to_string()));
            }
            TracePrompt::Length(n)
        }
        (None, Some(ids)) => {
            let ids = ids.token_ids().map_err(|m| err("token_ids", m))?;
            if ids.is_empty() {
                return Err(err("token_ids", "the prompt is empty".to_string()));
            }
            TracePrompt::Tokens(ids)
        }
        (Some(_), Some(_)) => {
            return Err(err(
                "token_ids",
                "give prompt_tokens or token_ids, not both".to_string(),
            ))
        }
        (None, None) => {
            return Err(err(
                "prompt_tokens",
                "missing (or give token_ids)".to_string(),
            ))
        }
    };
    let optional_text = |name: &str| {
        field(name)
            .map(|r| r.text().map_err(|m| err(name, m)))
            .transpose()
    };
    let salt = optional_text("salt")?;
    let tag = optional_text("tag")?;
    let prefix_group = optional_text("prefix_group")?;
    let prefix_tokens = field("prefix_tokens")
        .map(|r| r.count().map_err(|m| err("prefix_tokens", m)))
        .transpose()?;
    if prefix_group.is_some() {
        if let TracePrompt::Tokens(_) = prompt {
            return Err(err(
                "prefix_group",
                "only with prompt_tokens, not token_ids".to_string(),
            ));
        }
    }
    if let Some(p) = prefix_tokens {
        if prefix_group.is_none() {
            return Err(err("prefix_tokens", "needs a prefix_group".to_string()));
        }
        if let TracePrompt::Length(n) = prompt {
            if p > n {
                return Err(err(
                    "prefix_tokens",
                    format!("{p} exceeds prompt_tokens ({n})"),
                ));
            }
        }
    }
    Ok(TraceEntry {
        arrival_s,
        prompt,
        output_tokens,
        salt,
        prefix_group,
        prefix_tokens,
        tag,
    })
}

/// The lines of a JSONL trace that hold an entry, numbered from 1.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// Parses JSONL text; `path` names the file in errors.
pub fn parse_jsonl(text: &str, path: &Path) -> Result<Vec<TraceEntry>, TraceError> {
    let mut entries = Vec::new();
    for (line, row) in content_lines(text) {
        let value: Value = serde_json::from_str(row).map_err(|e| TraceError::Line {
            path: path.to_path_buf(),
            line,
            message: format!("invalid JSON: {e}"),
        })?;
        let Value::Object(map) = value else {
            return Err(TraceError::Line {
                path: path.to_path_buf(),
                line,
                message: "expected a JSON object".to_string(),
            });
        };
        if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(TraceError::Field {
                path: path.to_path_buf(),
                line,
                field: unknown.clone(),
                message: format!("unknown field; known fields: {}", FIELDS.join(", ")),
            });
        }
        let get = |name: &str| map.get(name).filter(|v| !v.is_null()).map(Raw::Json);
        entries.push(entry(get, path, line)?);
    }
    Ok(entries)
}
