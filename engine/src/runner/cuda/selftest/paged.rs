//! What the attention self-tests share: a batch over a paged cache with
//! shuffled blocks, packed by the runner's own metadata packer, and one
//! decode-attention launch over it.

use super::Ctx;
use crate::request::RequestId;
use crate::runner::cuda::decode::{
    enqueue_decode_attention, scale_log2, DecodeArgs, DecodeKernel, RopeArgs,
};
use crate::runner::cuda::device::{self, DeviceBuffer};
use crate::runner::cuda::meta::{pack_step, BatchLimits, Padding, StepLayout};
use crate::runner::{attention_tile_tokens, RunnerError, ScheduledBatch, ScheduledSeq};
use rand::seq::SliceRandom;

pub(super) const BLOCK_SIZE: usize = 16;
pub(super) const NUM_BLOCKS: usize = 64;

/// Sequences `(start_pos, new tokens)` packed for one step.
pub(super) struct PagedBatch {
    /// Block table of each sequence (shuffled blocks, none shared).
    pub tables: Vec<Vec<u32>>,
    pub lay: StepLayout,
    pub meta: Vec<i32>,
    /// New tokens in all.
    pub tokens: usize,
}

impl PagedBatch {
    pub fn new(
        c: &mut Ctx,
        shapes: &[(usize, usize)],
        max_len: usize,
    ) -> Result<Self, RunnerError> {
        let (nq, nkv) = (c.shape.num_q_heads, c.shape.num_kv_heads);
        let mut perm: Vec<u32> = (1..NUM_BLOCKS as u32).collect();
        perm.shuffle(&mut c.rng);
        let mut tables = Vec::new();
        let mut used = 0;
        for &(s, n) in shapes {
            let b = (s + n).div_ceil(BLOCK_SIZE);
            tables.push(perm[used..used + b].to_vec());
            used += b;
        }
        let tokens: usize = shapes.iter().map(|x| x.1).sum();
        let toks = vec![0u32; tokens];
        let mut seqs = Vec::new();
        let mut row = 0;
        for (i, &(s, n)) in shapes.iter().enumerate() {
            seqs.push(ScheduledSeq {
                request_id: RequestId(i as u64),
                token_ids: &toks[row..row + n],
                start_pos: s,
                block_table: &tables[i],
                samples: true,
            });
            row += n;
        }
        let batch = ScheduledBatch {
            seqs,
            block_size: BLOCK_SIZE,
        };
        let lim = BatchLimits {
            block_size: BLOCK_SIZE,
            num_blocks: NUM_BLOCKS,
            vocab_size: 1,
            max_tokens: 1024,
            max_seqs: 16,
            max_len,
            tokens_per_tile: attention_tile_tokens(nq, nkv),
        };
        let mut meta = vec![0i32; 8192];
        let lay = pack_step(&batch, &lim, Padding::None, &mut meta)?;
        meta.truncate(lay.total);
        Ok(Self {
            tables,
            lay,
            meta,
            tokens,
        })
    }

    /// Enqueues the decode attention of this batch's decodes: q/k/v from
    /// `qkv`, the caches `k_cache`/`v_cache`, output rows into `out`; `meta`
    /// holds [`Self::meta`] on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn decode(
        &self,
        c: &Ctx,
        kernel: DecodeKernel,
        nsplit: usize,
        meta: &DeviceBuffer,
        (qkv, k_cache, v_cache, out): (u64, u64, u64, u64),
        rope: Option<RopeArgs>,
    ) -> Result<(), RunnerError> {
        let (d, nq, nkv) = (c.shape.head_dim, c.shape.num_q_heads, c.shape.num_kv_heads);
        let alloc =
            |n: usize| DeviceBuffer::alloc(&c.ctx, n).map_err(|e| device::dev_err("alloc", e));
        let rows = self.lay.num_decodes.max(1);
        let (po, pml) = (
            alloc(rows * nq * nsplit * d * 4)?,
            alloc(rows * nq * nsplit * 2 * 4)?,
        );
        let a = DecodeArgs {
            qkv,
            k_cache,
            v_cache,
            out,
            meta: meta.ptr,
            decodes: self.lay.decodes,
            block_tables: self.lay.block_tables,
            block_size: BLOCK_SIZE,
            scale_log2: scale_log2(d),
            part_o: po.ptr,
            part_ml: pml.ptr,
            num_decodes: self.lay.num_decodes,
            num_q_heads: nq,
            num_kv_heads: nkv,
            nsplit,
            pdl: false,
            rope,
        };
        enqueue_decode_attention(&c.stream, &c.k, kernel, &a)?;
        // The partial buffers must outlive the kernels that use them.
        device::sync(&c.stream)
    }
}
