//! The runner on part of the GPU: a CUDA green context of N SMs, which makes
//! an H200 a smaller GPU of another balance between arithmetic, bandwidth and
//! latency, without touching the device's settings.
//!
//! Contract: [`open`] gives the runner its context and stream. With no SM
//! count, or the device's own, that is the primary context (the whole GPU,
//! as [`device::open_device`] opens it). Otherwise it is a green context of
//! exactly N SMs: [`plan`] checks N against the partitions the driver offers
//! (its minimum partition and alignment, as `cuDeviceGetDevResource` reports
//! them), and the split's result is checked again; an N it cannot give
//! exactly is a [`SmCountError`] naming the counts it can. Every kernel, copy
//! and cuBLAS call of the runner goes to that context's stream
//! (`cuGreenCtxStreamCreate`), so all of them run on the N SMs.
//!
//! [`GreenContext`] owns the green context and its stream and destroys them
//! with `cuGreenCtxDestroy` when dropped, so it must outlive every other user
//! of the context (the runner's last field). cudarc's wrapper of the
//! `CUcontext` the green context converts to is never dropped: its drop would
//! call `cuCtxDestroy` on a handle that only `cuGreenCtxDestroy` may release
//! (a small host struct is leaked per green runner instead).

use super::device::{self, dev_err};
use super::CudaRunner;
use crate::runner::{RunnerError, SmCountError};
use cudarc::driver::sys::{self, CUdevResourceType, CUdevice_attribute};
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::Arc;

/// Where a runner runs: the whole device, or a green context of this many SMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SmPlan {
    Whole(usize),
    Green(usize),
}

/// The SM counts a one-group split of a device of `device` SMs gives: from
/// `min_partition` in steps of `alignment`, then the whole device.
pub(crate) fn offered_counts(device: usize, min_partition: usize, alignment: usize) -> Vec<usize> {
    let mut v: Vec<usize> = if min_partition == 0 || alignment == 0 {
        Vec::new()
    } else {
        (min_partition..device).step_by(alignment).collect()
    };
    v.push(device);
    v
}

/// Checks `asked` SMs against a device of `device` SMs whose partitions are
/// `min_partition` SMs and more in steps of `alignment` (0 for either:
/// unknown, and only the split's result can tell).
pub(crate) fn plan(
    asked: Option<usize>,
    device: usize,
    min_partition: usize,
    alignment: usize,
) -> Result<SmPlan, SmCountError> {
    let Some(n) = asked else {
        return Ok(SmPlan::Whole(device));
    };
    if n == 0 {
        return Err(SmCountError::Zero);
    }
    if n > device {
        return Err(SmCountError::MoreThanDevice { asked: n, device });
    }
    if n == device {
        return Ok(SmPlan::Whole(device));
    }
    let offered = offered_counts(device, min_partition, alignment);
    if offered.len() > 1 && !offered.contains(&n) {
        return Err(SmCountError::NotOffered { asked: n, offered });
    }
    Ok(SmPlan::Green(n))
}

/// A runner's context and stream, the SMs they run on, and the green context
/// behind them if any (dropped last).
pub(crate) struct Device {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub sm_count: usize,
    pub green: Option<GreenContext>,
}

/// A green context and the stream made in it; destroyed on drop.
pub(crate) struct GreenContext {
    green: sys::CUgreenCtx,
    stream: sys::CUstream,
    /// The primary context, retained for as long as the green context lives
    /// (as the driver advises: creating one retains it anyway).
    _primary: Arc<CudaContext>,
}

impl Drop for GreenContext {
    fn drop(&mut self) {
        // Nothing useful can be done about a failure at drop time.
        // SAFETY: both handles were created by this struct's constructor and
        // are destroyed only here; every user of them was dropped before.
        unsafe {
            if !self.stream.is_null() {
                let _ = sys::cuStreamDestroy_v2(self.stream);
            }
            let _ = sys::cuGreenCtxDestroy(self.green);
        }
    }
}

/// A `CUdevResource` with room to spare after it: the struct has grown
/// between CUDA versions, and the driver must never write past ours.
#[repr(C)]
struct Resource {
    r: sys::CUdevResource,
    _tail: [u8; 64],
}

impl Resource {
    fn zeroed() -> Self {
        // SAFETY: plain data, for which all zeros is a valid value.
        unsafe { std::mem::zeroed() }
    }

    fn sm_count(&self) -> usize {
        // SAFETY: an SM resource, as every resource here is.
        unsafe { self.r.__bindgen_anon_1.sm.smCount as usize }
    }
}

/// Opens device `ordinal` whole, or a green context of `sm_count` SMs on it.
pub(crate) fn open(ordinal: usize, sm_count: Option<usize>) -> Result<Device, RunnerError> {
    let (primary, stream) = device::open_device(ordinal)?;
    let total = primary
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| dev_err("SM count", e))? as usize;
    let whole = |ctx, stream| Device {
        ctx,
        stream,
        sm_count: total,
        green: None,
    };
    if sm_count.is_none() {
        return Ok(whole(primary, stream));
    }
    let dev = primary.cu_device();
    let mut input = Resource::zeroed();
    // SAFETY: `input` is a zeroed resource with room to spare; `dev` is the open device.
    unsafe {
        sys::cuDeviceGetDevResource(
            dev,
            &mut input.r,
            CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM,
        )
    }
    .result()
    .map_err(|e| {
        dev_err(
            "the device's SM resource (green contexts need CUDA 12.4)",
            e,
        )
    })?;
    // SAFETY: an SM resource, just written by the driver.
    let sm = unsafe { input.r.__bindgen_anon_1.sm };
    let (min, align) = (
        sm.minSmPartitionSize as usize,
        sm.smCoscheduledAlignment as usize,
    );
    let n = match plan(sm_count, total, min, align)? {
        SmPlan::Whole(_) => return Ok(whole(primary, stream)),
        SmPlan::Green(n) => n,
    };
    drop(stream);
    let not_offered = || SmCountError::NotOffered {
        asked: n,
        offered: offered_counts(total, min, align),
    };
    let mut part = Resource::zeroed();
    let mut rest = Resource::zeroed();
    let mut groups = 1u32;
    // SAFETY: one output resource for one group; all three have room to spare.
    unsafe {
        sys::cuDevSmResourceSplitByCount(
            &mut part.r,
            &mut groups,
            &input.r,
            &mut rest.r,
            0,
            n as u32,
        )
    }
    .result()
    .map_err(|e| dev_err(&format!("splitting {n} SMs off the device"), e))?;
    if groups != 1 || part.sm_count() != n {
        return Err(not_offered().into());
    }
    let mut desc: sys::CUdevResourceDesc = std::ptr::null_mut();
    // SAFETY: one valid SM resource in, one descriptor out.
    unsafe { sys::cuDevResourceGenerateDesc(&mut desc, &mut part.r, 1) }
        .result()
        .map_err(|e| dev_err("green context descriptor", e))?;
    let mut green: sys::CUgreenCtx = std::ptr::null_mut();
    let flags = sys::CUgreenCtxCreate_flags::CU_GREEN_CTX_DEFAULT_STREAM as u32;
    // SAFETY: a descriptor just generated for this device.
    unsafe { sys::cuGreenCtxCreate(&mut green, desc, dev, flags) }
        .result()
        .map_err(|e| dev_err(&format!("green context of {n} SMs"), e))?;
    // Owned from here on: an error below destroys it.
    let mut owner = GreenContext {
        green,
        stream: std::ptr::null_mut(),
        _primary: primary,
    };
    let mut raw: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: a live green context.
    unsafe { sys::cuCtxFromGreenCtx(&mut raw, green) }
        .result()
        .map_err(|e| dev_err("green context's CUcontext", e))?;
    // SAFETY: `raw` is valid while `owner` lives, which the runner ensures by
    // dropping `owner` last; the wrapper itself is never dropped (see the
    // module doc), so it never destroys `raw`.
    let ctx = unsafe { CudaContext::from_raw_context(ordinal, dev, raw) }
        .map_err(|e| dev_err("wrapping the green context", e))?;
    std::mem::forget(ctx.clone());
    // SAFETY: nothing has run in this context yet; see device::open_device for why.
    unsafe { ctx.disable_event_tracking() };
    let mut raw_stream: sys::CUstream = std::ptr::null_mut();
    let stream_flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
    // SAFETY: a live green context; the stream is destroyed by `owner`.
    unsafe { sys::cuGreenCtxStreamCreate(&mut raw_stream, green, stream_flags, 0) }
        .result()
        .map_err(|e| dev_err("green context stream", e))?;
    owner.stream = raw_stream;
    // SAFETY: the stream belongs to this context and lives as long as `owner`,
    // which outlives every user of the wrapper.
    let stream = unsafe { ctx.wrap_borrowed_stream(raw_stream) };
    Ok(Device {
        ctx,
        stream,
        sm_count: n,
        green: Some(owner),
    })
}

impl CudaRunner {
    /// The SMs this runner's kernels run on: the device's count, or the
    /// green context's (`CudaRunnerConfig::sm_count`).
    pub fn sm_count(&self) -> usize {
        self.sm_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_count_or_the_devices_own_is_the_whole_device() {
        assert_eq!(plan(None, 132, 8, 8), Ok(SmPlan::Whole(132)));
        assert_eq!(plan(Some(132), 132, 8, 8), Ok(SmPlan::Whole(132)));
        // Unknown granularity: the whole device still needs no split.
        assert_eq!(plan(Some(132), 132, 0, 0), Ok(SmPlan::Whole(132)));
    }

    #[test]
    fn a_count_the_driver_offers_is_a_green_context() {
        for n in [8, 16, 32, 64, 128] {
            assert_eq!(plan(Some(n), 132, 8, 8), Ok(SmPlan::Green(n)));
        }
        assert_eq!(plan(Some(6), 132, 2, 2), Ok(SmPlan::Green(6)));
        // Unknown granularity: tried, and the split's result checked.
        assert_eq!(plan(Some(12), 132, 0, 8), Ok(SmPlan::Green(12)));
    }

    #[test]
    fn counts_that_cannot_be_had_are_errors_naming_what_can() {
        assert_eq!(plan(Some(0), 132, 8, 8), Err(SmCountError::Zero));
        assert_eq!(
            plan(Some(133), 132, 8, 8),
            Err(SmCountError::MoreThanDevice {
                asked: 133,
                device: 132
            })
        );
        let offered: Vec<usize> = (1..=16).map(|k| 8 * k).chain([132]).collect();
        for n in [1, 4, 12, 130, 131] {
            assert_eq!(
                plan(Some(n), 132, 8, 8),
                Err(SmCountError::NotOffered {
                    asked: n,
                    offered: offered.clone()
                })
            );
        }
        let e = plan(Some(12), 132, 8, 8).unwrap_err().to_string();
        assert!(
            e.contains("12 SMs") && e.ends_with("8, 16, 24, ..., 128 or 132"),
            "{e}"
        );
    }

    #[test]
    fn the_offered_counts_step_from_the_minimum_and_end_with_the_device() {
        assert_eq!(offered_counts(40, 8, 8), [8, 16, 24, 32, 40]);
        assert_eq!(offered_counts(36, 8, 8), [8, 16, 24, 32, 36]);
        assert_eq!(offered_counts(10, 4, 2), [4, 6, 8, 10]);
        assert_eq!(offered_counts(132, 0, 8), [132]);
    }
}
