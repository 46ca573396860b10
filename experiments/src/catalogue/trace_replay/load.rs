//! Reading trace_replay's trace: the file, format and window of the
//! settings through `sim::workload::load_trace_as`, then the rows no engine
//! can run (prompt + output above `max_model_len`) dropped and counted.
//!
//! Contract: [`load`] returns the rows to replay in file order with a count
//! for every row it did not keep, or an error: no trace given (naming the
//! flag and the formats), the reader's error (file, line, field), or
//! nothing left to replay (saying which rows were dropped and why).

use crate::catalogue::ExperimentError;
use crate::settings::Settings;
use sim::workload::{
    load_trace_as, PromptSource, TraceEntry, TraceFormat, TraceOptions, TracePrompt, TraceWindow,
};
use std::path::{Path, PathBuf};

/// The trace as the run replays it, and what happened to every row.
pub(super) struct Loaded {
    pub(super) path: PathBuf,
    pub(super) format: TraceFormat,
    /// Rows kept, in file order.
    pub(super) entries: Vec<TraceEntry>,
    pub(super) rows: usize,
    pub(super) outside_window: usize,
    /// BurstGPT rows skipped by the reader: failed or with an empty prompt.
    pub(super) failed_or_empty: usize,
    /// Rows whose prompt + output exceeds `max_model_len`.
    pub(super) too_long: usize,
}

pub(super) fn bad(message: String) -> ExperimentError {
    ExperimentError::BadParameter {
        key: "trace",
        message,
    }
}

/// The ids Mooncake blocks are drawn from: the prompt source's vocabulary.
pub(super) fn vocab_of(prompts: &PromptSource) -> u32 {
    match prompts {
        PromptSource::RandomTokens { high, .. } => *high,
        PromptSource::Words { words } => {
            let top = words.iter().flatten().copied().max().unwrap_or(1);
            top.saturating_add(1).max(2)
        }
    }
}

fn prompt_len(e: &TraceEntry) -> usize {
    match &e.prompt {
        TracePrompt::Length(n) => *n,
        TracePrompt::Tokens(t) => t.len(),
    }
}

fn trace_options(settings: &Settings, vocab: u32) -> Result<TraceOptions, ExperimentError> {
    let start_s = settings.number("window_start_s")?;
    let duration_s = settings.number("window_s")?;
    let window = (start_s > 0.0 || duration_s.is_finite()).then_some(TraceWindow {
        start_s,
        duration_s,
    });
    Ok(TraceOptions {
        rate_scale: settings.number("rate_scale")?,
        window,
        vocab_size: vocab,
        ..TraceOptions::default()
    })
}

/// Reads the trace of `settings`, drops the rows no engine can run and
/// fails when nothing is left.
pub(super) fn load(settings: &Settings, vocab: u32) -> Result<Loaded, ExperimentError> {
    let path = settings.path("trace")?.ok_or_else(|| {
        bad(format!(
            "trace_replay needs --trace FILE (formats: {}; see docs/traces.md)",
            TraceFormat::ALL.map(TraceFormat::name).join(", ")
        ))
    })?;
    let format = TraceFormat::from_name_or_auto(&settings.word("format")?)
        .map_err(|e| bad(e.to_string()))?;
    let load = load_trace_as(&path, format, &trace_options(settings, vocab)?)
        .map_err(|e| bad(e.to_string()))?;
    let limit = settings.engine.max_model_len;
    let (entries, long): (Vec<_>, Vec<_>) = load
        .entries
        .into_iter()
        .partition(|e| prompt_len(e) + e.output_tokens <= limit);
    let loaded = Loaded {
        path,
        format: load.format,
        entries,
        rows: load.rows,
        outside_window: load.outside_window,
        failed_or_empty: load.failed + load.empty_prompt,
        too_long: long.len(),
    };
    if loaded.entries.is_empty() {
        return Err(bad(format!(
            "{}: no request to replay: of {} rows, {} are outside the window, {} failed or \
             have an empty prompt, {} need more than max_model_len = {limit} tokens (prompt + \
             output; raise max_model_len, or move the window)",
            loaded.path.display(),
            loaded.rows,
            loaded.outside_window,
            loaded.failed_or_empty,
            loaded.too_long
        )));
    }
    Ok(loaded)
}

pub(super) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}
