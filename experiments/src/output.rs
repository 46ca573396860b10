//! Files of one run: `requests.csv`, `steps.csv`, `meta.ron`.
//!
//! Contract: times are milliseconds since the condition's run started;
//! requests are listed by id, steps in order. When a run has several
//! conditions, each row starts with a `condition` column naming it (a single
//! condition omits it). `meta.ron` records everything needed to reproduce the
//! run: settings, seed, conditions, backend (GPU and cost model), the git
//! commit (`unknown` outside a repository) and the UTC date.

use crate::backend::BackendInfo;
use crate::settings::Settings;
use crate::table::{csv_field, Cell};
use engine::EngineConfig;
use serde::Serialize;
use sim::{RequestRecord, RunRecords, StepRecord};
use std::fmt::Write as _;

const REQUEST_COLUMNS: &[&str] = &[
    "id",
    "tag",
    "arrival_ms",
    "first_token_ms",
    "ttft_ms",
    "finish_ms",
    "prompt_tokens",
    "max_tokens",
    "output_tokens",
    "cached_tokens",
    "preemptions",
    "itl_median_ms",
    "itl_max_ms",
    "finish_reason",
];

const STEP_COLUMNS: &[&str] = &[
    "engine",
    "start_ms",
    "duration_ms",
    "scheduled_tokens",
    "prefill_seqs",
    "decode_seqs",
    "prefill_tokens",
    "context_tokens",
    "max_context",
    "kv_blocks_used",
];

fn ms(s: Option<f64>) -> Cell {
    Cell::num(s.map(|x| x * 1e3))
}

fn request_cells(r: &RequestRecord) -> Vec<Cell> {
    let itls: Vec<f64> = r.itls_s().collect();
    let itl_max = itls.iter().copied().reduce(f64::max);
    vec![
        Cell::int(r.id as usize),
        Cell::text(r.tag.clone()),
        ms(Some(r.arrival_s)),
        ms(r.token_times_s.first().copied()),
        ms(r.ttft_s()),
        ms(r.finish_s),
        Cell::int(r.prompt_tokens),
        Cell::int(r.max_tokens),
        Cell::int(r.token_times_s.len()),
        Cell::int(r.cached_tokens),
        Cell::int(r.preemptions),
        ms(crate::stats::median(&itls)),
        ms(itl_max),
        Cell::text(r.finish_reason.clone()),
    ]
}

fn step_cells(s: &StepRecord) -> Vec<Cell> {
    vec![
        Cell::int(s.engine),
        ms(Some(s.start_s)),
        ms(Some(s.duration_s)),
        Cell::int(s.scheduled_tokens),
        Cell::int(s.prefill_seqs),
        Cell::int(s.decode_seqs),
        Cell::int(s.prefill_tokens),
        Cell::int(s.context_tokens),
        Cell::int(s.max_context),
        Cell::int(s.kv_blocks_used),
    ]
}

fn write_rows<T>(
    runs: &[(String, &RunRecords)],
    columns: &[&str],
    rows: impl Fn(&RunRecords) -> Vec<&T>,
    cells: impl Fn(&T) -> Vec<Cell>,
) -> String {
    let labelled = runs.len() > 1;
    let mut out = String::new();
    if labelled {
        out.push_str("condition,");
    }
    out.push_str(&columns.join(","));
    out.push('\n');
    for (label, records) in runs {
        for item in rows(records) {
            let line: Vec<String> = cells(item).iter().map(Cell::to_string).collect();
            if labelled {
                let _ = write!(out, "{},", csv_field(label));
            }
            let _ = writeln!(out, "{}", line.join(","));
        }
    }
    out
}

/// `requests.csv` for the runs of all conditions.
pub fn requests_csv(runs: &[(String, &RunRecords)]) -> String {
    write_rows(
        runs,
        REQUEST_COLUMNS,
        |r| {
            let mut v: Vec<&RequestRecord> = r.requests.iter().collect();
            v.sort_by_key(|q| q.id);
            v
        },
        request_cells,
    )
}

/// `steps.csv` for the runs of all conditions.
pub fn steps_csv(runs: &[(String, &RunRecords)]) -> String {
    write_rows(runs, STEP_COLUMNS, |r| r.steps.iter().collect(), step_cells)
}

#[derive(Debug, Serialize)]
pub struct ConditionMeta {
    pub label: String,
    pub engine: EngineConfig,
    pub seed: u64,
    pub requests: usize,
}

#[derive(Debug, Serialize)]
pub struct Meta<'a> {
    pub experiment: &'a str,
    pub seed: u64,
    pub settings: &'a Settings,
    pub backend: BackendInfo,
    pub conditions: Vec<ConditionMeta>,
    pub commit: String,
    pub date_utc: String,
}

/// `git rev-parse HEAD`, or `unknown` when git or the repository is missing.
pub fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

/// Seconds since 1970 as an ISO-8601 UTC date (civil-from-days, H. Hinnant).
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_798_761_599), "2026-12-31T23:59:59Z");
    }
}
