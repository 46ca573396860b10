//! The CPU runner's paged KV cache: for each layer, K and V for
//! `num_blocks * block_size` slots, each slot `kv_size` f32 values
//! (`num_key_value_heads * head_dim`, head-major within the slot).
//!
//! Position `p` of a sequence lives in slot
//! `block_table[p / block_size] * block_size + p % block_size`.

pub(super) struct PagedKv {
    block_size: usize,
    kv_size: usize,
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
}

impl PagedKv {
    pub(super) fn new(layers: usize, num_blocks: usize, block_size: usize, kv_size: usize) -> Self {
        let slots = num_blocks * block_size * kv_size;
        Self {
            block_size,
            kv_size,
            k: vec![vec![0.0; slots]; layers],
            v: vec![vec![0.0; slots]; layers],
        }
    }

    /// Slot of position `pos` under `block_table`; the batch was validated, so
    /// the table covers `pos` and its block ids are in range.
    pub(super) fn slot(&self, block_table: &[u32], pos: usize) -> usize {
        block_table[pos / self.block_size] as usize * self.block_size + pos % self.block_size
    }

    pub(super) fn write(&mut self, layer: usize, slot: usize, k: &[f32], v: &[f32]) {
        let range = slot * self.kv_size..(slot + 1) * self.kv_size;
        self.k[layer][range.clone()].copy_from_slice(k);
        self.v[layer][range].copy_from_slice(v);
    }

    pub(super) fn kv_size(&self) -> usize {
        self.kv_size
    }

    /// Every slot's K of `layer`, slot-major.
    pub(super) fn keys(&self, layer: usize) -> &[f32] {
        &self.k[layer]
    }

    /// Every slot's V of `layer`, slot-major.
    pub(super) fn values(&self, layer: usize) -> &[f32] {
        &self.v[layer]
    }
}
