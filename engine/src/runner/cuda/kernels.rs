//! The kernels: CUDA sources compiled by NVRTC at runner start for the
//! device's compute capability, with the model shape baked in as #defines.
//!
//! Contract: [`Kernels::compile`] rejects shapes the kernels do not handle
//! ([`check_shape`], with what to change) and returns NVRTC's log on a
//! compile failure; every kernel the runner launches is loaded up front, so a
//! missing one fails at start, not mid-step. Any grouped-query ratio up to 64
//! query heads per KV head compiles: a prefill tile holds
//! [`crate::runner::attention_tile_tokens`] whole tokens of the group.

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
    /// The residual stream's width (`add_rmsnorm` keeps a row in registers).
    pub hidden_size: usize,
}

/// Rows of one prefill attention tile (`ATT_BM` in attention.cu).
const TILE_ROWS: usize = 64;
/// Threads of every `add_rmsnorm` launch (forward.rs, the self-tests).
const NORM_THREADS: usize = 256;
/// The widest residual stream `add_rmsnorm` takes (32 float4 chunks a thread).
const MAX_HIDDEN: usize = 32 * 4 * NORM_THREADS;

impl KernelShape {
    /// `NORM_CHUNKS`: the float4 chunks of a row each `add_rmsnorm` thread
    /// keeps; 4 (the kernel as measured) up to hidden 4096.
    fn norm_chunks(&self) -> usize {
        self.hidden_size.div_ceil(4 * NORM_THREADS).max(4)
    }
}

/// Why the kernels cannot take `shape`, if they cannot: head_dim a multiple
/// of 32 up to 256, query heads a multiple of the KV heads with at most 64
/// per KV head (a prefill tile holds at least one token of the group), and
/// a residual stream of a multiple of 4 up to 32,768.
pub(crate) fn check_shape(shape: &KernelShape) -> Result<(), String> {
    let KernelShape {
        head_dim,
        num_q_heads: nq,
        num_kv_heads: nkv,
        hidden_size,
    } = *shape;
    if !head_dim.is_multiple_of(32) || head_dim > 256 {
        return Err(format!(
            "head_dim {head_dim} is not a multiple of 32 up to 256"
        ));
    }
    if nkv == 0 || nq == 0 || !nq.is_multiple_of(nkv) || nq / nkv > TILE_ROWS {
        return Err(format!(
            "{nq} query heads over {nkv} KV heads: the query heads must be a multiple of the KV \
             heads, at most {TILE_ROWS} per KV head"
        ));
    }
    if !hidden_size.is_multiple_of(4) || hidden_size > MAX_HIDDEN {
        return Err(format!(
            "hidden_size {hidden_size} is not a multiple of 4 up to {MAX_HIDDEN}"
        ));
    }
    Ok(())
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
    /// `copy_words[i]` keeps [`COPY_DEPTHS`]`[i]` loads in flight per thread.
    pub copy_words: [CudaFunction; 3],
    /// Dynamic shared memory of `attn_prefill` (two stages of K and V tiles).
    pub prefill_smem: u32,
    /// `skinny_gemm[i]` handles up to `16 * (i + 1)` rows.
    pub skinny_gemm: [CudaFunction; 4],
}

/// Loads in flight per thread of the `copy_words_D` kernels, in the order of
/// [`Kernels::copy_words`].
pub const COPY_DEPTHS: [usize; 3] = [1, 4, 8];

pub(crate) fn kernel_source(shape: KernelShape) -> String {
    format!(
        "#define HEAD_DIM {}\n#define NUM_Q_HEADS {}\n#define NUM_KV_HEADS {}\n#define NORM_CHUNKS {}\n{KERNELS_CU}\n{ATTENTION_CU}\n{DECODE_ATTENTION_CU}\n{DECODE_BLOCK_ATTENTION_CU}\n{SKINNY_GEMM_CU}",
        shape.head_dim, shape.num_q_heads, shape.num_kv_heads, shape.norm_chunks()
    )
}

fn cuda_include_dir() -> String {
    let home = std::env::var("CUDA_HOME")
        .or_else(|_| std::env::var("CUDA_PATH"))
        .unwrap_or_else(|_| "/usr/local/cuda".into());
    format!("{home}/include")
}

/// The device's NVRTC target, `sm_XY`. NVRTC wants a 'static string: one
/// leak per compile, a few bytes per runner start.
pub(crate) fn device_arch(ctx: &Arc<CudaContext>) -> Result<&'static str, RunnerError> {
    let (major, minor) = ctx
        .compute_capability()
        .map_err(|e| dev_err("compute capability", e))?;
    Ok(Box::leak(format!("sm_{major}{minor}").into_boxed_str()))
}

impl Kernels {
    pub fn compile(ctx: &Arc<CudaContext>, shape: KernelShape) -> Result<Self, RunnerError> {
        check_shape(&shape).map_err(RunnerError::Model)?;
        let arch = device_arch(ctx)?;
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
            copy_words: [f("copy_words_1")?, f("copy_words_4")?, f("copy_words_8")?],
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::attention_tile_tokens;

    /// What row `row` of a prefill tile computes for a group of `group` query
    /// heads, as attn_prefill maps it (attention.cu's `tok0`, `h0`, `ok0`):
    /// (token of the tile, head of the group), or `None` for a masked row
    /// (past the tile's whole tokens).
    fn tile_row(row: usize, group: usize) -> Option<(usize, usize)> {
        let tokens = attention_tile_tokens(group, 1);
        (row < tokens * group && row < TILE_ROWS).then_some((row / group, row % group))
    }

    fn shape(num_q_heads: usize, num_kv_heads: usize, hidden_size: usize) -> KernelShape {
        KernelShape {
            head_dim: 128,
            num_q_heads,
            num_kv_heads,
            hidden_size,
        }
    }

    #[test]
    fn every_tile_row_is_one_token_and_head_of_the_group_or_masked() {
        for group in 1..=8 {
            let tokens = attention_tile_tokens(8 * group, 8);
            // As many whole tokens as 64 rows hold, and no more.
            assert!(tokens * group <= TILE_ROWS && (tokens + 1) * group > TILE_ROWS);
            let mut seen = vec![vec![0; group]; tokens];
            for row in 0..TILE_ROWS {
                match tile_row(row, group) {
                    Some((t, h)) => seen[t][h] += 1,
                    None => assert!(row >= tokens * group, "group {group}: row {row} masked"),
                }
            }
            assert!(seen.iter().flatten().all(|&n| n == 1), "group {group}");
        }
        // Qwen3-14B (40 over 8): 12 tokens in 60 rows, the last 4 masked.
        assert_eq!(attention_tile_tokens(40, 8), 12);
        assert_eq!(tile_row(59, 5), Some((11, 4)));
        assert_eq!(tile_row(60, 5), None);
        assert_eq!(tile_row(63, 3), None);
        assert_eq!(tile_row(62, 3), Some((20, 2)));
    }

    #[test]
    fn every_family_shape_is_taken_and_the_rest_is_refused_with_the_reason() {
        // Qwen3 0.6b .. 32b: 16, 32, 40 and 64 query heads over 8; hidden up to 5120.
        for (nq, hidden) in [
            (16, 1024),
            (16, 2048),
            (32, 2560),
            (32, 4096),
            (40, 5120),
            (64, 5120),
        ] {
            assert_eq!(check_shape(&shape(nq, 8, hidden)), Ok(()), "{nq}/8");
        }
        assert_eq!(check_shape(&shape(24, 8, 3072)), Ok(()));
        assert_eq!(check_shape(&shape(64, 1, 8192)), Ok(()));
        let e = check_shape(&shape(65, 1, 1024)).unwrap_err();
        assert!(e.contains("at most 64 per KV head"), "{e}");
        let e = check_shape(&shape(20, 8, 1024)).unwrap_err();
        assert!(e.contains("multiple of the KV heads"), "{e}");
        assert!(check_shape(&shape(16, 0, 1024)).is_err());
        let e = check_shape(&shape(16, 8, 1026)).unwrap_err();
        assert!(e.contains("multiple of 4 up to 32768"), "{e}");
        assert!(check_shape(&shape(16, 8, MAX_HIDDEN + 4)).is_err());
        let e = check_shape(&KernelShape {
            head_dim: 80,
            ..shape(16, 8, 1024)
        })
        .unwrap_err();
        assert!(e.contains("head_dim 80"), "{e}");
    }

    #[test]
    fn the_norm_keeps_four_chunks_a_thread_up_to_4096_and_more_beyond() {
        assert_eq!(shape(16, 8, 1024).norm_chunks(), 4);
        assert_eq!(shape(32, 8, 4096).norm_chunks(), 4);
        assert_eq!(shape(40, 8, 5120).norm_chunks(), 5);
        assert_eq!(shape(64, 8, 8192).norm_chunks(), 8);
        // Every chunk of the widest row has a thread.
        let widest = shape(64, 8, MAX_HIDDEN);
        assert!(widest.norm_chunks() * 4 * NORM_THREADS >= MAX_HIDDEN);
        let src = kernel_source(shape(40, 8, 5120));
        assert!(src.starts_with(
            "#define HEAD_DIM 128\n#define NUM_Q_HEADS 40\n#define NUM_KV_HEADS 8\n#define NORM_CHUNKS 5\n"
        ));
    }
}
