//! The Mooncake FAST'25 traces (kvcache-ai/Mooncake, `FAST25-release/traces/
//! {conversation,toolagent,synthetic}_trace.jsonl`, and the older
//! `FAST25-release/arxiv-trace/mooncake_trace.jsonl`).
//!
//! Contract: one JSON object a line (blank lines and `#` lines skipped;
//! other keys ignored):
//! - `timestamp`: arrival in milliseconds, >= 0;
//! - `input_length` (>= 1): prompt tokens;
//! - `output_length` (>= 1): output tokens;
//! - `hash_ids`: one id (a whole number >= 0) per block of the prompt.
//!
//! `FAST25-release/README.md` ("Trace Format"): "`hash_ids`: Remapped prefix
//! block hashes. The block size is 512 tokens. Identical hash IDs indicate
//! reusable prefix KV cache blocks." Hence [`MOONCAKE_BLOCK_TOKENS`], the
//! default of [`TraceOptions::block_tokens`], and the rule checked on every
//! line: `hash_ids` holds exactly `ceil(input_length / block_tokens)` ids
//! (true of every line of the published conversation and synthetic traces),
//! so no prompt has tokens without a block or a block without tokens.
//!
//! The prompt is made real, so replaying it exercises the prefix cache as
//! the trace did: block `i` of a prompt is the token run of id `hash_ids[i]`,
//! a pure function of the id and [`TraceOptions::content_seed`] (ids in
//! `0..vocab_size`), and the last block is cut to `input_length`. Two
//! requests holding the same id at the same position therefore share exactly
//! that block, and different ids give different runs. Only the rows kept by
//! the window get their tokens; each costs 4 bytes per prompt token (the
//! whole conversation trace, 145 M tokens, about 580 MB).

use super::format::{Timeline, TraceFormat, TraceLoad, TraceOptions};
use super::{content_lines, TraceEntry, TraceError, TracePrompt};
use serde_json::{Map, Value};
use std::path::Path;

/// Tokens per `hash_ids` block in the Mooncake release (its README).
pub const MOONCAKE_BLOCK_TOKENS: usize = 512;

pub(super) fn parse(
    text: &str,
    path: &Path,
    options: &TraceOptions,
) -> Result<TraceLoad, TraceError> {
    let mut timeline = Timeline::new(TraceFormat::Mooncake, path, options);
    for (line, row) in content_lines(text) {
        let err = |field: &str, message: String| TraceError::Field {
            path: path.to_path_buf(),
            line,
            field: field.to_string(),
            message,
        };
        let line_err = |message: String| TraceError::Line {
            path: path.to_path_buf(),
            line,
            message,
        };
        let value: Value = serde_json::from_str(row).map_err(|e| {
            line_err(format!(
                "invalid JSON ({e}); expected an object with timestamp, input_length, \
                 output_length and hash_ids"
            ))
        })?;
        let Value::Object(map) = value else {
            return Err(line_err("expected a JSON object".to_string()));
        };
        let row = Row {
            map: &map,
            err: &err,
        };
        let ms = row.number("timestamp")?;
        let input = row.positive("input_length")?;
        let output_tokens = row.positive("output_length")?;
        let ids = row.ids("hash_ids")?;
        let blocks = input.div_ceil(options.block_tokens);
        if ids.len() != blocks {
            return Err(err(
                "hash_ids",
                format!(
                    "{} ids for input_length {input}: expected {blocks}, one per block of {} tokens",
                    ids.len(),
                    options.block_tokens
                ),
            ));
        }
        if let Some(arrival_s) = timeline.place(ms / 1000.0, line, "timestamp")? {
            timeline.load.entries.push(TraceEntry::new(
                arrival_s,
                TracePrompt::Tokens(prompt_tokens(&ids, input, options)),
                output_tokens,
            ));
        }
    }
    Ok(timeline.finish())
}

/// One line's fields, checked with errors naming them.
struct Row<'a, E: Fn(&str, String) -> TraceError> {
    map: &'a Map<String, Value>,
    err: &'a E,
}

impl<E: Fn(&str, String) -> TraceError> Row<'_, E> {
    fn get(&self, name: &str) -> Result<&Value, TraceError> {
        self.map
            .get(name)
            .filter(|v| !v.is_null())
            .ok_or_else(|| (self.err)(name, "missing".to_string()))
    }

    /// A finite number >= 0.
    fn number(&self, name: &str) -> Result<f64, TraceError> {
        match self.get(name)?.as_f64() {
            Some(t) if t.is_finite() && t >= 0.0 => Ok(t),
            Some(t) => Err((self.err)(
                name,
                format!("{t} is negative; expected a number >= 0"),
            )),
            None => Err((self.err)(
                name,
                format!("{} is not a number", self.get(name)?),
            )),
        }
    }

    /// A whole number >= 1.
    fn positive(&self, name: &str) -> Result<usize, TraceError> {
        let v = self.get(name)?;
        match v.as_u64() {
            Some(0) => Err((self.err)(name, "0; expected at least 1".to_string())),
            Some(n) => {
                usize::try_from(n).map_err(|_| (self.err)(name, format!("{n} is too large")))
            }
            None if v.as_i64().is_some() => Err((self.err)(
                name,
                format!("{v} is negative; expected a whole number >= 1"),
            )),
            None => Err((self.err)(name, format!("{v} is not a whole number >= 1"))),
        }
    }

    /// An array of whole numbers >= 0.
    fn ids(&self, name: &str) -> Result<Vec<u64>, TraceError> {
        let Value::Array(items) = self.get(name)? else {
            return Err((self.err)(
                name,
                "expected an array of block ids".to_string(),
            ));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_u64().ok_or_else(|| {
                    (self.err)(
                        name,
                        format!("item {i}: {v} is not a block id (a whole number >= 0)"),
                    )
                })
            })
            .collect()
    }
}

/// The prompt of `ids`: block after block, the last cut to `input` tokens.
fn prompt_tokens(ids: &[u64], input: usize, options: &TraceOptions) -> Vec<u32> {
    let mut tokens = Vec::with_capacity(input);
    for &id in ids {
        let len = options.block_tokens.min(input - tokens.len());
        tokens.extend(block(id, len, options));
    }
    tokens
}

/// The first `len` tokens of block `id`'s run.
fn block(id: u64, len: usize, options: &TraceOptions) -> impl Iterator<Item = u32> {
    let key = mix(options.content_seed ^ mix(id.wrapping_add(GOLDEN)));
    let vocab = u64::from(options.vocab_size);
    // The remainder's bias is below vocab / 2^64: nothing a test could see.
    (0..len as u64)
        .map(move |k| (mix(key.wrapping_add((k + 1).wrapping_mul(GOLDEN))) % vocab) as u32)
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finaliser: consecutive inputs give unrelated outputs, with no
/// state, so any block's tokens can be made on their own.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
