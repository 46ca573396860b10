//! cuBLAS GEMMs in row-major terms: `Y[m, n] = X[m, k] · W[n, k]ᵀ` (a Linear
//! layer), bf16 operands, fp32 accumulation, bf16 or fp32 output.
//!
//! cuBLAS is column-major, so it is asked for `Yᵀ = W · Xᵀ`: op(A) = the stored
//! W transposed (OP_T, lda = k), op(B) = the stored X as is (OP_N, ldb = k).
//! [`Gemm::linear_split_k`] splits K into strided batches that write fp32
//! partials, left for the kernel that reads the output next to add up.
//! The handle gets a fixed workspace so that GEMMs can be captured in a CUDA
//! graph without cuBLAS allocating during capture.
//!
//! A shape tuned by [`Gemm::tune_noted`] runs the cuBLASLt algorithm measured
//! fastest for it instead of `cublasGemmEx` (gemm_lt.rs).

use super::device::{dev_err, error_chain, DeviceBuffer};
use super::gemm_lt::{GemmKey, GemmTuneReport, LtDescs, LtGemms, LtPlan, MIN_GAIN, TUNE_CALLS};
use crate::runner::RunnerError;
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::{result as blas_result, sys as blas_sys, CudaBlas};
use cudarc::driver::{sys as drv_sys, CudaContext, CudaStream};
use statrs::statistics::{Data, OrderStatistics};
use std::sync::Arc;

const WORKSPACE_BYTES: usize = 32 << 20;

pub(crate) struct Gemm {
    blas: CudaBlas,
    pub(crate) lt: LtGemms,
    stream: Arc<CudaStream>,
    workspace: DeviceBuffer,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
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
            lt: LtGemms::new()?,
            stream: stream.clone(),
            workspace,
        })
    }

    /// `y[m, n] = x[m, k] · w[n, k]ᵀ`; all pointers are device addresses.
    pub fn linear(&self, a: &GemmArgs) -> Result<(), RunnerError> {
        self.run(a, 1)
    }

    /// The tuned cuBLASLt plan of the shape if there is one, else cuBLAS.
    fn run(&self, a: &GemmArgs, splits: usize) -> Result<(), RunnerError> {
        if a.m == 0 {
            return Ok(());
        }
        let key = GemmKey::of(a, splits);
        self.lt
            .with_plan(&key, a, |p| self.lt_matmul(&p.descs, &p.algo, a))
            .unwrap_or_else(|| self.cublas(a, splits))
    }

    /// `a` through cuBLAS: one GEMM, or strided batches over `splits` slices of K.
    fn cublas(&self, a: &GemmArgs, splits: usize) -> Result<(), RunnerError> {
        if splits > 1 {
            self.gemm_batched(a, splits)
        } else {
            self.gemm_ex(a)
        }
    }

    /// Enqueues `a` with the cuBLASLt algorithm `algo` of its shape's `descs`.
    fn lt_matmul(
        &self,
        descs: &LtDescs,
        algo: &cudarc::cublaslt::sys::cublasLtMatmulAlgo_t,
        a: &GemmArgs,
    ) -> Result<(), RunnerError> {
        let workspace = (self.workspace.ptr, WORKSPACE_BYTES);
        descs.matmul(
            self.lt.handle,
            algo,
            a,
            workspace,
            self.stream.cu_stream() as _,
        )
    }

    fn gemm_ex(&self, a: &GemmArgs) -> Result<(), RunnerError> {
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
    /// (`scripts/gemm_bench.cu`; where the runner splits: `linear::split_k_for`).
    pub fn linear_split_k(&self, a: &GemmArgs, splits: usize) -> Result<(), RunnerError> {
        let GemmArgs { m, k, out, .. } = *a;
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
        self.run(a, splits)
    }

    fn gemm_batched(&self, a: &GemmArgs, splits: usize) -> Result<(), RunnerError> {
        let GemmArgs {
            x,
            w,
            y: parts,
            m,
            n,
            k,
            ..
        } = *a;
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

    /// Tunes every shape noted since the last call (gemm_lt.rs): times
    /// cuBLAS and each cuBLASLt heuristic offer over [`TUNE_CALLS`] calls in a
    /// graph and installs the fastest. Runs work on the stream and waits for
    /// it. A shape whose tuning fails keeps `cublasGemmEx` (the report says
    /// why): tuning is an optimisation, and must not stop a step.
    pub fn tune_noted(&self) {
        for (key, calls) in self.lt.take_noted() {
            let (plan, report) = self.tune_shape(&key, &calls).unwrap_or_else(|e| {
                let failed = GemmTuneReport {
                    error: Some(error_chain(&e)),
                    ..GemmTuneReport::unmeasured(&key)
                };
                (None, failed)
            });
            self.lt.reports.borrow_mut().push(report);
            self.lt.install(key, plan);
        }
    }

    /// The plan for one shape (`None`: `cublasGemmEx` stays) and what was measured.
    fn tune_shape(
        &self,
        key: &GemmKey,
        calls: &[GemmArgs],
    ) -> Result<(Option<LtPlan>, GemmTuneReport), RunnerError> {
        let descs = LtDescs::new(key)?;
        let offers = descs.offers(self.lt.handle, WORKSPACE_BYTES)?;
        let gemm_ex_us = self
            .time_calls(calls, &|a| self.cublas(a, key.splits))?
            .ok_or_else(|| RunnerError::Device {
                what: format!("tuning {key:?}"),
                source: "cuBLAS failed in the tuning graph".into(),
            })?;
        let mut best: Option<(f64, usize)> = None;
        for (rank, algo) in offers.iter().enumerate() {
            if let Some(us) = self.time_calls(calls, &|a| self.lt_matmul(&descs, algo, a))? {
                if best.is_none_or(|(b, _)| us < b) {
                    best = Some((us, rank));
                }
            }
        }
        let wins = best.filter(|&(us, _)| us < gemm_ex_us * (1.0 - MIN_GAIN));
        let report = GemmTuneReport {
            gemm_ex_us: Some(gemm_ex_us),
            best_lt_us: best.map(|b| b.0),
            best_lt_rank: best.map(|b| b.1),
            offers: offers.len(),
            chosen: if wins.is_some() { "cublaslt" } else { "cublas" },
            ..GemmTuneReport::unmeasured(key)
        };
        let plan = wins.map(|(_, rank)| LtPlan {
            descs,
            algo: offers[rank],
        });
        Ok((plan, report))
    }

    /// Median µs per call of `run` over [`TUNE_CALLS`] calls (cycling through
    /// `calls`, whose weights differ) in one graph, or `None` if a call fails.
    fn time_calls(
        &self,
        calls: &[GemmArgs],
        run: &dyn Fn(&GemmArgs) -> Result<(), RunnerError>,
    ) -> Result<Option<f64>, RunnerError> {
        let st = &self.stream;
        st.begin_capture(drv_sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| dev_err("begin tuning capture", e))?;
        let ran = (0..TUNE_CALLS).try_for_each(|i| run(&calls[i % calls.len()]));
        let end = st.end_capture(drv_sys::CUgraphInstantiate_flags(0));
        if ran.is_err() {
            return Ok(None);
        }
        let Some(graph) = end.map_err(|e| dev_err("end tuning capture", e))? else {
            return Ok(None);
        };
        let ctx = st.context();
        let event = || {
            ctx.new_event(Some(drv_sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| dev_err("event", e))
        };
        let (start, end) = (event()?, event()?);
        let mut ms = Vec::new();
        // Two warm-up launches, then the median of five.
        for r in 0..7 {
            start.record(st).map_err(|e| dev_err("event record", e))?;
            graph
                .launch()
                .map_err(|e| dev_err("tuning graph launch", e))?;
            end.record(st).map_err(|e| dev_err("event record", e))?;
            let t = start
                .elapsed_ms(&end)
                .map_err(|e| dev_err("event time", e))?;
            if r >= 2 {
                ms.push(t as f64);
            }
        }
        Ok(Some(Data::new(ms).median() * 1000.0 / TUNE_CALLS as f64))
    }

    /// Self-test: runs `a` (over `splits` slices of K) with the `rank`-th
    /// cuBLASLt heuristic offer for its shape; `false` if there is no such offer.
    pub fn run_offer(&self, a: &GemmArgs, splits: usize, rank: usize) -> Result<bool, RunnerError> {
        let descs = LtDescs::new(&GemmKey::of(a, splits))?;
        let offers = descs.offers(self.lt.handle, WORKSPACE_BYTES)?;
        let Some(algo) = offers.get(rank) else {
            return Ok(false);
        };
        self.lt_matmul(&descs, algo, a)?;
        Ok(true)
    }

    /// What the tuning measured, shape by shape, in tuning order.
    pub fn tune_reports(&self) -> Vec<GemmTuneReport> {
        self.lt.reports.borrow().clone()
    }
}
