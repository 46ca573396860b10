//! Trace formats: which reader turns a file into [`TraceEntry`]s, and the
//! options every reader shares.
//!
//! Contract: [`load_trace_as`] reads a file in a named [`TraceFormat`], or in
//! the one [`TraceFormat::sniff`] recognises from its first line when no
//! format is given, and returns a [`TraceLoad`]: the entries and a count of
//! every row it did not keep. The formats:
//!
//! | format | file | clock | prompt |
//! |---|---|---|---|
//! | `servetwin` | this crate's CSV/JSONL ([`super`]) | `arrival_s`, as written | as written |
//! | `azure` | Azure LLM inference trace 2023 (`AzureLLMInferenceTrace_{conv,code}.csv`) | `TIMESTAMP` date-times | `ContextTokens` (a length) |
//! | `mooncake` | Mooncake FAST'25 JSONL (`traces/*_trace.jsonl`, `mooncake_trace.jsonl`) | `timestamp`, ms | `hash_ids` made into token ids |
//! | `burstgpt` | BurstGPT (`BurstGPT_*.csv`) | `Timestamp`, s | `Request tokens` (a length) |
//!
//! Time: a public trace's clock starts at its first data row (kept or not),
//! so its first row arrives at 0; a servetwin file's `arrival_s` is already on
//! the run's clock and is not moved. [`TraceOptions::window`] keeps the rows
//! at `start_s <= t < start_s + duration_s` on that clock and moves
//! `start_s` to 0; then every arrival is divided by
//! [`TraceOptions::rate_scale`] (2.0 replays the same requests at twice the
//! rate). The window is taken before scaling, so a rate scale never changes
//! which requests are kept. The public formats' rows must be in time order
//! (equal times are fine): a row earlier than the one before it is an error
//! naming its line, as the published files are ordered and a row out of
//! order means a damaged or concatenated file. Servetwin rows may come in any
//! order, as [`super::load_trace`] allows.
//!
//! Every malformed row is a [`TraceError`] naming the file, the 1-based line
//! and the field, and what was expected.

use super::{azure, burstgpt, content_lines, mooncake, parse_csv, parse_jsonl};
use super::{TraceEntry, TraceError};
use crate::workload::prompts::QWEN3_REGULAR_VOCAB;
use serde_json::Value;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// This crate's CSV/JSONL trace.
    Servetwin,
    /// Azure LLM inference trace 2023 (Azure/AzurePublicDataset).
    Azure,
    /// Mooncake FAST'25 trace (kvcache-ai/Mooncake).
    Mooncake,
    /// BurstGPT (HPMLL/BurstGPT).
    BurstGpt,
}

impl TraceFormat {
    pub const ALL: [TraceFormat; 4] =
        [Self::Servetwin, Self::Azure, Self::Mooncake, Self::BurstGpt];

    /// The name [`TraceFormat::from_name`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Self::Servetwin => "servetwin",
            Self::Azure => "azure",
            Self::Mooncake => "mooncake",
            Self::BurstGpt => "burstgpt",
        }
    }

    fn known() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
        names.join(", ")
    }

    /// The format of that name (ASCII case ignored); an unknown name is an
    /// error listing the known ones.
    pub fn from_name(name: &str) -> Result<Self, TraceError> {
        let wanted = name.trim();
        Self::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| TraceError::UnknownFormat {
                name: name.to_string(),
                known: Self::known(),
            })
    }

    /// As [`TraceFormat::from_name`], and `auto` gives `None`: sniff the file.
    pub fn from_name_or_auto(name: &str) -> Result<Option<Self>, TraceError> {
        if name.trim().eq_ignore_ascii_case("auto") {
            return Ok(None);
        }
        Self::from_name(name)
            .map(Some)
            .map_err(|_| TraceError::UnknownFormat {
                name: name.to_string(),
                known: format!("auto, {}", Self::known()),
            })
    }

    /// The format whose header (CSV) or first object (JSONL) the first line
    /// that is neither blank nor a `#` comment matches: a JSON object with
    /// `hash_ids` or `input_length` is Mooncake, one with `arrival_s`
    /// servetwin; a CSV header with `TIMESTAMP` and `ContextTokens` is Azure,
    /// one with `Request tokens` and `Response tokens` BurstGPT, one with
    /// `arrival_s` servetwin. Anything else is an error asking for a format.
    pub fn sniff(text: &str, path: &Path) -> Result<Self, TraceError> {
        let first = content_lines(text.trim_start_matches('\u{feff}'))
            .next()
            .map_or("", |(_, l)| l);
        let sniffed = if first.starts_with('{') {
            match serde_json::from_str::<Value>(first) {
                Ok(Value::Object(m))
                    if m.contains_key("hash_ids") || m.contains_key("input_length") =>
                {
                    Some(Self::Mooncake)
                }
                Ok(Value::Object(m)) if m.contains_key("arrival_s") => Some(Self::Servetwin),
                _ => None,
            }
        } else {
            let columns: Vec<&str> = first
                .split(',')
                .map(|c| c.trim().trim_matches('"'))
                .collect();
            let has = |name: &str| columns.contains(&name);
            if has("TIMESTAMP") && has("ContextTokens") {
                Some(Self::Azure)
            } else if has("Request tokens") && has("Response tokens") {
                Some(Self::BurstGpt)
            } else if has("arrival_s") {
                Some(Self::Servetwin)
            } else {
                None
            }
        };
        sniffed.ok_or_else(|| TraceError::Sniff {
            path: path.to_path_buf(),
            first: first.chars().take(80).collect(),
            known: Self::known(),
        })
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFormat {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s)
    }
}

/// The rows kept: `start_s <= t < start_s + duration_s`, in seconds on the
/// trace's clock before [`TraceOptions::rate_scale`] applies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceWindow {
    /// Finite, >= 0.
    pub start_s: f64,
    /// > 0; infinite keeps every row from `start_s` on.
    pub duration_s: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TraceOptions {
    /// Arrival times are divided by it: 2.0 is twice the request rate.
    /// Positive and finite.
    pub rate_scale: f64,
    /// Keep only the rows in this window (see [`TraceWindow`]), re-based to 0.
    pub window: Option<TraceWindow>,
    /// Mooncake: tokens per `hash_ids` block (the release's 512).
    pub block_tokens: usize,
    /// Mooncake: prompt token ids are in `0..vocab_size` (at least 2).
    pub vocab_size: u32,
    /// Mooncake: block contents derive from it and the hash id, so two traces
    /// whose ids mean different content can get different seeds.
    pub content_seed: u64,
}

impl Default for TraceOptions {
    fn default() -> Self {
        Self {
            rate_scale: 1.0,
            window: None,
            block_tokens: mooncake::MOONCAKE_BLOCK_TOKENS,
            vocab_size: QWEN3_REGULAR_VOCAB,
            content_seed: 0,
        }
    }
}

impl TraceOptions {
    /// Every option in range, or an error naming the first that is not.
    pub fn check(&self) -> Result<(), TraceError> {
        let bad = |option, value: String, expected: &str| {
            Err(TraceError::Option {
                option,
                value,
                expected: expected.to_string(),
            })
        };
        if !(self.rate_scale.is_finite() && self.rate_scale > 0.0) {
            return bad(
                "rate_scale",
                self.rate_scale.to_string(),
                "give a finite number > 0",
            );
        }
        if let Some(w) = self.window {
            if !(w.start_s.is_finite() && w.start_s >= 0.0) {
                return bad(
                    "window start_s",
                    w.start_s.to_string(),
                    "give a finite number >= 0",
                );
            }
            if w.duration_s.is_nan() || w.duration_s <= 0.0 {
                return bad(
                    "window duration_s",
                    w.duration_s.to_string(),
                    "give a number > 0",
                );
            }
        }
        if self.block_tokens == 0 {
            return bad(
                "block_tokens",
                "0".into(),
                "give at least 1 token per block",
            );
        }
        if self.vocab_size < 2 {
            return bad(
                "vocab_size",
                self.vocab_size.to_string(),
                "give at least 2, so different blocks can differ",
            );
        }
        Ok(())
    }

    /// The arrival of a row at `t` seconds on the trace's clock, or `None`
    /// outside the window.
    pub(super) fn arrival(&self, t: f64) -> Option<f64> {
        let (start, end) = self.window.map_or((0.0, f64::INFINITY), |w| {
            (w.start_s, w.start_s + w.duration_s)
        });
        (start <= t && t < end).then(|| (t - start) / self.rate_scale)
    }
}

/// What a reader made of a file. Every data row is counted once: kept (in
/// `entries`), `outside_window`, `failed` or `empty_prompt`, in that order of
/// precedence (a failed row outside the window counts as outside it).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceLoad {
    pub format: TraceFormat,
    pub entries: Vec<TraceEntry>,
    /// Data rows in the file.
    pub rows: usize,
    /// Rows outside [`TraceOptions::window`].
    pub outside_window: usize,
    /// BurstGPT rows with `Response tokens` 0: failed requests, skipped.
    pub failed: usize,
    /// BurstGPT rows with `Request tokens` 0 and a response: skipped, as an
    /// engine serves no empty prompt.
    pub empty_prompt: usize,
}

impl TraceLoad {
    fn new(format: TraceFormat) -> Self {
        Self {
            format,
            entries: Vec::new(),
            rows: 0,
            outside_window: 0,
            failed: 0,
            empty_prompt: 0,
        }
    }
}

/// Reads `path` as `format`, or as the sniffed format when `format` is `None`.
pub fn load_trace_as(
    path: &Path,
    format: Option<TraceFormat>,
    options: &TraceOptions,
) -> Result<TraceLoad, TraceError> {
    options.check()?;
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_trace_as(&text, path, format, options)
}

/// Parses `text` as [`load_trace_as`] reads a file; `path` names it in errors
/// (and, for servetwin, picks CSV or JSONL by its extension).
pub fn parse_trace_as(
    text: &str,
    path: &Path,
    format: Option<TraceFormat>,
    options: &TraceOptions,
) -> Result<TraceLoad, TraceError> {
    options.check()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let format = match format {
        Some(f) => f,
        None => TraceFormat::sniff(text, path)?,
    };
    match format {
        TraceFormat::Servetwin => servetwin(text, path, options),
        TraceFormat::Azure => azure::parse(text, path, options),
        TraceFormat::Mooncake => mooncake::parse(text, path, options),
        TraceFormat::BurstGpt => burstgpt::parse(text, path, options),
    }
}

/// A servetwin trace: CSV or JSONL by extension, else by whether its first
/// content line is a JSON object.
fn servetwin(text: &str, path: &Path, options: &TraceOptions) -> Result<TraceLoad, TraceError> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let jsonl = match ext.to_ascii_lowercase().as_str() {
        "jsonl" | "ndjson" => true,
        "csv" => false,
        _ => content_lines(text)
            .next()
            .is_some_and(|(_, l)| l.starts_with('{')),
    };
    let entries = if jsonl {
        parse_jsonl(text, path)?
    } else {
        parse_csv(text, path)?
    };
    let mut load = TraceLoad::new(TraceFormat::Servetwin);
    load.rows = entries.len();
    for mut e in entries {
        match options.arrival(e.arrival_s) {
            Some(a) => {
                e.arrival_s = a;
                load.entries.push(e);
            }
            None => load.outside_window += 1,
        }
    }
    Ok(load)
}

/// Puts a public trace's rows on the output clock: checks their order,
/// starts the clock at the first row and applies the window and rate scale.
pub(super) struct Timeline<'a> {
    path: &'a Path,
    options: &'a TraceOptions,
    origin: Option<f64>,
    last: f64,
    pub(super) load: TraceLoad,
}

impl<'a> Timeline<'a> {
    pub(super) fn new(format: TraceFormat, path: &'a Path, options: &'a TraceOptions) -> Self {
        Self {
            path,
            options,
            origin: None,
            last: f64::NEG_INFINITY,
            load: TraceLoad::new(format),
        }
    }

    /// Counts a row at `t` seconds on the file's clock (finite) and returns
    /// its arrival, or `None` (counted) outside the window. `field` names the
    /// time column in the error for a row out of order.
    pub(super) fn place(
        &mut self,
        t: f64,
        line: usize,
        field: &str,
    ) -> Result<Option<f64>, TraceError> {
        if t < self.last {
            return Err(TraceError::Field {
                path: self.path.to_path_buf(),
                line,
                field: field.to_string(),
                message: format!(
                    "goes back in time ({} s after the first row, the row before is at {} s): \
                     expected rows in time order",
                    t - self.origin.unwrap_or(0.0),
                    self.last - self.origin.unwrap_or(0.0)
                ),
            });
        }
        self.last = t;
        self.load.rows += 1;
        let origin = *self.origin.get_or_insert(t);
        let arrival = self.options.arrival(t - origin);
        if arrival.is_none() {
            self.load.outside_window += 1;
        }
        Ok(arrival)
    }

    pub(super) fn finish(self) -> TraceLoad {
        self.load
    }
}
