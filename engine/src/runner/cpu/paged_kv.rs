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

    /// K and V of positions `0..len` as contiguous `[len, kv_size]` arrays.
    pub(super) fn gather(
        &self,
        layer: usize,
        block_table: &[u32],
        len: usize,
    ) -> (Vec<f32>, Vec<f32>) {
        let mut k = Vec::with_capacity(len * self.kv_size);
        let mut v = Vec::with_capacity(len * self.kv_size);
        for pos in 0..len {
            let start = self.slot(block_table, pos) * self.kv_size;
            k.extend_from_slice(&self.k[layer][start..start + self.kv_size]);
            v.extend_from_slice(&self.v[layer][start..start + self.kv_size]);
        }
        (k, v)
    }
}
