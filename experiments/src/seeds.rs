//! Repeated sim runs over seeds: the spread of every summary metric.
//!
//! Contract: [`per_seed`] stacks the summaries of the seeds into one table
//! with a leading `seed` column (`summary_seeds.csv`); [`spread`] gives, in
//! long form, for every summary row (its key columns) and every numeric
//! metric column: the number of seeds with a value, mean, sample standard
//! deviation, the 95 % confidence interval of the mean (Student t with
//! n − 1 degrees of freedom, statrs) and min and max (`seeds.csv`). A metric
//! with one value has no sd or interval (empty cells). Every seed's summary
//! must have the same rows and columns, which a fixed plan guarantees.

use crate::table::{Cell, Table};
use statrs::distribution::{ContinuousCDF, StudentsT};
use statrs::statistics::Statistics;
use thiserror::Error;

/// `seeds.csv`'s columns after the summary's key columns.
pub const SPREAD_COLUMNS: [&str; 8] = [
    "metric",
    "seeds",
    "mean",
    "sd",
    "ci95_low",
    "ci95_high",
    "min",
    "max",
];

#[derive(Debug, Error)]
pub enum SeedsError {
    #[error("seed {seed}: its summary has {got} rows and columns {got_columns:?}, the first seed's {want} rows and {want_columns:?}")]
    Mismatch {
        seed: u64,
        got: usize,
        want: usize,
        got_columns: Vec<&'static str>,
        want_columns: Vec<&'static str>,
    },
    #[error("no seeds to summarize")]
    Empty,
}

fn check_same_shape(runs: &[(u64, &Table)]) -> Result<(), SeedsError> {
    let (_, first) = runs.first().ok_or(SeedsError::Empty)?;
    for (seed, t) in runs {
        if t.columns != first.columns || t.rows.len() != first.rows.len() {
            return Err(SeedsError::Mismatch {
                seed: *seed,
                got: t.rows.len(),
                want: first.rows.len(),
                got_columns: t.columns.clone(),
                want_columns: first.columns.clone(),
            });
        }
    }
    Ok(())
}

/// Every seed's summary rows, each led by its seed (`summary_seeds.csv`).
pub fn per_seed(runs: &[(u64, &Table)]) -> Result<Table, SeedsError> {
    check_same_shape(runs)?;
    let (_, first) = runs.first().ok_or(SeedsError::Empty)?;
    let mut columns = vec!["seed"];
    columns.extend(first.columns.iter().copied());
    let mut out = Table::new(&columns);
    for (seed, t) in runs {
        for row in &t.rows {
            let mut cells = vec![Cell::Int(i64::try_from(*seed).unwrap_or(i64::MAX))];
            cells.extend(row.iter().cloned());
            out.push(cells);
        }
    }
    Ok(out)
}

/// Mean, sd, 95 % interval, min and max of `values` (n ≥ 1).
fn describe(values: &[f64]) -> [Option<f64>; 6] {
    let n = values.len();
    let mean = values.mean();
    let (min, max) = (values.min(), values.max());
    if n < 2 {
        return [Some(mean), None, None, None, Some(min), Some(max)];
    }
    let sd = values.std_dev();
    // The t quantile with n - 1 >= 1 degrees of freedom always exists.
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .map(|d| d.inverse_cdf(0.975))
        .ok();
    let half = t.map(|t| t * sd / (n as f64).sqrt());
    [
        Some(mean),
        Some(sd),
        half.map(|h| mean - h),
        half.map(|h| mean + h),
        Some(min),
        Some(max),
    ]
}

/// The long-form spread of every numeric metric (`seeds.csv`); the first
/// `key_columns` summary columns identify each row.
pub fn spread(runs: &[(u64, &Table)], key_columns: usize) -> Result<Table, SeedsError> {
    check_same_shape(runs)?;
    let (_, first) = runs.first().ok_or(SeedsError::Empty)?;
    let keys = key_columns.min(first.columns.len());
    let mut columns: Vec<&'static str> = first.columns[..keys].to_vec();
    columns.extend(SPREAD_COLUMNS);
    let mut out = Table::new(&columns);
    for (r, row) in first.rows.iter().enumerate() {
        for (c, name) in first.columns.iter().enumerate().skip(keys) {
            let values: Vec<f64> = runs
                .iter()
                .filter_map(|(_, t)| t.rows.get(r)?.get(c).and_then(Cell::as_f64))
                .collect();
            if values.is_empty() {
                continue;
            }
            let mut cells: Vec<Cell> = row.iter().take(keys).cloned().collect();
            cells.push(Cell::text(*name));
            cells.push(Cell::int(values.len()));
            cells.extend(describe(&values).into_iter().map(Cell::num));
            out.push(cells);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(x: f64) -> Table {
        let mut t = Table::new(&["condition", "ms", "note"]);
        t.push(vec![Cell::text("a"), Cell::num(Some(x)), Cell::text("n")]);
        t
    }

    #[test]
    fn spread_has_a_t_interval_around_the_mean() {
        let (a, b, c) = (summary(1.0), summary(2.0), summary(3.0));
        let runs = [(0, &a), (1, &b), (2, &c)];
        let t = spread(&runs, 1).unwrap();
        assert_eq!(
            t.columns,
            [
                "condition",
                "metric",
                "seeds",
                "mean",
                "sd",
                "ci95_low",
                "ci95_high",
                "min",
                "max"
            ]
        );
        assert_eq!(t.rows.len(), 1, "the text column is no metric");
        let get = |c: &str| t.get(0, c).and_then(Cell::as_f64).unwrap();
        assert_eq!(get("mean"), 2.0);
        assert_eq!(get("sd"), 1.0);
        // t(0.975, 2 df) = 4.303: 2 ± 4.303 / sqrt(3).
        assert!((get("ci95_high") - (2.0 + 4.303 / 3f64.sqrt())).abs() < 1e-3);
        assert_eq!((get("min"), get("max")), (1.0, 3.0));
        let seeds = per_seed(&runs).unwrap();
        assert_eq!(seeds.columns[0], "seed");
        assert_eq!(seeds.rows.len(), 3);
    }

    #[test]
    fn one_seed_has_no_interval_and_mismatched_summaries_are_refused() {
        let a = summary(1.0);
        let t = spread(&[(5, &a)], 1).unwrap();
        assert_eq!(t.get(0, "sd"), Some(&Cell::Empty));
        let mut b = summary(2.0);
        b.push(vec![Cell::text("b")]);
        let err = spread(&[(0, &a), (1, &b)], 1).unwrap_err().to_string();
        assert!(err.contains("seed 1") && err.contains("2 rows"), "{err}");
    }
}
