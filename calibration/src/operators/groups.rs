//! What each kernel group of a step costs (`results/h200/operators/groups.csv`),
//! as fit points of the operator model's parts.
//!
//! Contract: the file times the six cases of `engine-bench --profile` (decode
//! batch 1 / 16 / 64 / 256 at 300 keys, prefills of 512 and 3,200 tokens) with
//! each kernel group left out, per model and SM count. A group's cost is the
//! full step minus the step without it; the GEMMs' is the step with only
//! the GEMMs minus the step with nothing. A group point is kept only where
//! that cost is at least [`MIN_SHARE`] of the step, since a smaller
//! difference is within the run-to-run spread of two steps. The GEMMs of
//! decode cases are not used: the file predates the runner's current rule
//! for the skinny kernel (`engine::runner::gemm_choice`), which changes
//! products of up to 64 rows only, so prefill GEMMs are those the model
//! prices. A row that does not parse is an error naming its line and field.

use super::family::{batch_of, read_checked, CheckedRow, FamilyError, MeasuredRow};
use super::slices::CopyBandwidths;
use super::StepTime;
use engine::BatchShape;
use sim::{GpuSpec, ModelShape};
use std::collections::HashMap;
use std::path::Path;

/// Smallest share of the full step a group's cost must have to be fitted.
pub const MIN_SHARE: f64 = 0.03;

/// Keys each decode case reads (`engine-bench --profile`).
const DECODE_KEYS: usize = 300;

/// A kernel group whose cost the file isolates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    Attention,
    Elementwise,
    LmHead,
    /// Every GEMM, LM head included: the step with only the GEMMs, less the
    /// step with nothing. Prefill cases only (see the module docs).
    Gemms,
}

impl Group {
    pub const ALL: [Group; 4] = [
        Group::Attention,
        Group::Elementwise,
        Group::LmHead,
        Group::Gemms,
    ];

    /// The group's cost from a case's variants (ms by variant name).
    fn cost(self, variants: &HashMap<String, f64>) -> Option<f64> {
        let v = |name: &str| variants.get(name).copied();
        match self {
            Group::Attention => Some(v("full")? - v("no_attention")?),
            Group::Elementwise => Some(v("full")? - v("no_elementwise")?),
            Group::LmHead => Some(v("full")? - v("no_head")?),
            Group::Gemms => Some(v("gemm_only")? - v("nothing")?),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Group::Attention => "attention",
            Group::Elementwise => "elementwise",
            Group::LmHead => "lm_head",
            Group::Gemms => "gemms",
        }
    }

    /// The group's part of a modelled step.
    pub fn of(self, t: &StepTime) -> f64 {
        match self {
            Group::Attention => t.attention,
            Group::Elementwise => t.elementwise,
            Group::LmHead => t.lm_head,
            Group::Gemms => t.gemm + t.lm_head,
        }
    }
}

/// One group's measured cost in one case.
#[derive(Debug, Clone)]
pub struct GroupPoint {
    pub model: String,
    pub shape: ModelShape,
    pub gpu: GpuSpec,
    pub case: String,
    pub step: BatchShape,
    pub group: Group,
    pub measured_s: f64,
}

fn case_batch(case: &str) -> Option<BatchShape> {
    if let Some(b) = case.strip_prefix("decode") {
        batch_of("decode", b.parse().ok()?, DECODE_KEYS)
    } else {
        let t = case.strip_prefix("prefill")?;
        batch_of("prefill", 1, t.parse().ok()?)
    }
}

#[derive(serde::Deserialize)]
struct Row {
    model: String,
    sm_count: u32,
    case: String,
    variant: String,
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

/// Reads a groups CSV measured on the GPU of `gpus`.
pub fn read(path: &Path, gpus: &CopyBandwidths) -> Result<Vec<GroupPoint>, FamilyError> {
    // (model, sm_count, case) -> variant -> ms, in file order of first sight,
    // with the first checked row of each case for its shape and slice.
    let mut order: Vec<((String, u32, String), CheckedRow<Row>)> = Vec::new();
    let mut times: HashMap<(String, u32, String), HashMap<String, f64>> = HashMap::new();
    for c in read_checked::<Row>(path, gpus)? {
        let row = &c.row;
        case_batch(&row.case)
            .ok_or_else(|| c.field("case", format!("{:?} is not decodeN or prefillN", row.case)))?;
        if !(row.ms_median.is_finite() && row.ms_median >= 0.0) {
            return Err(c.field("ms_median", format!("{} is not a time", row.ms_median)));
        }
        let key = (row.model.clone(), row.sm_count, row.case.clone());
        let first_sight = !times.contains_key(&key);
        times
            .entry(key.clone())
            .or_default()
            .insert(row.variant.clone(), row.ms_median * 1e-3);
        if first_sight {
            order.push((key, c));
        }
    }
    let mut out = Vec::new();
    for (key, first) in order {
        let variants = &times[&key];
        let Some(&full) = variants.get("full") else {
            continue;
        };
        let (model, _, case) = key;
        // Checked above: the case parses.
        let Some(step) = case_batch(&case) else {
            continue;
        };
        let (config, gpu) = (&first.config, &first.gpu);
        for group in Group::ALL {
            if group == Group::Gemms && !case.starts_with("prefill") {
                continue;
            }
            let Some(cost) = group.cost(variants) else {
                continue;
            };
            if cost >= MIN_SHARE * full {
                out.push(GroupPoint {
                    model: model.clone(),
                    shape: ModelShape::from_qwen3(config),
                    gpu: gpu.clone(),
                    case: case.clone(),
                    step: step.clone(),
                    group,
                    measured_s: cost,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::operators::test_files::h200;

    fn write(name: &str, body: &str) -> std::path::PathBuf {
        crate::operators::test_files::write("groups", name, body)
    }

    const HEADER: &str = "model,sm_count,copy_bandwidth_tb_s,case,variant,ms_median,date,commit\n";

    #[test]
    fn a_group_costs_the_full_step_minus_the_step_without_it() {
        let path = write(
            "ok.csv",
            &format!(
                "{HEADER}qwen3-0.6b,132,3.7,decode64,full,1.5,d,c\n\
                 qwen3-0.6b,132,3.7,decode64,no_attention,0.9,d,c\n\
                 qwen3-0.6b,132,3.7,decode64,no_elementwise,1.49,d,c\n\
                 qwen3-0.6b,132,3.7,decode64,no_head,1.4,d,c\n"
            ),
        );
        let pts = read(&path, &h200()).expect("reads");
        // Elementwise (0.01 of 1.5 ms) is under the 3 % floor.
        assert_eq!(pts.len(), 2);
        assert_eq!(pts[0].group, Group::Attention);
        assert!((pts[0].measured_s - 0.6e-3).abs() < 1e-12);
        assert_eq!(pts[0].step.seqs.len(), 64);
        assert_eq!(pts[1].group, Group::LmHead);
    }

    #[test]
    fn a_bad_row_names_its_line_and_field() {
        let path = write(
            "bad.csv",
            &format!(
                "{HEADER}qwen3-0.6b,132,3.7,decode64,full,1.5,d,c\n\
                 qwen3-0.6b,12,3.7,decode64,full,1.5,d,c\n"
            ),
        );
        let err = read(&path, &h200()).expect_err("12 SMs were not measured");
        let text = err.to_string();
        assert!(
            text.contains("bad.csv:3") && text.contains("sm_count"),
            "{text}"
        );
        let path = write(
            "case.csv",
            &format!("{HEADER}qwen3-0.6b,132,3.7,mixed,full,1.5,d,c\n"),
        );
        let text = read(&path, &h200()).expect_err("unknown case").to_string();
        assert!(
            text.contains("case.csv:2") && text.contains("case"),
            "{text}"
        );
    }
}
