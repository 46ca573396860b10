//! Columns by header name, for the public CSV traces (Azure, BurstGPT).
//!
//! Contract: [`open`] reads the first row as a header and requires the named
//! columns, in any order (names trimmed, compared exactly); other columns are
//! ignored, so a release that adds columns (BurstGPT_3's `Session ID` and
//! `Elapsed time`, which it inserts rather than appends) still reads. Each
//! later row must have no more fields than the header; a field a short row
//! lacks, or an empty one, is an error naming the column. Blank lines and
//! lines starting with `#` are skipped, as [`super::format`]'s sniffing and
//! the servetwin CSV skip them (no published row starts with `#`); line ends
//! may be `\n` or `\r\n` (the Azure files use the latter).
//! Numbers are checked here so every reader words its errors the same way.

use super::csv::Lines;
use super::TraceError;
use ::csv::StringRecord;
use std::path::Path;

pub(super) struct Columns<'a> {
    path: &'a Path,
    names: Vec<String>,
}

/// The data rows of a file, as `(line, record)`, in file order.
pub(super) type Rows<'a> = Box<dyn Iterator<Item = Result<(usize, StringRecord), TraceError>> + 'a>;

/// The header's columns, checked to hold `required`, and the data rows.
/// `format` names the format in the missing-column error.
pub(super) fn open<'a>(
    text: &'a str,
    path: &'a Path,
    format: &str,
    required: &[&str],
) -> Result<(Columns<'a>, Rows<'a>), TraceError> {
    let line_err = move |line: usize, message: String| TraceError::Line {
        path: path.to_path_buf(),
        line,
        message,
    };
    let reader = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(::csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    // A line of spaces alone reads as one empty field: skip it as blank.
    let mut lines = Lines::new(text);
    let mut records = reader
        .into_records()
        .filter(|r| {
            !r.as_ref()
                .is_ok_and(|r| r.len() == 1 && r.get(0) == Some(""))
        })
        .map(move |r| match r {
            Ok(record) => Ok((lines.of(record.position()), record)),
            Err(e) => Err(line_err(
                lines.of(e.position()),
                format!("unreadable CSV: {e}"),
            )),
        });
    let (header_line, header) = match records.next() {
        Some(h) => h?,
        None => {
            return Err(line_err(
                1,
                format!(
                    "empty trace: expected a {format} header ({})",
                    required.join(",")
                ),
            ))
        }
    };
    let names: Vec<String> = header.iter().map(str::to_string).collect();
    if let Some(missing) = required.iter().find(|r| !names.iter().any(|n| n == *r)) {
        return Err(TraceError::Field {
            path: path.to_path_buf(),
            line: header_line,
            field: missing.to_string(),
            message: format!(
                "missing column: a {format} header holds {} (this one: {})",
                required.join(","),
                names.join(",")
            ),
        });
    }
    let width = names.len();
    let rows = records.map(move |r| {
        let (line, record) = r?;
        if record.len() > width {
            return Err(line_err(
                line,
                format!("{} fields, the header has {width}", record.len()),
            ));
        }
        Ok((line, record))
    });
    Ok((Columns { path, names }, Box::new(rows)))
}

impl Columns<'_> {
    pub(super) fn err(&self, line: usize, field: &str, message: String) -> TraceError {
        TraceError::Field {
            path: self.path.to_path_buf(),
            line,
            field: field.to_string(),
            message,
        }
    }

    /// The field of column `name`, or `None` where the header lacks it.
    fn raw<'r>(
        &self,
        line: usize,
        record: &'r StringRecord,
        name: &str,
    ) -> Option<Result<&'r str, TraceError>> {
        let i = self.names.iter().position(|n| n == name)?;
        Some(record.get(i).ok_or_else(|| {
            self.err(
                line,
                name,
                format!(
                    "missing: the row has {} fields, the header {}",
                    record.len(),
                    self.names.len()
                ),
            )
        }))
    }

    /// A required column's field, not empty.
    pub(super) fn text<'r>(
        &self,
        line: usize,
        record: &'r StringRecord,
        name: &str,
    ) -> Result<&'r str, TraceError> {
        let value = self
            .raw(line, record, name)
            .unwrap_or_else(|| Err(self.err(line, name, "missing column".to_string())))?;
        if value.is_empty() {
            return Err(self.err(line, name, "empty; expected a value".to_string()));
        }
        Ok(value)
    }

    /// An optional column's field: `None` when the column is absent or the
    /// field empty.
    pub(super) fn optional<'r>(
        &self,
        line: usize,
        record: &'r StringRecord,
        name: &str,
    ) -> Result<Option<&'r str>, TraceError> {
        Ok(self
            .raw(line, record, name)
            .transpose()?
            .filter(|v| !v.is_empty()))
    }

    /// A whole number >= 0.
    pub(super) fn count(
        &self,
        line: usize,
        record: &StringRecord,
        name: &str,
    ) -> Result<usize, TraceError> {
        self.whole(line, record, name, 0)
    }

    /// A whole number >= 1.
    pub(super) fn positive(
        &self,
        line: usize,
        record: &StringRecord,
        name: &str,
    ) -> Result<usize, TraceError> {
        self.whole(line, record, name, 1)
    }

    fn whole(
        &self,
        line: usize,
        record: &StringRecord,
        name: &str,
        min: usize,
    ) -> Result<usize, TraceError> {
        let value = self.text(line, record, name)?;
        whole(value, min).map_err(|m| self.err(line, name, m))
    }

    /// A time in seconds: finite, >= 0.
    pub(super) fn seconds(
        &self,
        line: usize,
        record: &StringRecord,
        name: &str,
    ) -> Result<f64, TraceError> {
        let value = self.text(line, record, name)?;
        seconds(value).map_err(|m| self.err(line, name, m))
    }
}

/// A whole number >= `min`, or what is wrong with `s`.
pub(super) fn whole(s: &str, min: usize) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        Ok(n) => Err(format!("{n}; expected at least {min}")),
        Err(_) if s.starts_with('-') => Err(format!(
            "{s:?} is negative; expected a whole number >= {min}"
        )),
        Err(_) => Err(format!("{s:?} is not a whole number >= {min}")),
    }
}

/// A finite number >= 0, or what is wrong with `s`.
pub(super) fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        Ok(t) if t < 0.0 => Err(format!("{s:?} is negative; expected seconds >= 0")),
        Ok(_) => Err(format!("{s:?} is not finite; expected seconds >= 0")),
        Err(_) => Err(format!("{s:?} is not a number; expected seconds >= 0")),
    }
}
