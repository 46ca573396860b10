//! Reading back the grid points `exp calibrate` wrote (`FILE.samples.csv`),
//! so that a cost-model change can be refitted on measurements already made,
//! without the GPU.
//!
//! Contract: the CSV holds one row per grid point, in the order of the grid
//! it was measured on, with at least the columns `seqs`, `tokens`, `sampled`
//! and `measured_ms` (others are ignored); it is read by the `csv` crate into
//! [`SampleRow`]s. Each row is paired with the grid's shape at its position,
//! and a row whose summary does not match that shape is an error (the samples
//! were measured on another grid). Errors name the file, the line (1-based,
//! the header is line 1) and the field.

use crate::fit::Sample;
use crate::measure::Grid;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SamplesCsvError {
    #[error("{}: no column {column:?}", path.display())]
    MissingColumn { path: PathBuf, column: String },
    #[error("{}: {rows} rows but the grid has {points} points: measured on another grid", path.display())]
    RowCount {
        path: PathBuf,
        rows: usize,
        points: usize,
    },
    #[error(
        "{}:{line}: field `{field}`: {found}, the grid's point has {expected}: measured on another grid",
        path.display()
    )]
    ShapeMismatch {
        path: PathBuf,
        line: usize,
        field: &'static str,
        found: usize,
        expected: usize,
    },
    #[error("{}:{line}: field `{field}`: {message}", path.display())]
    BadField {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
    #[error("{}:{line}: {message}", path.display())]
    Unreadable {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// The columns a refit reads from one row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SampleRow {
    pub seqs: usize,
    pub tokens: usize,
    pub sampled: usize,
    pub measured_ms: f64,
}

const REQUIRED: [&str; 4] = ["seqs", "tokens", "sampled", "measured_ms"];

/// The rows of `text` (the file `path`), each with the line it is on.
fn rows(text: &str, path: &Path) -> Result<Vec<(usize, SampleRow)>, SamplesCsvError> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let line_of = |p: Option<&csv::Position>| p.map_or(1, |p| p.line() as usize);
    let unreadable = |e: csv::Error| SamplesCsvError::Unreadable {
        path: path.to_path_buf(),
        line: line_of(e.position()),
        message: e.to_string(),
    };
    let headers = reader.headers().map_err(unreadable)?.clone();
    if let Some(column) = REQUIRED.iter().find(|c| !headers.iter().any(|h| h == **c)) {
        return Err(SamplesCsvError::MissingColumn {
            path: path.to_path_buf(),
            column: column.to_string(),
        });
    }
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(unreadable)?;
        let line = line_of(record.position());
        let row = record.deserialize(Some(&headers)).map_err(|e| {
            let (field, value) = match e.kind() {
                csv::ErrorKind::Deserialize { err, .. } => {
                    let i = err.field().map_or(usize::MAX, |i| i as usize);
                    (headers.get(i), record.get(i))
                }
                _ => (None, None),
            };
            match (field, value) {
                (Some(field), Some(value)) => SamplesCsvError::BadField {
                    path: path.to_path_buf(),
                    line,
                    field: field.to_string(),
                    message: format!("{value:?} is not a number"),
                },
                _ => SamplesCsvError::Unreadable {
                    path: path.to_path_buf(),
                    line,
                    message: e.to_string(),
                },
            }
        })?;
        out.push((line, row));
    }
    Ok(out)
}

/// The samples of `text` (read from `path`, named in errors), paired with
/// `grid`'s shapes.
pub fn samples_from_csv(
    text: &str,
    path: &Path,
    grid: &Grid,
) -> Result<Vec<Sample>, SamplesCsvError> {
    let rows = rows(text, path)?;
    let shapes = grid.shapes();
    if rows.len() != shapes.len() {
        return Err(SamplesCsvError::RowCount {
            path: path.to_path_buf(),
            rows: rows.len(),
            points: shapes.len(),
        });
    }
    rows.into_iter()
        .zip(shapes)
        .map(|((line, row), shape)| {
            let counts = shape.counts();
            for (field, found, expected) in [
                ("seqs", row.seqs, counts.seqs),
                ("tokens", row.tokens, counts.tokens),
                ("sampled", row.sampled, counts.sampled),
            ] {
                if found != expected {
                    return Err(SamplesCsvError::ShapeMismatch {
                        path: path.to_path_buf(),
                        line,
                        field,
                        found,
                        expected,
                    });
                }
            }
            Ok(Sample {
                seconds: row.measured_ms / 1e3,
                shape,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv_for(grid: &Grid, ms: impl Fn(usize) -> String) -> String {
        let mut out = String::from("point,seqs,tokens,sampled,measured_ms\n");
        for (i, s) in grid.shapes().iter().enumerate() {
            out += &format!(
                "{i},{},{},{},{}\n",
                s.seqs.len(),
                s.num_tokens(),
                s.num_sampled(),
                ms(i)
            );
        }
        out
    }

    fn path() -> &'static Path {
        Path::new("s.csv")
    }

    #[test]
    fn rows_pair_with_the_grid_and_keep_their_times() {
        let grid = Grid::small(256);
        let text = csv_for(&grid, |i| format!("{}.5", i + 1));
        let samples = samples_from_csv(&text, path(), &grid).unwrap();
        assert_eq!(samples.len(), grid.shapes().len());
        assert_eq!(samples[2].seconds, 3.5e-3);
        assert_eq!(samples[2].shape, grid.shapes()[2]);
    }

    #[test]
    fn another_grid_or_a_bad_file_is_an_error_that_says_where() {
        let grid = Grid::small(256);
        let text = csv_for(&grid, |_| "1".into());
        let bigger = Grid::gpu_default();
        assert!(matches!(
            samples_from_csv(&text, path(), &bigger),
            Err(SamplesCsvError::RowCount { .. })
        ));
        let swapped = text.replacen("\n0,1,1,1,", "\n0,2,1,1,", 1);
        let err = samples_from_csv(&swapped, path(), &grid).unwrap_err();
        assert_eq!(
            err,
            SamplesCsvError::ShapeMismatch {
                path: path().into(),
                line: 2,
                field: "seqs",
                found: 2,
                expected: 1
            }
        );
        assert!(
            err.to_string().starts_with("s.csv:2: field `seqs`"),
            "{err}"
        );
        let bad = text.replacen(",1\n", ",fast\n", 1);
        let err = samples_from_csv(&bad, path(), &grid).unwrap_err();
        assert!(
            matches!(
                &err,
                SamplesCsvError::BadField { line: 2, field, .. } if field == "measured_ms"
            ),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("\"fast\" is not a number"),
            "{err}"
        );
        assert_eq!(
            samples_from_csv("point,seqs\n", path(), &grid),
            Err(SamplesCsvError::MissingColumn {
                path: path().into(),
                column: "tokens".into()
            })
        );
    }

    #[test]
    fn a_quoted_field_holding_a_comma_is_one_field() {
        let grid = Grid::small(256);
        let text = csv_for(&grid, |i| format!("1,\"point {i}, warm\"")).replacen(
            "measured_ms\n",
            "measured_ms,note\n",
            1,
        );
        let samples = samples_from_csv(&text, path(), &grid).unwrap();
        assert_eq!(samples.len(), grid.shapes().len());
        let short = text.replacen(",\"point 0, warm\"\n", "\n", 1);
        assert!(
            matches!(
                samples_from_csv(&short, path(), &grid),
                Err(SamplesCsvError::Unreadable { line: 2, .. })
            ),
            "a row shorter than the header"
        );
    }
}
