//! The cuBLASLt descriptors of one GEMM shape (gemm_lt.rs): the operation
//! `Yᵀ = W · Xᵀ` in cuBLAS's column-major terms, strided batches for a split
//! of K, the heuristic's offers, and the call itself.

use super::device::dev_err;
use super::gemm::{GemmArgs, OutType};
use super::gemm_lt::GemmKey;
use crate::runner::RunnerError;
use cudarc::cublas::sys::cublasOperation_t;
pub(crate) use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys::{
    self as lt_sys, cublasComputeType_t, cublasLtMatmulAlgo_t, cublasLtMatmulDescAttributes_t,
    cublasLtMatmulDesc_t, cublasLtMatmulHeuristicResult_t, cublasLtMatmulPreferenceAttributes_t,
    cublasLtMatrixLayoutAttribute_t, cublasLtMatrixLayout_t, cudaDataType,
};
use std::ffi::c_void;

/// Most algorithms asked of the heuristic per shape.
const HEURISTIC_OFFERS: usize = 8;

/// The cuBLASLt descriptors of one shape: the operation and the layouts of
/// W (op A), X (op B) and Y (C and D), in cuBLAS's column-major terms.
pub(crate) struct LtDescs {
    op: cublasLtMatmulDesc_t,
    a: cublasLtMatrixLayout_t,
    b: cublasLtMatrixLayout_t,
    c: cublasLtMatrixLayout_t,
}

pub(crate) fn lt_err(what: &str, e: lt::CublasError) -> RunnerError {
    dev_err(&format!("cuBLASLt {what}"), e)
}

impl LtDescs {
    pub fn new(key: &GemmKey) -> Result<Self, RunnerError> {
        let ks = key.k / key.splits.max(1);
        let c_type = match key.out {
            OutType::Bf16 => cudaDataType::CUDA_R_16BF,
            OutType::F32 => cudaDataType::CUDA_R_32F,
        };
        let bf16 = cudaDataType::CUDA_R_16BF;
        let op = lt::create_matmul_desc(
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cudaDataType::CUDA_R_32F,
        )
        .map_err(|e| lt_err("matmul descriptor", e))?;
        // From here on, `d` owns what exists and frees it if a later step fails.
        let mut d = LtDescs {
            op,
            a: std::ptr::null_mut(),
            b: std::ptr::null_mut(),
            c: std::ptr::null_mut(),
        };
        let (ta, tb) = (
            cublasOperation_t::CUBLAS_OP_T,
            cublasOperation_t::CUBLAS_OP_N,
        );
        unsafe {
            set_attr(
                d.op,
                cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                &ta,
            )?;
            set_attr(
                d.op,
                cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
                &tb,
            )?;
        }
        let layout = |t, rows: usize, cols: usize, ld: usize| {
            lt::create_matrix_layout(t, rows as u64, cols as u64, ld as i64)
                .map_err(|e| lt_err("matrix layout", e))
        };
        d.a = layout(bf16, ks, key.n, key.k)?;
        d.b = layout(bf16, ks, key.m, key.k)?;
        d.c = layout(c_type, key.n, key.m, key.n)?;
        if key.splits > 1 {
            let count = key.splits as i32;
            let (slice, part) = (ks as i64, (key.m * key.n) as i64);
            for (l, stride) in [(d.a, slice), (d.b, slice), (d.c, part)] {
                unsafe {
                    set_layout(
                        l,
                        cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        &count,
                    )?;
                    set_layout(
                        l,
                        cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                        &stride,
                    )?;
                }
            }
        }
        Ok(d)
    }

    /// Up to [`HEURISTIC_OFFERS`] algorithms the heuristic offers for this
    /// shape within `workspace` bytes, best guess first.
    pub fn offers(
        &self,
        handle: lt_sys::cublasLtHandle_t,
        workspace: usize,
    ) -> Result<Vec<cublasLtMatmulAlgo_t>, RunnerError> {
        let pref = lt::create_matmul_pref().map_err(|e| lt_err("preference", e))?;
        let mut results: Vec<cublasLtMatmulHeuristicResult_t> =
            Vec::with_capacity(HEURISTIC_OFFERS);
        let mut count = 0i32;
        let status = unsafe {
            let ws = workspace as u64;
            let set = lt::set_matmul_pref_attribute(
                pref,
                cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&ws) as *const u64 as *const c_void,
                std::mem::size_of::<u64>(),
            );
            let got = set.and_then(|()| {
                lt_sys::cublasLtMatmulAlgoGetHeuristic(
                    handle,
                    self.op,
                    self.a,
                    self.b,
                    self.c,
                    self.c,
                    pref,
                    HEURISTIC_OFFERS as i32,
                    results.as_mut_ptr(),
                    &mut count,
                )
                .result()
            });
            let _ = lt::destroy_matmul_pref(pref);
            got
        };
        status.map_err(|e| lt_err("heuristic", e))?;
        // SAFETY: the heuristic wrote `count` (at most HEURISTIC_OFFERS) results.
        unsafe { results.set_len((count.max(0) as usize).min(HEURISTIC_OFFERS)) };
        Ok(results
            .iter()
            .filter(|r| r.state == lt_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
            .filter(|r| r.workspaceSize <= workspace)
            .map(|r| r.algo)
            .collect())
    }

    /// Enqueues `a` with `algo` on `stream` (`a.y` holds `splits` partials when split).
    pub fn matmul(
        &self,
        handle: lt_sys::cublasLtHandle_t,
        algo: &cublasLtMatmulAlgo_t,
        a: &GemmArgs,
        workspace: (u64, usize),
        stream: lt_sys::cudaStream_t,
    ) -> Result<(), RunnerError> {
        let (alpha, beta) = (1f32, 0f32);
        unsafe {
            lt::matmul(
                handle,
                self.op,
                (&alpha) as *const f32 as *const c_void,
                (&beta) as *const f32 as *const c_void,
                a.w as *const c_void,
                self.a,
                a.x as *const c_void,
                self.b,
                a.y as *const c_void,
                self.c,
                a.y as *mut c_void,
                self.c,
                algo,
                workspace.0 as *mut c_void,
                workspace.1,
                stream,
            )
        }
        .map_err(|e| lt_err(&format!("matmul m={} n={} k={}", a.m, a.n, a.k), e))
    }
}

unsafe fn set_attr<T>(
    op: cublasLtMatmulDesc_t,
    attr: cublasLtMatmulDescAttributes_t,
    v: &T,
) -> Result<(), RunnerError> {
    lt::set_matmul_desc_attribute(
        op,
        attr,
        v as *const T as *const c_void,
        std::mem::size_of::<T>(),
    )
    .map_err(|e| lt_err("descriptor attribute", e))
}

unsafe fn set_layout<T>(
    l: cublasLtMatrixLayout_t,
    attr: cublasLtMatrixLayoutAttribute_t,
    v: &T,
) -> Result<(), RunnerError> {
    lt::set_matrix_layout_attribute(
        l,
        attr,
        v as *const T as *const c_void,
        std::mem::size_of::<T>(),
    )
    .map_err(|e| lt_err("layout attribute", e))
}

impl Drop for LtDescs {
    fn drop(&mut self) {
        unsafe {
            for l in [self.a, self.b, self.c] {
                if !l.is_null() {
                    let _ = lt::destroy_matrix_layout(l);
                }
            }
            let _ = lt::destroy_matmul_desc(self.op);
        }
    }
}
