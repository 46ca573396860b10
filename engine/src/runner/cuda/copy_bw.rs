//! The copy bandwidth a runner gets, measured at start, so that every result
//! can record the GPU it ran on, whole or SM-limited ([`super::green`]).
//!
//! Contract: [`measure`] times a grid-stride copy kernel (`copy_words_D` in
//! kernels.cu, [`START_DEPTH`] loads in flight per thread, eight blocks of 256
//! threads per SM of the runner) over two buffers of [`COPY_BYTES`] on the
//! runner's stream with events: one warm-up, then the median of [`REPS`]
//! copies. The figure is bytes read plus bytes written per second. A kernel,
//! not a copy-engine memcpy, because only a kernel's bandwidth depends on the
//! SMs it has. More loads in flight do not raise it on a few SMs (on the H200
//! 0.76 TB/s on 8 SMs at 1, 4 and 8 loads a thread) and lower it on many
//! (3.69 / 3.40 / 3.43 TB/s on 132): `results/h200/copy_bandwidth.txt`,
//! `cuda-check --bandwidth`. So the figure of a slice is what its SMs' loads
//! and stores move, not a latency of the kernel; cuBLAS's bulk copies stream
//! weights faster per SM (1.09 TB/s on 8 SMs). The buffers are freed before
//! the runner sizes its KV cache.

use super::device::{self, dev_err, launch, Arg, DeviceBuffer};
use super::kernels::{Kernels, COPY_DEPTHS};
use super::CudaRunner;
use crate::runner::RunnerError;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream};
use statrs::statistics::{Data, OrderStatistics};
use std::sync::Arc;

/// Bytes of each of the two buffers (256 MiB: far past the L2 cache).
pub(crate) const COPY_BYTES: usize = 256 << 20;
/// Timed copies.
const REPS: usize = 5;
/// Threads per block and blocks per SM of the copy (a whole SM's 2,048 threads).
const THREADS: u32 = 256;
const BLOCKS_PER_SM: usize = 8;

/// Loads in flight per thread of the copy a runner times at start: the
/// fastest on the whole GPU, and as fast as any on a slice.
const START_DEPTH: usize = 1;
/// Its place in [`COPY_DEPTHS`]; a depth without a kernel does not compile.
const START_INDEX: usize = depth_index(START_DEPTH);

const fn depth_index(depth: usize) -> usize {
    let mut i = 0;
    while i < COPY_DEPTHS.len() {
        if COPY_DEPTHS[i] == depth {
            return i;
        }
        i += 1;
    }
    panic!("no copy_words kernel with that many loads in flight")
}

/// Bytes per second (read plus written) of the copy with [`START_DEPTH`]
/// loads in flight on `sm_count` SMs.
pub(crate) fn measure(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    k: &Kernels,
    sm_count: usize,
) -> Result<f64, RunnerError> {
    measure_kernel(ctx, stream, &k.copy_words[START_INDEX], sm_count)
}

/// Bytes per second (read plus written) of the copy kernel `func` on `sm_count` SMs.
fn measure_kernel(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    sm_count: usize,
) -> Result<f64, RunnerError> {
    let alloc =
        || DeviceBuffer::alloc(ctx, COPY_BYTES).map_err(|e| dev_err("copy bandwidth buffer", e));
    let (src, dst) = (alloc()?, alloc()?);
    let words = (COPY_BYTES / 16) as i64;
    let blocks = (sm_count.max(1) * BLOCKS_PER_SM) as u32;
    let copy = || {
        launch(
            stream,
            func,
            "copy_words",
            (blocks, 1, 1),
            THREADS,
            0,
            &[Arg::Ptr(src.ptr), Arg::Ptr(dst.ptr), Arg::I64(words)],
        )
    };
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = ctx.new_event(flags).map_err(|e| dev_err("event", e))?;
    let end = ctx.new_event(flags).map_err(|e| dev_err("event", e))?;
    copy()?;
    let mut seconds = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        start
            .record(stream)
            .map_err(|e| dev_err("event record", e))?;
        copy()?;
        end.record(stream).map_err(|e| dev_err("event record", e))?;
        device::sync(stream)?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(|e| dev_err("event time", e))?;
        seconds.push(f64::from(ms) * 1e-3);
    }
    Ok(bandwidth(COPY_BYTES, &seconds))
}

/// Bytes read plus written per second by copies of `bytes`, at the median time.
fn bandwidth(bytes: usize, seconds: &[f64]) -> f64 {
    let median = Data::new(seconds.to_vec()).median();
    2.0 * bytes as f64 / median
}

impl CudaRunner {
    /// Bytes per second (read plus written) that a copy kernel on this
    /// runner's SMs moved at start ([`measure`]).
    pub fn measured_copy_bandwidth(&self) -> f64 {
        self.copy_bandwidth
    }

    /// (loads in flight per thread, bytes per second read plus written) of
    /// each copy kernel on this runner's SMs, timed now: the evidence that
    /// the start figure does not depend on the depth timed. Needs two free buffers of [`COPY_BYTES`] beside the KV cache.
    pub fn copy_bandwidth_by_depth(&self) -> Result<Vec<(usize, f64)>, RunnerError> {
        COPY_DEPTHS
            .iter()
            .zip(&self.kernels.copy_words)
            .map(|(&d, f)| {
                measure_kernel(&self._ctx, &self.stream, f, self.sm_count).map(|bw| (d, bw))
            })
            .collect()
    }

    /// (kernel, blocks one SM holds at once) of the skinny GEMM kernels, from
    /// the driver's occupancy calculator for their 256-thread blocks.
    pub fn skinny_blocks_per_sm(&self) -> Result<Vec<(String, u32)>, RunnerError> {
        self.kernels
            .skinny_gemm
            .iter()
            .enumerate()
            .map(|(i, f)| {
                f.occupancy_max_active_blocks_per_multiprocessor(256, 0, None)
                    .map(|b| (format!("skinny_gemm_{}", i + 1), b))
                    .map_err(|e| dev_err("occupancy", e))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::bandwidth;

    #[test]
    fn bandwidth_counts_both_buffers_at_the_median_time() {
        // 1 GB read and 1 GB written in 1 ms: 2 TB/s; the outliers do not count.
        let b = bandwidth(1_000_000_000, &[1e-3, 5e-3, 0.9e-3, 1e-3, 1.1e-3]);
        assert!((b - 2e12).abs() < 1.0, "{b}");
    }
}
