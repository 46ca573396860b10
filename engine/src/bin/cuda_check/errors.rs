//! `cuda-check --errors`: the runner's failure paths on a real device.
//! KV-cache sizing from `gpu_memory_utilization`; `OutOfMemory` or `Memory`
//! (not a panic) when the cache cannot fit; SM counts the device cannot give
//! (more SMs than it has, one SM where the driver's partitions are larger)
//! refused with `SmCount`; and, with `--sm-count N`, a runner that says it
//! runs on N SMs and measured its copy bandwidth there.

use crate::runner_config;
use engine::model::{Qwen3Config, WeightSource};
use engine::runner::cuda::{CudaRunner, CudaRunnerConfig};
use engine::runner::SmCountError;
use engine::{ModelRunner, RunnerError};

/// Runs every check, printing PASS/FAIL each; returns whether all passed.
pub fn error_paths(sm_count: Option<usize>) -> bool {
    let cfg = Qwen3Config::tiny();
    let w = || WeightSource::Synthetic { seed: 3 };
    let base = runner_config(256, 32, 64, sm_count);
    let mut ok = true;
    let mut report = |name: &str, pass: bool, detail: String| {
        println!("{} {name}: {detail}", if pass { "PASS" } else { "FAIL" });
        ok &= pass;
    };
    match CudaRunner::with_weights(
        &cfg,
        w(),
        &CudaRunnerConfig {
            num_gpu_blocks: None,
            gpu_memory_utilization: 0.3,
            ..base.clone()
        },
    ) {
        Ok(r) => report(
            "kv blocks from gpu_memory_utilization 0.3",
            r.num_kv_blocks() > 64,
            format!("{} blocks", r.num_kv_blocks()),
        ),
        Err(e) => report(
            "kv blocks from gpu_memory_utilization 0.3",
            false,
            format!("{:#}", anyhow::Error::from(e)),
        ),
    }
    for (name, rc) in [
        (
            "num_gpu_blocks beyond memory",
            CudaRunnerConfig {
                num_gpu_blocks: Some(1 << 40),
                ..base.clone()
            },
        ),
        (
            "gpu_memory_utilization too small",
            CudaRunnerConfig {
                num_gpu_blocks: None,
                gpu_memory_utilization: 0.0001,
                ..base.clone()
            },
        ),
    ] {
        let (pass, detail) = refused(CudaRunner::with_weights(&cfg, w(), &rc), |e| {
            matches!(e, RunnerError::OutOfMemory { .. } | RunnerError::Memory(_))
        });
        report(name, pass, detail);
    }
    let on = |n: usize| CudaRunnerConfig {
        sm_count: Some(n),
        ..base.clone()
    };
    let (pass, detail) = refused(CudaRunner::with_weights(&cfg, w(), &on(100_000)), |e| {
        matches!(e, RunnerError::SmCount(SmCountError::MoreThanDevice { .. }))
    });
    report("more SMs than the device has", pass, detail);
    // One SM is below Hopper's smallest partition; a driver that gives it must say so.
    let (pass, detail) = match CudaRunner::with_weights(&cfg, w(), &on(1)) {
        Ok(r) if r.sm_count() == 1 => (true, "a runner on 1 SM".into()),
        other => refused(other, |e| {
            matches!(e, RunnerError::SmCount(SmCountError::NotOffered { .. }))
        }),
    };
    report("one SM", pass, detail);
    if let Some(n) = sm_count {
        let name = format!("a runner on {n} SMs");
        match CudaRunner::with_weights(&cfg, w(), &base) {
            Ok(r) => report(
                &name,
                r.sm_count() == n && r.measured_copy_bandwidth() > 0.0,
                format!(
                    "sm_count() {}, copy bandwidth {:.2} TB/s",
                    r.sm_count(),
                    r.measured_copy_bandwidth() * 1e-12
                ),
            ),
            Err(e) => report(&name, false, format!("{:#}", anyhow::Error::from(e))),
        }
    }
    ok
}

/// Whether a runner's construction was refused with the `expected` error,
/// and what to print: the error, the wrong error with its chain, or the
/// runner that should not have been built.
fn refused(
    result: Result<CudaRunner, RunnerError>,
    expected: impl Fn(&RunnerError) -> bool,
) -> (bool, String) {
    match result {
        Err(e) if expected(&e) => (true, e.to_string()),
        Err(e) => (false, format!("wrong error: {:#}", anyhow::Error::from(e))),
        Ok(r) => (
            false,
            format!("constructed a runner on {} SMs", r.sm_count()),
        ),
    }
}
