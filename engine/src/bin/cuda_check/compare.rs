//! Comparing a run with a reference, step by step: greedy agreement, logit
//! error, and each step whose argmax differs, with both sides' margins, so a
//! near-tie can be told from a bug.

use crate::driver::Trace;

/// Per-prompt comparison of a trace with a reference trace (teacher forced on the reference's tokens).
pub struct Cmp {
    pub agree: usize,
    pub steps: usize,
    pub max_abs_diff: f32,
    pub max_abs_logit: f32,
    pub rel_l2: f64,
    /// Every teacher-forced step whose argmax differs from the reference's.
    pub disagreements: Vec<Disagreement>,
}

/// A step where the test's argmax is not the reference's. The two margins say
/// whether it was a near-tie: `reference_margin` is how far the reference put
/// its own token above the test's, `test_margin` the converse.
pub struct Disagreement {
    pub step: usize,
    pub reference_token: u32,
    pub test_token: u32,
    pub reference_margin: f32,
    pub test_margin: f32,
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "step {} ref {} (by {:.4}) vs test {} (by {:.4})",
            self.step,
            self.reference_token,
            self.reference_margin,
            self.test_token,
            self.test_margin
        )
    }
}

/// `;`-separated `step:reference_margin:test_margin` for a CSV cell (empty when none).
pub fn disagreement_cell(ds: &[Disagreement]) -> String {
    ds.iter()
        .map(|d| format!("{}:{:.5}:{:.5}", d.step, d.reference_margin, d.test_margin))
        .collect::<Vec<_>>()
        .join(";")
}

pub fn compare(test: &Trace, reference_tokens: &[u32], reference_logits: &[Vec<f32>]) -> Cmp {
    let mut c = Cmp {
        agree: 0,
        steps: reference_tokens.len(),
        max_abs_diff: 0.0,
        max_abs_logit: 0.0,
        rel_l2: 0.0,
        disagreements: Vec::new(),
    };
    let (mut num, mut den) = (0f64, 0f64);
    for (s, &tok) in reference_tokens.iter().enumerate() {
        c.agree += (test.tokens.get(s) == Some(&tok)) as usize;
        if let (Some(a), Some(b)) = (test.logits.get(s), reference_logits.get(s)) {
            if let Some(&ours) = test.tokens.get(s).filter(|&&t| t != tok) {
                let at = |l: &[f32], t: u32| l.get(t as usize).copied().unwrap_or(f32::NAN);
                c.disagreements.push(Disagreement {
                    step: s,
                    reference_token: tok,
                    test_token: ours,
                    reference_margin: at(b, tok) - at(b, ours),
                    test_margin: at(a, ours) - at(a, tok),
                });
            }
            for (x, y) in a.iter().zip(b) {
                let d = (x - y).abs();
                if !d.is_finite() || d > c.max_abs_diff {
                    c.max_abs_diff = if d.is_finite() { d } else { f32::INFINITY };
                }
                c.max_abs_logit = c.max_abs_logit.max(y.abs());
                num += (d as f64).powi(2);
                den += (*y as f64).powi(2);
            }
        }
    }
    c.rel_l2 = (num / den.max(1e-30)).sqrt();
    c
}

pub fn prefix_match(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(tokens: &[u32], logits: &[&[f32]]) -> Trace {
        Trace {
            tokens: tokens.to_vec(),
            logits: logits.iter().map(|l| l.to_vec()).collect(),
        }
    }

    #[test]
    fn a_differing_argmax_is_recorded_with_both_margins() {
        // Step 0 agrees; at step 1 the reference prefers token 2 by 0.25, the test token 0 by 0.5.
        let reference: [&[f32]; 2] = [&[3.0, 1.0, 0.0], &[1.0, 0.0, 1.25]];
        let test = trace(&[0, 0], &[&[3.0, 1.0, 0.0], &[1.5, 0.0, 1.0]]);
        let c = compare(&test, &[0, 2], &reference.map(|l| l.to_vec()));
        assert_eq!((c.agree, c.steps), (1, 2));
        assert_eq!(c.disagreements.len(), 1);
        let d = &c.disagreements[0];
        assert_eq!((d.step, d.reference_token, d.test_token), (1, 2, 0));
        assert!((d.reference_margin - 0.25).abs() < 1e-6);
        assert!((d.test_margin - 0.5).abs() < 1e-6);
        assert!((c.max_abs_diff - 0.5).abs() < 1e-6);
        assert_eq!(disagreement_cell(&c.disagreements), "1:0.25000:0.50000");
        assert_eq!(
            d.to_string(),
            "step 1 ref 2 (by 0.2500) vs test 0 (by 0.5000)"
        );
    }

    #[test]
    fn identical_runs_agree_everywhere_and_nan_logits_count_as_infinite_error() {
        let logits: [&[f32]; 1] = [&[0.5, 2.0]];
        let same = compare(&trace(&[1], &logits), &[1], &logits.map(|l| l.to_vec()));
        assert_eq!((same.agree, same.max_abs_diff, same.rel_l2), (1, 0.0, 0.0));
        assert_eq!(disagreement_cell(&same.disagreements), "");
        let broken = compare(
            &trace(&[1], &[&[f32::NAN, 2.0]]),
            &[1],
            &logits.map(|l| l.to_vec()),
        );
        assert_eq!(broken.max_abs_diff, f32::INFINITY);
    }

    #[test]
    fn a_token_outside_the_reference_logits_gives_a_nan_margin_not_a_panic() {
        let reference: [&[f32]; 1] = [&[1.0, 0.0]];
        let c = compare(
            &trace(&[7], &[&[0.0, 0.0]]),
            &[0],
            &reference.map(|l| l.to_vec()),
        );
        assert!(c.disagreements[0].reference_margin.is_nan());
        assert_eq!(prefix_match(&[1, 2, 3], &[1, 2, 4]), 2);
    }
}
