//! trace_replay's figures: latency distributions and the engine over time.
//!
//! Contract: four charts, each titled with the trace (file and rate scale;
//! titles are kept short, as a figure does not wrap them):
//! - `trace_replay_ttft_cdf`, `trace_replay_itl_cdf`: the cumulative share of
//!   requests (TTFT) or of token gaps (ITL) at or below each latency, drawn
//!   at [`CDF_POINTS`] + 1 evenly spaced percentiles (a trace has thousands
//!   of gaps; the percentiles keep the curve's shape at a fixed size). The x
//!   axis is logarithmic when the largest value is more than 30 times the
//!   smallest, as queueing TTFTs under a burst are.
//! - `trace_replay_queue`: waiting and running requests after each step;
//!   `trace_replay_kv`: KV blocks in use as a percentage of the engine's
//!   blocks. Both against the run's time in seconds, as the largest value in
//!   each of [`TIME_BINS`] equal time bins (a peak between two drawn points
//!   is never lost; the steps of a long trace would make a file per step).
//!
//! The figures crate draws lines with that many points without point
//! markers, so the curves stay readable.

use crate::charts::ChartSpec;
use crate::stats::percentile;
use ::figures::YScale;
use sim::{RunRecords, StepRecord};

/// Percentile steps of a CDF curve (0, 0.5, ..., 100 %).
pub const CDF_POINTS: usize = 200;
/// Time bins of the over-time charts.
pub const TIME_BINS: usize = 300;

/// The four charts of a replay; `what` names the trace in the titles.
pub fn charts(what: &str, ttft_ms: &[f64], itl_ms: &[f64], rec: &RunRecords) -> Vec<ChartSpec> {
    let queue = ChartSpec::new(
        "trace_replay_queue",
        &format!("trace_replay: queues ({what})"),
        "time since the run started (s)",
        "requests (after each step)",
    )
    .series("waiting", over_time(&rec.steps, |s| s.waiting_seqs as f64))
    .series("running", over_time(&rec.steps, |s| s.running_seqs as f64));
    let kv = ChartSpec::new(
        "trace_replay_kv",
        &format!("trace_replay: KV cache ({what})"),
        "time since the run started (s)",
        "KV blocks in use (% of the engine's blocks)",
    )
    .series(
        "KV blocks in use",
        over_time(&rec.steps, |s| {
            if s.kv_blocks_total == 0 {
                f64::NAN
            } else {
                s.kv_blocks_used as f64 / s.kv_blocks_total as f64 * 100.0
            }
        }),
    );
    vec![
        cdf(
            "trace_replay_ttft_cdf",
            &format!("trace_replay: TTFT CDF ({what})"),
            "time to first token (ms)",
            "requests with TTFT at or below x (%)",
            "TTFT",
            ttft_ms,
        ),
        cdf(
            "trace_replay_itl_cdf",
            &format!("trace_replay: ITL CDF ({what})"),
            "gap between consecutive output tokens (ms)",
            "token gaps at or below x (%)",
            "ITL",
            itl_ms,
        ),
        queue,
        kv,
    ]
}

/// `(value at percentile q, q)` for q in 0, 100 / CDF_POINTS, ..., 100.
pub fn cdf_points(values: &[f64]) -> Vec<(f64, f64)> {
    if values.is_empty() {
        return Vec::new();
    }
    (0..=CDF_POINTS)
        .filter_map(|i| {
            let q = i as f64 * 100.0 / CDF_POINTS as f64;
            percentile(values, q).map(|v| (v, q))
        })
        .collect()
}

fn cdf(stem: &str, title: &str, x: &str, y: &str, label: &str, values: &[f64]) -> ChartSpec {
    let points = cdf_points(values);
    let positive: Vec<f64> = points.iter().map(|p| p.0).filter(|v| *v > 0.0).collect();
    let spans_decades = match (positive.first(), positive.last()) {
        (Some(lo), Some(hi)) => positive.len() == points.len() && hi / lo > 30.0,
        _ => false,
    };
    let spec = ChartSpec::new(stem, title, x, y)
        .y_scale(YScale::Linear)
        .series(label, points);
    if spans_decades {
        spec.log_x()
    } else {
        spec
    }
}

/// The largest `value` of the steps starting in each of [`TIME_BINS`] equal
/// bins of the run, at the bin's start time in seconds; empty bins are left
/// out.
pub fn over_time(steps: &[StepRecord], value: impl Fn(&StepRecord) -> f64) -> Vec<(f64, f64)> {
    let Some(end) = steps.iter().map(|s| s.start_s).reduce(f64::max) else {
        return Vec::new();
    };
    let width = end / TIME_BINS as f64;
    let mut bins: Vec<Option<f64>> = vec![None; TIME_BINS + 1];
    for s in steps {
        let v = value(s);
        if !v.is_finite() {
            continue;
        }
        let i = if width > 0.0 {
            ((s.start_s / width) as usize).min(TIME_BINS)
        } else {
            0
        };
        bins[i] = Some(bins[i].map_or(v, |b: f64| b.max(v)));
    }
    bins.iter()
        .enumerate()
        .filter_map(|(i, b)| b.map(|v| (i as f64 * width, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(start_s: f64, waiting: usize) -> StepRecord {
        StepRecord {
            engine: 0,
            start_s,
            duration_s: 0.001,
            scheduled_tokens: 1,
            prefill_seqs: 0,
            decode_seqs: 1,
            prefill_tokens: 0,
            context_tokens: 1,
            max_context: 1,
            kv_blocks_used: 1,
            kv_blocks_total: 10,
            waiting_seqs: waiting,
            running_seqs: 1,
            shape: Default::default(),
        }
    }

    #[test]
    fn cdf_runs_from_the_smallest_to_the_largest_value() {
        let values: Vec<f64> = (1..=1000).map(f64::from).collect();
        let pts = cdf_points(&values);
        assert_eq!(pts.len(), CDF_POINTS + 1);
        assert_eq!(pts[0], (1.0, 0.0));
        assert_eq!(pts[CDF_POINTS], (1000.0, 100.0));
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert!(cdf_points(&[]).is_empty());
    }

    #[test]
    fn binning_keeps_each_bins_peak_at_a_fixed_size() {
        let mut steps: Vec<StepRecord> = (0..3000).map(|i| step(i as f64 * 0.01, 1)).collect();
        steps[1234].waiting_seqs = 77;
        let pts = over_time(&steps, |s| s.waiting_seqs as f64);
        assert!(pts.len() <= TIME_BINS + 1, "{}", pts.len());
        assert_eq!(pts.iter().filter(|p| p.1 == 77.0).count(), 1, "the peak");
        assert!(pts.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(over_time(&[], |s| s.waiting_seqs as f64).is_empty());
        assert_eq!(
            over_time(&[step(0.5, 3)], |s| s.waiting_seqs as f64).len(),
            1
        );
    }
}
