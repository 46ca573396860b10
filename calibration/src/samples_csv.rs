//! Reading back the grid points `exp calibrate` wrote (`FILE.samples.csv`),
//! so that a cost-model change can be refitted on measurements already made,
//! without the GPU.
//!
//! Contract: the CSV holds one row per grid point, in the order of the grid
//! it was measured on, with at least the columns `seqs`, `tokens`, `sampled`
//! and `measured_ms`; each row is paired with the grid's shape at its
//! position, and a row whose summary does not match that shape is an error
//! naming the row (the samples were measured on another grid).

use crate::fit::Sample;
use crate::measure::Grid;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SamplesCsvError {
    #[error("the samples CSV has no column {0:?}")]
    MissingColumn(String),
    #[error("the samples CSV has {rows} rows but the grid has {points} points: measured on another grid")]
    RowCount { rows: usize, points: usize },
    #[error(
        "row {row}: {what} is {found}, the grid's point has {expected}: measured on another grid"
    )]
    ShapeMismatch {
        row: usize,
        what: &'static str,
        found: String,
        expected: usize,
    },
    #[error("row {row}: measured_ms {value:?} is not a number")]
    BadNumber { row: usize, value: String },
}

/// The samples of `text`, paired with `grid`'s shapes.
pub fn samples_from_csv(text: &str, grid: &Grid) -> Result<Vec<Sample>, SamplesCsvError> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|&h| h.trim() == name)
            .ok_or_else(|| SamplesCsvError::MissingColumn(name.into()))
    };
    let (seqs, tokens, sampled, measured) = (
        col("seqs")?,
        col("tokens")?,
        col("sampled")?,
        col("measured_ms")?,
    );
    let rows: Vec<Vec<&str>> = lines
        .map(|l| l.split(',').map(str::trim).collect())
        .collect();
    let shapes = grid.shapes();
    if rows.len() != shapes.len() {
        return Err(SamplesCsvError::RowCount {
            rows: rows.len(),
            points: shapes.len(),
        });
    }
    rows.iter()
        .zip(shapes)
        .enumerate()
        .map(|(i, (r, shape))| {
            let field = |c: usize| r.get(c).copied().unwrap_or("");
            let counts = shape.counts();
            for (what, c, expected) in [
                ("seqs", seqs, counts.seqs),
                ("tokens", tokens, counts.tokens),
                ("sampled", sampled, counts.sampled),
            ] {
                if field(c).parse::<usize>().ok() != Some(expected) {
                    return Err(SamplesCsvError::ShapeMismatch {
                        row: i + 1,
                        what,
                        found: field(c).into(),
                        expected,
                    });
                }
            }
            let ms: f64 = field(measured)
                .parse()
                .map_err(|_| SamplesCsvError::BadNumber {
                    row: i + 1,
                    value: field(measured).into(),
                })?;
            Ok(Sample {
                seconds: ms / 1e3,
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

    #[test]
    fn rows_pair_with_the_grid_and_keep_their_times() {
        let grid = Grid::small(256);
        let samples = samples_from_csv(&csv_for(&grid, |i| format!("{}.5", i + 1)), &grid).unwrap();
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
            samples_from_csv(&text, &bigger),
            Err(SamplesCsvError::RowCount { .. })
        ));
        let swapped = text.replacen("\n0,1,1,1,", "\n0,2,1,1,", 1);
        assert_eq!(
            samples_from_csv(&swapped, &grid),
            Err(SamplesCsvError::ShapeMismatch {
                row: 1,
                what: "seqs",
                found: "2".into(),
                expected: 1
            })
        );
        let bad = text.replacen(",1\n", ",fast\n", 1);
        assert!(matches!(
            samples_from_csv(&bad, &grid),
            Err(SamplesCsvError::BadNumber { row: 1, .. })
        ));
        assert_eq!(
            samples_from_csv("point,seqs\n", &grid),
            Err(SamplesCsvError::MissingColumn("tokens".into()))
        );
    }
}
