//! A summary table and its CSV form.
//!
//! Contract: columns are named in the header row; numbers are written with a
//! fixed number of decimals so the same results give byte-identical files;
//! a missing value (a metric a row does not have) is an empty cell. Text
//! cells containing commas, quotes or newlines are quoted (RFC 4180).

use std::fmt::Write as _;

#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Text(String),
    Int(i64),
    /// Written with 3 decimals.
    Num(f64),
    Empty,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Self {
        Cell::Text(s.into())
    }
    pub fn int(n: usize) -> Self {
        Cell::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
    /// `None` and NaN become an empty cell.
    pub fn num(x: Option<f64>) -> Self {
        match x {
            Some(v) if v.is_finite() => Cell::Num(v),
            _ => Cell::Empty,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Int(n) => Some(*n as f64),
            Cell::Num(x) => Some(*x),
            _ => None,
        }
    }
}

pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Text(s) => f.write_str(&csv_field(s)),
            Cell::Int(n) => write!(f, "{n}"),
            Cell::Num(x) => write!(f, "{x:.3}"),
            Cell::Empty => Ok(()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub columns: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(columns: &[&'static str]) -> Self {
        Self {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; cells beyond the header are dropped, missing ones empty.
    pub fn push(&mut self, mut row: Vec<Cell>) {
        row.resize(self.columns.len(), Cell::Empty);
        self.rows.push(row);
    }

    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| *c == name)
    }

    /// The cell at `row` in the column named `name`.
    pub fn get(&self, row: usize, name: &str) -> Option<&Cell> {
        self.rows.get(row)?.get(self.column(name)?)
    }

    pub fn to_csv(&self) -> String {
        let mut out = self.columns.join(",");
        out.push('\n');
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(Cell::to_string).collect();
            let _ = writeln!(out, "{}", cells.join(","));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_header_fixed_decimals_and_empty_cells() {
        let mut t = Table::new(&["part", "ms", "n"]);
        t.push(vec![
            Cell::text("a,b"),
            Cell::num(Some(1.23456)),
            Cell::int(3),
        ]);
        t.push(vec![Cell::text("x"), Cell::num(None)]);
        assert_eq!(t.to_csv(), "part,ms,n\n\"a,b\",1.235,3\nx,,\n");
        assert_eq!(t.get(0, "n").and_then(Cell::as_f64), Some(3.0));
    }
}
