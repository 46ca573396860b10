//! The subtitle under an experiment's figure titles: what ran, on what.
//!
//! Contract: [`subtitle`] is one line per backend, in run order (`sim: GPU ·
//! cost model · model`, `real: runner · model`, see [`backend_line`]), then
//! one line for the workload ([`workload_line`]): the number of conditions
//! and of measured requests (warm-up requests left out), prompt and output
//! lengths (one value, or the range), and the engine settings every
//! condition shares (`max_num_batched_tokens`, `max_num_seqs`, prefix
//! caching, and chunked prefill when it is off). Settings that differ
//! between conditions are what the figure compares, so they are left out.
//! Names are never split: the figure wraps lines at spaces only.

use crate::backend::BackendInfo;
use crate::catalogue::Condition;
use crate::script::{ScriptedRequest, WARMUP_TAG};

/// Separates the parts of one line.
const SEP: &str = " · ";

/// The figures' subtitle for a run on `backends` of a workload described
/// by `workload` (a [`workload_line`]; empty for none).
pub fn subtitle(backends: &[BackendInfo], workload: &str) -> String {
    let mut lines: Vec<String> = backends.iter().map(backend_line).collect();
    if !workload.is_empty() {
        lines.push(workload.to_string());
    }
    lines.join("\n")
}

/// `sim: h200-sxm · profile h200-qwen3-0.6b.ron · qwen3-0.6b`, or
/// `real: cuda on NVIDIA H200 · qwen3-0.6b (...)`.
pub fn backend_line(info: &BackendInfo) -> String {
    let mut parts = Vec::new();
    match &info.runner {
        Some(runner) => parts.push(runner.clone()),
        None => {
            if let Some(gpu) = &info.gpu {
                parts.push(gpu.name.clone());
            }
            let cost = if info.cost_label.is_empty() {
                &info.cost_model
            } else {
                &info.cost_label
            };
            parts.push(cost.clone());
        }
    }
    parts.push(info.model.clone());
    format!("{}: {}", info.mode, parts.join(SEP))
}

/// The requests of `c` that metrics count (the warm-up left out).
fn measured(c: &Condition) -> Vec<&ScriptedRequest> {
    c.script
        .requests
        .iter()
        .filter(|r| r.tag != WARMUP_TAG)
        .collect()
}

/// The smallest and the largest value.
fn lengths(values: &[usize]) -> Option<(usize, usize)> {
    Some((*values.iter().min()?, *values.iter().max()?))
}

/// The value every item has, if they all agree.
fn shared<T: PartialEq + Clone>(values: impl IntoIterator<Item = T>) -> Option<T> {
    let mut values = values.into_iter();
    let first = values.next()?;
    values.all(|v| v == first).then_some(first)
}

/// `8 conditions × 24 requests · 256-token prompts · 128 output tokens ·
/// engine: max_num_batched_tokens 2048, prefix caching on`.
pub fn workload_line(conditions: &[Condition]) -> String {
    if conditions.is_empty() {
        return String::new();
    }
    let counts: Vec<usize> = conditions.iter().map(|c| measured(c).len()).collect();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let mut parts = vec![match (conditions.len(), shared(counts.iter().copied())) {
        (1, _) => plural(counts[0], "request"),
        (n, Some(each)) => format!("{n} conditions × {}", plural(each, "request")),
        (n, None) => format!("{n} conditions, {}", plural(counts.iter().sum(), "request")),
    }];
    let requests: Vec<_> = conditions.iter().flat_map(measured).collect();
    let prompts: Vec<usize> = requests.iter().map(|r| r.prompt.len()).collect();
    let outputs: Vec<usize> = requests.iter().map(|r| r.max_tokens).collect();
    match lengths(&prompts) {
        Some((lo, hi)) if lo == hi => parts.push(format!("{lo}-token prompts")),
        Some((lo, hi)) => parts.push(format!("prompts {lo}–{hi} tokens")),
        None => {}
    }
    match lengths(&outputs) {
        Some((1, 1)) => parts.push("1 output token".into()),
        Some((lo, hi)) if lo == hi => parts.push(format!("{lo} output tokens")),
        Some((lo, hi)) => parts.push(format!("{lo}–{hi} output tokens")),
        None => {}
    }
    let engines: Vec<_> = conditions.iter().map(|c| &c.engine).collect();
    let on_off = |on: bool| if on { "on" } else { "off" };
    let mut engine = Vec::new();
    if let Some(v) = shared(engines.iter().map(|e| e.max_num_batched_tokens)) {
        engine.push(format!("max_num_batched_tokens {v}"));
    }
    if let Some(v) = shared(engines.iter().map(|e| e.max_num_seqs)) {
        engine.push(format!("max_num_seqs {v}"));
    }
    if let Some(v) = shared(engines.iter().map(|e| e.enable_prefix_caching)) {
        engine.push(format!("prefix caching {}", on_off(v)));
    }
    // Chunked prefill is on by default; say so only when it is off.
    if shared(engines.iter().map(|e| e.enable_chunked_prefill)) == Some(false) {
        engine.push("chunked prefill off".into());
    }
    if !engine.is_empty() {
        parts.push(format!("engine: {}", engine.join(", ")));
    }
    parts.join(SEP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{Gate, Script};
    use engine::EngineConfig;

    fn request(tag: &str, prompt: usize, output: usize) -> ScriptedRequest {
        ScriptedRequest {
            tag: tag.into(),
            prompt: vec![1; prompt],
            max_tokens: output,
            salt: None,
            gate: Gate::At(0.0),
        }
    }

    fn condition(seqs: usize, requests: Vec<ScriptedRequest>) -> Condition {
        Condition {
            label: format!("max_num_seqs={seqs}"),
            engine: EngineConfig {
                max_num_seqs: seqs,
                ..EngineConfig::default()
            },
            script: Script { requests },
            seed: 0,
            fleet: None,
            disagg: None,
        }
    }

    fn sim_info() -> BackendInfo {
        BackendInfo {
            mode: "sim",
            cost_model: "calibrated profile shipped:h200-qwen3-0.6b.ron (as measured ...)".into(),
            gpu: Some(calibration::datasheet::lookup("h200-sxm").unwrap()),
            model: "qwen3-0.6b".into(),
            runner: None,
            cost_label: "profile h200-qwen3-0.6b.ron".into(),
            endpoint: None,
            expected_error: None,
        }
    }

    #[test]
    fn a_sim_run_names_gpu_cost_model_model_and_workload() {
        let same = |seqs| {
            let mut r = vec![request(WARMUP_TAG, 32, 4)];
            r.extend((0..3).map(|_| request("load", 256, 128)));
            condition(seqs, r)
        };
        let workload = workload_line(&[same(1), same(256)]);
        let text = subtitle(&[sim_info()], &workload);
        assert_eq!(
            text,
            "sim: h200-sxm · profile h200-qwen3-0.6b.ron · qwen3-0.6b\n\
             2 conditions × 3 requests · 256-token prompts · 128 output tokens · \
             engine: max_num_batched_tokens 2048, prefix caching on"
        );
    }

    #[test]
    fn both_modes_get_a_line_each_and_ranges_show_as_ranges() {
        let real = BackendInfo {
            mode: "real",
            runner: Some("cuda on NVIDIA H200".into()),
            cost_label: "measured".into(),
            ..sim_info()
        };
        let conditions = [
            condition(16, vec![request("a", 64, 16), request("a", 3000, 256)]),
            condition(16, vec![request("a", 100, 1)]),
        ];
        let text = subtitle(&[real, sim_info()], &workload_line(&conditions));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "real: cuda on NVIDIA H200 · qwen3-0.6b");
        assert!(lines[1].starts_with("sim: h200-sxm · "), "{text}");
        assert!(
            lines[2].starts_with(
                "2 conditions, 3 requests · prompts 64–3000 tokens · 1–256 output tokens · \
                 engine: max_num_batched_tokens 2048, max_num_seqs 16,"
            ),
            "{text}"
        );
        assert_eq!(workload_line(&[]), "");
        let mut unchunked = condition(16, vec![request("a", 64, 16)]);
        unchunked.engine.enable_chunked_prefill = false;
        assert!(workload_line(&[unchunked]).ends_with(", chunked prefill off"));
    }
}
