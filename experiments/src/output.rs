//! Files of one run: `requests.csv`, `steps.csv`, `meta.ron`.
//!
//! Contract: the columns and number format are `sim::records`' writers
//! (times in milliseconds since the condition's run started); requests are
//! listed by id, steps in order. When a run has several
//! conditions, each row starts with a `condition` column naming it (a single
//! condition omits it). `meta.ron` records everything needed to reproduce the
//! run: settings, seed, conditions, backend (GPU and cost model), the git
//! commit (`unknown` outside a repository) and the UTC date.

use crate::backend::BackendInfo;
use crate::settings::Settings;
use crate::table::csv_field;
use calibration::fit::relative_error_pct;
use engine::EngineConfig;
use serde::Serialize;
use sim::{CostModel, RunRecords};
use std::fmt::Write as _;

/// Prefixes every line of one condition's CSV with its label (header: `condition`).
fn append_labelled(out: &mut String, csv: &str, label: Option<&str>, with_header: bool) {
    for (i, line) in csv.lines().enumerate() {
        if i == 0 && !with_header {
            continue;
        }
        match (i, label) {
            (_, None) => {}
            (0, Some(_)) => out.push_str("condition,"),
            (_, Some(l)) => {
                let _ = write!(out, "{},", csv_field(l));
            }
        }
        out.push_str(line);
        out.push('\n');
    }
}

fn combine(
    runs: &[(String, &RunRecords)],
    write: impl Fn(&mut Vec<u8>, &RunRecords) -> std::io::Result<()>,
) -> std::io::Result<String> {
    let labelled = runs.len() > 1;
    let mut out = String::new();
    if runs.is_empty() {
        let mut buf = Vec::new();
        write(&mut buf, &RunRecords::default())?;
        return Ok(String::from_utf8_lossy(&buf).into_owned());
    }
    for (i, (label, records)) in runs.iter().enumerate() {
        let mut buf = Vec::new();
        write(&mut buf, records)?;
        let text = String::from_utf8_lossy(&buf);
        append_labelled(&mut out, &text, labelled.then_some(label.as_str()), i == 0);
    }
    Ok(out)
}

/// `requests.csv` (sim's columns, requests by id) for the runs of all conditions.
pub fn requests_csv(runs: &[(String, &RunRecords)]) -> std::io::Result<String> {
    combine(runs, |buf, records| {
        let mut requests = records.requests.clone();
        requests.sort_by_key(|r| r.id);
        sim::records::write_requests_csv(buf, &requests)
    })
}

/// `steps.csv` (sim's columns) for the runs of all conditions.
pub fn steps_csv(runs: &[(String, &RunRecords)]) -> std::io::Result<String> {
    combine(runs, |buf, records| {
        sim::records::write_steps_csv(buf, &records.steps)
    })
}

/// `steps.csv` with a trailing `predicted_ms` column (the step's batch priced
/// by `predictor`) when a predictor is given.
pub fn steps_csv_predicted(
    runs: &[(String, &RunRecords)],
    predictor: Option<&dyn CostModel>,
) -> std::io::Result<String> {
    let Some(predictor) = predictor else {
        return steps_csv(runs);
    };
    combine(runs, |buf, records| {
        let mut plain = Vec::new();
        sim::records::write_steps_csv(&mut plain, &records.steps)?;
        let text = String::from_utf8_lossy(&plain);
        for (i, line) in text.lines().enumerate() {
            buf.extend_from_slice(line.as_bytes());
            match i.checked_sub(1).and_then(|s| records.steps.get(s)) {
                None if i == 0 => buf.extend_from_slice(b",predicted_ms"),
                None => buf.push(b','),
                Some(step) => {
                    let ms = predictor.step_seconds(&step.shape) * 1e3;
                    buf.extend_from_slice(format!(",{ms:.6}").as_bytes());
                }
            }
            buf.push(b'\n');
        }
        Ok(())
    })
}

/// |predicted − measured| / measured in percent for every step (of positive
/// measured duration) of every run.
pub fn step_errors_pct(runs: &[RunRecords], predictor: &dyn CostModel) -> Vec<f64> {
    runs.iter()
        .flat_map(|r| &r.steps)
        .filter(|s| s.duration_s > 0.0)
        .map(|s| relative_error_pct(predictor.step_seconds(&s.shape), s.duration_s))
        .collect()
}

#[derive(Debug, Serialize)]
pub struct ConditionMeta {
    pub label: String,
    pub engine: EngineConfig,
    pub seed: u64,
    pub requests: usize,
    /// KV-cache blocks of the engine, null block included (when known).
    pub kv_blocks: Option<usize>,
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

/// The commit `exp` was built from (`-dirty` with uncommitted changes),
/// recorded at build time by `build.rs`, or `unknown` without git.
pub fn git_commit() -> String {
    env!("SERVETWIN_BUILD_COMMIT").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    use sim::RequestRecord;

    fn records(ids: &[u64]) -> RunRecords {
        RunRecords {
            requests: ids
                .iter()
                .map(|&id| RequestRecord {
                    id,
                    tag: "t".into(),
                    arrival_s: 0.0,
                    prompt_tokens: 4,
                    max_tokens: 1,
                    cached_tokens: 0,
                    preemptions: 0,
                    token_times_s: vec![0.001],
                    finish_s: Some(0.001),
                    finish_reason: "length".into(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn several_conditions_get_a_leading_condition_column() {
        let (a, b) = (records(&[2, 1]), records(&[5]));
        let one = requests_csv(&[("only".into(), &a)]).unwrap();
        assert!(one.starts_with("id,tag,"), "{one}");
        let ids: Vec<&str> = one.lines().skip(1).map(|l| &l[..2]).collect();
        assert_eq!(ids, ["1,", "2,"], "requests sorted by id");
        let both = requests_csv(&[("x=1".into(), &a), ("y, z".into(), &b)]).unwrap();
        let lines: Vec<&str> = both.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("condition,id,tag,"));
        assert!(
            lines[1].starts_with("x=1,1,") && lines[3].starts_with("\"y, z\",5,"),
            "{both}"
        );
        let steps = steps_csv(&[("x".into(), &a), ("y".into(), &b)]).unwrap();
        assert_eq!(steps.lines().count(), 1, "no steps: header only");
    }
}
