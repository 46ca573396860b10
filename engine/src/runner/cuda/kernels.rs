//! The kernels: CUDA sources compiled by NVRTC at runner start for the
//! device's compute capability, with the model shape baked in as #defines.
//!
//! Contract: [`Kernels::compile`] rejects shapes the kernels do not handle
//! (with what to change) and returns NVRTC's log on a compile failure; every
//! kernel the runner launches is loaded up front, so a missing one fails at
//! start, not mid-step.

use super::device::dev_err;
use crate::runner::RunnerError;
use cudarc::driver::{CudaContext, CudaFunction};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use std::sync::Arc;

const KERNELS_CU: &str = include_str!("kernels.cu");
const ATTENTION_CU: &str = include_str!("attention.cu");
const DECODE_ATTENTION_CU: &str = include_str!("decode_attention.cu");
const DECODE_BLOCK_ATTENTION_CU: &str = include_str!("decode_block_attention.cu");
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
    pub add_rmsnorm: CudaFunction,
    pub qk_norm_rope_cache: CudaFunction,
    pub silu_mul: CudaFunction,
    pub argmax_rows: CudaFunction,
    pub attn_prefill: CudaFunction,
    pub attn_decode: CudaFunction,
    pub attn_decode_block_w4u4: CudaFunction,
    pub attn_decode_block_w8u4: CudaFunction,
    pub attn_decode_heads_u4: CudaFunction,
    pub attn_decode_block_w4u4_rope: CudaFunction,
    pub attn_decode_block_w8u4_rope: CudaFunction,
    pub attn_decode_heads_u4_rope: CudaFunction,
    pub attn_combine: CudaFunction,
    /// Dynamic shared memory of `attn_prefill` (two stages of K and V tiles).
    pub prefill_smem: u32,
    /// `skinny_gemm[i]` handles up to `16 * (i + 1)` rows.
    pub skinny_gemm: [CudaFunction; 4],
}

pub(crate) fn kernel_source(shape: KernelShape) -> String {
    format!(
        "#define HEAD_DIM {}\n#define NUM_Q_HEADS {}\n#define NUM_KV_HEADS {}\n{KERNELS_CU}\n{ATTENTION_CU}\n{DECODE_ATTENTION_CU}\n{DECODE_BLOCK_ATTENTION_CU}\n{SKINNY_GEMM_CU}",
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
        // Kernels that take more than the default 48 KB of dynamic shared memory.
        let with_smem = |name: &str, bytes: u32| {
            let func = f(name)?;
            func.set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .map_err(|e| RunnerError::Compile {
                message: format!("{name} needs {bytes} B of shared memory: {e:?}"),
                log: String::new(),
            })?;
            Ok::<_, RunnerError>(func)
        };
        let attn_prefill = with_smem("attn_prefill", prefill_smem)?;
        Ok(Self {
            prefill_smem,
            add_rmsnorm: f("add_rmsnorm")?,
            qk_norm_rope_cache: f("qk_norm_rope_cache")?,
            silu_mul: f("silu_mul")?,
            argmax_rows: f("argmax_rows")?,
            attn_prefill,
            attn_decode: f("attn_decode")?,
            attn_decode_block_w4u4: f("attn_decode_block_w4u4")?,
            attn_decode_block_w8u4: f("attn_decode_block_w8u4")?,
            attn_decode_heads_u4: f("attn_decode_heads_u4")?,
            attn_decode_block_w4u4_rope: f("attn_decode_block_w4u4_rope")?,
            attn_decode_block_w8u4_rope: f("attn_decode_block_w8u4_rope")?,
            attn_decode_heads_u4_rope: f("attn_decode_heads_u4_rope")?,
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
        let named: [(&'static str, &CudaFunction); 17] = [
            ("add_rmsnorm", &self.add_rmsnorm),
            ("qk_norm_rope_cache", &self.qk_norm_rope_cache),
            ("silu_mul", &self.silu_mul),
            ("argmax_rows", &self.argmax_rows),
            ("attn_prefill", &self.attn_prefill),
            ("attn_decode", &self.attn_decode),
            ("attn_decode_block_w4u4", &self.attn_decode_block_w4u4),
            ("attn_decode_block_w8u4", &self.attn_decode_block_w8u4),
            ("attn_decode_heads_u4", &self.attn_decode_heads_u4),
            (
                "attn_decode_block_w4u4_rope",
                &self.attn_decode_block_w4u4_rope,
            ),
            (
                "attn_decode_block_w8u4_rope",
                &self.attn_decode_block_w8u4_rope,
            ),
            ("attn_decode_heads_u4_rope", &self.attn_decode_heads_u4_rope),
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
