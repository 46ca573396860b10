//! The CUDA runner's constructor: settings and the no-driver failure path.

use super::*;

#[test]
fn missing_driver_is_an_error_not_a_panic() {
    // Only meaningful where no NVIDIA driver is installed (CI, this build machine).
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return;
    }
    let cfg = Qwen3Config::tiny();
    let w = Qwen3Weights::synthetic(&cfg, 1);
    let rc = CudaRunnerConfig::from(&EngineConfig::default());
    match CudaRunner::new(&cfg, &w, &rc) {
        Err(RunnerError::NoDevice(msg)) => assert!(msg.contains("libcuda"), "{msg}"),
        Err(e) => panic!("expected NoDevice, got {e}"),
        Ok(_) => panic!("constructed a CUDA runner without a driver"),
    }
}

#[test]
fn settings_come_from_the_engine_config() {
    let e = EngineConfig {
        block_size: 32,
        num_gpu_blocks: Some(99),
        max_num_seqs: 7,
        ..EngineConfig::default()
    };
    let rc = CudaRunnerConfig::from(&e);
    assert_eq!(
        (rc.block_size, rc.num_gpu_blocks, rc.max_num_seqs),
        (32, Some(99), 7)
    );
    assert_eq!(rc.max_num_batched_tokens, e.max_num_batched_tokens);
    assert!(rc.use_cuda_graphs);
}
