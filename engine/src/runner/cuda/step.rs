//! One step on the device: pack and copy the metadata, then replay the decode
//! graph of the batch's bucket (capturing it on first use), or launch the
//! piecewise graphs of its token bucket with the attention between them
//! (piecewise.rs), or enqueue the forward pass eagerly ([`StepPath`]), and
//! wait for the sampled tokens. They need no copy
//! back: `argmax_rows` writes them into page-locked host memory (head.rs),
//! where the host watches for them. Against a copy back and a wait for the
//! stream, that made a step about 5 µs shorter at batch 64 and 13 µs at
//! batch 1 on the H200 (results/h200/step_overheads.txt).

use super::device::{self, copy_dtoh_async, copy_htod_async, dev_err};
use super::meta::{argmax_index, pack_step, Padding, StepLayout};
use super::{CudaRunner, LastStep, GRAPH_BUCKETS, SKIP_HEAD};
use crate::runner::attention_choice::split_count;
use crate::runner::{RunnerError, ScheduledBatch};
use cudarc::driver::{sys, CudaGraph};

/// How a step ran ([`CudaRunner::last_step_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StepPath {
    /// Every kernel launched from the host.
    #[default]
    Eager,
    /// A decode-only batch, from the decode graph of `bucket` sequences.
    DecodeGraph { bucket: usize },
    /// From the piecewise graphs of `bucket` token rows, attention and head eager.
    Piecewise { bucket: usize },
}

impl CudaRunner {
    pub(super) fn kv_layer_ptrs(&self, layer: usize) -> (u64, u64) {
        let k = self.kv.ptr + (2 * layer * self.layer_kv_bytes) as u64;
        (k, k + self.layer_kv_bytes as u64)
    }

    /// Splits of each decode entry's attention ([`split_count`]); the partial
    /// buffers hold `max_seqs * max_splits` (entry, split) rows.
    pub(super) fn decode_splits(&self, n_dec: usize, max_ctx: Option<usize>) -> usize {
        split_count(
            n_dec,
            self.cfg.num_key_value_heads,
            self.decode_kernel_for(n_dec).warps_per_unit(),
            self.tuning.decode_target_warps.max(1),
            max_ctx,
            self.max_splits,
            self.limits.max_seqs * self.max_splits,
        )
    }

    /// [`CudaRunner::graph_buckets`], smallest first, without a `Vec` (`bucket_for` runs every step).
    fn buckets(&self) -> impl Iterator<Item = usize> + '_ {
        GRAPH_BUCKETS
            .iter()
            .copied()
            .filter(|&b| b <= self.limits.max_seqs)
    }

    /// The batch-size buckets that have a decode graph (those up to `max_num_seqs`).
    pub fn graph_buckets(&self) -> Vec<usize> {
        self.buckets().collect()
    }

    pub(super) fn bucket_for(&self, n: usize) -> Option<usize> {
        self.buckets().find(|&b| b >= n)
    }

    /// Captures the decode graph of every batch-size bucket now, then the
    /// piecewise graphs of every token bucket (piecewise.rs), so that no later
    /// step pays for a capture (steps timed in real mode stay uniform). The
    /// decode graphs come first, as before piecewise graphs existed.
    pub fn warm_up_graphs(&mut self) -> Result<(), RunnerError> {
        if !self.use_graphs {
            return Ok(());
        }
        for b in self.graph_buckets() {
            let nsplit = self.decode_splits(b, None);
            if self.graphs.contains_key(&(b, nsplit)) {
                continue;
            }
            // A bucket's offsets do not depend on the block-table stride (the tables come last).
            let graph = self.capture(&StepLayout::new(b, b, b, b, 0, 1), nsplit)?;
            self.graphs.insert((b, nsplit), graph);
        }
        self.warm_up_pieces()
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

    /// The step's one host-to-device copy: the metadata `pack_step` wrote for `lay`.
    pub(super) fn copy_meta(&self, lay: &StepLayout) -> Result<(), RunnerError> {
        copy_htod_async(
            self.ws.meta.ptr,
            &self.meta_host.as_slice()[..lay.total],
            &self.stream,
        )
    }

    pub(super) fn run_step(&mut self, batch: &ScheduledBatch<'_>) -> Result<Vec<u32>, RunnerError> {
        let path = self.path_for(batch);
        let pad = match path {
            StepPath::DecodeGraph { bucket } => Padding::Sequences(bucket),
            StepPath::Piecewise { bucket } => Padding::Tokens(bucket),
            StepPath::Eager => Padding::None,
        };
        let lay = pack_step(batch, &self.limits, pad, self.meta_host.as_mut_slice())?;
        self.copy_meta(&lay)?;
        // Zero keys: `argmax_rows` writes every sampled row's, padded rows too (wait_for_keys).
        self.sampled_host.as_mut_slice()[..lay.num_sampled].fill(0);
        let max_ctx = batch
            .seqs
            .iter()
            .map(|s| s.start_pos + s.token_ids.len())
            .max()
            .unwrap_or(1);
        match path {
            StepPath::DecodeGraph { bucket: b } => {
                let nsplit = self.decode_splits(b, None);
                if !self.graphs.contains_key(&(b, nsplit)) {
                    let graph = self.capture(&lay, nsplit)?;
                    self.graphs.insert((b, nsplit), graph);
                }
                let graph = &self.graphs[&(b, nsplit)];
                graph.launch().map_err(|e| dev_err("graph launch", e))?;
            }
            StepPath::Piecewise { bucket } => {
                self.ensure_pieces(bucket)?;
                let nsplit = self.decode_splits(lay.num_decodes, Some(max_ctx));
                self.launch_piecewise(&lay, bucket, nsplit)?;
            }
            StepPath::Eager => self.enqueue_forward(
                &lay,
                self.decode_splits(lay.num_decodes, Some(max_ctx)),
                false,
            )?,
        }
        let n_real = batch.seqs.iter().filter(|s| s.samples).count();
        self.last = LastStep {
            num_sampled: n_real,
            path,
        };
        if lay.num_sampled == 0 || self.skips(SKIP_HEAD) {
            // Nothing to wait for in host memory: wait for the stream (the next step's packing
            // must not overwrite the metadata before this step's copy has read it).
            device::sync(&self.stream)?;
        } else {
            self.wait_for_keys(lay.num_sampled)?;
        }
        // The argmax keys of the real sequences lead the padded ones (meta.rs).
        Ok(self.sampled_host.as_slice()[..n_real]
            .iter()
            .map(|&key| argmax_index(key))
            .collect())
    }

    /// How `batch` runs: a decode-only batch from its bucket's decode graph,
    /// another from the piecewise graphs of its token bucket, or eagerly
    /// (graphs off, or more tokens than piecewise graphs take).
    fn path_for(&self, batch: &ScheduledBatch<'_>) -> StepPath {
        let decode_only = batch
            .seqs
            .iter()
            .all(|s| s.token_ids.len() == 1 && s.samples);
        let path = if decode_only {
            self.use_graphs
                .then(|| self.bucket_for(batch.seqs.len()))
                .flatten()
                .map(|bucket| StepPath::DecodeGraph { bucket })
        } else {
            self.piece_bucket(batch.num_tokens())
                .map(|bucket| StepPath::Piecewise { bucket })
        };
        path.unwrap_or(StepPath::Eager)
    }

    /// How the last step ran.
    pub fn last_step_path(&self) -> StepPath {
        self.last.path
    }

    /// Waits until `argmax_rows` has written all `n` keys of the step into
    /// host memory (zeroed before the step), checking the stream every few
    /// hundred polls so that a failed step reports its error and a step that
    /// ends without writing one (a row of NaN logits: index 0, as before)
    /// still returns. The last blocks may still be retiring when this
    /// returns; the next step's work queues behind them on the stream. On the
    /// H200 this answered 3–4 µs sooner than waiting for the stream
    /// (docs/performance.md).
    fn wait_for_keys(&self, n: usize) -> Result<(), RunnerError> {
        let keys = self.sampled_host.as_slice().as_ptr();
        let mut spins = 0u32;
        loop {
            // A key's low half holds `u32::MAX - index` (never zero once written), the only half
            // `argmax_index` reads: a 64-bit write seen half-done still yields the right index.
            // SAFETY: in bounds; the device writes these words, hence volatile reads.
            if (0..n).all(|i| unsafe { std::ptr::read_volatile(keys.add(i)) } as u32 != 0) {
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                return Ok(());
            }
            spins += 1;
            if spins.is_multiple_of(256) {
                // SAFETY: the runner's own live stream.
                match unsafe { sys::cuStreamQuery(self.stream.cu_stream()) } {
                    sys::CUresult::CUDA_ERROR_NOT_READY => {}
                    r => return r.result().map_err(|e| dev_err("step", e)),
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Captures the forward pass of `lay` into a graph. With GEMM tuning on
    /// ([`super::CudaTuning::gemm_tuning`]), the GEMM shapes not tuned yet are
    /// noted first and tuned (gemm_lt.rs), so that the graph has their plans.
    fn capture(&self, lay: &StepLayout, nsplit: usize) -> Result<CudaGraph, RunnerError> {
        self.note_gemms(&|| self.enqueue_forward(lay, nsplit, true))?;
        self.gemm.tune_noted();
        Ok(self
            .capture_graph(|| self.enqueue_forward(lay, nsplit, true))?
            .0)
    }

    /// Captures what `enqueue` enqueues without instantiating it, only for
    /// the GEMM shapes it notes (gemm_lt.rs). A graph instantiated and thrown
    /// away here made the one captured after it run 0.08 ms slower at batch
    /// 64 on the H200 (measured while graphs were uploaded at capture;
    /// docs/performance.md); nothing here needs an instance.
    pub(super) fn note_gemms(
        &self,
        enqueue: &dyn Fn() -> Result<(), RunnerError>,
    ) -> Result<(), RunnerError> {
        if !self.gemm.lt.enabled() {
            return Ok(());
        }
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| dev_err("begin graph capture", e))?;
        // Only once capturing: a failed start must not leave every later GEMM noting.
        self.gemm.lt.set_noting(true);
        let enq = enqueue();
        self.gemm.lt.set_noting(false);
        let graph = unsafe { cudarc::driver::result::stream::end_capture(self.stream.cu_stream()) }
            .map_err(|e| dev_err("end graph capture", e))?;
        if !graph.is_null() {
            unsafe { cudarc::driver::result::graph::destroy(graph) }
                .map_err(|e| dev_err("graph destroy", e))?;
        }
        enq
    }

    /// Captures what `enqueue` enqueues into a graph, with what it returned.
    pub(super) fn capture_graph<R>(
        &self,
        enqueue: impl FnOnce() -> Result<R, RunnerError>,
    ) -> Result<(CudaGraph, R), RunnerError> {
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| dev_err("begin graph capture", e))?;
        let enq = enqueue();
        let end = self.stream.end_capture(sys::CUgraphInstantiate_flags(0));
        let out = enq?;
        let graph = end
            .map_err(|e| dev_err("end graph capture", e))?
            .ok_or_else(|| RunnerError::Device {
                what: "end graph capture".into(),
                source: "the capture produced no graph".into(),
            })?;
        // Not uploaded here (`cuGraphUpload`): on the H200, once a few graphs had been uploaded
        // at capture, the later ones ran about 5 % slower at every launch (batch 64 with all 13
        // buckets captured: 1.70 ms a step uploaded, 1.62 left to its first launch;
        // docs/performance.md). The first launch uploads it instead.
        Ok((graph, out))
    }
}
