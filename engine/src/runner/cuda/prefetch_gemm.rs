//! The prefetch GEMM (prefetch_gemm.cu): the QKV product, and the gate-up
//! product with SiLU·mul in its epilogue, for decode steps of 17–64 rows,
//! on Hopper (sm_90a: wgmma).
//!
//! Contract: [`PrefetchGemm::plan`] says whether the kernel takes a shape
//! (and how to launch it) or `None`, in which case the caller runs cuBLAS
//! (and, for gate-up, `silu_mul`). The kernel reads its weights in the layout
//! [`tile_weights`] makes (a second copy of the QKV and gate-up weights, kept
//! by the runner beside the row-major one that cuBLAS reads). It is always a
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
/// Weight rows per cluster of each half of the tile (`NH` in prefetch_gemm.cu).
/// A cluster's 256 weight rows: H200 runs at most 30 clusters of 4 of these
/// blocks at once, so Qwen3-0.6B's products take 16 (QKV) and 24 (gate-up),
/// one wave.
const PLAIN_NH: usize = 128;
const SILU_NH: usize = 128;
/// Threads per block (4 warpgroups), blocks per cluster (the split of K) and
/// the one K the kernels take (`PG_THREADS`, `PG_KSPLIT`, `PG_K`).
const THREADS: usize = 512;
const KSPLIT: usize = 4;
pub(crate) const PREFETCH_GEMM_K: usize = 1024;

/// What the kernel writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Epilogue {
    /// `y[m, n]` in bf16.
    Plain,
    /// `w` is `[gate; up]` (`n` = 2 · inter rows); `y[m, inter]` = silu(gate) · up in bf16.
    SiluMul,
}

/// One product `y = x · wᵀ` (`x`: `m × k`, bf16; `w`: `n × k` in bf16,
/// tiled by [`tile_weights`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrefetchGemm {
    pub x: u64,
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

impl PrefetchGemm {
    /// The launch, or `None` where the kernel does not take the shape: rows
    /// outside 1–64, K other than [`PREFETCH_GEMM_K`], N not a whole number
    /// of cluster tiles, or more shared memory than `max_smem` bytes.
    pub fn plan(&self, max_smem: usize) -> Option<LaunchPlan> {
        if !(1..=64).contains(&self.m) || self.k != PREFETCH_GEMM_K {
            return None;
        }
        let (nh, cols, out_cols) = match self.epilogue {
            Epilogue::Plain => (PLAIN_NH, self.n, 2 * PLAIN_NH),
            Epilogue::SiluMul if self.n.is_multiple_of(16) => (SILU_NH, self.n / 2, SILU_NH),
            Epilogue::SiluMul => return None,
        };
        if cols == 0 || !cols.is_multiple_of(out_cols) || !cols.is_multiple_of(4) {
            return None;
        }
        let nc = 2 * nh;
        let ks = self.k / KSPLIT;
        // The weight halves and X's quarter; the sums later reuse the weights' space.
        let smem = nc * ks * 2 + 64 * ks * 2;
        debug_assert!(64 * (nc + 4) * 4 <= nc * ks * 2);
        if smem > max_smem {
            return None;
        }
        let (row_step, seg1_off) = match self.epilogue {
            Epilogue::Plain => (nc, nh),
            Epilogue::SiluMul => (nh, cols),
        };
        Some(LaunchPlan {
            blocks: cols / out_cols * KSPLIT,
            smem,
            row_step,
            seg1_off,
            ldy: cols,
        })
    }

    /// Enqueues the product (a programmatic dependent launch, in clusters of
    /// 4 blocks); a shape [`Self::plan`] refuses, or a device without the
    /// kernel, is an error.
    pub fn enqueue(&self, stream: &CudaStream, k: &Kernels) -> Result<(), RunnerError> {
        if !k.prefetch_ok {
            return Err(RunnerError::Model(
                "the prefetch GEMM needs an sm_90 (Hopper) device".into(),
            ));
        }
        let p = self.plan(k.max_smem).ok_or_else(|| {
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
                Arg::Ptr(self.x),
                Arg::Ptr(self.w_tiled),
                Arg::Ptr(self.y),
                Arg::I32(self.m as i32),
                Arg::I32(self.n as i32),
                Arg::I32(p.row_step as i32),
                Arg::I32(p.seg1_off as i32),
                Arg::I32(p.ldy as i32),
            ],
            true,
            KSPLIT as u32,
        )
    }
}

/// A copy of the `n × k` row-major bf16 matrix at `w` in the prefetch GEMM's
/// layout (`tile_for_wgmma`), enqueued on `stream`. `n % 8 == 0`, `k % 32 == 0`.
pub(crate) fn tile_weights(
    stream: &CudaStream,
    k: &Kernels,
    w: u64,
    rows: usize,
    cols: usize,
) -> Result<DeviceBuffer, RunnerError> {
    if !rows.is_multiple_of(8) || !cols.is_multiple_of(32) {
        return Err(RunnerError::Model(format!(
            "tile_for_wgmma takes rows % 8 == 0 and cols % 32 == 0, not {rows} x {cols}"
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
    /// Enqueues `a` (layer `layer`'s QKV for [`Epilogue::Plain`], its gate-up
    /// for [`Epilogue::SiluMul`], where `a.y` receives silu(gate) · up) on the
    /// prefetch GEMM and returns true when the runner uses it for this step:
    /// tiled weights exist, a decode-only step, rows in [`PREFETCH_GEMM_ROWS`],
    /// a shape the kernel takes. False: the caller runs the product itself.
    /// Left out with the GEMMs when profiling.
    pub(super) fn try_prefetch_gemm(
        &self,
        decode_only: bool,
        a: &GemmArgs,
        layer: usize,
        epilogue: Epilogue,
        group: u32,
    ) -> Result<bool, RunnerError> {
        let Some(pw) = &self.prefetch_weights else {
            return Ok(false);
        };
        if !self.use_prefetch_gemm || !decode_only || !PREFETCH_GEMM_ROWS.contains(&a.m) {
            return Ok(false);
        }
        let tiled = match epilogue {
            Epilogue::Plain => &pw.qkv[layer],
            Epilogue::SiluMul => &pw.gate_up[layer],
        };
        let p = PrefetchGemm {
            x: a.x,
            w_tiled: tiled.ptr,
            y: a.y,
            m: a.m,
            n: a.n,
            k: a.k,
            epilogue,
        };
        if p.plan(self.kernels.max_smem).is_none() {
            return Ok(false);
        }
        if self.profile_skip & group == 0 {
            p.enqueue(&self.stream, &self.kernels)?;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(m: usize, n: usize, k: usize, epilogue: Epilogue) -> PrefetchGemm {
        PrefetchGemm {
            x: 0,
            w_tiled: 0,
            y: 0,
            m,
            n,
            k,
            epilogue,
        }
    }

    #[test]
    fn qwen3_products_fill_the_h200() {
        let max = 227 * 1024;
        // QKV of Qwen3-0.6B at 64 rows: 16 clusters of 4 blocks, 256 columns a cluster;
        // each block holds its 256 rows of a quarter of K (128 KB) and X's quarter (32 KB).
        let qkv = product(64, 4096, 1024, Epilogue::Plain).plan(max).unwrap();
        assert_eq!((qkv.blocks, qkv.ldy, qkv.smem), (64, 4096, 160 * 1024));
        assert_eq!((qkv.row_step, qkv.seg1_off), (256, 128));
        // Gate-up: 24 clusters of 128 gate and 128 up rows, writing 128 columns of act each.
        let gu = product(48, 6144, 1024, Epilogue::SiluMul)
            .plan(max)
            .unwrap();
        assert_eq!((gu.blocks, gu.ldy, gu.smem), (96, 3072, 160 * 1024));
        assert_eq!((gu.row_step, gu.seg1_off), (128, 3072));
    }

    #[test]
    fn shapes_it_cannot_take_are_refused() {
        let max = 227 * 1024;
        assert!(product(0, 4096, 1024, Epilogue::Plain).plan(max).is_none());
        assert!(product(65, 4096, 1024, Epilogue::Plain).plan(max).is_none());
        assert!(product(64, 4096, 2048, Epilogue::Plain).plan(max).is_none());
        assert!(product(64, 4000, 1024, Epilogue::Plain).plan(max).is_none());
        assert!(product(64, 6143, 1024, Epilogue::SiluMul)
            .plan(max)
            .is_none());
        assert!(product(64, 6000, 1024, Epilogue::SiluMul)
            .plan(max)
            .is_none());
        assert!(product(64, 6144, 1024, Epilogue::SiluMul)
            .plan(150 * 1024)
            .is_none());
    }
}
