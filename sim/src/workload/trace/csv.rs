//! The CSV form of a trace (fields: see the parent module).
//!
//! Contract: [`parse_csv`] reads a header row naming known columns (any
//! order, each once), then rows of as many fields; [`write_csv`] writes every
//! column in the order of [`FIELDS`], so what it writes reads back to the
//! same entries. Both go through the `csv` crate and [`CsvRow`].

use super::{entry, Raw, TraceEntry, TraceError, TracePrompt, FIELDS};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::path::Path;

/// One row as text, by column name; `None` for an absent column or an empty
/// field. Checking and converting the values is [`entry`]'s, shared with JSONL.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct CsvRow {
    arrival_s: Option<String>,
    prompt_tokens: Option<String>,
    token_ids: Option<String>,
    output_tokens: Option<String>,
    salt: Option<String>,
    prefix_group: Option<String>,
    prefix_tokens: Option<String>,
    tag: Option<String>,
}

impl CsvRow {
    fn get(&self, name: &str) -> Option<&str> {
        let value = match name {
            "arrival_s" => &self.arrival_s,
            "prompt_tokens" => &self.prompt_tokens,
            "token_ids" => &self.token_ids,
            "output_tokens" => &self.output_tokens,
            "salt" => &self.salt,
            "prefix_group" => &self.prefix_group,
            "prefix_tokens" => &self.prefix_tokens,
            "tag" => &self.tag,
            _ => &None,
        };
        value.as_deref()
    }

    fn of(e: &TraceEntry) -> Self {
        let (prompt_tokens, token_ids) = match &e.prompt {
            TracePrompt::Length(n) => (Some(n.to_string()), None),
            TracePrompt::Tokens(ids) => {
                let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
                (None, Some(ids.join(" ")))
            }
        };
        Self {
            arrival_s: Some(e.arrival_s.to_string()),
            prompt_tokens,
            token_ids,
            output_tokens: Some(e.output_tokens.to_string()),
            salt: e.salt.clone(),
            prefix_group: e.prefix_group.clone(),
            prefix_tokens: e.prefix_tokens.map(|n| n.to_string()),
            tag: e.tag.clone(),
        }
    }
}

/// The 1-based line each record of one text starts on. The `csv` crate's
/// own count (`Position::line`) lags a line behind after every `\r\n` and
/// after skipped comment lines, so count `\n`s up to the record's first
/// byte instead: its `Position::byte` is where the reader began looking for
/// the record, before the line ends, blank lines and `#` comment lines it
/// skipped there. Records come in order, so the count goes on from the last
/// one (one pass over the text in all).
pub(super) struct Lines<'a> {
    text: &'a [u8],
    at: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Self {
            text: text.as_bytes(),
            at: 0,
            line: 1,
        }
    }

    /// The line of the record (or error) at `position`.
    pub(super) fn of(&mut self, position: Option<&::csv::Position>) -> usize {
        let text = self.text;
        let Some(mut start) = position.map(|p| (p.byte() as usize).min(text.len())) else {
            return self.line;
        };
        loop {
            while start < text.len() && matches!(text[start], b'\r' | b'\n') {
                start += 1;
            }
            if start < text.len() && text[start] == b'#' {
                start = text[start..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(text.len(), |i| start + i + 1);
            } else {
                break;
            }
        }
        if start < self.at {
            (self.at, self.line) = (0, 1);
        }
        self.line += text[self.at..start].iter().filter(|&&b| b == b'\n').count();
        self.at = start;
        self.line
    }
}

/// Parses CSV text; `path` names the file in errors.
pub fn parse_csv(text: &str, path: &Path) -> Result<Vec<TraceEntry>, TraceError> {
    let line_err = |line: usize, message: String| TraceError::Line {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(::csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    // A line of spaces alone reads as one empty field: skip it as blank.
    let mut records = reader.records().filter(|r| {
        !r.as_ref()
            .is_ok_and(|r| r.len() == 1 && r.get(0) == Some(""))
    });
    let mut lines = Lines::new(text);
    let mut read = |r: Result<::csv::StringRecord, ::csv::Error>| match r {
        Ok(record) => Ok((lines.of(record.position()), record)),
        Err(e) => Err(line_err(
            lines.of(e.position()),
            format!("unreadable CSV: {e}"),
        )),
    };
    let Some((header_line, header)) = records.next().map(&mut read).transpose()? else {
        return Err(line_err(
            1,
            "empty trace: expected a header row".to_string(),
        ));
    };
    for (i, c) in header.iter().enumerate() {
        if !FIELDS.contains(&c) {
            return Err(line_err(
                header_line,
                format!("unknown column {c:?}; known columns: {}", FIELDS.join(", ")),
            ));
        }
        if header.iter().take(i).any(|earlier| earlier == c) {
            return Err(line_err(header_line, format!("column {c:?} appears twice")));
        }
    }
    let mut entries = Vec::new();
    for record in records {
        let (line, record) = read(record)?;
        if record.len() != header.len() {
            return Err(line_err(
                line,
                format!("{} fields, the header has {}", record.len(), header.len()),
            ));
        }
        let row: CsvRow = record
            .deserialize(Some(&header))
            .map_err(|e| line_err(line, e.to_string()))?;
        let get = |name: &str| row.get(name).map(Raw::Text);
        entries.push(entry(get, path, line)?);
    }
    Ok(entries)
}

/// Writes `entries` as a CSV trace with every column. Text fields come back
/// from [`parse_csv`] as written but for spaces at their ends, which reading
/// trims.
pub fn write_csv<W: Write>(out: W, entries: &[TraceEntry]) -> io::Result<()> {
    let mut w = ::csv::WriterBuilder::new()
        .has_headers(false)
        // A field starting with `#` is quoted, so no row reads as a comment.
        .comment(Some(b'#'))
        .from_writer(out);
    w.write_record(FIELDS)?;
    for e in entries {
        w.serialize(CsvRow::of(e))?;
    }
    w.flush()
}
