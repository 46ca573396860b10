//! Fused decode layers on Hopper (fused_gemm.cu): five kernels a layer
//! instead of nine for decode-only steps of at most 64 sequences.
//!
//! Contract: [`compile_fused`] gives `None` (the runner keeps its cuBLAS
//! path) on a GPU other than compute capability 9.0 or for a model shape the
//! kernels do not take ([`FusedShape::unsupported`] says why). A fused layer
//! is: RMSNorm folded into the QKV GEMM; attention; O GEMM adding into the
//! fp32 residual stream; RMSNorm folded into the gate-up GEMM, whose epilogue
//! writes silu(gate)·up; down GEMM adding into the residual stream. All are
//! programmatic dependent launches that copy their weights before waiting on
//! the previous kernel. The residual stream ends whole in `ws.resid`.

use super::device::{launch_ex, Arg, DeviceBuffer};
use super::forward::StepKnobs;
use super::kernels::{build_module, load_kernel, nvrtc_options, KERNELS_CU};
use super::meta::StepLayout;
use super::{CudaRunner, SKIP_GEMM};
use crate::model::{Qwen3Config, Qwen3Weights};
use crate::runner::RunnerError;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream};
use half::bf16;
use std::sync::Arc;

const FUSED_GEMM_CU: &str = include_str!("fused_gemm.cu");

/// Rows of one fused GEMM tile: steps of more tokens take the cuBLAS path.
pub const FUSED_MAX_ROWS: usize = 64;
/// Output columns per block of the normed GEMMs: QKV, and gate-up (24 gate + 24 up).
const QKV_TILE: usize = 32;
const GATE_UP_TILE: usize = 48;
/// Blocks of a cluster that share the staging of the normed rows.
const NORM_CLUSTER: usize = 4;
/// Output columns per block, and K slices (a cluster), of the residual GEMMs.
const RESID_TILE: usize = 64;
const RESID_SPLITS: usize = 8;
/// Static shared memory of the normed GEMMs (1/rms of 64 rows, aligned up).
const NORM_STATIC_SMEM: usize = 1024;

/// The model dimensions the fused kernels are compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FusedShape {
    pub hidden: usize,
    pub q_dim: usize,
    pub qkv_dim: usize,
    pub inter: usize,
}

impl FusedShape {
    pub fn of(c: &Qwen3Config) -> Self {
        Self {
            hidden: c.hidden_size,
            q_dim: c.num_attention_heads * c.head_dim,
            qkv_dim: (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim,
            inter: c.intermediate_size,
        }
    }

    /// Dynamic shared memory of a normed GEMM with `tile` output columns: A and B tiles.
    fn norm_smem(&self, tile: usize) -> usize {
        (64 + tile) * self.hidden * 2
    }

    /// Dynamic shared memory of a residual GEMM over `k` inputs: A and B K slices, the
    /// fp32 partial tile [64][68]; at least `RESID_MIN_SMEM`, so that its 128 blocks
    /// spread over 128 SMs instead of pairing up on 64.
    fn resid_smem(&self, k: usize) -> usize {
        (2 * 64 * (k / RESID_SPLITS) * 2 + 64 * 68 * 4).max(
            std::env::var("SERVETWIN_FG_RESID_MIN")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        )
    }

    /// Why the fused kernels cannot run this shape with `smem_limit` bytes of shared memory
    /// per block, or `None`.
    pub fn unsupported(&self, smem_limit: usize) -> Option<String> {
        let k_slice = RESID_SPLITS * 16;
        let checks = [
            (
                self.hidden.is_multiple_of(RESID_TILE),
                "hidden_size % 64 == 0",
            ),
            (
                self.qkv_dim.is_multiple_of(QKV_TILE * NORM_CLUSTER),
                "QKV width % 128 == 0",
            ),
            (
                self.inter.is_multiple_of(GATE_UP_TILE / 2 * NORM_CLUSTER),
                "intermediate_size % 96 == 0",
            ),
            (
                self.q_dim.is_multiple_of(k_slice) && self.inter.is_multiple_of(k_slice),
                "query width and intermediate_size % 128 == 0",
            ),
            (
                self.norm_smem(GATE_UP_TILE) + NORM_STATIC_SMEM <= smem_limit,
                "hidden_size small enough for 64 + 48 rows of it in shared memory",
            ),
            (
                self.resid_smem(self.q_dim.max(self.inter)) <= smem_limit,
                "intermediate_size small enough for its K slices in shared memory",
            ),
        ];
        checks
            .iter()
            .find(|(ok, _)| !ok)
            .map(|(_, need)| format!("the fused decode kernels need {need} ({self:?})"))
    }
}

/// One layer's weights as the fused kernels read them: every block's tile
/// stored as its shared-memory image ([`norm_tiles`], [`resid_tiles`]).
pub(crate) struct FusedLayer {
    pub qkv: DeviceBuffer,
    pub gate_up: DeviceBuffer,
    pub o: DeviceBuffer,
    pub down: DeviceBuffer,
}

/// Appends the shared-memory image of the tile made of `rows` of the K-major
/// matrix `w` (`k` wide), columns `k0..k0 + kt`: the no-swizzle layout of
/// fused_gemm.cu, core matrix (r / 8, c) of 8 rows x 8 values at
/// `(c * rows.len() / 8 + r / 8) * 64` values.
fn push_image(out: &mut Vec<bf16>, w: &[bf16], k: usize, rows: &[usize], k0: usize, kt: usize) {
    let (base, r8) = (out.len(), rows.len() / 8);
    out.resize(base + rows.len() * kt, bf16::ZERO);
    for (r, &row) in rows.iter().enumerate() {
        for c in 0..kt / 8 {
            let dst = base + (c * r8 + r / 8) * 64 + (r % 8) * 8;
            let src = row * k + k0 + c * 8;
            out[dst..dst + 8].copy_from_slice(&w[src..src + 8]);
        }
    }
}

/// The tiles of a normed GEMM's weights `[n][k]`, one per block in block
/// order: `tile` consecutive rows, or with `pairs` (gate-up, `n` = 2 · inter)
/// `tile / 2` gate rows and the same `tile / 2` up rows.
pub(crate) fn norm_tiles(w: &[bf16], n: usize, k: usize, tile: usize, pairs: bool) -> Vec<bf16> {
    let mut out = Vec::with_capacity(n * k);
    let (blocks, half) = if pairs {
        (n / tile, n / 2)
    } else {
        (n / tile, 0)
    };
    for t in 0..blocks {
        let rows: Vec<usize> = if pairs {
            let g = t * tile / 2..(t + 1) * tile / 2;
            g.clone().chain(g.map(|r| half + r)).collect()
        } else {
            (t * tile..(t + 1) * tile).collect()
        };
        push_image(&mut out, w, k, &rows, 0, k);
    }
    out
}

/// The tiles of a residual GEMM's weights `[n][k]`: block (t, s) holds rows
/// `64t..64t + 64`, K slice `s` of `RESID_SPLITS`, at index `t * RESID_SPLITS + s`.
pub(crate) fn resid_tiles(w: &[bf16], n: usize, k: usize) -> Vec<bf16> {
    let mut out = Vec::with_capacity(n * k);
    let ks = k / RESID_SPLITS;
    for t in 0..n / RESID_TILE {
        let rows: Vec<usize> = (t * RESID_TILE..(t + 1) * RESID_TILE).collect();
        for s in 0..RESID_SPLITS {
            push_image(&mut out, w, k, &rows, s * ks, ks);
        }
    }
    out
}

/// The compiled fused kernels and the shared memory each launch takes.
pub(crate) struct FusedKernels {
    pub shape: FusedShape,
    /// Per layer, empty until [`FusedKernels::upload_layers`].
    pub layers: Vec<FusedLayer>,
    norm_qkv: CudaFunction,
    norm_silu: CudaFunction,
    resid_o: CudaFunction,
    resid_down: CudaFunction,
}

/// The fused kernels for `shape` on this device, or `None` where they cannot run.
pub(crate) fn compile_fused(
    ctx: &Arc<CudaContext>,
    shape: FusedShape,
    attention: super::kernels::KernelShape,
) -> Result<Option<FusedKernels>, RunnerError> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let cc = ctx
        .compute_capability()
        .map_err(|e| super::device::dev_err("compute capability", e))?;
    let smem_limit =
        ctx.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(|e| super::device::dev_err("shared memory per block", e))? as usize;
    // wgmma exists on sm_90a only.
    if cc != (9, 0) || shape.unsupported(smem_limit).is_some() {
        return Ok(None);
    }
    let batch = std::env::var("SERVETWIN_FG_BATCH").unwrap_or_else(|_| "4".into());
    let source = format!(
        "#define FG_BATCH {batch}\n#define FG_HIDDEN {}\n#define FG_Q_DIM {}\n#define FG_INTER {}\n#define HEAD_DIM {}\n#define NUM_Q_HEADS {}\n#define NUM_KV_HEADS {}\n{KERNELS_CU}\n{FUSED_GEMM_CU}",
        shape.hidden,
        shape.q_dim,
        shape.inter,
        attention.head_dim,
        attention.num_q_heads,
        attention.num_kv_heads,
    );
    let module = build_module(ctx, source, nvrtc_options("sm_90a"))?;
    let smem = |bytes: usize| Some(bytes as u32);
    // EXPERIMENT: SERVETWIN_FUSED_C1 picks the unclustered normed GEMMs.
    let suffix = if std::env::var_os("SERVETWIN_FUSED_C1").is_some() {
        "c1"
    } else {
        "c4"
    };
    Ok(Some(FusedKernels {
        layers: Vec::new(),
        norm_qkv: load_kernel(
            &module,
            &format!("wg_norm_gemm_qkv_{suffix}"),
            smem(shape.norm_smem(QKV_TILE)),
        )?,
        norm_silu: load_kernel(
            &module,
            &format!("wg_norm_gemm_silu_{suffix}"),
            smem(shape.norm_smem(GATE_UP_TILE)),
        )?,
        resid_o: load_kernel(
            &module,
            "wg_resid_gemm_o",
            smem(shape.resid_smem(shape.q_dim)),
        )?,
        resid_down: load_kernel(
            &module,
            "wg_resid_gemm_down",
            smem(shape.resid_smem(shape.inter)),
        )?,
        shape,
    }))
}

/// Where one normed GEMM reads and writes (device addresses).
pub(crate) struct NormGemm {
    pub resid: u64,
    pub gain: u64,
    pub w: u64,
    pub out: u64,
    pub rows: usize,
}

impl FusedKernels {
    /// Uploads every layer's weights in tile order (about the size of the
    /// layer weights again: 0.88 GB for Qwen3-0.6B).
    pub fn upload_layers(
        &mut self,
        ctx: &Arc<CudaContext>,
        w: &Qwen3Weights,
    ) -> Result<(), RunnerError> {
        let s = self.shape;
        let (h, inter) = (s.hidden, s.inter);
        let cat = |parts: &[&[bf16]]| parts.concat();
        self.layers = w
            .layers
            .iter()
            .map(|l| {
                let qkv = cat(&[&l.q_proj.data, &l.k_proj.data, &l.v_proj.data]);
                let gate_up = cat(&[&l.gate_proj.data, &l.up_proj.data]);
                Ok(FusedLayer {
                    qkv: DeviceBuffer::from_host(
                        ctx,
                        &norm_tiles(&qkv, s.qkv_dim, h, QKV_TILE, false),
                    )?,
                    gate_up: DeviceBuffer::from_host(
                        ctx,
                        &norm_tiles(&gate_up, 2 * inter, h, GATE_UP_TILE, true),
                    )?,
                    o: DeviceBuffer::from_host(ctx, &resid_tiles(&l.o_proj.data, h, s.q_dim))?,
                    down: DeviceBuffer::from_host(ctx, &resid_tiles(&l.down_proj.data, h, inter))?,
                })
            })
            .collect::<Result<_, RunnerError>>()?;
        Ok(())
    }

    /// `out = rmsnorm(resid) · Wᵀ` (QKV, all `qkv_dim` columns).
    pub fn norm_qkv(
        &self,
        s: &CudaStream,
        a: &NormGemm,
        eps: f32,
        pdl: bool,
    ) -> Result<(), RunnerError> {
        let n = self.shape.qkv_dim;
        self.norm(
            s,
            &self.norm_qkv,
            "wg_norm_gemm_qkv",
            n / QKV_TILE,
            n,
            QKV_TILE,
            a,
            eps,
            pdl,
        )
    }

    /// `out = silu(g) · u` with `[g | u] = rmsnorm(resid) · Wᵀ` (W: gate rows, then up rows).
    pub fn norm_silu(
        &self,
        s: &CudaStream,
        a: &NormGemm,
        eps: f32,
        pdl: bool,
    ) -> Result<(), RunnerError> {
        let n = 2 * self.shape.inter;
        let blocks = self.shape.inter / (GATE_UP_TILE / 2);
        self.norm(
            s,
            &self.norm_silu,
            "wg_norm_gemm_silu",
            blocks,
            n,
            GATE_UP_TILE,
            a,
            eps,
            pdl,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn norm(
        &self,
        s: &CudaStream,
        f: &CudaFunction,
        name: &str,
        blocks: usize,
        n: usize,
        tile: usize,
        a: &NormGemm,
        eps: f32,
        pdl: bool,
    ) -> Result<(), RunnerError> {
        check_rows(name, a.rows)?;
        launch_ex(
            s,
            f,
            name,
            (blocks as u32, 1, 1),
            128,
            self.shape.norm_smem(tile) as u32,
            &[
                Arg::Ptr(a.resid),
                Arg::Ptr(a.gain),
                Arg::Ptr(a.w),
                Arg::Ptr(a.out),
                Arg::I32(a.rows as i32),
                Arg::I32(n as i32),
                Arg::F32(eps),
            ],
            pdl,
        )
    }

    /// `resid += x · Wᵀ` for the O projection (`o = true`, x: attention output) or the
    /// down projection (x: silu(gate)·up); `hidden` output columns.
    #[allow(clippy::too_many_arguments)]
    pub fn resid_gemm(
        &self,
        s: &CudaStream,
        o: bool,
        x: u64,
        w: u64,
        resid: u64,
        rows: usize,
        pdl: bool,
    ) -> Result<(), RunnerError> {
        let (f, name, k) = if o {
            (&self.resid_o, "wg_resid_gemm_o", self.shape.q_dim)
        } else {
            (&self.resid_down, "wg_resid_gemm_down", self.shape.inter)
        };
        check_rows(name, rows)?;
        let n = self.shape.hidden;
        launch_ex(
            s,
            f,
            name,
            ((n / RESID_TILE) as u32, RESID_SPLITS as u32, 1),
            128,
            self.shape.resid_smem(k) as u32,
            &[
                Arg::Ptr(x),
                Arg::Ptr(w),
                Arg::Ptr(resid),
                Arg::I32(rows as i32),
                Arg::I32(n as i32),
            ],
            pdl,
        )
    }
}

fn check_rows(name: &str, rows: usize) -> Result<(), RunnerError> {
    if (1..=FUSED_MAX_ROWS).contains(&rows) {
        Ok(())
    } else {
        Err(RunnerError::Model(format!(
            "{name} takes 1-{FUSED_MAX_ROWS} rows, not {rows}"
        )))
    }
}

impl CudaRunner {
    /// The fused kernels when this step takes them: decode-only, at most
    /// `fused_max_rows` tokens, on a device that compiled them.
    pub(super) fn fused_for(&self, lay: &StepLayout) -> Option<&FusedKernels> {
        self.fused.as_ref().filter(|f| {
            lay.is_decode_only() && lay.num_tokens <= self.fused_max_rows && !f.layers.is_empty()
        })
    }

    /// Every layer of a decode-only step through the fused kernels.
    pub(super) fn enqueue_fused_layers(
        &self,
        fk: &FusedKernels,
        lay: &StepLayout,
        step: &StepKnobs,
    ) -> Result<(), RunnerError> {
        let ws = &self.ws;
        let (t, eps, pdl) = (lay.num_tokens, self.cfg.rms_norm_eps as f32, step.pdl);
        let gemms = self.profile_skip & SKIP_GEMM == 0;
        for (li, (lw, fw)) in self.weights.layers.iter().zip(&fk.layers).enumerate() {
            let normed = |gain: u64, w: u64, out: u64| NormGemm {
                resid: ws.resid.ptr,
                gain,
                w,
                out,
                rows: t,
            };
            if gemms {
                let a = normed(lw.input_norm.ptr, fw.qkv.ptr, ws.qkv.ptr);
                fk.norm_qkv(&self.stream, &a, eps, pdl)?;
            }
            self.enqueue_attention(lay, li, step)?;
            if gemms {
                let s = &self.stream;
                fk.resid_gemm(s, true, ws.attn.ptr, fw.o.ptr, ws.resid.ptr, t, pdl)?;
                let a = normed(lw.post_norm.ptr, fw.gate_up.ptr, ws.act.ptr);
                fk.norm_silu(s, &a, eps, pdl)?;
                fk.resid_gemm(s, false, ws.act.ptr, fw.down.ptr, ws.resid.ptr, t, pdl)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen3_0_6b_fits_and_odd_shapes_say_what_to_change() {
        let c = Qwen3Config::preset("qwen3-0.6b").unwrap();
        let s = FusedShape::of(&c);
        // The H200 allows 227 KB per block: 64 + 48 rows of 1,024 bf16 take 224 KB.
        assert_eq!(s.unsupported(232_448), None);
        assert_eq!(s.norm_smem(GATE_UP_TILE), 229_376);
        let small = s.unsupported(200 * 1024).unwrap();
        assert!(small.contains("hidden_size small enough"), "{small}");
        let odd = FusedShape { inter: 3000, ..s };
        assert!(odd.unsupported(232_448).unwrap().contains("% 96"));
        let narrow = FusedShape { hidden: 1000, ..s };
        assert!(narrow
            .unsupported(232_448)
            .unwrap()
            .contains("hidden_size % 64"));
    }
}
