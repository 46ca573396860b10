//! Device plumbing: context and stream, raw device allocations, and typed
//! kernel launches (optionally programmatic dependent launches).
//!
//! Contract: every device buffer is a [`DeviceBuffer`] that owns one
//! `cuMemAlloc` allocation and frees it on drop; kernels take raw device
//! addresses (`u64`), so activations can be carved out of one workspace and a
//! captured CUDA graph keeps pointing at the same memory. cudarc's event
//! tracking is disabled for the whole context (graph capture requires it), so
//! ordering is the single stream's order.

use crate::runner::RunnerError;
use cudarc::driver::{result, CudaContext, CudaFunction, CudaStream};
use std::error::Error;
use std::sync::Arc;

/// A [`RunnerError::Device`]: `what` failed with `e` (its source).
pub(crate) fn dev_err(what: &str, e: impl Error + Send + Sync + 'static) -> RunnerError {
    RunnerError::Device {
        what: what.to_owned(),
        source: Box::new(e),
    }
}

/// `e` and its sources, `: `-separated (for reports that keep errors as text).
pub(crate) fn error_chain(e: &(dyn Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Opens device `ordinal` with one non-default stream, or says why not.
pub(crate) fn open_device(
    ordinal: usize,
) -> Result<(Arc<CudaContext>, Arc<CudaStream>), RunnerError> {
    // cudarc panics when a library is missing; check first so the caller gets an error.
    let present = unsafe {
        (
            cudarc::driver::sys::is_culib_present(),
            cudarc::nvrtc::sys::is_culib_present(),
            cudarc::cublas::sys::is_culib_present(),
        )
    };
    match present {
        (false, _, _) => {
            return Err(RunnerError::NoDevice(
                "libcuda (the NVIDIA driver) not found".into(),
            ))
        }
        (_, false, _) => {
            return Err(RunnerError::NoDevice(
                "libnvrtc not found (set LD_LIBRARY_PATH to the CUDA toolkit's lib64)".into(),
            ))
        }
        (_, _, false) => {
            return Err(RunnerError::NoDevice(
                "libcublas not found (set LD_LIBRARY_PATH to the CUDA toolkit's lib64)".into(),
            ))
        }
        _ => {}
    }
    let count = CudaContext::device_count()
        .map_err(|e| RunnerError::NoDevice(format!("cuInit/device count: {e:?}")))?;
    if count <= ordinal as i32 {
        return Err(RunnerError::NoDevice(format!(
            "{count} CUDA devices, asked for device {ordinal}"
        )));
    }
    let ctx = CudaContext::new(ordinal).map_err(|e| RunnerError::NoDevice(format!("{e:?}")))?;
    // Graph capture fails ("dependency created on uncaptured work") with event tracking on.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().map_err(|e| dev_err("new stream", e))?;
    Ok((ctx, stream))
}

/// One raw device allocation, freed on drop.
pub(crate) struct DeviceBuffer {
    ctx: Arc<CudaContext>,
    pub ptr: u64,
}

impl DeviceBuffer {
    pub fn alloc(
        ctx: &Arc<CudaContext>,
        bytes: usize,
    ) -> Result<Self, cudarc::driver::DriverError> {
        ctx.bind_to_thread()?;
        let ptr = unsafe { result::malloc_sync(bytes.max(256)) }?;
        Ok(Self {
            ctx: ctx.clone(),
            ptr,
        })
    }

    /// Allocates and copies `data` in (synchronously: used at load time only).
    pub fn from_host<T: Copy>(ctx: &Arc<CudaContext>, data: &[T]) -> Result<Self, RunnerError> {
        let bytes = std::mem::size_of_val(data);
        let buf = Self::alloc(ctx, bytes).map_err(|e| dev_err("alloc", e))?;
        if bytes > 0 {
            unsafe { result::memcpy_htod_sync(buf.ptr, data) }
                .map_err(|e| dev_err("copy to device", e))?;
        }
        Ok(buf)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // Nothing useful can be done about a failed free at drop time.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

pub(crate) fn copy_htod_async<T>(
    dst: u64,
    src: &[T],
    stream: &CudaStream,
) -> Result<(), RunnerError> {
    unsafe { result::memcpy_htod_async(dst, src, stream.cu_stream()) }
        .map_err(|e| dev_err("copy to device", e))
}

pub(crate) fn copy_dtoh_async<T>(
    dst: &mut [T],
    src: u64,
    stream: &CudaStream,
) -> Result<(), RunnerError> {
    unsafe { result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }
        .map_err(|e| dev_err("copy to host", e))
}

/// Page-locked host memory (so the per-step copy is true async DMA), mapped
/// into the device's address space so that a kernel can write results into
/// it (`argmax_rows`, step.rs). Kernels reading the step metadata from it
/// were slower than the copy: 20 µs for 8 KB at batch 64 on the H200
/// (docs/performance.md).
pub(crate) struct PinnedBuffer<T: Copy + Default> {
    ptr: *mut T,
    len: usize,
    device_ptr: u64,
    ctx: Arc<CudaContext>,
}

impl<T: Copy + Default> PinnedBuffer<T> {
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self, RunnerError> {
        ctx.bind_to_thread().map_err(|e| dev_err("bind", e))?;
        let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_DEVICEMAP;
        let ptr = unsafe { result::malloc_host(len.max(1) * std::mem::size_of::<T>(), flags) }
            .map_err(|e| dev_err("pinned alloc", e))? as *mut T;
        let mut device_ptr = 0;
        // SAFETY: `ptr` was just returned by cuMemHostAlloc with DEVICEMAP.
        let mapped = unsafe {
            cudarc::driver::sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, ptr.cast(), 0)
        }
        .result();
        // Owned before the mapping's error returns, so that dropping it frees the allocation.
        let mut b = Self {
            ptr,
            len,
            device_ptr,
            ctx: ctx.clone(),
        };
        mapped.map_err(|e| dev_err("map pinned memory", e))?;
        b.as_mut_slice().fill(T::default());
        Ok(b)
    }
    /// The buffer's address for kernels.
    pub fn device_ptr(&self) -> u64 {
        self.device_ptr
    }
    pub fn as_slice(&self) -> &[T] {
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: Copy + Default> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            let _ = unsafe { result::free_host(self.ptr as _) };
        }
    }
}

/// One kernel argument: a device address or a scalar.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg {
    Ptr(u64),
    I32(i32),
    I64(i64),
    F32(f32),
}

/// The most arguments a kernel launch takes (the fused decode kernels have 20).
const MAX_KERNEL_ARGS: usize = 24;

/// Launches `f` on `stream` with `args` in order.
pub(crate) fn launch(
    stream: &CudaStream,
    f: &CudaFunction,
    name: &str,
    grid: (u32, u32, u32),
    block: u32,
    smem: u32,
    args: &[Arg],
) -> Result<(), RunnerError> {
    launch_ex(stream, f, name, grid, block, smem, args, false)
}

/// [`launch`], optionally as a programmatic dependent launch (`pdl`): the
/// kernel may be scheduled while the previous one on the stream drains, and
/// must itself wait (`PDL_WAIT` in kernels.cu) before touching memory. It
/// saves part of the gap between the small kernels of a decode step.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_ex(
    stream: &CudaStream,
    f: &CudaFunction,
    name: &str,
    grid: (u32, u32, u32),
    block: u32,
    smem: u32,
    args: &[Arg],
    pdl: bool,
) -> Result<(), RunnerError> {
    use cudarc::driver::sys;
    // Each argument in its own 8-byte slot; the driver reads as many bytes as
    // the kernel's parameter has, from the slot's start. Fixed arrays: this runs
    // for every kernel of an eager step, so it allocates nothing.
    if args.len() > MAX_KERNEL_ARGS {
        return Err(RunnerError::Model(format!(
            "launch {name}: {} arguments, more than the {MAX_KERNEL_ARGS} launch_ex takes",
            args.len()
        )));
    }
    let mut slots = [[0u8; 8]; MAX_KERNEL_ARGS];
    for (b, a) in slots.iter_mut().zip(args) {
        match *a {
            Arg::Ptr(p) => b.copy_from_slice(&p.to_ne_bytes()),
            Arg::I64(v) => b.copy_from_slice(&v.to_ne_bytes()),
            Arg::I32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
            Arg::F32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
        }
    }
    let mut params = [std::ptr::null_mut::<std::ffi::c_void>(); MAX_KERNEL_ARGS];
    for (p, b) in params.iter_mut().zip(slots.iter_mut()) {
        *p = b.as_mut_ptr().cast();
    }
    // SAFETY: an all-zero attribute is valid plain data; id and value are set below.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let cfg = sys::CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: smem,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: pdl as u32,
    };
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| dev_err(&format!("launch {name}"), e))?;
    // SAFETY: `params` points at one slot per kernel parameter, in order, each
    // at least as large as the parameter; the slots outlive the call.
    unsafe {
        sys::cuLaunchKernelEx(
            &cfg,
            f.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
        .result()
    }
    .map_err(|e| dev_err(&format!("launch {name}"), e))
}

/// Free and total device memory in bytes.
pub(crate) fn mem_info(ctx: &Arc<CudaContext>) -> Result<(usize, usize), RunnerError> {
    ctx.mem_get_info().map_err(|e| dev_err("memory info", e))
}

pub(crate) fn sync(stream: &CudaStream) -> Result<(), RunnerError> {
    stream.synchronize().map_err(|e| dev_err("synchronize", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_error_keeps_its_cause_as_the_source() {
        let e = dev_err("graph launch", std::io::Error::other("launch failed"));
        assert!(matches!(&e, RunnerError::Device { what, .. } if what == "graph launch"));
        assert_eq!(e.to_string(), "device error: graph launch");
        let source = e.source().expect("a source");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(error_chain(&e), "device error: graph launch: launch failed");
        // Errors without a source are their own text.
        assert_eq!(error_chain(&std::io::Error::other("x")), "x");
    }
}
