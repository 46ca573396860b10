//! The attacker's decision rule: "hit" when TTFT is below a threshold.
//!
//! Contract: [`best_threshold`] returns the threshold (ms) that classifies
//! the given samples best and its accuracy on them, trying every midpoint
//! between consecutive distinct TTFTs plus "always miss"/"always hit"; ties
//! go to the lowest threshold. [`cross_validated_accuracy`] splits the samples
//! into two stratified folds, fits on one and scores on the other, both ways,
//! and returns the accuracy over all held-out samples.

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub ttft_ms: f64,
    /// Whether the victim sent the document in this trial.
    pub hit: bool,
}

fn accuracy(samples: &[Sample], threshold: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let right = samples
        .iter()
        .filter(|s| (s.ttft_ms < threshold) == s.hit)
        .count();
    right as f64 / samples.len() as f64
}

/// (threshold ms, accuracy on `samples`).
pub fn best_threshold(samples: &[Sample]) -> (f64, f64) {
    let mut sorted: Vec<Sample> = samples.to_vec();
    sorted.sort_by(|a, b| a.ttft_ms.total_cmp(&b.ttft_ms));
    let n = sorted.len();
    let total_misses = sorted.iter().filter(|s| !s.hit).count();
    // Threshold below everything: every sample predicted "miss".
    let mut best = (sorted.first().map_or(0.0, |s| s.ttft_ms), total_misses);
    let mut correct = total_misses;
    for i in 0..n {
        // Moving sample i to the "hit" side.
        if sorted[i].hit {
            correct += 1;
        } else {
            correct -= 1;
        }
        let boundary = i + 1 == n || sorted[i + 1].ttft_ms > sorted[i].ttft_ms;
        if boundary && correct > best.1 {
            let threshold = match sorted.get(i + 1) {
                Some(next) => (sorted[i].ttft_ms + next.ttft_ms) / 2.0,
                None => f64::INFINITY,
            };
            best = (threshold, correct);
        }
    }
    (
        best.0,
        if n == 0 {
            f64::NAN
        } else {
            best.1 as f64 / n as f64
        },
    )
}

pub fn cross_validated_accuracy(samples: &[Sample]) -> f64 {
    // Stratified: alternate hits between the folds, and misses likewise, so
    // each fold sees both classes whatever order the trials ran in.
    let (mut folds, mut seen) = ([Vec::new(), Vec::new()], [0usize; 2]);
    for s in samples {
        let class = usize::from(s.hit);
        folds[seen[class] % 2].push(*s);
        seen[class] += 1;
    }
    let [a, b] = folds;
    let on_b = accuracy(&b, best_threshold(&a).0);
    let on_a = accuracy(&a, best_threshold(&b).0);
    let weighted = |acc: f64, n: usize| if n == 0 { 0.0 } else { acc * n as f64 };
    (weighted(on_b, b.len()) + weighted(on_a, a.len())) / samples.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ttft_ms: f64, hit: bool) -> Sample {
        Sample { ttft_ms, hit }
    }

    #[test]
    fn separable_samples_give_full_accuracy() {
        let x = [s(1.0, true), s(5.0, false), s(2.0, true), s(6.0, false)];
        let (thr, acc) = best_threshold(&x);
        assert_eq!(acc, 1.0);
        assert_eq!(thr, 3.5);
        assert_eq!(cross_validated_accuracy(&x), 1.0);
    }

    #[test]
    fn identical_ttfts_leak_nothing() {
        let x: Vec<Sample> = (0..40).map(|i| s(3.0, i % 2 == 0)).collect();
        assert_eq!(best_threshold(&x).1, 0.5);
        assert_eq!(cross_validated_accuracy(&x), 0.5);
    }

    #[test]
    fn overlapping_samples_pick_the_best_cut() {
        let x = [
            s(1.0, true),
            s(2.0, false),
            s(3.0, true),
            s(4.0, false),
            s(5.0, false),
        ];
        let (thr, acc) = best_threshold(&x);
        assert_eq!(acc, 0.8);
        assert!(thr > 3.0 && thr < 4.0 || thr > 1.0 && thr < 2.0, "{thr}");
    }
}
