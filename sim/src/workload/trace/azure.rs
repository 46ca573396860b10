//! The Azure LLM inference trace 2023 (Azure/AzurePublicDataset,
//! `data/AzureLLMInferenceTrace_conv.csv` and `_code.csv`, described in its
//! `AzureLLMInferenceDataset2023.md`).
//!
//! Contract: a CSV header with `TIMESTAMP`, `ContextTokens` and
//! `GeneratedTokens` (other columns ignored), then one request a row:
//! - `TIMESTAMP`: a date-time `YYYY-MM-DD HH:MM:SS[.fraction]` (a `T` may
//!   separate date and time; up to 9 fraction digits; an optional `Z` or
//!   `±HH:MM` offset, without one the time is taken as UTC). The files write
//!   7 digits, e.g. `2023-11-16 18:15:46.6805900`. The arrival is the time
//!   since the first row's, computed in whole nanoseconds so the files'
//!   100 ns resolution survives;
//! - `ContextTokens` (>= 1): the prompt length (the trace holds no content;
//!   replay fills it with made-up tokens);
//! - `GeneratedTokens` (>= 1): the output length.
//!
//! Neither published file has a zero count or a row out of time order, so
//! either is an error here rather than something to skip.

use super::columns;
use super::format::{Timeline, TraceFormat, TraceLoad, TraceOptions};
use super::{TraceEntry, TraceError, TracePrompt};
use std::path::Path;
use time::{Date, Month, PrimitiveDateTime, Time, UtcOffset};

const TIMESTAMP: &str = "TIMESTAMP";
const CONTEXT: &str = "ContextTokens";
const GENERATED: &str = "GeneratedTokens";

pub(super) fn parse(
    text: &str,
    path: &Path,
    options: &TraceOptions,
) -> Result<TraceLoad, TraceError> {
    let (columns, rows) = columns::open(text, path, "Azure", &[TIMESTAMP, CONTEXT, GENERATED])?;
    let mut timeline = Timeline::new(TraceFormat::Azure, path, options);
    let mut first: Option<i128> = None;
    for row in rows {
        let (line, record) = row?;
        let stamp = columns.text(line, &record, TIMESTAMP)?;
        let nanos = unix_nanos(stamp).map_err(|m| columns.err(line, TIMESTAMP, m))?;
        let prompt = columns.positive(line, &record, CONTEXT)?;
        let output_tokens = columns.positive(line, &record, GENERATED)?;
        let origin = *first.get_or_insert(nanos);
        // Whole nanoseconds first: seconds since 1970 as f64 would keep only
        // about 0.2 µs of the fraction.
        let t = (nanos - origin) as f64 / 1e9;
        if let Some(arrival_s) = timeline.place(t, line, TIMESTAMP)? {
            timeline.load.entries.push(TraceEntry::new(
                arrival_s,
                TracePrompt::Length(prompt),
                output_tokens,
            ));
        }
    }
    Ok(timeline.finish())
}

const EXPECTED: &str = "expected a date-time like 2023-11-16 18:15:46.6805900";

/// Nanoseconds since 1970-01-01 00:00 UTC of a `TIMESTAMP` field.
pub(super) fn unix_nanos(s: &str) -> Result<i128, String> {
    let bad = |what: &str| format!("{s:?}: {what}; {EXPECTED}");
    let (date, rest) = s
        .split_once([' ', 'T'])
        .ok_or_else(|| bad("no time after the date"))?;
    let date = parse_date(date).ok_or_else(|| bad("not a date YYYY-MM-DD"))?;
    // The offset, if any, follows the time: `Z`, or a sign (the time itself
    // has neither).
    let (clock, offset) = match rest.find(['Z', '+', '-']) {
        Some(i) => (
            &rest[..i],
            parse_offset(&rest[i..]).ok_or_else(|| bad("not an offset Z or ±HH:MM"))?,
        ),
        None => (rest, UtcOffset::UTC),
    };
    let time = parse_time(clock).ok_or_else(|| bad("not a time HH:MM:SS[.fraction]"))?;
    Ok(PrimitiveDateTime::new(date, time)
        .assume_offset(offset)
        .unix_timestamp_nanos())
}

/// Digits only, so `+5` or ` 5` (which `parse` would take) are refused.
fn number<T: std::str::FromStr>(s: &str, digits: std::ops::RangeInclusive<usize>) -> Option<T> {
    (digits.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn parse_date(s: &str) -> Option<Date> {
    let mut parts = s.split('-');
    let year: i32 = number(parts.next()?, 4..=4)?;
    let month: u8 = number(parts.next()?, 2..=2)?;
    let day: u8 = number(parts.next()?, 2..=2)?;
    if parts.next().is_some() {
        return None;
    }
    // `time` checks the day against the month (and leap years).
    Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()
}

fn parse_time(s: &str) -> Option<Time> {
    let (hms, fraction) = match s.split_once('.') {
        Some((hms, f)) => (hms, Some(f)),
        None => (s, None),
    };
    let mut parts = hms.split(':');
    let hour: u8 = number(parts.next()?, 2..=2)?;
    let minute: u8 = number(parts.next()?, 2..=2)?;
    let second: u8 = number(parts.next()?, 2..=2)?;
    if parts.next().is_some() {
        return None;
    }
    let nanos = match fraction {
        None => 0,
        Some(f) => {
            let digits: u32 = number(f, 1..=9)?;
            digits * 10u32.pow(9 - f.len() as u32)
        }
    };
    Time::from_hms_nano(hour, minute, second, nanos).ok()
}

fn parse_offset(s: &str) -> Option<UtcOffset> {
    if s == "Z" {
        return Some(UtcOffset::UTC);
    }
    let sign: i8 = if s.starts_with('-') { -1 } else { 1 };
    let (h, m) = s[1..].split_once(':').unwrap_or((&s[1..], "00"));
    let hours: i8 = number(h, 2..=2)?;
    let minutes: i8 = number(m, 2..=2)?;
    UtcOffset::from_hms(sign * hours, sign * minutes, 0).ok()
}
