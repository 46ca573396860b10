//! Decode steps of sequences at different contexts (`engine-bench
//! --decode-mix`, `decode_mix.csv`: model, sm_count, contexts, ms_median,
//! copy_bandwidth_tb_s, date, commit), as steps of the operator model.
//!
//! Contract: each row becomes a decode-only batch of one sequence per
//! number in `contexts` (separated by spaces), each one new token over that
//! many cached keys, as [`super::family`] reads a decode row; its kind is
//! [`KIND`], its batch the count and its tokens the longest context; its
//! GPU, whole or a slice, is described by its SM count, its share of the
//! FLOP/s and the copy bandwidth its runner measured (`copy_bandwidth_tb_s`,
//! as [`super::slices`] describes a slice): these rows are fitted on, and a
//! GPU whose datasheet bandwidth is not the fit's GPU's share of it would
//! otherwise tell the fit its products are slow. The
//! family table holds batches of one context only; these steps show what a
//! batch whose sequences differ costs (the blocks of its longest sequence
//! finish last). A row that does not parse is an error naming its line and
//! field.

use super::family::{read_checked, FamilyError, FamilyPoint, MeasuredRow};
use super::slices::{slice_of, CopyBandwidths};
use engine::{BatchShape, SeqShape};
use sim::ModelShape;
use std::path::Path;

/// The kind of a decode-mix step ([`FamilyPoint::kind`]).
pub const KIND: &str = "decode_mix";

#[derive(serde::Deserialize)]
struct Row {
    model: String,
    sm_count: u32,
    contexts: String,
    ms_median: f64,
    copy_bandwidth_tb_s: f64,
}

impl MeasuredRow for Row {
    fn model(&self) -> &str {
        &self.model
    }
    fn sm_count(&self) -> u32 {
        self.sm_count
    }
}

/// Reads a decode_mix CSV measured on the GPU of `gpus`.
pub fn read(path: &Path, gpus: &CopyBandwidths) -> Result<Vec<FamilyPoint>, FamilyError> {
    let mut out = Vec::new();
    for c in read_checked::<Row>(path, gpus)? {
        let row = &c.row;
        let contexts: Vec<u32> = row
            .contexts
            .split_whitespace()
            .map(|n| n.parse::<u32>().ok().filter(|&n| n > 0))
            .collect::<Option<_>>()
            .filter(|v: &Vec<u32>| !v.is_empty())
            .ok_or_else(|| {
                c.field(
                    "contexts",
                    format!(
                        "{:?} is not a list of contexts (whole numbers above zero, separated by spaces)",
                        row.contexts
                    ),
                )
            })?;
        c.positive_time("ms_median", row.ms_median)?;
        let copy = row.copy_bandwidth_tb_s;
        if !(copy.is_finite() && copy > 0.0) {
            return Err(c.field(
                "copy_bandwidth_tb_s",
                format!("{copy} is not a bandwidth (TB/s above zero)"),
            ));
        }
        let seqs = contexts
            .iter()
            .map(|&ctx| SeqShape {
                new_tokens: 1,
                context_before: ctx,
                samples: true,
            })
            .collect();
        out.push(FamilyPoint {
            model: row.model.clone(),
            shape: ModelShape::from_qwen3(&c.config),
            gpu: slice_of(&gpus.whole, c.gpu.sm_count, copy),
            kind: KIND.to_string(),
            batch: contexts.len(),
            tokens: contexts.iter().copied().max().unwrap_or(0) as usize,
            step: BatchShape { seqs },
            measured_s: row.ms_median * 1e-3,
        });
    }
    Ok(out)
}

/// The contexts of a batch as `2048/300x4`: runs of one context as `CxN`.
pub fn contexts_label(step: &BatchShape) -> String {
    let mut runs: Vec<(u32, usize)> = Vec::new();
    for s in &step.seqs {
        match runs.last_mut() {
            Some((c, n)) if *c == s.context_before => *n += 1,
            _ => runs.push((s.context_before, 1)),
        }
    }
    runs.iter()
        .map(|&(c, n)| {
            if n == 1 {
                c.to_string()
            } else {
                format!("{c}x{n}")
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole() -> CopyBandwidths {
        let h100 = crate::datasheet::lookup("h100-sxm").expect("h100 in the table");
        CopyBandwidths {
            whole: h100,
            by_sm: Default::default(),
        }
    }

    fn write(name: &str, rows: &str) -> std::path::PathBuf {
        let header = "model,sm_count,contexts,ms_median,copy_bandwidth_tb_s,date,commit\n";
        crate::operators::test_files::write("decode-mix", name, &format!("{header}{rows}"))
    }

    #[test]
    fn a_row_is_one_decode_sequence_per_context() {
        let path = write(
            "good.csv",
            "qwen3-0.6b,132,2048 300 300 300 300,1.5316,2.775,d,c\n",
        );
        let pts = read(&path, &whole()).expect("reads");
        let p = &pts[0];
        assert_eq!((p.kind.as_str(), p.batch, p.tokens), (KIND, 5, 2048));
        let ctx: Vec<u32> = p.step.seqs.iter().map(|s| s.context_before).collect();
        assert_eq!(ctx, [2048, 300, 300, 300, 300]);
        assert!(p.step.seqs.iter().all(|s| s.new_tokens == 1 && s.samples));
        assert!((p.measured_s - 1.5316e-3).abs() < 1e-12);
        assert_eq!(p.gpu.sm_count, 132);
        // The GPU as its runner measured it: 2.775 TB/s of copies.
        let copy = p.gpu.mem_bandwidth * super::super::COPY_FRACTION;
        assert!((copy - 2.775e12).abs() < 1e6, "{copy}");
        assert_eq!(contexts_label(&p.step), "2048/300x4");
        assert_eq!(p.target(), "decode_mix 2048/300x4");
    }

    #[test]
    fn a_bad_row_names_its_file_line_and_field() {
        for (rows, field) in [
            ("qwen3-0.6b,132,2048 x 300,1.5,2.7,d,c\n", "`contexts`"),
            ("qwen3-0.6b,132,2048 0,1.5,2.7,d,c\n", "`contexts`"),
            ("qwen3-0.6b,132,,1.5,2.7,d,c\n", "`contexts`"),
            ("qwen3-0.6b,132,300,-1,2.7,d,c\n", "`ms_median`"),
            ("qwen3-0.6b,132,300,1.5,0,d,c\n", "`copy_bandwidth_tb_s`"),
            ("qwen3-9b,132,300,1.5,2.7,d,c\n", "`model`"),
        ] {
            let path = write(
                "bad.csv",
                &format!("qwen3-0.6b,132,300,1.1,2.7,d,c\n{rows}"),
            );
            let text = read(&path, &whole()).expect_err(rows).to_string();
            assert!(
                text.contains("bad.csv:3") && text.contains(field),
                "{rows}: {text}"
            );
        }
    }
}
