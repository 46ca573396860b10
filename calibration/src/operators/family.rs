//! Whole-step measurements over the Qwen3 family and SM counts
//! (`results/h200/engine_family.csv`), as fit points of the operator model.
//!
//! Contract: each row (model, sm_count, kind, batch, tokens, ms_median, ...)
//! becomes a batch shape (`decode`: `batch` sequences of one new token over
//! `tokens` cached; `prefill`: one sequence of `tokens` new tokens, sampled)
//! on a GPU: the measured GPU with `sm_count` SMs, described by its SM
//! count, its share of the dense FLOP/s, and the copy bandwidth a runner
//! with that many SMs measured ([`super::slices`]). A row that does not
//! parse is an error naming its line and field.

use super::slices::CopyBandwidths;
use engine::model::Qwen3Config;
use engine::{BatchShape, SeqShape};
use sim::{GpuSpec, ModelShape};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum FamilyError {
    #[error("reading {path}: {source}")]
    Csv { path: String, source: csv::Error },
    #[error("{path}:{line}: field `{field}`: {message}")]
    Field {
        path: String,
        line: u64,
        field: &'static str,
        message: String,
    },
}

/// One measured step.
#[derive(Debug, Clone)]
pub struct FamilyPoint {
    pub model: String,
    pub shape: ModelShape,
    pub gpu: GpuSpec,
    pub kind: String,
    pub batch: usize,
    pub tokens: usize,
    pub step: BatchShape,
    pub measured_s: f64,
}

impl FamilyPoint {
    /// `decode b=64 ctx=300`, `prefill 3200`, or a decode mix's contexts
    /// (`decode_mix 2048/300x4`, [`super::decode_mix`]).
    pub fn target(&self) -> String {
        match self.kind.as_str() {
            "decode" => format!("decode b={} ctx={}", self.batch, self.tokens),
            super::decode_mix::KIND => format!(
                "{} {}",
                super::decode_mix::KIND,
                super::decode_mix::contexts_label(&self.step)
            ),
            _ => format!("prefill {}", self.tokens),
        }
    }
}

pub fn batch_of(kind: &str, batch: usize, tokens: usize) -> Option<BatchShape> {
    let seq = match kind {
        "decode" => SeqShape {
            new_tokens: 1,
            context_before: tokens as u32,
            samples: true,
        },
        "prefill" => SeqShape {
            new_tokens: tokens as u32,
            context_before: 0,
            samples: true,
        },
        _ => return None,
    };
    Some(BatchShape {
        seqs: vec![seq; batch],
    })
}

/// A row of a measurement CSV that names a model preset and an SM count.
pub trait MeasuredRow: serde::de::DeserializeOwned {
    fn model(&self) -> &str;
    fn sm_count(&self) -> u32;
}

/// One row of a measurement CSV with what every such file shares checked:
/// the model is a preset and its SM count a measured H200 slice.
pub struct CheckedRow<T> {
    pub row: T,
    pub config: Qwen3Config,
    pub gpu: GpuSpec,
    path: String,
    line: u64,
}

impl<T> CheckedRow<T> {
    /// The error for `field` of this row's line.
    pub fn field(&self, field: &'static str, message: String) -> FamilyError {
        FamilyError::Field {
            path: self.path.clone(),
            line: self.line,
            field,
            message,
        }
    }

    /// `value` of `field` when it is a finite time above zero, else the row's error.
    pub fn positive_time(&self, field: &'static str, value: f64) -> Result<f64, FamilyError> {
        if value.is_finite() && value > 0.0 {
            Ok(value)
        } else {
            Err(self.field(field, format!("{value} is not a positive time")))
        }
    }
}

/// Every row of `path` (measured on the GPU of `gpus` and its slices),
/// checked; the first bad row is an error naming its line and field.
pub fn read_checked<T: MeasuredRow>(
    path: &Path,
    gpus: &CopyBandwidths,
) -> Result<Vec<CheckedRow<T>>, FamilyError> {
    let p = path.display().to_string();
    let csv_err = |source| FamilyError::Csv {
        path: p.clone(),
        source,
    };
    let mut reader = csv::Reader::from_path(path).map_err(csv_err)?;
    let mut out = Vec::new();
    for (i, rec) in reader.deserialize::<T>().enumerate() {
        let row = rec.map_err(csv_err)?;
        let line = i as u64 + 2;
        let field = |field, message: String| FamilyError::Field {
            path: p.clone(),
            line,
            field,
            message,
        };
        let config = Qwen3Config::preset(row.model()).map_err(|e| field("model", e.to_string()))?;
        let gpu = gpus.gpu(row.sm_count()).ok_or_else(|| {
            field(
                "sm_count",
                format!(
                    "{} SMs of the {} ({} in all): no runner of the steps' file measured                      its copy bandwidth (column copy_bandwidth_tb_s)",
                    row.sm_count(),
                    gpus.whole.name,
                    gpus.whole.sm_count
                ),
            )
        })?;
        out.push(CheckedRow {
            row,
            config,
            gpu,
            path: p.clone(),
            line,
        });
    }
    Ok(out)
}

#[derive(serde::Deserialize)]
struct Row {
    model: String,
    sm_count: u32,
    kind: String,
    batch: usize,
    tokens: usize,
    ms_median: f64,
}

impl MeasuredRow for Row {
    fn model(&self) -> &str {
        &self.model
    }
    fn sm_count(&self) -> u32 {
        self.sm_count
    }
}

/// Reads an engine_family CSV measured on the GPU of `gpus`.
pub fn read(path: &Path, gpus: &CopyBandwidths) -> Result<Vec<FamilyPoint>, FamilyError> {
    let mut out = Vec::new();
    for c in read_checked::<Row>(path, gpus)? {
        let row = &c.row;
        let step = batch_of(&row.kind, row.batch, row.tokens)
            .ok_or_else(|| c.field("kind", format!("{:?} is not decode or prefill", row.kind)))?;
        c.positive_time("ms_median", row.ms_median)?;
        out.push(FamilyPoint {
            model: row.model.clone(),
            shape: ModelShape::from_qwen3(&c.config),
            gpu: c.gpu.clone(),
            kind: row.kind.clone(),
            batch: row.batch,
            tokens: row.tokens,
            step,
            measured_s: row.ms_median * 1e-3,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_row_names_its_file_line_and_field() {
        let whole = crate::operators::test_files::h200();
        let header = "model,sm_count,kind,batch,tokens,ms_median,tok_s,date,commit\n";
        let write =
            |body: String| crate::operators::test_files::write("family", "family.csv", &body);
        let path = write(format!(
            "{header}qwen3-0.6b,132,decode,64,300,1.55,1,d,c\n\
             qwen3-0.6b,132,mixed,64,300,1.55,1,d,c\n"
        ));
        let text = read(&path, &whole)
            .expect_err("mixed is no kind")
            .to_string();
        assert!(
            text.contains("family.csv:3") && text.contains("`kind`"),
            "{text}"
        );
        write(format!("{header}qwen3-9b,132,decode,64,300,1.55,1,d,c\n"));
        let text = read(&path, &whole).expect_err("no such preset").to_string();
        assert!(
            text.contains("family.csv:2") && text.contains("`model`"),
            "{text}"
        );
        write(format!("{header}qwen3-0.6b,132,decode,64,300,1.55,1,d,c\n"));
        let pts = read(&path, &whole).expect("reads");
        assert_eq!((pts[0].step.seqs.len(), pts[0].gpu.sm_count), (64, 132));
    }
}
