//! A GPU's recent work in the price of a step: rested, it runs tensor work
//! above the rate its power limit holds it to, for a while.
//!
//! Contract: [`after`] prices a step as [`super::ops::step_time_after`]
//! does with the credit a [`GpuHistory`] holds, after `idle_s` seconds with
//! nothing to run, and updates the history. The credit is time the power
//! limit would cost and a rested GPU does not pay:
//! - a step whose GEMMs run above the sustained rate saves as much of what
//!   the limit costs it as the credit holds (never running faster than its
//!   kernels' own rate) and spends what it saved;
//! - idle time gives back [`REFILL`] seconds of credit a second, and so does
//!   a step whose GEMMs run below the sustained rate (decodes: the step's
//!   whole time), up to [`MAX_CREDIT_S`].
//!
//! Steps timed back to back, as engine-bench times its prefills, start with
//! no credit, so the fit's steps are priced as [`super::ops::step_time`]
//! prices them; an engine that serves runs its prefills after decodes and
//! idle time, and so faster. Both constants are measured on an H100 (the
//! H200's chip, clocks and 700 W), `results/h100/power_history/`: a 50 ms
//! burst of qwen3-8b's gate/up product takes 49.9 ms after 50 ms or more of
//! idle GPU against 54.5 back to back (4.6 ms saved), about 51.5 after
//! 20 ms idle (3 ms given back in 20 ms). The engine's chunks agree: in
//! chunk_sweep's stall on the H100, qwen3-8b's three 1,024-token chunks
//! after a run of decodes take 23.8, 29.8 and 36.9 ms, where the model
//! gives 23.4 / 28.0 / 32.6 unlimited and 26.7 / 31.3 / 36.0 limited: the
//! first saves the 3.3 ms the limit costs, the second what is left, the
//! third nothing.

use super::ops::step_time_after;
use super::OperatorParams;
use engine::BatchShape;
use sim::{GpuHistory, GpuSpec, ModelShape};

/// Most seconds of the power limit's cost a rested GPU saves.
pub const MAX_CREDIT_S: f64 = 0.0045;
/// Seconds of credit regained per second idle or below the sustained rate.
pub const REFILL: f64 = 0.12;

/// Seconds of `batch` after `idle_s` idle seconds on a GPU with `history`.
pub fn after(
    p: &OperatorParams,
    m: &ModelShape,
    gpu: &GpuSpec,
    batch: &BatchShape,
    idle_s: f64,
    history: &mut GpuHistory,
) -> f64 {
    let rested = history.burst_credit_s.max(0.0) + REFILL * idle_s.max(0.0);
    let credit = rested.min(MAX_CREDIT_S);
    let (time, power) = step_time_after(p, m, gpu, batch, credit);
    let seconds = time.total();
    history.burst_credit_s = if power.above_cap {
        (credit - power.credit_used).max(0.0)
    } else {
        (credit + REFILL * seconds).min(MAX_CREDIT_S)
    };
    seconds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::step_time;
    use engine::SeqShape;

    fn setup() -> (OperatorParams, ModelShape, GpuSpec) {
        let m = ModelShape::from_qwen3(&engine::model::Qwen3Config::preset("qwen3-8b").unwrap());
        let gpu = crate::datasheet::lookup("h200-sxm").unwrap();
        (OperatorParams::initial(), m, gpu)
    }

    fn prompt(tokens: u32) -> BatchShape {
        BatchShape {
            seqs: vec![SeqShape {
                new_tokens: tokens,
                context_before: 0,
                samples: true,
            }],
        }
    }

    fn decode() -> BatchShape {
        BatchShape {
            seqs: vec![SeqShape {
                new_tokens: 1,
                context_before: 300,
                samples: true,
            }],
        }
    }

    #[test]
    fn back_to_back_prefills_cost_what_the_fit_prices_and_a_rested_one_less() {
        let (p, m, gpu) = setup();
        let long = prompt(2048);
        let fitted = step_time(&p, &m, &gpu, &long).total();
        let mut history = GpuHistory::default();
        // Rested for ever: the first prefill runs faster than the fit's.
        let rested = after(&p, &m, &gpu, &long, f64::INFINITY, &mut history);
        assert!(rested < fitted, "{rested} against {fitted}");
        // Back to back, the credit runs out and a prefill costs the fit's price.
        let mut next = rested;
        for _ in 0..4 {
            next = after(&p, &m, &gpu, &long, 0.0, &mut history);
        }
        assert_eq!(history.burst_credit_s, 0.0);
        assert!((next - fitted).abs() < 1e-12, "{next} against {fitted}");
    }

    #[test]
    fn idle_time_and_decode_steps_give_the_credit_back_up_to_the_most() {
        let (p, m, gpu) = setup();
        let mut history = GpuHistory::default();
        let d = after(&p, &m, &gpu, &decode(), 0.0, &mut history);
        assert!((history.burst_credit_s - REFILL * d).abs() < 1e-12);
        // A decode is the fit's price whatever the credit: its GEMMs stream
        // weights below the sustained rate.
        assert!((d - step_time(&p, &m, &gpu, &decode()).total()).abs() < 1e-12);
        after(&p, &m, &gpu, &decode(), 1.0, &mut history);
        assert_eq!(history.burst_credit_s, MAX_CREDIT_S);
        // Idle long enough for half the most credit, from nothing.
        let mut history = GpuHistory::default();
        let _ = after(&p, &m, &gpu, &prompt(2048), 0.0, &mut history);
        assert_eq!(history.burst_credit_s, 0.0);
        let idle = MAX_CREDIT_S / 2.0 / REFILL;
        let partly = after(&p, &m, &gpu, &prompt(2048), idle, &mut history);
        let mut full = GpuHistory::default();
        let rested = after(&p, &m, &gpu, &prompt(2048), 1.0, &mut full);
        let fitted = step_time(&p, &m, &gpu, &prompt(2048)).total();
        assert!(
            rested < partly && partly < fitted,
            "{rested} {partly} {fitted}"
        );
    }
}
