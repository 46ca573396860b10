//! The prefetch GEMM (prefetch_gemm.cu): the QKV product, and the gate-up
//! product with SiLU·mul in its epilogue, for decode steps of 17–64 rows,
//! on Hopper (sm_90a: wgmma, clusters, multicast bulk copies).
//!
//! Contract: [`PrefetchGemm::plan`] says whether the kernel takes a shape
//! (and how to launch it) or `None`, in which case the caller runs cuBLAS
//! (and, for gate-up, `silu_mul`). The kernel reads its operands in wgmma's
//! tiled layout: the weights as [`tile_weights`] copies them (a second copy
//! of the QKV and gate-up weights, kept by the runner beside the row-major
//! one that cuBLAS reads), X as `add_rmsnorm` writes it when asked for the
//! tiled layout (64 rows, whatever the step's count). It is always a
//! programmatic dependent launch: it copies its weight tile into shared
//! memory before it waits for the previous kernel, so it must follow a kernel
//! that lets its dependents start early (`add_rmsnorm` does).

use super::device::{launch_cluster, launch_ex, Arg, DeviceBuffer};
use super::gemm::GemmArgs;
use super::kernels::Kernels;
use super::weights::DeviceWeights;
use super::CudaRunner;
use crate::model::Qwen3Config;
use crate::runner::RunnerError;
use cudarc::driver::CudaStream;

/// Rows the runner gives the prefetch GEMM (it computes 64 either way).
pub(crate) const PREFETCH_GEMM_ROWS: std::ops::RangeInclusive<usize> = 17..=64;
/// Weight rows per block of each half of the tile (`NH` in prefetch_gemm.cu).
const PLAIN_NH: usize = 16;
const SILU_NH: usize = 24;
/// Threads per block, blocks per cluster (sharing X) and the one K the
/// kernels take (`PG_THREADS`, `PG_CLUSTER`, `PG_K`).
const THREADS: usize = 256;
const CLUSTER: usize = 2;
pub(crate) const PREFETCH_GEMM_K: usize = 1024;
/// Rows of X the kernel reads (the tiled buffer's rows).
pub(crate) const PREFETCH_X_ROWS: usize = 64;

/// What the kernel writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Epilogue {
    /// `y[m, n]` in bf16.
    Plain,
    /// `w` is `[gate; up]` (`n` = 2 · inter rows); `y[m, inter]` = silu(gate) · up in bf16.
    SiluMul,
}

/// One product `y = x · wᵀ` (`x`: 64 rows of `k` in the tiled layout, of
/// which the first `m` count; `w`: `n × k` tiled by [`tile_weights`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrefetchGemm {
    pub x_tiled: u64,
    pub w_tiled: u64,
    pub y: u64,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub epilogue: Epilogue,
}

/// How to launch one [`PrefetchGemm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaunchPlan {
    pub blocks: usize,
    pub smem: usize,
    pub row_step: usize,
    pub seg1_off: usize,
    pub ldy: usize,
}

/// The launch of an `m × k` by `n × k` product with `epilogue`, or `None`
/// where the kernel does not take it: rows outside 1–64, K other than
/// [`PREFETCH_GEMM_K`], N not a whole number of cluster tiles, or more shared
/// memory than `max_smem` bytes.
pub(crate) fn plan(
    m: usize,
    n: usize,
    k: usize,
    epilogue: Epilogue,
    max_smem: usize,
) -> Option<LaunchPlan> {
    if !(1..=PREFETCH_X_ROWS).contains(&m) || k != PREFETCH_GEMM_K {
        return None;
    }
    let (nh, cols, out_cols) = match epilogue {
        Epilogue::Plain => (PLAIN_NH, n, 2 * PLAIN_NH),
        Epilogue::SiluMul if n.is_multiple_of(16) => (SILU_NH, n / 2, SILU_NH),
        Epilogue::SiluMul => return None,
    };
    if cols == 0 || !cols.is_multiple_of(out_cols * CLUSTER) {
        return None;
    }
    // Both halves of the weight tile, then all of X.
    let smem = 2 * nh * k * 2 + PREFETCH_X_ROWS * k * 2;
    if smem > max_smem {
        return None;
    }
    let (row_step, seg1_off) = match epilogue {
        Epilogue::Plain => (2 * nh, nh),
        Epilogue::SiluMul => (nh, cols),
    };
    Some(LaunchPlan {
        blocks: cols / out_cols,
        smem,
        row_step,
        seg1_off,
        ldy: cols,
    })
}

impl PrefetchGemm {
    /// Enqueues the product (a programmatic dependent launch, in clusters of
    /// 2 blocks); a shape [`plan`] refuses, or a device without the kernel,
    /// is an error.
    pub fn enqueue(&self, stream: &CudaStream, k: &Kernels) -> Result<(), RunnerError> {
        if !k.prefetch_ok {
            return Err(RunnerError::Model(
                "the prefetch GEMM needs an sm_90 (Hopper) device".into(),
            ));
        }
        let p = plan(self.m, self.n, self.k, self.epilogue, k.max_smem).ok_or_else(|| {
            RunnerError::Model(format!(
                "prefetch GEMM takes 1-64 rows, K = {PREFETCH_GEMM_K} and whole cluster tiles, not {self:?}"
            ))
        })?;
        let f = match self.epilogue {
            Epilogue::Plain => &k.prefetch_gemm_plain,
            Epilogue::SiluMul => &k.prefetch_gemm_silu,
        };
        launch_cluster(
            stream,
            f,
            "prefetch_gemm",
            (p.blocks as u32, 1, 1),
            THREADS as u32,
            p.smem as u32,
            &[
                Arg::Ptr(self.x_tiled),
                Arg::Ptr(self.w_tiled),
                Arg::Ptr(self.y),
                Arg::I32(self.m as i32),
                Arg::I32(p.row_step as i32),
                Arg::I32(p.seg1_off as i32),
                Arg::I32(p.ldy as i32),
            ],
            true,
            CLUSTER as u32,
        )
    }
}

/// A copy of the `rows × cols` row-major bf16 matrix at `w` in the prefetch
/// GEMM's layout (`tile_for_wgmma`), enqueued on `stream`. `rows % 8 == 0`,
/// `cols % 8 == 0`.
pub(crate) fn tile_weights(
    stream: &CudaStream,
    k: &Kernels,
    w: u64,
    rows: usize,
    cols: usize,
) -> Result<DeviceBuffer, RunnerError> {
    if !rows.is_multiple_of(8) || !cols.is_multiple_of(8) {
        return Err(RunnerError::Model(format!(
            "tile_for_wgmma takes rows % 8 == 0 and cols % 8 == 0, not {rows} x {cols}"
        )));
    }
    let t = DeviceBuffer::alloc(stream.context(), rows * cols * 2)
        .map_err(|e| super::device::dev_err("tiled weights", e))?;
    let units = rows * cols / 8;
    launch_ex(
        stream,
        &k.tile_for_wgmma,
        "tile_for_wgmma",
        (units.div_ceil(256) as u32, 1, 1),
        256,
        0,
        &[
            Arg::Ptr(w),
            Arg::Ptr(t.ptr),
            Arg::I32(rows as i32),
            Arg::I32(cols as i32),
        ],
        false,
    )?;
    Ok(t)
}

/// The QKV and gate-up weights of every layer, tiled for the prefetch GEMM.
pub(crate) struct PrefetchWeights {
    pub qkv: Vec<DeviceBuffer>,
    pub gate_up: Vec<DeviceBuffer>,
    pub bytes: usize,
}

/// Tiles every layer's QKV and gate-up weights where the device runs the
/// prefetch GEMM and the shapes allow it (`None` otherwise: cuBLAS then runs
/// every product). Costs a second copy of those weights: 0.59 GB for
/// Qwen3-0.6B.
pub(crate) fn tile_layers(
    stream: &CudaStream,
    k: &Kernels,
    w: &DeviceWeights,
    cfg: &Qwen3Config,
) -> Result<Option<PrefetchWeights>, RunnerError> {
    let hidden = cfg.hidden_size;
    let qkv_rows = cfg.q_size() + 2 * cfg.kv_size();
    let gate_up_rows = 2 * cfg.intermediate_size;
    if !k.prefetch_ok || hidden != PREFETCH_GEMM_K || !qkv_rows.is_multiple_of(8) {
        return Ok(None);
    }
    let mut pw = PrefetchWeights {
        qkv: Vec::new(),
        gate_up: Vec::new(),
        bytes: 0,
    };
    for l in &w.layers {
        pw.qkv
            .push(tile_weights(stream, k, l.qkv.ptr, qkv_rows, hidden)?);
        pw.gate_up.push(tile_weights(
            stream,
            k,
            l.gate_up.ptr,
            gate_up_rows,
            hidden,
        )?);
        pw.bytes += (qkv_rows + gate_up_rows) * hidden * 2;
    }
    super::device::sync(stream)?;
    Ok(Some(pw))
}

impl CudaRunner {
    /// Whether the runner gives an `m`-row product of `n × k` weights with
    /// `epilogue` to the prefetch GEMM: tiled weights exist, a decode-only
    /// step, rows in [`PREFETCH_GEMM_ROWS`], a shape the kernel takes. The
    /// norm before it then writes the tiled X.
    pub(super) fn prefetch_gemm_for(
        &self,
        decode_only: bool,
        m: usize,
        n: usize,
        k: usize,
        epilogue: Epilogue,
    ) -> bool {
        self.use_prefetch_gemm
            && self.prefetch_weights.is_some()
            && decode_only
            && PREFETCH_GEMM_ROWS.contains(&m)
            && plan(m, n, k, epilogue, self.kernels.max_smem).is_some()
    }

    /// Enqueues `a` (layer `layer`'s QKV for [`Epilogue::Plain`], its gate-up
    /// for [`Epilogue::SiluMul`], where `a.y` receives silu(gate) · up; `a.x`
    /// holds the tiled X) on the prefetch GEMM, which
    /// [`Self::prefetch_gemm_for`] must have chosen. Left out with the GEMMs
    /// when profiling.
    pub(super) fn prefetch_gemm(
        &self,
        a: &GemmArgs,
        layer: usize,
        epilogue: Epilogue,
        group: u32,
    ) -> Result<(), RunnerError> {
        let pw = self.prefetch_weights.as_ref().ok_or_else(|| {
            RunnerError::Model("the prefetch GEMM has no tiled weights on this device".into())
        })?;
        let tiled = match epilogue {
            Epilogue::Plain => &pw.qkv[layer],
            Epilogue::SiluMul => &pw.gate_up[layer],
        };
        if self.profile_skip & group != 0 {
            return Ok(());
        }
        PrefetchGemm {
            x_tiled: a.x,
            w_tiled: tiled.ptr,
            y: a.y,
            m: a.m,
            n: a.n,
            k: a.k,
            epilogue,
        }
        .enqueue(&self.stream, &self.kernels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen3_products_fill_the_h200() {
        let max = 227 * 1024 - 2048;
        // QKV of Qwen3-0.6B: 128 blocks (64 clusters of 2) of 32 columns, 64 KB of
        // weights and all of X (128 KB) each.
        let qkv = plan(64, 4096, 1024, Epilogue::Plain, max).unwrap();
        assert_eq!((qkv.blocks, qkv.ldy, qkv.smem), (128, 4096, 192 * 1024));
        assert_eq!((qkv.row_step, qkv.seg1_off), (32, 16));
        // Gate-up: 128 blocks of 24 gate and 24 up rows, writing 24 columns of act each.
        let gu = plan(48, 6144, 1024, Epilogue::SiluMul, max).unwrap();
        assert_eq!((gu.blocks, gu.ldy, gu.smem), (128, 3072, 224 * 1024));
        assert_eq!((gu.row_step, gu.seg1_off), (24, 3072));
    }

    #[test]
    fn shapes_it_cannot_take_are_refused() {
        let max = 227 * 1024 - 2048;
        let refused = |m, n, k, e| plan(m, n, k, e, max).is_none();
        assert!(refused(0, 4096, 1024, Epilogue::Plain));
        assert!(refused(65, 4096, 1024, Epilogue::Plain));
        assert!(refused(64, 4096, 2048, Epilogue::Plain));
        // 4064 columns: 127 blocks, not whole clusters.
        assert!(refused(64, 4064, 1024, Epilogue::Plain));
        assert!(refused(64, 6143, 1024, Epilogue::SiluMul));
        assert!(refused(64, 6000, 1024, Epilogue::SiluMul));
        assert!(plan(64, 6144, 1024, Epilogue::SiluMul, 200 * 1024).is_none());
    }
}
