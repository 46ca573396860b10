//! The copy bandwidth a runner gets, measured at start, so that every result
//! can record the GPU it ran on, whole or SM-limited ([`super::green`]).
//!
//! Contract: [`measure`] times a grid-stride copy kernel (`copy_words` in
//! kernels.cu, eight blocks of 256 threads per SM of the runner) over two
//! buffers of [`COPY_BYTES`] on the runner's stream with events: one warm-up,
//! then the median of [`REPS`] copies. The figure is bytes read plus bytes
//! written per second. A kernel, not a copy-engine memcpy, because only a
//! kernel's bandwidth depends on the SMs it has (on the H200: 0.77 TB/s on 8
//! SMs, 3.78 TB/s on all 132, DESIGN.md). The buffers are freed before the
//! runner sizes its KV cache.

use super::device::{self, dev_err, launch, Arg, DeviceBuffer};
use super::kernels::Kernels;
use super::CudaRunner;
use crate::runner::RunnerError;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaStream};
use statrs::statistics::{Data, OrderStatistics};
use std::sync::Arc;

/// Bytes of each of the two buffers (256 MiB: far past the L2 cache).
pub(crate) const COPY_BYTES: usize = 256 << 20;
/// Timed copies.
const REPS: usize = 5;
/// Threads per block and blocks per SM of the copy (a whole SM's 2,048 threads).
const THREADS: u32 = 256;
const BLOCKS_PER_SM: usize = 8;

/// Bytes per second (read plus written) of `copy_words` on `sm_count` SMs.
pub(crate) fn measure(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    k: &Kernels,
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
            &k.copy_words,
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
