//! Decode attention: the kernel choices and their one launch path, shared by
//! the forward pass and the kernel self-test. A unit of work is one (decode
//! sequence, KV head, split); with more than one split per sequence the
//! partial results are merged by `attn_combine`.

use super::device::{launch_ex, Arg};
use super::kernels::Kernels;
use crate::runner::RunnerError;
use cudarc::driver::{CudaFunction, CudaStream};

pub use crate::runner::attention_choice::DecodeKernel;
use crate::runner::attention_choice::DecodeLayout;

/// The compiled kernel of `kernel` with the fused q/k-norm + RoPE + cache
/// write, if it has one.
fn rope_function(kernel: DecodeKernel, k: &Kernels) -> Option<&CudaFunction> {
    match kernel {
        DecodeKernel::Prefetch8 => None,
        DecodeKernel::BlockW4U4 => Some(&k.attn_decode_block_w4u4_rope),
        DecodeKernel::BlockW8U4 => Some(&k.attn_decode_block_w8u4_rope),
        DecodeKernel::HeadsU4 => Some(&k.attn_decode_heads_u4_rope),
    }
}

/// The compiled kernel of `kernel`.
fn function(kernel: DecodeKernel, k: &Kernels) -> &CudaFunction {
    match kernel {
        DecodeKernel::Prefetch8 => &k.attn_decode,
        DecodeKernel::BlockW4U4 => &k.attn_decode_block_w4u4,
        DecodeKernel::BlockW8U4 => &k.attn_decode_block_w8u4,
        DecodeKernel::HeadsU4 => &k.attn_decode_heads_u4,
    }
}

/// `log2(e) / sqrt(head_dim)`: the attention kernels' softmax scale (they
/// take exponentials in base 2).
pub(crate) fn scale_log2(head_dim: usize) -> f32 {
    (1.0 / (head_dim as f64).sqrt() * std::f64::consts::LOG2_E) as f32
}

/// Device addresses and sizes of one decode-attention launch. `meta` is the
/// step metadata; the offsets are those of its `StepLayout`.
pub(crate) struct DecodeArgs {
    pub qkv: u64,
    pub k_cache: u64,
    pub v_cache: u64,
    pub out: u64,
    pub meta: u64,
    /// Offset of the decode entries (sequence, token row, keys) in the metadata.
    pub decodes: usize,
    pub block_tables: usize,
    pub block_size: usize,
    pub scale_log2: f32,
    pub part_o: u64,
    pub part_ml: u64,
    pub num_decodes: usize,
    pub num_q_heads: usize,
    pub num_kv_heads: usize,
    pub nsplit: usize,
    /// Launch as programmatic dependent launches ([`launch_ex`]).
    pub pdl: bool,
    /// Do q/k-norm + RoPE + the cache write of the new tokens too (decode-only
    /// steps; the kernel must [`DecodeKernel::fuses_rope`]).
    pub rope: Option<RopeArgs>,
}

/// The inputs of `qk_norm_rope_cache` that a fused decode kernel takes.
pub(crate) struct RopeArgs {
    pub q_norm: u64,
    pub k_norm: u64,
    pub cos: u64,
    pub sin: u64,
    /// Offset of the KV slots in the step metadata.
    pub slots: usize,
    pub max_pos: usize,
    pub eps: f32,
}

/// Enqueues the decode attention of `a.num_decodes` sequences (and the split
/// merge when `a.nsplit > 1`) on `stream`.
pub(crate) fn enqueue_decode_attention(
    stream: &CudaStream,
    k: &Kernels,
    kernel: DecodeKernel,
    a: &DecodeArgs,
) -> Result<(), RunnerError> {
    if a.num_decodes == 0 {
        return Ok(());
    }
    let m = |off: usize| Arg::Ptr(a.meta + 4 * off as u64);
    let units = a.num_decodes * a.num_kv_heads * a.nsplit;
    let (blocks, threads) = kernel.grid(a.num_decodes, a.num_kv_heads, a.nsplit);
    let mut args = vec![
        Arg::Ptr(a.qkv),
        Arg::Ptr(a.k_cache),
        Arg::Ptr(a.v_cache),
        Arg::Ptr(a.out),
        m(a.decodes),
        m(a.block_tables),
        m(0),
        Arg::I32(a.block_size as i32),
        Arg::F32(a.scale_log2),
        Arg::Ptr(a.part_o),
        Arg::Ptr(a.part_ml),
        Arg::I32(a.nsplit as i32),
        // Units for the warp kernel, blocks for the others.
        Arg::I32(if kernel.layout() == DecodeLayout::WarpPerUnit {
            units
        } else {
            blocks
        } as i32),
    ];
    let f = match &a.rope {
        None => function(kernel, k),
        Some(r) => {
            args.extend([
                Arg::Ptr(r.q_norm),
                Arg::Ptr(r.k_norm),
                Arg::Ptr(r.cos),
                Arg::Ptr(r.sin),
                m(r.slots),
                Arg::I32(r.max_pos as i32),
                Arg::F32(r.eps),
            ]);
            rope_function(kernel, k).ok_or_else(|| {
                RunnerError::Model(format!("decode kernel {kernel:?} does not fuse RoPE"))
            })?
        }
    };
    launch_ex(
        stream,
        f,
        "attn_decode",
        (blocks as u32, 1, 1),
        threads as u32,
        0,
        &args,
        a.pdl,
    )?;
    if a.nsplit == 1 {
        return Ok(());
    }
    launch_ex(
        stream,
        &k.attn_combine,
        "attn_combine",
        (a.num_decodes as u32, a.num_q_heads as u32, 1),
        128,
        0,
        &[
            Arg::Ptr(a.part_o),
            Arg::Ptr(a.part_ml),
            Arg::Ptr(a.out),
            m(a.decodes),
            Arg::I32(a.nsplit as i32),
        ],
        a.pdl,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_size_picks_the_kernel_and_unsupported_shapes_fall_back() {
        // Qwen3-0.6B: head_dim 128, 16 query heads over 8 KV heads.
        assert_eq!(
            DecodeKernel::for_batch(1, 128, 2, 8),
            DecodeKernel::BlockW8U4
        );
        assert_eq!(
            DecodeKernel::for_batch(64, 128, 2, 8),
            DecodeKernel::BlockW4U4
        );
        assert_eq!(
            DecodeKernel::for_batch(256, 128, 2, 8),
            DecodeKernel::HeadsU4
        );
        // 8 warps x 64 query heads per KV head x 258 x 4 B is past 48 KB of shared memory.
        assert!(!DecodeKernel::BlockW8U4.supports(256, 64, 1));
        assert_eq!(
            DecodeKernel::for_batch(1, 256, 64, 1),
            DecodeKernel::Prefetch8
        );
        // 33 KV heads would need 33 warps in one block.
        assert!(!DecodeKernel::HeadsU4.supports(128, 1, 33));
        assert!(DecodeKernel::ALL.iter().all(|k| k.supports(128, 2, 8)));
    }

    #[test]
    fn every_kernel_takes_every_group_of_the_family() {
        for group in [2, 3, 4, 5, 8] {
            for k in DecodeKernel::ALL {
                assert!(k.supports(128, group, 8), "{k:?} group {group}");
            }
            // So the batch size alone picks the kernel.
            assert_eq!(
                DecodeKernel::for_batch(1, 128, group, 8),
                DecodeKernel::BlockW8U4
            );
            assert_eq!(
                DecodeKernel::for_batch(256, 128, group, 8),
                DecodeKernel::HeadsU4
            );
        }
        // 8 warps x 12 heads x 130 x 4 B = 49,920 B: past 48 KB, 4 warps fit.
        assert!(!DecodeKernel::BlockW8U4.supports(128, 12, 8));
        assert!(DecodeKernel::BlockW4U4.supports(128, 12, 8));
        assert_eq!(
            DecodeKernel::for_batch(1, 128, 12, 8),
            DecodeKernel::Prefetch8
        );
    }

    #[test]
    fn a_kernel_is_named_as_its_variant() {
        for k in DecodeKernel::ALL {
            assert_eq!(k.name(), format!("{k:?}"));
        }
    }
}
