//! Synthetic weights made on the GPU: each device tensor, in the runner's
//! fused layouts, filled by a kernel (synthetic.cu) with exactly the bits the
//! host generator ([`crate::model::synthetic`]) gives, and no host tensors.
//!
//! Contract: [`generate`] returns the same [`DeviceWeights`] that
//! [`super::weights::upload`] makes from `Qwen3Weights::synthetic(cfg, seed)`:
//! the fused QKV buffer holds q_proj's rows, then k_proj's, then v_proj's, and
//! gate-up holds gate_proj's rows then up_proj's, each part filled from its own
//! tensor's stream. [`synthetic_weights_self_test`] checks this on a device
//! (whole tensors of a small model, a large tensor of Qwen3-32B's shape, and
//! indices beyond 2^32), bit for bit.

use super::device::{self, dev_err, launch, Arg, DeviceBuffer};
use super::weights::{rope_table, DeviceLayer, DeviceWeights};
use super::KernelCheck;
use crate::model::synthetic::{TensorStream, IRWIN_HALL_UNIT};
use crate::model::{tensor_specs, HostTensor, Qwen3Config, Qwen3Weights};
use crate::runner::RunnerError;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use half::bf16;
use std::collections::HashMap;
use std::sync::Arc;

const SYNTHETIC_CU: &str = include_str!("synthetic.cu");

/// Threads per block, and the most blocks of a fill (grid-stride beyond).
const THREADS: u32 = 256;
const MAX_BLOCKS: u64 = 4096;

/// The compiled fill kernel (its own small module: it needs no model shape).
pub(crate) struct SyntheticKernel {
    fill: CudaFunction,
}

impl SyntheticKernel {
    pub fn compile(ctx: &Arc<CudaContext>) -> Result<Self, RunnerError> {
        let arch = super::kernels::device_arch(ctx)?;
        let opts = CompileOptions {
            arch: Some(arch),
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(SYNTHETIC_CU, opts).map_err(|e| RunnerError::Compile {
            message: "synthetic.cu".into(),
            log: format!("{e:?}"),
        })?;
        let module = ctx.load_module(ptx).map_err(|e| RunnerError::Compile {
            message: format!("loading synthetic.cu's module: {e:?}"),
            log: String::new(),
        })?;
        let fill = module
            .load_function("synthetic_fill")
            .map_err(|e| RunnerError::Compile {
                message: format!("kernel synthetic_fill missing from the module: {e:?}"),
                log: String::new(),
            })?;
        Ok(Self { fill })
    }

    /// Writes elements `start .. start + n` of `stream`'s tensor at `dst` (bf16).
    pub fn fill(
        &self,
        stream: &CudaStream,
        dst: u64,
        n: usize,
        start: u64,
        tensor: &TensorStream,
    ) -> Result<(), RunnerError> {
        if n == 0 {
            return Ok(());
        }
        let blocks = (n as u64).div_ceil(THREADS as u64).min(MAX_BLOCKS) as u32;
        let args = [
            Arg::Ptr(dst),
            Arg::I64(n as i64),
            Arg::I64(start as i64),
            // The key's bits, as the kernel's unsigned 64-bit parameter.
            Arg::I64(tensor.key as i64),
            Arg::F32(IRWIN_HALL_UNIT),
            Arg::F32(tensor.mean),
            Arg::F32(tensor.std),
        ];
        launch(
            stream,
            &self.fill,
            "synthetic_fill",
            (blocks, 1, 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// Allocates one device buffer per runner tensor and fills it; counts bytes.
struct Filler<'a> {
    ctx: &'a Arc<CudaContext>,
    stream: &'a CudaStream,
    kernel: SyntheticKernel,
    shapes: HashMap<String, Vec<usize>>,
    seed: u64,
    bytes: usize,
}

impl Filler<'_> {
    /// One buffer holding the named tensors' rows one after another.
    fn rows(&mut self, names: &[String]) -> Result<DeviceBuffer, RunnerError> {
        let mut parts = Vec::with_capacity(names.len());
        for name in names {
            let shape = self
                .shapes
                .get(name)
                .ok_or_else(|| RunnerError::Model(format!("tensor {name}: not in the model")))?;
            parts.push((
                TensorStream::new(self.seed, name, shape),
                shape.iter().product(),
            ));
        }
        let total: usize = parts.iter().map(|(_, n)| n).sum();
        let buf = DeviceBuffer::alloc(self.ctx, total * 2).map_err(|e| dev_err("alloc", e))?;
        let mut offset = 0usize;
        for (tensor, n) in &parts {
            let dst = buf.ptr + (offset * 2) as u64;
            self.kernel.fill(self.stream, dst, *n, 0, tensor)?;
            offset += n;
        }
        self.bytes += total * 2;
        Ok(buf)
    }

    fn one(&mut self, name: &str) -> Result<DeviceBuffer, RunnerError> {
        self.rows(&[name.to_string()])
    }
}

/// The device weights of `Qwen3Weights::synthetic(cfg, seed)`, made on the GPU.
pub(crate) fn generate(
    ctx: &Arc<CudaContext>,
    stream: &CudaStream,
    cfg: &Qwen3Config,
    seed: u64,
    rope_positions: usize,
) -> Result<DeviceWeights, RunnerError> {
    let mut f = Filler {
        ctx,
        stream,
        kernel: SyntheticKernel::compile(ctx)?,
        shapes: tensor_specs(cfg).into_iter().collect(),
        seed,
        bytes: 0,
    };
    let embed = f.one("model.embed_tokens.weight")?;
    let lm_head = if cfg.tie_word_embeddings {
        None
    } else {
        Some(f.one("lm_head.weight")?)
    };
    let final_norm = f.one("model.norm.weight")?;
    let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
    for i in 0..cfg.num_hidden_layers {
        let n = |suffix: &str| format!("model.layers.{i}.{suffix}");
        layers.push(DeviceLayer {
            input_norm: f.one(&n("input_layernorm.weight"))?,
            post_norm: f.one(&n("post_attention_layernorm.weight"))?,
            q_norm: f.one(&n("self_attn.q_norm.weight"))?,
            k_norm: f.one(&n("self_attn.k_norm.weight"))?,
            qkv: f.rows(&[
                n("self_attn.q_proj.weight"),
                n("self_attn.k_proj.weight"),
                n("self_attn.v_proj.weight"),
            ])?,
            o: f.one(&n("self_attn.o_proj.weight"))?,
            gate_up: f.rows(&[n("mlp.gate_proj.weight"), n("mlp.up_proj.weight")])?,
            down: f.one(&n("mlp.down_proj.weight"))?,
        });
    }
    device::sync(stream)?;
    let (cos_h, sin_h) = rope_table(cfg.head_dim, cfg.rope_theta, rope_positions);
    Ok(DeviceWeights {
        embed,
        lm_head,
        final_norm,
        layers,
        cos: DeviceBuffer::from_host(ctx, &cos_h)?,
        sin: DeviceBuffer::from_host(ctx, &sin_h)?,
        rope_positions,
        bytes: f.bytes,
    })
}

/// Device bits against host bits: the count of differing values is the error.
fn bitwise(name: &str, got: &[bf16], want: &[bf16]) -> KernelCheck {
    let differ = got
        .iter()
        .zip(want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count()
        + got.len().abs_diff(want.len());
    let (mut max_abs, mut num, mut den) = (0.0f64, 0.0f64, 0.0f64);
    for (g, w) in got.iter().zip(want) {
        let d = (g.to_f64() - w.to_f64()).abs();
        max_abs = max_abs.max(d);
        num += d * d;
        den += w.to_f64() * w.to_f64();
    }
    KernelCheck {
        name: format!("synthetic weights: {name}"),
        max_abs_err: max_abs,
        rel_l2_err: (num / den.max(1e-30)).sqrt(),
        pass: differ == 0 && !want.is_empty(),
        note: format!(
            "{} values, {differ} differ from the host generator",
            want.len()
        ),
    }
}

fn download(stream: &CudaStream, buf: &DeviceBuffer, n: usize) -> Result<Vec<bf16>, RunnerError> {
    let mut h = vec![bf16::ZERO; n];
    device::copy_dtoh_async(&mut h, buf.ptr, stream)?;
    device::sync(stream)?;
    Ok(h)
}

fn concat(parts: &[&HostTensor]) -> Vec<bf16> {
    parts.iter().flat_map(|t| t.data.iter().copied()).collect()
}

/// Device generation against the host generator on device 0, bit for bit:
/// every runner tensor of a small untied model (fused QKV and gate-up
/// included), a whole down_proj of Qwen3-32B's shape (131 M values), and
/// 4,096 values past index 3·2^32. An error becomes one failed entry.
pub fn synthetic_weights_self_test(seed: u64) -> Vec<KernelCheck> {
    match self_test(seed) {
        Ok(checks) => checks,
        Err(e) => vec![KernelCheck {
            name: "synthetic weights".into(),
            max_abs_err: f64::NAN,
            rel_l2_err: f64::NAN,
            pass: false,
            note: e.to_string(),
        }],
    }
}

fn self_test(seed: u64) -> Result<Vec<KernelCheck>, RunnerError> {
    let (ctx, stream) = device::open_device(0)?;
    let cfg = Qwen3Config {
        tie_word_embeddings: false,
        num_hidden_layers: 3,
        ..Qwen3Config::tiny()
    };
    let dw = generate(&ctx, &stream, &cfg, seed, 64)?;
    let host = Qwen3Weights::synthetic(&cfg, seed);
    let mut out = Vec::new();
    let mut check = |name: &str, buf: &DeviceBuffer, want: Vec<bf16>| -> Result<(), RunnerError> {
        out.push(bitwise(name, &download(&stream, buf, want.len())?, &want));
        Ok(())
    };
    check("embed_tokens", &dw.embed, host.embed_tokens.data.clone())?;
    if let (Some(d), Some(h)) = (&dw.lm_head, &host.lm_head) {
        check("lm_head", d, h.data.clone())?;
    }
    check("norm", &dw.final_norm, host.norm.data.clone())?;
    for (i, (d, h)) in dw.layers.iter().zip(&host.layers).enumerate() {
        check(
            &format!("layer {i} input_layernorm"),
            &d.input_norm,
            h.input_layernorm.data.clone(),
        )?;
        check(
            &format!("layer {i} post_attention_layernorm"),
            &d.post_norm,
            h.post_attention_layernorm.data.clone(),
        )?;
        check(
            &format!("layer {i} q_norm"),
            &d.q_norm,
            h.q_norm.data.clone(),
        )?;
        check(
            &format!("layer {i} k_norm"),
            &d.k_norm,
            h.k_norm.data.clone(),
        )?;
        check(
            &format!("layer {i} fused qkv"),
            &d.qkv,
            concat(&[&h.q_proj, &h.k_proj, &h.v_proj]),
        )?;
        check(&format!("layer {i} o_proj"), &d.o, h.o_proj.data.clone())?;
        check(
            &format!("layer {i} fused gate_up"),
            &d.gate_up,
            concat(&[&h.gate_proj, &h.up_proj]),
        )?;
        check(
            &format!("layer {i} down_proj"),
            &d.down,
            h.down_proj.data.clone(),
        )?;
    }
    let kernel = SyntheticKernel::compile(&ctx)?;
    let big = Qwen3Config::qwen3_32b();
    let big_name = "model.layers.63.mlp.down_proj.weight";
    let big_shape = [big.hidden_size, big.intermediate_size];
    let far_name = "model.embed_tokens.weight";
    let far_shape = [big.vocab_size, big.hidden_size];
    for (label, name, shape, start, n) in [
        (
            "qwen3-32b layer 63 down_proj",
            big_name,
            &big_shape,
            0u64,
            big_shape[0] * big_shape[1],
        ),
        (
            "values past index 3 * 2^32",
            far_name,
            &far_shape,
            (3u64 << 32) + 12_345,
            4096,
        ),
    ] {
        let tensor = TensorStream::new(seed, name, shape);
        let buf = DeviceBuffer::alloc(&ctx, n * 2).map_err(|e| dev_err("alloc", e))?;
        kernel.fill(&stream, buf.ptr, n, start, &tensor)?;
        let got = download(&stream, &buf, n)?;
        let mut want = vec![bf16::ZERO; n];
        tensor.fill(start, &mut want);
        out.push(bitwise(label, &got, &want));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::{weight_bytes, Precision};

    /// The whole of Qwen3-32B (65.5 GB) generated on device 0; run with
    /// `--ignored` on a GPU with the memory. Prints how long it took.
    #[test]
    #[ignore]
    fn generates_qwen3_32b_on_the_device() {
        let (ctx, stream) = device::open_device(0).unwrap();
        let cfg = Qwen3Config::qwen3_32b();
        let t0 = std::time::Instant::now();
        let dw = generate(&ctx, &stream, &cfg, 3, 4096).unwrap();
        eprintln!(
            "qwen3-32b: {} bytes generated in {:.2} s",
            dw.bytes,
            t0.elapsed().as_secs_f64()
        );
        assert_eq!(dw.bytes as u64, weight_bytes(&cfg, Precision::BF16));
        // The last layer's up_proj rows, the second half of its fused gate-up buffer.
        let (inter, h) = (cfg.intermediate_size, cfg.hidden_size);
        let up_rows = download(&stream, &dw.layers[63].gate_up, 2 * inter * h).unwrap();
        let name = "model.layers.63.mlp.up_proj.weight";
        let up = TensorStream::new(3, name, &[inter, h]);
        let n = 1 << 20;
        let mut want = vec![bf16::ZERO; n];
        up.fill((inter * h - n) as u64, &mut want);
        assert_eq!(&up_rows[2 * inter * h - n..], &want[..]);
    }
}
