//! A summary table and its CSV form.
//!
//! Contract: columns are named in the header row; numbers are written with a
//! fixed number of decimals so the same results give byte-identical files;
//! a missing value (a metric a row does not have) is an empty cell. Rows are
//! written by the `csv` crate through [`Cell`]'s `Serialize`, so a text cell
//! holding a comma, a quote or a line break is quoted (RFC 4180) and reads
//! back whole.

use serde::{Serialize, Serializer};
use std::io::{self, Write};

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

/// The cell's text as the CSV holds it, before any quoting.
impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Text(s) => f.write_str(s),
            Cell::Int(n) => write!(f, "{n}"),
            Cell::Num(x) => write!(f, "{x:.3}"),
            Cell::Empty => Ok(()),
        }
    }
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Cell::Text(s) => serializer.serialize_str(s),
            Cell::Int(n) => serializer.serialize_i64(*n),
            Cell::Num(_) | Cell::Empty => serializer.collect_str(self),
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

    /// The header row, then every row.
    pub fn write_csv<W: Write>(&self, out: W) -> io::Result<()> {
        let mut w = sim::records::csv_writer(out);
        w.write_record(&self.columns)?;
        for row in &self.rows {
            w.serialize(row)?;
        }
        w.flush()
    }

    pub fn to_csv(&self) -> String {
        let mut out = Vec::new();
        self.write_csv(&mut out)
            .expect("writing CSV into memory does not fail");
        // Every cell is a Rust string or a number: the bytes are UTF-8.
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Several tables with the same columns as one CSV: a leading column `name`
/// holds each row's label; the header is the first table's.
pub fn write_labelled_csv<W: Write>(
    out: W,
    name: &str,
    tables: &[(&str, &Table)],
) -> io::Result<()> {
    let mut w = sim::records::csv_writer(out);
    if let Some((_, first)) = tables.first() {
        w.write_record(std::iter::once(name).chain(first.columns.iter().copied()))?;
    }
    for (label, table) in tables {
        for row in &table.rows {
            w.serialize((label, row))?;
        }
    }
    w.flush()
}

/// [`write_labelled_csv`] into a string.
pub fn labelled_csv(name: &str, tables: &[(&str, &Table)]) -> String {
    let mut out = Vec::new();
    write_labelled_csv(&mut out, name, tables).expect("writing CSV into memory does not fail");
    String::from_utf8_lossy(&out).into_owned()
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
        assert_eq!(
            t.get(0, "part").map(Cell::to_string).as_deref(),
            Some("a,b")
        );
    }

    #[test]
    fn a_text_cell_with_a_comma_a_quote_and_a_newline_round_trips() {
        let text = "GPU \"a\", second\nline";
        let mut t = Table::new(&["part", "ms"]);
        t.push(vec![Cell::text(text), Cell::num(Some(2.0))]);
        t.push(vec![Cell::text("plain"), Cell::Empty]);
        let csv = t.to_csv();
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        assert_eq!(reader.headers().unwrap(), vec!["part", "ms"]);
        let rows: Vec<Vec<String>> = reader.deserialize().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            rows,
            [
                vec![text.to_string(), "2.000".into()],
                vec!["plain".into(), String::new()]
            ]
        );
    }

    #[test]
    fn labelled_tables_get_a_leading_column() {
        let mut a = Table::new(&["part", "ms"]);
        a.push(vec![Cell::text("x"), Cell::num(Some(1.0))]);
        let mut b = a.clone();
        b.push(vec![Cell::text("y"), Cell::Empty]);
        assert_eq!(
            labelled_csv("gpu", &[("h200", &a), ("l4, 24 GB", &b)]),
            "gpu,part,ms\nh200,x,1.000\n\"l4, 24 GB\",x,1.000\n\"l4, 24 GB\",y,\n"
        );
        assert_eq!(labelled_csv("gpu", &[]), "");
    }
}
