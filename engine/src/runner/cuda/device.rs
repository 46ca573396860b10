//! Device plumbing: context and stream, raw device allocations, NVRTC
//! compilation of the kernels and typed launch helpers.
//!
//! Contract: every device buffer is a [`DeviceBuffer`] that owns one
//! `cuMemAlloc` allocation and frees it on drop; kernels take raw device
//! addresses (`u64`), so activations can be carved out of one workspace and a
//! captured CUDA graph keeps pointing at the same memory. cudarc's event
//! tracking is disabled for the whole context (graph capture requires it), so
//! ordering is the single stream's order.

use crate::runner::RunnerError;
use cudarc::driver::{result, CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use std::sync::Arc;

pub(crate) fn dev_err(what: &str, e: impl std::fmt::Debug) -> RunnerError {
    RunnerError::Device(format!("{what}: {e:?}"))
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

/// Page-locked host memory (so the per-step copies are true async DMA).
pub(crate) struct PinnedBuffer<T: Copy + Default> {
    ptr: *mut T,
    len: usize,
    ctx: Arc<CudaContext>,
}

impl<T: Copy + Default> PinnedBuffer<T> {
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self, RunnerError> {
        ctx.bind_to_thread().map_err(|e| dev_err("bind", e))?;
        let ptr = unsafe { result::malloc_host(len.max(1) * std::mem::size_of::<T>(), 0) }
            .map_err(|e| dev_err("pinned alloc", e))? as *mut T;
        let mut b = Self {
            ptr,
            len,
            ctx: ctx.clone(),
        };
        b.as_mut_slice().fill(T::default());
        Ok(b)
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

const KERNELS_CU: &str = include_str!("kernels.cu");
const ATTENTION_CU: &str = include_str!("attention.cu");
const DECODE_ATTENTION_CU: &str = include_str!("decode_attention.cu");
const SKINNY_GEMM_CU: &str = include_str!("skinny_gemm.cu");

/// Model shape baked into the kernels at compile time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KernelShape {
    pub head_dim: usize,
    pub num_q_heads: usize,
    pub num_kv_heads: usize,
}

/// The compiled kernels.
pub(crate) struct Kernels {
    pub embed_gather: CudaFunction,
    pub add_rmsnorm: CudaFunction,
    pub qk_norm_rope_cache: CudaFunction,
    pub silu_mul: CudaFunction,
    pub argmax_rows: CudaFunction,
    pub attn_prefill: CudaFunction,
    pub attn_decode: CudaFunction,
    /// 16-key groups without prefetch (a tuning alternative to `attn_decode`).
    pub attn_decode_g16: CudaFunction,
    /// Shared-memory cp.async pipeline (a tuning alternative to `attn_decode`).
    pub attn_decode_async: CudaFunction,
    /// Dynamic shared memory of `attn_decode_async`.
    pub decode_async_smem: u32,
    pub attn_combine: CudaFunction,
    /// Dynamic shared memory of `attn_prefill` (two stages of K and V tiles).
    pub prefill_smem: u32,
    /// `skinny_gemm[i]` handles up to `16 * (i + 1)` rows.
    pub skinny_gemm: [CudaFunction; 4],
}

pub(crate) fn kernel_source(shape: KernelShape) -> String {
    format!(
        "#define HEAD_DIM {}\n#define NUM_Q_HEADS {}\n#define NUM_KV_HEADS {}\n{KERNELS_CU}\n{ATTENTION_CU}\n{DECODE_ATTENTION_CU}\n{SKINNY_GEMM_CU}",
        shape.head_dim, shape.num_q_heads, shape.num_kv_heads
    )
}

fn cuda_include_dir() -> String {
    let home = std::env::var("CUDA_HOME")
        .or_else(|_| std::env::var("CUDA_PATH"))
        .unwrap_or_else(|_| "/usr/local/cuda".into());
    format!("{home}/include")
}

impl Kernels {
    pub fn compile(ctx: &Arc<CudaContext>, shape: KernelShape) -> Result<Self, RunnerError> {
        if !shape.head_dim.is_multiple_of(32) || shape.head_dim > 256 {
            return Err(RunnerError::Model(format!(
                "head_dim {} is not a multiple of 32 up to 256",
                shape.head_dim
            )));
        }
        if shape.num_kv_heads == 0
            || !shape.num_q_heads.is_multiple_of(shape.num_kv_heads)
            || 64 % (shape.num_q_heads / shape.num_kv_heads) != 0
        {
            return Err(RunnerError::Model(format!(
                "{} query heads over {} KV heads: the group size must divide 64",
                shape.num_q_heads, shape.num_kv_heads
            )));
        }
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| dev_err("compute capability", e))?;
        // NVRTC wants a 'static arch string; one leak per runner start.
        let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
        let opts = CompileOptions {
            arch: Some(arch),
            include_paths: vec![cuda_include_dir()],
            options: vec!["--std=c++17".into()],
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(kernel_source(shape), opts).map_err(|e| match e {
            CompileError::CompileError {
                nvrtc,
                options,
                log,
            } => RunnerError::Compile {
                message: format!("NVRTC {nvrtc:?} with options {options:?}"),
                log: log.to_string_lossy().into_owned(),
            },
            other => RunnerError::Compile {
                message: format!("{other:?}"),
                log: String::new(),
            },
        })?;
        let module = ctx.load_module(ptx).map_err(|e| RunnerError::Compile {
            message: format!("loading the PTX module: {e:?}"),
            log: String::new(),
        })?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| RunnerError::Compile {
                    message: format!("kernel {name} missing from the module: {e:?}"),
                    log: String::new(),
                })
        };
        // 2 stages x (K, V) x 64 keys x (head_dim + 8 padding) bf16: ATTN_PREFILL_SMEM in attention.cu.
        let prefill_smem = (2 * 2 * 64 * (shape.head_dim + 8) * 2) as u32;
        let attn_prefill = f("attn_prefill")?;
        attn_prefill
            .set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                prefill_smem as i32,
            )
            .map_err(|e| RunnerError::Compile {
                message: format!("attn_prefill needs {prefill_smem} B of shared memory: {e:?}"),
                log: String::new(),
            })?;
        // 4 warps x 4 stages x (K, V) x 8 keys x head_dim bf16: attn_decode_async's pipeline.
        let decode_async_smem = (4 * 4 * 2 * 8 * shape.head_dim * 2) as u32;
        let attn_decode_async = f("attn_decode_async")?;
        attn_decode_async
            .set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                decode_async_smem as i32,
            )
            .map_err(|e| RunnerError::Compile {
                message: format!("attn_decode_async needs {decode_async_smem} B of shared memory: {e:?}"),
                log: String::new(),
            })?;
        Ok(Self {
            prefill_smem,
            embed_gather: f("embed_gather")?,
            add_rmsnorm: f("add_rmsnorm")?,
            qk_norm_rope_cache: f("qk_norm_rope_cache")?,
            silu_mul: f("silu_mul")?,
            argmax_rows: f("argmax_rows")?,
            attn_prefill,
            attn_decode: f("attn_decode")?,
            attn_decode_g16: f("attn_decode_g16")?,
            attn_decode_async,
            decode_async_smem,
            attn_combine: f("attn_combine")?,
            skinny_gemm: [
                f("skinny_gemm_1")?,
                f("skinny_gemm_2")?,
                f("skinny_gemm_3")?,
                f("skinny_gemm_4")?,
            ],
        })
    }
}

impl Kernels {
    /// (name, registers per thread, local-memory bytes per thread) of every kernel.
    pub fn resource_report(&self) -> Vec<(&'static str, i32, i32)> {
        use cudarc::driver::sys::CUfunction_attribute as A;
        let named: [(&'static str, &CudaFunction); 14] = [
            ("embed_gather", &self.embed_gather),
            ("add_rmsnorm", &self.add_rmsnorm),
            ("qk_norm_rope_cache", &self.qk_norm_rope_cache),
            ("silu_mul", &self.silu_mul),
            ("argmax_rows", &self.argmax_rows),
            ("attn_prefill", &self.attn_prefill),
            ("attn_decode", &self.attn_decode),
            ("attn_decode_g16", &self.attn_decode_g16),
            ("attn_decode_async", &self.attn_decode_async),
            ("attn_combine", &self.attn_combine),
            ("skinny_gemm_1", &self.skinny_gemm[0]),
            ("skinny_gemm_2", &self.skinny_gemm[1]),
            ("skinny_gemm_3", &self.skinny_gemm[2]),
            ("skinny_gemm_4", &self.skinny_gemm[3]),
        ];
        named
            .iter()
            .map(|(n, f)| {
                let regs = f.get_attribute(A::CU_FUNC_ATTRIBUTE_NUM_REGS).unwrap_or(-1);
                let local = f
                    .get_attribute(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
                    .unwrap_or(-1);
                (*n, regs, local)
            })
            .collect()
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
    let cfg = LaunchConfig {
        grid_dim: grid,
        block_dim: (block, 1, 1),
        shared_mem_bytes: smem,
    };
    let mut b = stream.launch_builder(f);
    for a in args {
        match a {
            Arg::Ptr(p) => b.arg(p),
            Arg::I32(v) => b.arg(v),
            Arg::I64(v) => b.arg(v),
            Arg::F32(v) => b.arg(v),
        };
    }
    unsafe { b.launch(cfg) }
        .map(|_| ())
        .map_err(|e| dev_err(&format!("launch {name}"), e))
}

/// Free and total device memory in bytes.
pub(crate) fn mem_info(ctx: &Arc<CudaContext>) -> Result<(usize, usize), RunnerError> {
    ctx.mem_get_info().map_err(|e| dev_err("memory info", e))
}

pub(crate) fn sync(stream: &CudaStream) -> Result<(), RunnerError> {
    stream.synchronize().map_err(|e| dev_err("synchronize", e))
}
