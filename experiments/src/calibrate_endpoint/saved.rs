//! Reading back the probe points `exp calibrate --endpoint` wrote
//! (`PROFILE.samples.csv`), so that `exp calibrate --refit` fits them again
//! without the server.
//!
//! Contract: the file holds one row per probe point with at least the
//! columns `seqs`, `decodes`, `prefill_tokens`, `max_context` and
//! `measured_ms` (the others are ignored). Each row's step is rebuilt from
//! what [`super::probes::sample`] makes:
//! - `decodes == seqs`, no prefill tokens: a decode probe, `seqs` decodes
//!   at context `max_context − 1`;
//! - 2 sequences, one a decode: a prefill beside the pace. The chunk of
//!   `prefill_tokens` new tokens is over a cached context of
//!   `max_context − prefill_tokens` when that is longer than the pace can
//!   be ([`PACE_PROMPT`] + [`PACE_OUTPUTS`]; cached probes' prefixes are
//!   256 tokens or more), else over none. The pace's own context is
//!   `max_context − 1` when it is the longest, else [`PACE_CONTEXT`]: the
//!   file does not hold it, and its keys weigh under a microsecond.
//!
//! Any other row is not a probe point, an error naming the line.

use super::probes::{PACE_OUTPUTS, PACE_PROMPT};
use calibration::Sample;
use engine::{BatchShape, SeqShape};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The pace's context taken where the file does not give it: its prompt
/// and the five steps it has decoded when a measured request arrives
/// after the starter (as the probes on an H200 and the mock find it).
pub const PACE_CONTEXT: usize = PACE_PROMPT + 5;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SavedSamplesError {
    #[error("{}: {message}", path.display())]
    Unreadable { path: PathBuf, message: String },
    #[error(
        "{}:{line}: {seqs} sequences, {decodes} decodes and {prefill_tokens} prefill tokens \
         is no probe point of `exp calibrate --endpoint` (decodes only, or one decode beside one \
         prefill chunk)",
        path.display()
    )]
    NotAProbe {
        path: PathBuf,
        line: usize,
        seqs: usize,
        decodes: usize,
        prefill_tokens: usize,
    },
    #[error("{}:{line}: measured_ms {value} is not a time above 0", path.display())]
    BadTime {
        path: PathBuf,
        line: usize,
        value: f64,
    },
}

#[derive(Debug, Deserialize)]
struct Row {
    seqs: usize,
    decodes: usize,
    prefill_tokens: usize,
    max_context: usize,
    measured_ms: f64,
}

fn seq(new_tokens: usize, context_before: usize) -> SeqShape {
    SeqShape {
        new_tokens: new_tokens as u32,
        context_before: context_before as u32,
        samples: true,
    }
}

/// The step of one row, if it is a probe point.
fn shape(r: &Row) -> Option<BatchShape> {
    if r.seqs >= 1 && r.decodes == r.seqs && r.prefill_tokens == 0 {
        let context = r.max_context.checked_sub(1)?;
        return Some(BatchShape {
            seqs: vec![seq(1, context); r.seqs],
        });
    }
    if r.seqs != 2 || r.decodes != 1 || r.prefill_tokens < 2 {
        return None;
    }
    let beyond = r.max_context.checked_sub(r.prefill_tokens)?;
    let cached = if beyond > PACE_PROMPT + PACE_OUTPUTS {
        beyond
    } else {
        0
    };
    let pace = if cached == 0 && r.max_context > r.prefill_tokens {
        r.max_context - 1
    } else {
        PACE_CONTEXT
    };
    Some(BatchShape {
        seqs: vec![seq(1, pace), seq(r.prefill_tokens, cached)],
    })
}

/// The probe points of `text` (read from `path`, named in errors).
pub fn samples_from_csv(text: &str, path: &Path) -> Result<Vec<Sample>, SavedSamplesError> {
    let unreadable = |message: String| SavedSamplesError::Unreadable {
        path: path.to_path_buf(),
        message,
    };
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let mut out = Vec::new();
    for row in reader.deserialize::<Row>() {
        let row = row.map_err(|e| unreadable(e.to_string()))?;
        let line = out.len() + 2;
        if !(row.measured_ms.is_finite() && row.measured_ms > 0.0) {
            return Err(SavedSamplesError::BadTime {
                path: path.to_path_buf(),
                line,
                value: row.measured_ms,
            });
        }
        let shape = shape(&row).ok_or_else(|| SavedSamplesError::NotAProbe {
            path: path.to_path_buf(),
            line,
            seqs: row.seqs,
            decodes: row.decodes,
            prefill_tokens: row.prefill_tokens,
        })?;
        out.push(Sample {
            shape,
            seconds: row.measured_ms / 1e3,
        });
    }
    if out.is_empty() {
        return Err(unreadable("no probe points".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::samples_table;

    fn sample(seqs: Vec<SeqShape>, ms: f64) -> Sample {
        Sample {
            shape: BatchShape { seqs },
            seconds: ms / 1e3,
        }
    }

    #[test]
    fn every_kind_of_probe_point_reads_back_as_written() {
        let written = vec![
            sample(vec![seq(1, 136); 8], 1.06),
            sample(vec![seq(1, 21), seq(8, 0)], 1.3),
            sample(vec![seq(1, 21), seq(512, 0)], 2.8),
            sample(vec![seq(1, 22), seq(16, 3072)], 2.6),
            sample(vec![seq(1, 23), seq(512, 256)], 3.2),
        ];
        let profile = calibration::CostProfile::load(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../calibration/profiles/h200-qwen3-0.6b.ron"
        )))
        .unwrap();
        let text = samples_table(&written, &profile).to_csv();
        let read = samples_from_csv(&text, Path::new("s.csv")).unwrap();
        assert_eq!(read.len(), written.len());
        for (r, w) in read.iter().zip(&written) {
            assert!((r.seconds - w.seconds).abs() < 1e-9);
            // The chunk and the decodes exactly; the pace's context where
            // the file holds it.
            assert_eq!(r.shape.counts().max_context, w.shape.counts().max_context);
            assert_eq!(r.shape.seqs.last(), w.shape.seqs.last());
        }
        assert_eq!(read[1].shape.seqs[0], seq(1, 21));
        assert_eq!(read[3].shape.seqs[0], seq(1, PACE_CONTEXT));
    }

    #[test]
    fn rows_that_are_no_probe_point_or_time_are_refused() {
        let head = "point,seqs,decodes,prefill_tokens,max_context,measured_ms\n";
        let err = samples_from_csv(&format!("{head}0,3,1,64,64,1.0\n"), Path::new("s.csv"));
        let text = err.unwrap_err().to_string();
        assert!(
            text.starts_with("s.csv:2: 3 sequences, 1 decodes"),
            "{text}"
        );
        let err = samples_from_csv(&format!("{head}0,1,1,0,9,0\n"), Path::new("s.csv"));
        assert!(matches!(
            err,
            Err(SavedSamplesError::BadTime { line: 2, .. })
        ));
        let err = samples_from_csv("point,seqs\n0,1\n", Path::new("s.csv")).unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
        assert!(samples_from_csv(head, Path::new("s.csv")).is_err());
    }
}
