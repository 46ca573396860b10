//! BurstGPT (HPMLL/BurstGPT, `data/BurstGPT_1.csv` and the release's
//! `BurstGPT_*.csv`, schema in its README).
//!
//! Contract: a CSV header with `Timestamp`, `Request tokens` and `Response
//! tokens`; `Model`, `Total tokens` and `Log Type` are read when present, and
//! other columns (BurstGPT_3's `Session ID`, `Elapsed time`) ignored:
//! - `Timestamp`: seconds (>= 0) since midnight of the trace's first day;
//!   as every public trace here, the clock starts at the first row;
//! - `Request tokens`: the prompt length (made-up tokens on replay);
//! - `Response tokens`: the output length;
//! - `Total tokens`: checked to be a whole number, not used (it is their sum);
//! - `Model` and `Log Type` (e.g. `ChatGPT`, `Conversation log`) become the
//!   entry's tag, `ChatGPT/Conversation log`, so results split by them.
//!
//! Failures: the README says the files "with some failure" mark them by
//! `Response tokens` 0 (the `_without_fails_` files drop them). Such a row
//! still has to be well formed and in time order, then is skipped and
//! counted in [`TraceLoad::failed`]. A row with `Request tokens` 0 and a
//! response is skipped and counted in [`TraceLoad::empty_prompt`]: the engine
//! serves no empty prompt. In the shipped sample every failed row has 0
//! request tokens too, and no other row does.

use super::columns;
use super::format::{Timeline, TraceFormat, TraceLoad, TraceOptions};
use super::{TraceEntry, TraceError, TracePrompt};
use std::path::Path;

const TIMESTAMP: &str = "Timestamp";
const REQUEST: &str = "Request tokens";
const RESPONSE: &str = "Response tokens";
const TOTAL: &str = "Total tokens";
const MODEL: &str = "Model";
const LOG_TYPE: &str = "Log Type";

pub(super) fn parse(
    text: &str,
    path: &Path,
    options: &TraceOptions,
) -> Result<TraceLoad, TraceError> {
    let (columns, rows) = columns::open(text, path, "BurstGPT", &[TIMESTAMP, REQUEST, RESPONSE])?;
    let mut timeline = Timeline::new(TraceFormat::BurstGpt, path, options);
    for row in rows {
        let (line, record) = row?;
        let t = columns.seconds(line, &record, TIMESTAMP)?;
        let request = columns.count(line, &record, REQUEST)?;
        let response = columns.count(line, &record, RESPONSE)?;
        if columns.optional(line, &record, TOTAL)?.is_some() {
            columns.count(line, &record, TOTAL)?;
        }
        let model = columns.optional(line, &record, MODEL)?;
        let log_type = columns.optional(line, &record, LOG_TYPE)?;
        let Some(arrival_s) = timeline.place(t, line, TIMESTAMP)? else {
            continue;
        };
        if response == 0 {
            timeline.load.failed += 1;
            continue;
        }
        if request == 0 {
            timeline.load.empty_prompt += 1;
            continue;
        }
        let tag = match (model, log_type) {
            (Some(m), Some(l)) => Some(format!("{m}/{l}")),
            (m, l) => m.or(l).map(str::to_string),
        };
        timeline.load.entries.push(TraceEntry {
            tag,
            ..TraceEntry::new(arrival_s, TracePrompt::Length(request), response)
        });
    }
    Ok(timeline.finish())
}
