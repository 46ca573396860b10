//! `compare.csv`: every metric of a real run next to the simulated one.
//!
//! Contract: the real and sim summary tables of one experiment have the same
//! columns; the first `key_columns` columns identify a row (its condition),
//! every other numeric column is a metric. Rows are matched by condition;
//! a condition or metric present on one side only is left out.
//! `error_pct` = (sim − real) / real × 100, empty when real is 0.

use crate::table::{Cell, Table};

pub const COLUMNS: &[&str] = &["condition", "metric", "real", "sim", "error_pct"];

pub(crate) fn condition_of(table: &Table, row: &[Cell], key_columns: usize) -> String {
    table
        .columns
        .iter()
        .zip(row)
        .take(key_columns)
        .map(|(c, v)| format!("{c}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn compare(real: &Table, sim: &Table, key_columns: usize) -> Table {
    let mut out = Table::new(COLUMNS);
    for real_row in &real.rows {
        let condition = condition_of(real, real_row, key_columns);
        let Some(sim_row) = sim
            .rows
            .iter()
            .find(|r| condition_of(sim, r, key_columns) == condition)
        else {
            continue;
        };
        for (i, metric) in real.columns.iter().enumerate().skip(key_columns) {
            let r = real_row.get(i).and_then(Cell::as_f64);
            let s = sim
                .column(metric)
                .and_then(|j| sim_row.get(j))
                .and_then(Cell::as_f64);
            let (Some(r), Some(s)) = (r, s) else { continue };
            let error = (r != 0.0).then(|| (s - r) / r * 100.0);
            out.push(vec![
                Cell::text(condition.clone()),
                Cell::text(*metric),
                Cell::num(Some(r)),
                Cell::num(Some(s)),
                Cell::num(error),
            ]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[(&str, f64, Option<f64>)]) -> Table {
        let mut t = Table::new(&["part", "ms", "tok_s"]);
        for (part, ms, tok) in rows {
            t.push(vec![
                Cell::text(*part),
                Cell::num(Some(*ms)),
                Cell::num(*tok),
            ]);
        }
        t
    }

    #[test]
    fn matches_rows_by_condition_and_reports_error() {
        let real = table(&[
            ("a", 10.0, Some(100.0)),
            ("b", 0.0, None),
            ("only_real", 1.0, None),
        ]);
        let sim = table(&[("b", 2.0, Some(5.0)), ("a", 12.0, Some(90.0))]);
        let c = compare(&real, &sim, 1);
        let csv = c.to_csv();
        assert_eq!(
            csv,
            "condition,metric,real,sim,error_pct\n\
             part=a,ms,10.000,12.000,20.000\n\
             part=a,tok_s,100.000,90.000,-10.000\n\
             part=b,ms,0.000,2.000,\n"
        );
    }
}
