//! Decode attention with each block alone on its SM (`engine-bench
//! --lone-blocks`, `lone_blocks.csv`: model, sm_count, copy_bandwidth_tb_s,
//! kernel, batch, context, blocks, ms_median, no_attention_ms, date, commit),
//! as fit points of the operator model's decode attention.
//!
//! Contract: each row is a decode-only step of `batch` sequences at
//! `context` keys whose attention runs `kernel` unsplit; its measured cost is
//! the step minus the same batch's step without attention (`ms_median −
//! no_attention_ms`), and the model's is the layers' decode attention of
//! that launch ([`attention::decode_work_of`]). Why: on the whole GPU a
//! family step's attention is either many blocks an SM or as long as its
//! DRAM time, so the steps alone do not say how long one block takes; these
//! do. A row that does not parse, names a kernel that is not one of
//! [`DecodeKernel::ALL`] or costs nothing is an error naming its line and
//! field.

use super::attention::{self, decode_work_of, DecodeWork};
use super::family::{batch_of, read_checked, FamilyError, MeasuredRow};
use super::slices::CopyBandwidths;
use super::OperatorParams;
use engine::runner::attention_choice::DecodeKernel;
use sim::{GpuSpec, ModelShape};
use std::path::Path;

#[derive(serde::Deserialize)]
struct Row {
    model: String,
    sm_count: u32,
    kernel: String,
    batch: usize,
    context: usize,
    ms_median: f64,
    no_attention_ms: f64,
}

impl MeasuredRow for Row {
    fn model(&self) -> &str {
        &self.model
    }
    fn sm_count(&self) -> u32 {
        self.sm_count
    }
}

/// One measured step's attention with its blocks alone on their SMs.
#[derive(Debug, Clone)]
pub struct LonePoint {
    pub model: String,
    pub shape: ModelShape,
    pub gpu: GpuSpec,
    pub kernel: DecodeKernel,
    pub batch: usize,
    pub context: usize,
    /// The step's attention seconds (all layers).
    pub measured_s: f64,
}

impl LonePoint {
    /// The launch the row timed: `batch` decodes at `context` keys, unsplit.
    pub fn work(&self) -> DecodeWork {
        let step = batch_of("decode", self.batch, self.context).unwrap_or_default();
        decode_work_of(&self.shape, &step, true, self.kernel, 1)
    }

    /// The model's attention seconds of the step (all layers).
    pub fn predict_s(&self, p: &OperatorParams) -> f64 {
        self.shape.num_layers as f64
            * attention::decode_seconds(p, &self.shape, &self.gpu, &self.work())
    }

    /// `kernel b=N ctx=K`, as the hold-out tables name it.
    pub fn quantity(&self) -> String {
        format!(
            "lone {} b={} ctx={}",
            self.kernel.name(),
            self.batch,
            self.context
        )
    }
}

/// Reads a lone_blocks CSV measured on the GPU of `gpus`.
pub fn read(path: &Path, gpus: &CopyBandwidths) -> Result<Vec<LonePoint>, FamilyError> {
    let mut out = Vec::new();
    for c in read_checked::<Row>(path, gpus)? {
        let row = &c.row;
        let kernel = DecodeKernel::ALL
            .into_iter()
            .find(|k| k.name() == row.kernel)
            .ok_or_else(|| {
                let names: Vec<&str> = DecodeKernel::ALL.iter().map(|k| k.name()).collect();
                c.field(
                    "kernel",
                    format!("{:?} is not one of {}", row.kernel, names.join(", ")),
                )
            })?;
        if row.batch == 0 || row.context == 0 {
            let field = if row.batch == 0 { "batch" } else { "context" };
            return Err(c.field(field, "0: a step needs a decode and a key".into()));
        }
        let full = c.positive_time("ms_median", row.ms_median)?;
        let base = c.positive_time("no_attention_ms", row.no_attention_ms)?;
        let cost = c.positive_time("ms_median", full - base).map_err(|_| {
            c.field(
                "ms_median",
                format!("{full} is not above the step without attention, {base}"),
            )
        })?;
        out.push(LonePoint {
            model: row.model.clone(),
            shape: ModelShape::from_qwen3(&c.config),
            gpu: c.gpu.clone(),
            kernel,
            batch: row.batch,
            context: row.context,
            measured_s: cost * 1e-3,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::operators::test_files::h200;

    fn write(name: &str, body: &str) -> std::path::PathBuf {
        crate::operators::test_files::write("lone", name, body)
    }

    const HEADER: &str = "model,sm_count,copy_bandwidth_tb_s,kernel,batch,context,blocks,ms_median,no_attention_ms,date,commit\n";

    #[test]
    fn a_rows_attention_is_its_step_less_the_step_without_it_priced_unsplit() {
        let path = write(
            "ok.csv",
            &format!("{HEADER}qwen3-8b,132,3.7,BlockW4U4,16,2000,128,5.5,2.0,d,c\n"),
        );
        let points = read(&path, &h200()).expect("reads");
        assert_eq!(points.len(), 1);
        let pt = &points[0];
        assert_eq!(
            (pt.kernel, pt.batch, pt.context),
            (DecodeKernel::BlockW4U4, 16, 2000)
        );
        assert!((pt.measured_s - 3.5e-3).abs() < 1e-12);
        let w = pt.work();
        assert_eq!((w.blocks, w.splits, w.warps_per_block), (128, 1, 4));
        // One block an SM: one wave of 2,001 keys over 4 warps, per layer.
        let p = OperatorParams {
            decode_block_cost: 0.0,
            decode_key_cost: 0.0,
            decode_kv_key_cost: 0.0,
            attention_latency: 0.0,
            contention_exponent: 1e6,
            ..OperatorParams::initial()
        };
        let wave = p.decode_wave_latency + 2001.0 / 4.0 * p.decode_warp_key_latency;
        let t = pt.predict_s(&p);
        assert!((t - 36.0 * wave).abs() < 1e-6 * t, "{t}");
        assert_eq!(pt.quantity(), "lone BlockW4U4 b=16 ctx=2000");
    }

    #[test]
    fn bad_rows_name_their_line_and_field() {
        for (row, field, says) in [
            (
                "qwen3-8b,132,3.7,BlockW9,16,300,128,5.5,2.0,d,c",
                "kernel",
                "BlockW4U4",
            ),
            (
                "qwen3-8b,132,3.7,HeadsU4,0,300,128,5.5,2.0,d,c",
                "batch",
                "0",
            ),
            (
                "qwen3-8b,132,3.7,HeadsU4,1,300,8,1.5,2.0,d,c",
                "ms_median",
                "not above",
            ),
            (
                "qwen3-8b,132,3.7,HeadsU4,1,300,8,1.5,nan,d,c",
                "no_attention_ms",
                "NaN",
            ),
        ] {
            let path = write("bad.csv", &format!("{HEADER}{row}\n"));
            let e = read(&path, &h200()).expect_err(row).to_string();
            assert!(
                e.contains(field) && e.contains(says) && e.contains(":2"),
                "{row}: {e}"
            );
        }
    }
}
