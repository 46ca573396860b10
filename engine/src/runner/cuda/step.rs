//! One step on the device: pack and copy the metadata, then replay the decode
//! graph of the batch's bucket (capturing it on first use) or enqueue the
//! forward pass eagerly; copy the sampled tokens back.

use super::device::{self, copy_dtoh_async, copy_htod_async, dev_err};
use super::meta::{argmax_index, pack_step, StepLayout};
use super::{CudaRunner, LastStep, DECODE_MIN_KEYS_PER_SPLIT, GRAPH_BUCKETS};
use crate::runner::{RunnerError, ScheduledBatch};
use cudarc::driver::{sys, CudaGraph};

impl CudaRunner {
    pub(super) fn kv_layer_ptrs(&self, layer: usize) -> (u64, u64) {
        let k = self.kv.ptr + (2 * layer * self.layer_kv_bytes) as u64;
        (k, k + self.layer_kv_bytes as u64)
    }

    /// Splits of each sequence's decode attention: enough warps in all to
    /// fill the GPU; in eager steps also no fewer than
    /// `DECODE_MIN_KEYS_PER_SPLIT` keys per warp of a split. A graph's split
    /// count depends on its batch size alone, since the kernel divides each
    /// context at run time.
    fn decode_splits(&self, n_dec: usize, max_ctx: Option<usize>) -> usize {
        let wpu = self.decode_kernel_for(n_dec).warps_per_unit();
        let units = (n_dec * self.cfg.num_key_value_heads * wpu).max(1);
        let mut n = self.decode_target_warps.div_ceil(units);
        if let Some(ctx) = max_ctx {
            n = n.min(ctx.div_ceil(DECODE_MIN_KEYS_PER_SPLIT * wpu));
        }
        n.clamp(1, self.max_splits)
    }

    fn bucket_for(&self, n: usize) -> Option<usize> {
        GRAPH_BUCKETS
            .iter()
            .copied()
            .find(|&b| b >= n && b <= self.limits.max_seqs)
    }

    /// Captures the decode graph of every batch-size bucket now, so that no
    /// later step pays for a capture (steps timed in real mode stay uniform).
    pub fn warm_up_graphs(&mut self) -> Result<(), RunnerError> {
        if !self.use_graphs {
            return Ok(());
        }
        let buckets: Vec<usize> = GRAPH_BUCKETS
            .iter()
            .copied()
            .filter(|&b| b <= self.limits.max_seqs)
            .collect();
        for b in buckets {
            let nsplit = self.decode_splits(b, None);
            if self.graphs.contains_key(&(b, nsplit)) {
                continue;
            }
            // A bucket's offsets do not depend on the block-table stride (the tables come last).
            let graph = self.capture(&StepLayout::new(b, b, b, b, 0, 1), nsplit)?;
            self.graphs.insert((b, nsplit), graph);
        }
        Ok(())
    }

    /// Logits (fp32, `[vocab]` each) of the sequences that sampled in the last
    /// step, in batch order. Copies from the device: not for the hot path.
    pub fn last_logits(&self) -> Result<Vec<Vec<f32>>, RunnerError> {
        let (n, v) = (self.last.num_sampled, self.cfg.vocab_size);
        let mut host = vec![0f32; n * v];
        copy_dtoh_async(&mut host, self.ws.logits.ptr, &self.stream)?;
        device::sync(&self.stream)?;
        Ok(host.chunks(v.max(1)).map(|c| c.to_vec()).collect())
    }

    pub(super) fn run_step(&mut self, batch: &ScheduledBatch<'_>) -> Result<Vec<u32>, RunnerError> {
        let decode_only = batch
            .seqs
            .iter()
            .all(|s| s.token_ids.len() == 1 && s.samples);
        let bucket = if self.use_graphs && decode_only {
            self.bucket_for(batch.seqs.len())
        } else {
            None
        };
        let lay = pack_step(batch, &self.limits, bucket, self.meta_host.as_mut_slice())?;
        copy_htod_async(
            self.ws.meta.ptr,
            &self.meta_host.as_slice()[..lay.total],
            &self.stream,
        )?;
        let max_ctx = batch
            .seqs
            .iter()
            .map(|s| s.start_pos + s.token_ids.len())
            .max()
            .unwrap_or(1);
        match bucket {
            Some(b) => {
                let nsplit = self.decode_splits(b, None);
                if !self.graphs.contains_key(&(b, nsplit)) {
                    let graph = self.capture(&lay, nsplit)?;
                    self.graphs.insert((b, nsplit), graph);
                }
                let graph = &self.graphs[&(b, nsplit)];
                graph.launch().map_err(|e| dev_err("graph launch", e))?;
            }
            None => {
                self.enqueue_forward(&lay, self.decode_splits(lay.num_decodes, Some(max_ctx)))?
            }
        }
        let n_real = batch.seqs.iter().filter(|s| s.samples).count();
        self.last = LastStep {
            num_sampled: n_real,
        };
        if n_real == 0 {
            device::sync(&self.stream)?;
            return Ok(Vec::new());
        }
        // The argmax keys of the real sequences lead the padded ones (meta.rs).
        let out = &mut self.sampled_host.as_mut_slice()[..n_real];
        copy_dtoh_async(out, self.ws.meta.ptr + 4 * lay.argmax as u64, &self.stream)?;
        device::sync(&self.stream)?;
        Ok(self.sampled_host.as_slice()[..n_real]
            .iter()
            .map(|&key| argmax_index(key))
            .collect())
    }

    fn capture(&self, lay: &StepLayout, nsplit: usize) -> Result<CudaGraph, RunnerError> {
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| dev_err("begin graph capture", e))?;
        let enq = self.enqueue_forward(lay, nsplit);
        let end = self.stream.end_capture(sys::CUgraphInstantiate_flags(0));
        enq?;
        let graph = end
            .map_err(|e| dev_err("end graph capture", e))?
            .ok_or_else(|| RunnerError::Device("graph capture produced no graph".into()))?;
        graph.upload().map_err(|e| dev_err("graph upload", e))?;
        Ok(graph)
    }
}
