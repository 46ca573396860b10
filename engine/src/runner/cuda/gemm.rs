//! cuBLAS GEMMs in row-major terms: `Y[m, n] = X[m, k] · W[n, k]ᵀ` (a Linear
//! layer), bf16 operands, fp32 accumulation, bf16 or fp32 output.
//!
//! cuBLAS is column-major, so it is asked for `Yᵀ = W · Xᵀ`: op(A) = the stored
//! W transposed (OP_T, lda = k), op(B) = the stored X as is (OP_N, ldb = k).
//! [`Gemm::linear_split_k`] splits K into strided batches that write fp32
//! partials, left for the kernel that reads the output next to add up.
//! The handle gets a fixed workspace so that GEMMs can be captured in a CUDA
//! graph without cuBLAS allocating during capture.

use super::device::{dev_err, DeviceBuffer};
use crate::runner::RunnerError;
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::{result as blas_result, sys as blas_sys, CudaBlas};
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::Arc;

const WORKSPACE_BYTES: usize = 32 << 20;

pub(crate) struct Gemm {
    blas: CudaBlas,
    _workspace: DeviceBuffer,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum OutType {
    Bf16,
    F32,
}

/// Operands of one GEMM: device addresses and sizes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GemmArgs {
    pub x: u64,
    pub w: u64,
    pub y: u64,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub out: OutType,
}

impl Gemm {
    pub fn new(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>) -> Result<Self, RunnerError> {
        let blas = CudaBlas::new(stream.clone()).map_err(|e| dev_err("cuBLAS handle", e))?;
        let workspace = DeviceBuffer::alloc(ctx, WORKSPACE_BYTES)
            .map_err(|e| dev_err("cuBLAS workspace", e))?;
        unsafe {
            blas_sys::cublasSetWorkspace_v2(
                *blas.handle(),
                workspace.ptr as *mut _,
                WORKSPACE_BYTES,
            )
            .result()
            .map_err(|e| dev_err("cublasSetWorkspace", e))?;
        }
        Ok(Self {
            blas,
            _workspace: workspace,
        })
    }

    /// `y[m, n] = x[m, k] · w[n, k]ᵀ`; all pointers are device addresses.
    pub fn linear(&self, a: &GemmArgs) -> Result<(), RunnerError> {
        let GemmArgs {
            x,
            w,
            y,
            m,
            n,
            k,
            out,
        } = *a;
        if m == 0 {
            return Ok(());
        }
        let alpha: f32 = 1.0;
        let beta: f32 = 0.0;
        let c_type = match out {
            OutType::Bf16 => cudaDataType::CUDA_R_16BF,
            OutType::F32 => cudaDataType::CUDA_R_32F,
        };
        unsafe {
            blas_result::gemm_ex(
                *self.blas.handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                (&alpha) as *const f32 as *const _,
                w as *const _,
                cudaDataType::CUDA_R_16BF,
                k as i32,
                x as *const _,
                cudaDataType::CUDA_R_16BF,
                k as i32,
                (&beta) as *const f32 as *const _,
                y as *mut _,
                c_type,
                n as i32,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| dev_err(&format!("cublasGemmEx m={m} n={n} k={k}"), e))
    }

    /// `parts[j][m, n] = x[m, kj] · w[n, kj]ᵀ` over the `splits` equal slices `kj` of K, as one
    /// strided-batched call; `a.y` holds `splits` fp32 `m × n` matrices back to back (`a.out`
    /// must be [`OutType::F32`]). At a few dozen rows cuBLAS runs the O and down projections
    /// with too few blocks to stream their weights; the batches give it more
    /// (results/h200/gemm_bench_split.csv).
    pub fn linear_split_k(&self, a: &GemmArgs, splits: usize) -> Result<(), RunnerError> {
        let GemmArgs {
            x,
            w,
            y: parts,
            m,
            n,
            k,
            out,
        } = *a;
        if m == 0 {
            return Ok(());
        }
        if out != OutType::F32
            || splits == 0
            || !k.is_multiple_of(splits)
            || !(k / splits).is_multiple_of(8)
        {
            return Err(RunnerError::Model(format!(
                "split-K GEMM: K={k} does not split into {splits} slices of a multiple of 8 with fp32 partials"
            )));
        }
        let ks = k / splits;
        let alpha: f32 = 1.0;
        let beta: f32 = 0.0;
        unsafe {
            blas_result::gemm_strided_batched_ex(
                *self.blas.handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                ks as i32,
                (&alpha) as *const f32 as *const _,
                w as *const _,
                cudaDataType::CUDA_R_16BF,
                k as i32,
                ks as i64,
                x as *const _,
                cudaDataType::CUDA_R_16BF,
                k as i32,
                ks as i64,
                (&beta) as *const f32 as *const _,
                parts as *mut _,
                cudaDataType::CUDA_R_32F,
                n as i32,
                (m * n) as i64,
                splits as i32,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| {
            dev_err(
                &format!("cublasGemmStridedBatchedEx m={m} n={n} k={k} splits={splits}"),
                e,
            )
        })
    }
}
