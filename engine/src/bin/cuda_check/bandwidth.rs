//! `cuda-check --bandwidth`: what the cost model's description of a GPU
//! slice rests on. On a runner of the `tiny` shape (in a green context of
//! `--sm-count N` SMs, or the whole GPU), the copy bandwidth with 1, 4 and 8
//! loads in flight per thread (the runner's start figure is the 1-deep one),
//! and how many blocks of each skinny GEMM kernel one SM holds at once (the
//! operator cost model's `SKINNY_BLOCKS_PER_SM`). A figure that is not
//! positive and finite, or a kernel that fits no block on an SM, fails.

use crate::runner_config;
use engine::model::{Qwen3Config, WeightSource};
use engine::runner::cuda::CudaRunner;

/// Prints the figures (PASS/FAIL each); returns whether all passed.
pub fn bandwidth(sm_count: Option<usize>) -> bool {
    let cfg = Qwen3Config::tiny();
    let rc = runner_config(256, 32, 64, sm_count);
    let r = match CudaRunner::with_weights(&cfg, WeightSource::Synthetic { seed: 3 }, &rc) {
        Ok(r) => r,
        Err(e) => {
            println!("FAIL bandwidth: runner: {:#}", anyhow::Error::from(e));
            return false;
        }
    };
    let sms = r.sm_count();
    let mut ok = true;
    match r.copy_bandwidth_by_depth() {
        Ok(by_depth) => {
            let finite = by_depth.iter().all(|(_, b)| b.is_finite() && *b > 0.0);
            let figures: Vec<String> = by_depth
                .iter()
                .map(|(d, b)| format!("depth {d} {:.3} TB/s", b * 1e-12))
                .collect();
            let pass = finite;
            println!(
                "{} copy bandwidth on {sms} SMs: {} (at start {:.3} TB/s)",
                if pass { "PASS" } else { "FAIL" },
                figures.join(", "),
                r.measured_copy_bandwidth() * 1e-12
            );
            ok &= pass;
        }
        Err(e) => {
            println!(
                "FAIL copy bandwidth on {sms} SMs: {:#}",
                anyhow::Error::from(e)
            );
            ok = false;
        }
    }
    match r.skinny_blocks_per_sm() {
        Ok(kernels) => {
            for (name, blocks) in kernels {
                let pass = blocks >= 1;
                println!(
                    "{} {name}: {blocks} blocks of 256 threads per SM",
                    if pass { "PASS" } else { "FAIL" }
                );
                ok &= pass;
            }
        }
        Err(e) => {
            println!("FAIL skinny occupancy: {:#}", anyhow::Error::from(e));
            ok = false;
        }
    }
    ok
}
