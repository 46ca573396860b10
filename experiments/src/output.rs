//! Files of one run: `requests.csv`, `steps.csv`, `meta.ron`.
//!
//! Contract: the columns and number format are `sim::records`' writers
//! (times in milliseconds since the condition's run started); requests are
//! listed by id, steps in order. When a run has several
//! conditions, each row starts with a `condition` column naming it (a single
//! condition omits it). `meta.ron` records everything needed to reproduce the
//! run: settings, seed (and every seed of a `--seeds N` run), conditions, backend (GPU and cost model), the git
//! commit (`unknown` outside a repository) and the UTC date.

use crate::backend::BackendInfo;
use crate::settings::Settings;
use calibration::fit::relative_error_pct;
use engine::EngineConfig;
use serde::Serialize;
use sim::records::{Millis, RequestRow, StepRow, REQUESTS_COLUMNS, STEPS_COLUMNS};
use sim::{CostModel, GpuHistory, RunRecords};

/// The rows of every run under `columns`, led by a `condition` column
/// naming each run's condition when there are several.
fn combine<R: Serialize>(
    runs: &[(String, &RunRecords)],
    columns: &[&str],
    rows: impl Fn(usize, &RunRecords) -> Vec<R>,
) -> std::io::Result<String> {
    let labelled = runs.len() > 1;
    let mut out = Vec::new();
    let mut w = sim::records::csv_writer(&mut out);
    let condition = labelled.then_some("condition");
    w.write_record(condition.iter().chain(columns))?;
    for (i, (label, records)) in runs.iter().enumerate() {
        for row in rows(i, records) {
            if labelled {
                w.serialize((label, row))?;
            } else {
                w.serialize(row)?;
            }
        }
    }
    w.flush()?;
    drop(w);
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `requests.csv` (sim's columns, requests by id) for the runs of all conditions.
pub fn requests_csv(runs: &[(String, &RunRecords)]) -> std::io::Result<String> {
    combine(runs, &REQUESTS_COLUMNS, |_, records| {
        let mut rows: Vec<RequestRow> = records.requests.iter().map(RequestRow::from).collect();
        rows.sort_by_key(|r| r.id);
        rows
    })
}

/// `steps.csv` (sim's columns) for the runs of all conditions.
pub fn steps_csv(runs: &[(String, &RunRecords)]) -> std::io::Result<String> {
    combine(runs, &STEPS_COLUMNS, |_, records| {
        records.steps.iter().map(StepRow::from).collect()
    })
}

/// `predictor`'s price of each of `records`' steps, in order, as the
/// simulator prices a step ([`CostModel::step_seconds_after`]): after the
/// idle time measured since its engine's last step ended (rested for ever
/// before an engine's first), on the GPU history of that engine's steps so
/// far as the predictor priced them.
pub fn predicted_seconds(records: &RunRecords, predictor: &dyn CostModel) -> Vec<f64> {
    let mut engines: Vec<(Option<f64>, GpuHistory)> = Vec::new();
    records
        .steps
        .iter()
        .map(|s| {
            if engines.len() <= s.engine {
                engines.resize(s.engine + 1, (None, GpuHistory::default()));
            }
            let (last_end, history) = &mut engines[s.engine];
            let idle = last_end.map_or(f64::INFINITY, |end| (s.start_s - end).max(0.0));
            *last_end = Some(s.start_s + s.duration_s);
            predictor.step_seconds_after(&s.shape, idle, history)
        })
        .collect()
}

/// `steps.csv` with a trailing `predicted_ms` column when predictions are
/// given: `predicted[i]` holds [`predicted_seconds`] of `runs[i]`'s steps.
pub fn steps_csv_predicted(
    runs: &[(String, &RunRecords)],
    predicted: Option<&[Vec<f64>]>,
) -> std::io::Result<String> {
    let Some(predicted) = predicted else {
        return steps_csv(runs);
    };
    let mut columns = STEPS_COLUMNS.to_vec();
    columns.push("predicted_ms");
    combine(runs, &columns, |i, records| {
        records
            .steps
            .iter()
            .zip(&predicted[i])
            .map(|(s, &p)| (StepRow::from(s), Millis::from_seconds(p)))
            .collect()
    })
}

/// |predicted − measured| / measured in percent for every step (of positive
/// measured duration) of every run; `predicted[i]` holds
/// [`predicted_seconds`] of `runs[i]`'s steps.
pub fn step_errors_pct(runs: &[RunRecords], predicted: &[Vec<f64>]) -> Vec<f64> {
    runs.iter()
        .zip(predicted)
        .flat_map(|(r, p)| r.steps.iter().zip(p))
        .filter(|(s, _)| s.duration_s > 0.0)
        .map(|(s, &p)| relative_error_pct(p, s.duration_s))
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
    /// The seed whose records are in this folder.
    pub seed: u64,
    /// Every seed run (`--seeds N`: seed..seed+N-1), the first being `seed`.
    pub seeds: Vec<u64>,
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
        assert!(steps.starts_with("condition,engine,start_ms,"), "{steps}");
    }

    /// Prices a step at its idle time before it, and keeps a count in the history.
    struct IdlePriced;
    impl CostModel for IdlePriced {
        fn step_seconds(&self, _: &engine::BatchShape) -> f64 {
            -1.0
        }
        fn step_seconds_after(
            &self,
            _: &engine::BatchShape,
            idle_s: f64,
            history: &mut GpuHistory,
        ) -> f64 {
            history.burst_credit_s += 1.0;
            idle_s + 100.0 * history.burst_credit_s
        }
    }

    fn step(engine: usize, start_s: f64, duration_s: f64) -> sim::StepRecord {
        sim::StepRecord {
            engine,
            start_s,
            duration_s,
            scheduled_tokens: 1,
            prefill_seqs: 0,
            decode_seqs: 1,
            prefill_tokens: 0,
            context_tokens: 10,
            max_context: 10,
            kv_blocks_used: 1,
            kv_blocks_total: 10,
            waiting_seqs: 0,
            running_seqs: 1,
            shape: engine::BatchShape::default(),
        }
    }

    #[test]
    fn a_measured_step_is_predicted_after_its_measured_idle_time_on_its_engines_history() {
        let run = RunRecords {
            steps: vec![
                step(0, 0.0, 1.0),
                step(1, 0.5, 1.0),
                step(0, 1.0, 1.0),
                step(0, 5.0, 1.0),
            ],
            ..Default::default()
        };
        // Engine 0: rested for ever, then back to back, then 3 s idle;
        // engine 1 keeps its own history.
        let p = predicted_seconds(&run, &IdlePriced);
        assert_eq!(p, [f64::INFINITY, f64::INFINITY, 200.0, 303.0]);
        let errors = step_errors_pct(&[run], &[p]);
        assert_eq!(errors.len(), 4);
        assert_eq!(errors[2], (200.0 - 1.0) / 1.0 * 100.0);
    }

    #[test]
    fn a_condition_label_with_a_comma_a_quote_and_a_newline_round_trips() {
        let label = "tenant \"a\", batch\n2";
        let (a, b) = (records(&[1]), records(&[2]));
        let both = requests_csv(&[(label.into(), &a), ("b".into(), &b)]).unwrap();
        let mut reader = csv::Reader::from_reader(both.as_bytes());
        let rows: Vec<(String, RequestRow)> = reader
            .records()
            .map(|r| {
                let r = r.unwrap();
                let rest = csv::StringRecord::from(r.iter().skip(1).collect::<Vec<_>>());
                (r[0].to_string(), rest.deserialize(None).unwrap())
            })
            .collect();
        assert_eq!(rows[0].0, label);
        assert_eq!(rows[0].1, RequestRow::from(&a.requests[0]));
        assert_eq!(rows[1].0, "b");
    }
}
