//! On a GPU (skipped where no NVIDIA driver is installed): steps that are
//! not decode-only give the same tokens and logits from the piecewise graphs
//! as eagerly (`piecewise_self_test`: a prefill-only step, a mixed step, a
//! decode-only step reading what the mixed step wrote, the smallest bucket,
//! a single prompt), on the tiny and the Qwen3-0.6B shapes.
#![cfg(feature = "cuda")]

use engine::model::Qwen3Config;
use engine::runner::cuda::piecewise_self_test;

fn gpu() -> bool {
    // SAFETY: only asks whether the driver library can be loaded.
    let present = unsafe { cudarc::driver::sys::is_culib_present() };
    if !present {
        eprintln!("no NVIDIA driver: skipped");
    }
    present
}

fn check(cfg: &Qwen3Config) {
    let checks = piecewise_self_test(cfg, 17);
    for c in &checks {
        eprintln!(
            "{} {}: rel_l2 {:.3e}, max_abs {:.3e}; {}",
            if c.pass { "PASS" } else { "FAIL" },
            c.name,
            c.rel_l2_err,
            c.max_abs_err,
            c.note
        );
    }
    assert_eq!(checks.len(), 5, "one check per step of the script");
    assert!(checks.iter().all(|c| c.pass));
}

#[test]
fn piecewise_steps_match_eager_ones_on_the_tiny_shape() {
    if gpu() {
        check(&Qwen3Config::tiny());
    }
}

#[test]
fn piecewise_steps_match_eager_ones_on_the_qwen3_0_6b_shape() {
    if gpu() {
        check(&Qwen3Config::qwen3_0_6b());
    }
}
