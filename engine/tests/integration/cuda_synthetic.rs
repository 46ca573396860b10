//! On a GPU (skipped where no NVIDIA driver is installed): synthetic weights
//! generated on the device are the host generator's bits, a runner built on
//! them computes what a runner built from host tensors computes, and a model
//! that does not fit is refused at start with the numbers.
#![cfg(feature = "cuda")]

use engine::model::{MemoryError, Qwen3Config, Qwen3Weights, WeightSource};
use engine::runner::cuda::{synthetic_weights_self_test, CudaRunner, CudaRunnerConfig};
use engine::{EngineConfig, ModelRunner, RequestId, RunnerError, ScheduledBatch, ScheduledSeq};

fn gpu() -> bool {
    // SAFETY: only asks whether the driver library can be loaded.
    let present = unsafe { cudarc::driver::sys::is_culib_present() };
    if !present {
        eprintln!("no NVIDIA driver: skipped");
    }
    present
}

#[test]
fn device_generation_matches_the_host_bit_for_bit() {
    if !gpu() {
        return;
    }
    let checks = synthetic_weights_self_test(21);
    for c in &checks {
        eprintln!(
            "{} {}: {}",
            if c.pass { "PASS" } else { "FAIL" },
            c.name,
            c.note
        );
    }
    assert!(checks.len() > 20, "{} checks", checks.len());
    assert!(checks.iter().all(|c| c.pass));
}

fn runner_config() -> CudaRunnerConfig {
    CudaRunnerConfig {
        num_gpu_blocks: Some(64),
        max_model_len: 256,
        max_num_seqs: 4,
        max_num_batched_tokens: 64,
        ..CudaRunnerConfig::from(&EngineConfig::default())
    }
}

/// Greedy tokens and the first sampled row's logits of a prefill and a few decodes.
fn run(runner: &mut CudaRunner) -> (Vec<u32>, Vec<f32>) {
    let mut tokens: Vec<u32> = (0..40).map(|t| (t * 13 + 5) % 500).collect();
    let table: Vec<u32> = (1..=8).collect();
    let mut start = 0;
    let mut logits = Vec::new();
    for _ in 0..5 {
        let batch = ScheduledBatch {
            seqs: vec![ScheduledSeq {
                request_id: RequestId(1),
                token_ids: &tokens[start..],
                start_pos: start,
                block_table: &table,
                samples: true,
            }],
            block_size: 16,
        };
        let out = runner.execute(&batch).unwrap();
        if logits.is_empty() {
            logits = runner.last_logits().unwrap().remove(0);
        }
        start = tokens.len();
        tokens.push(out.sampled[0]);
    }
    (tokens[40..].to_vec(), logits)
}

#[test]
fn runner_on_device_generated_weights_equals_runner_on_uploaded_ones() {
    if !gpu() {
        return;
    }
    let cfg = Qwen3Config::tiny();
    let host = Qwen3Weights::synthetic(&cfg, 9);
    let mut uploaded = CudaRunner::new(&cfg, &host, &runner_config()).unwrap();
    let source = WeightSource::Synthetic { seed: 9 };
    let mut generated = CudaRunner::with_weights(&cfg, source, &runner_config()).unwrap();
    assert_eq!(generated.weight_bytes(), uploaded.weight_bytes());
    assert_eq!(run(&mut generated), run(&mut uploaded));
}

#[test]
fn model_too_big_for_the_device_is_refused_with_the_numbers() {
    if !gpu() {
        return;
    }
    // Qwen3-8B's 16.4 GB of weights in 10 % of the device.
    let rc = CudaRunnerConfig {
        gpu_memory_utilization: 0.1,
        num_gpu_blocks: None,
        ..runner_config()
    };
    let source = WeightSource::Synthetic { seed: 1 };
    match CudaRunner::with_weights(&Qwen3Config::qwen3_8b(), source, &rc) {
        Err(RunnerError::Memory(MemoryError::DoesNotFit(s))) => {
            eprintln!("{}", MemoryError::DoesNotFit(s.clone()));
            assert_eq!(
                s.weight_bytes,
                2 * Qwen3Config::qwen3_8b().num_params() as u64
            );
            assert!(s.total_bytes > 0 && s.available_bytes < s.weight_bytes);
        }
        Err(e) => panic!("expected a memory error, got {e}"),
        Ok(_) => panic!("built an 8B runner in 10 % of the device"),
    }
}
