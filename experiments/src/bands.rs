//! Each figure of a sim run with its cost model's step error carried through
//! the run (`bands.csv`).
//!
//! Contract: [`propagate`] runs the experiment again, same settings and
//! seed, once for each share in [`SHARES`] of the step error the cost
//! model's hold-outs measured, every step off by that share
//! ([`Backend::with_step_error`]); `None` when the backend has no such error
//! (a real runner, a calibrated profile). [`bands`] gives, for every
//! condition (as `compare.csv` names it) and every numeric metric of the
//! unscaled summary: `value`, `low` and `high` (the least and the most over
//! the unscaled run and the scaled ones) and `error_pct`, the larger of
//! `value − low` and `high − value` in % of |value| (empty when value is 0).
//! For `exp validate`: [`band_of`] is a figure's (`sim_low`, `sim_high`),
//! and [`measured_inside`] counts the measured values inside their bands.
//!
//! Why: the held-out table measures steps, and figures do not all move with
//! their steps alike. A token count does not move; a TTFT under load, where
//! requests queue behind one another, moves by several times the error of
//! the steps; a figure whose scheduling tips (a request joining one step
//! later) can jump. A figure's stated error is what its own band shows.

use crate::backend::{Backend, BackendError};
use crate::catalogue::Experiment;
use crate::compare::condition_of;
use crate::driver::{evaluate, DriverError};
use crate::progress;
use crate::settings::Settings;
use crate::table::{Cell, Table};
use sim::workload::PromptSource;
use thiserror::Error;

/// Shares of the held-out step error each extra run puts on every step.
pub const SHARES: [f64; 4] = [-1.0, -0.5, 0.5, 1.0];

/// `bands.csv`'s columns.
pub const COLUMNS: [&str; 6] = ["condition", "metric", "value", "low", "high", "error_pct"];

#[derive(Debug, Error)]
pub enum BandsError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error("the run with steps off by {share:+} of their error has {got} summary rows, the unscaled run {want}")]
    Mismatch { share: f64, got: usize, want: usize },
}

/// The band of every figure of `base` over `base` and `scaled` (same rows
/// and columns: the same plan run with other step costs).
pub fn bands(
    base: &Table,
    scaled: &[(f64, Table)],
    key_columns: usize,
) -> Result<Table, BandsError> {
    for (share, t) in scaled {
        if t.rows.len() != base.rows.len() || t.columns != base.columns {
            return Err(BandsError::Mismatch {
                share: *share,
                got: t.rows.len(),
                want: base.rows.len(),
            });
        }
    }
    let keys = key_columns.min(base.columns.len());
    let mut out = Table::new(&COLUMNS);
    for (r, row) in base.rows.iter().enumerate() {
        let condition = condition_of(base, row, keys);
        for (c, metric) in base.columns.iter().enumerate().skip(keys) {
            let Some(value) = row.get(c).and_then(Cell::as_f64) else {
                continue;
            };
            let (mut low, mut high) = (value, value);
            for (_, t) in scaled {
                if let Some(v) = t.rows[r].get(c).and_then(Cell::as_f64) {
                    (low, high) = (low.min(v), high.max(v));
                }
            }
            let spread = (value - low).max(high - value);
            let error = (value != 0.0).then(|| spread / value.abs() * 100.0);
            out.push(vec![
                Cell::text(condition.clone()),
                Cell::text(*metric),
                Cell::num(Some(value)),
                Cell::num(Some(low)),
                Cell::num(Some(high)),
                Cell::num(error),
            ]);
        }
    }
    Ok(out)
}

/// The bands of `exp`'s figures on `backend`, whose unscaled run summarised
/// to `base`; `None` when `backend` has no held-out step error.
#[allow(clippy::too_many_arguments)]
pub fn propagate(
    exp: &dyn Experiment,
    settings: &Settings,
    backend: &dyn Backend,
    base: &Table,
    key_columns: usize,
    seed: u64,
    prompts: Option<&PromptSource>,
    quiet: bool,
) -> Result<Option<Table>, BandsError> {
    let mut scaled = Vec::with_capacity(SHARES.len());
    for share in SHARES {
        let Some(off) = backend.with_step_error(share)? else {
            return Ok(None);
        };
        let bar = progress::conditions_bar(quiet, exp.name());
        bar.set_message(format!("(steps {share:+} x their held-out error)"));
        let evaluation = evaluate(exp, settings, off.as_ref(), seed, prompts, &bar)?;
        bar.finish_and_clear();
        scaled.push((share, evaluation.report.summary));
    }
    bands(base, &scaled, key_columns).map(Some)
}

/// `sim_low` and `sim_high` of `condition`'s `metric` in `bands` (empty
/// cells where the sim has no band), for `validation.csv`.
pub fn band_of(bands: Option<&Table>, condition: &str, metric: &str) -> [Cell; 2] {
    let found = bands.and_then(|b| {
        b.rows
            .iter()
            .find(|r| r[0].to_string() == condition && r[1].to_string() == metric)
    });
    match found {
        Some(row) => [row[3].clone(), row[4].clone()],
        None => [Cell::Empty, Cell::Empty],
    }
}

/// Of the rows of a validation table (`real`, `sim_low`, `sim_high`
/// columns) that have a band, how many measured values lie inside it:
/// (inside, with a band); `None` when no row has one.
pub fn measured_inside(validation: &Table) -> Option<(usize, usize)> {
    let col = |name| validation.column(name);
    let (real, low, high) = (col("real")?, col("sim_low")?, col("sim_high")?);
    let (mut inside, mut banded) = (0, 0);
    for row in &validation.rows {
        let value = |i: usize| row.get(i).and_then(Cell::as_f64);
        if let (Some(r), Some(l), Some(h)) = (value(real), value(low), value(high)) {
            banded += 1;
            inside += usize::from(l <= r && r <= h);
        }
    }
    (banded > 0).then_some((inside, banded))
}

/// The row of `bands` with the largest `error_pct` among `metrics` (all
/// when empty): (condition, metric, error_pct).
pub fn widest(bands: &Table, metrics: &[&str]) -> Option<(String, String, f64)> {
    let col = |name| bands.column(name);
    let (c, m, e) = (col("condition")?, col("metric")?, col("error_pct")?);
    bands
        .rows
        .iter()
        .filter_map(|row| {
            let metric = row.get(m)?.to_string();
            if !metrics.is_empty() && !metrics.contains(&metric.as_str()) {
                return None;
            }
            Some((row.get(c)?.to_string(), metric, row.get(e)?.as_f64()?))
        })
        .max_by(|a, b| a.2.total_cmp(&b.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(rows: &[(&str, f64, f64)]) -> Table {
        let mut t = Table::new(&["rate", "ttft_ms", "tokens"]);
        for (rate, ttft, tokens) in rows {
            t.push(vec![
                Cell::text(*rate),
                Cell::num(Some(*ttft)),
                Cell::num(Some(*tokens)),
            ]);
        }
        t
    }

    #[test]
    fn a_band_spans_every_run_and_its_error_is_the_wider_side() {
        let base = summary(&[("10", 20.0, 64.0), ("40", 100.0, 64.0)]);
        let scaled = vec![
            (-1.0, summary(&[("10", 19.0, 64.0), ("40", 90.0, 64.0)])),
            (-0.5, summary(&[("10", 19.5, 64.0), ("40", 101.0, 64.0)])),
            (0.5, summary(&[("10", 20.5, 64.0), ("40", 104.0, 64.0)])),
            (1.0, summary(&[("10", 21.0, 64.0), ("40", 118.0, 64.0)])),
        ];
        let t = bands(&base, &scaled, 1).unwrap();
        assert_eq!(t.columns, COLUMNS);
        assert_eq!(t.rows.len(), 4, "two conditions, two metrics");
        let row = |cond: &str, metric: &str| {
            t.rows
                .iter()
                .find(|r| r[0].to_string() == cond && r[1].to_string() == metric)
                .unwrap()
                .iter()
                .skip(2)
                .map(|c| c.as_f64().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(row("rate=40", "ttft_ms"), [100.0, 90.0, 118.0, 18.0]);
        assert_eq!(row("rate=10", "ttft_ms"), [20.0, 19.0, 21.0, 5.0]);
        assert_eq!(row("rate=10", "tokens"), [64.0, 64.0, 64.0, 0.0]);
        assert_eq!(
            widest(&t, &[]),
            Some(("rate=40".into(), "ttft_ms".into(), 18.0))
        );
        assert_eq!(
            widest(&t, &["tokens"]).map(|w| w.2),
            Some(0.0),
            "only the metrics asked for"
        );
    }

    #[test]
    fn a_validation_table_counts_the_measured_values_inside_their_bands() {
        let mut t = Table::new(&["metric", "real", "sim", "sim_low", "sim_high"]);
        for (real, low, high) in [(1.0, Some(0.9), Some(1.1)), (2.0, Some(2.1), Some(2.4))] {
            t.push(vec![
                Cell::text("ttft_ms"),
                Cell::num(Some(real)),
                Cell::num(Some(real)),
                Cell::num(low),
                Cell::num(high),
            ]);
        }
        t.push(vec![Cell::text("steps"), Cell::Empty, Cell::Empty]);
        assert_eq!(measured_inside(&t), Some((1, 2)));
        let found = band_of(
            Some(&bands(&summary(&[("10", 5.0, 1.0)]), &[], 1).unwrap()),
            "rate=10",
            "ttft_ms",
        );
        assert_eq!(found.map(|c| c.as_f64()), [Some(5.0), Some(5.0)]);
        assert_eq!(
            band_of(None, "rate=10", "ttft_ms"),
            [Cell::Empty, Cell::Empty]
        );
        t.rows.truncate(0);
        assert_eq!(measured_inside(&t), None);
    }

    #[test]
    fn a_zero_value_has_no_error_and_mismatched_runs_are_refused() {
        let base = summary(&[("10", 0.0, 1.0)]);
        let t = bands(&base, &[(1.0, summary(&[("10", 0.5, 1.0)]))], 1).unwrap();
        assert_eq!(t.get(0, "error_pct"), Some(&Cell::Empty));
        assert_eq!(t.get(0, "high").and_then(Cell::as_f64), Some(0.5));
        let short = summary(&[]);
        let e = bands(&base, &[(-0.5, short)], 1).unwrap_err().to_string();
        assert!(e.contains("-0.5") && e.contains("0 summary rows"), "{e}");
    }
}
