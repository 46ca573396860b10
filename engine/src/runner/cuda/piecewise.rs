//! Piecewise CUDA graphs: steps that are not decode-only (prefill chunks,
//! prefill chunks beside decodes) run from graphs too, so that their time is
//! the GPU's and not the host's launches (about 11 kernels a layer, 4–7 µs
//! each eagerly).
//!
//! A step of `T` tokens is padded to a token bucket `Tb` ([`token_bucket`]:
//! the GEMMs' row classes, which they pad to anyway). Everything between two
//! attentions is captured once per bucket: piece 0 is layer 0's front (norm
//! with the embedding gather, QKV product, q/k-norm + RoPE + KV write),
//! piece `l` (1 ≤ l < L) layer `l - 1`'s back (O product, residual norm,
//! gate-up, SiLU·mul, down) and layer `l`'s front, piece `L` the last
//! layer's back: `L + 1` graphs (forward.rs's `enqueue_layer_front` and
//! `enqueue_layer_back`). The attention kernels, whose grids depend on the
//! step's composition, and the head (final norm, LM head and argmax of the
//! sampled rows) are launched eagerly between and after them.
//!
//! Contract: the pieces read only the metadata's token sections, whose
//! offsets depend on `Tb` alone (meta.rs [`TokenRows`]); padding rows carry
//! token 0, position 0 and slot -1, so they write no KV, and no kernel
//! reads their outputs (attention and the head see the real rows only;
//! every other kernel works row by row). A captured bucket is therefore
//! valid for every step padded to it. Residual products split over K by
//! the graphed rule (linear.rs), and the pieces' GEMM shapes are noted and
//! tuned before capture as the decode graphs' are (gemm_lt.rs).
//! [`CudaTuning::piecewise_graphs`](super::CudaTuning) turns them off (every
//! such step eager, as before), and
//! [`CudaTuning::piecewise_max_tokens`](super::CudaTuning) bounds the steps
//! that use them; [`CudaRunner::warm_up_graphs`] captures every bucket.

mod check;
#[cfg(test)]
mod tests;

pub use check::piecewise_self_test;

use super::device::dev_err;
use super::linear::Delta;
use super::meta::{StepLayout, TokenRows};
use super::CudaRunner;
use crate::runner::{gemm_padded_rows, RunnerError};
use cudarc::driver::CudaGraph;

/// The smallest token bucket: the most rows for which the skinny kernel
/// beats cuBLAS on Qwen3-0.6B's QKV product (linear.rs), which the next
/// bucket (16) would hand to cuBLAS.
const SMALLEST_BUCKET: usize = 8;

/// The token bucket of a step of `t` tokens: [`SMALLEST_BUCKET`], then the
/// GEMMs' row classes ([`gemm_padded_rows`]: multiples of 16 up to 64, of 64
/// beyond), at most `max_tokens` (the largest step, which the workspace and
/// metadata are sized for). `None` (the step runs eagerly) past `limit`
/// tokens or the runner's `max_tokens`, or for an empty step.
pub(crate) fn token_bucket(t: usize, max_tokens: usize, limit: usize) -> Option<usize> {
    if t == 0 || t > limit || t > max_tokens {
        return None;
    }
    let b = if t <= SMALLEST_BUCKET {
        SMALLEST_BUCKET
    } else {
        gemm_padded_rows(t)
    };
    Some(b.min(max_tokens))
}

/// Every token bucket of steps of up to `limit` tokens, smallest first.
pub(crate) fn token_buckets(max_tokens: usize, limit: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut t = 1;
    while let Some(b) = token_bucket(t, max_tokens, limit) {
        out.push(b);
        t = b + 1;
    }
    out
}

/// What piece `p` of a model of `layers` layers holds: the back of a layer
/// (its O product to its down product), then the front of the next (its
/// input norm to its KV write), as in the module docs.
pub(crate) fn piece_parts(p: usize, layers: usize) -> (Option<usize>, Option<usize>) {
    (p.checked_sub(1), (p < layers).then_some(p))
}

/// The captured pieces of one token bucket.
pub(crate) struct PieceGraphs {
    /// `num_layers + 1` graphs, in launch order (module docs).
    graphs: Vec<CudaGraph>,
    /// How the last piece left the last layer's output, for the head's norm.
    head_delta: Delta,
}

impl CudaRunner {
    /// The token bucket of a step of `t` tokens that is not decode-only, if
    /// it runs piecewise-graphed (graphs on, piecewise graphs on, `t` within
    /// the limit).
    pub(super) fn piece_bucket(&self, t: usize) -> Option<usize> {
        if !(self.use_graphs && self.tuning.piecewise_graphs) {
            return None;
        }
        token_bucket(t, self.limits.max_tokens, self.tuning.piecewise_max_tokens)
    }

    /// The token buckets that have piecewise graphs (none with them off).
    pub fn piece_buckets(&self) -> Vec<usize> {
        if !(self.use_graphs && self.tuning.piecewise_graphs) {
            return Vec::new();
        }
        token_buckets(self.limits.max_tokens, self.tuning.piecewise_max_tokens)
    }

    /// Enqueues piece `p` on `rows`; returns the delta it leaves for the
    /// head (the last piece's; [`Delta::NONE`] for the others, whose delta
    /// the next layer's norm adds inside the piece).
    fn enqueue_piece(&self, p: usize, rows: &TokenRows) -> Result<Delta, RunnerError> {
        let (back, front) = piece_parts(p, self.weights.layers.len());
        let delta = match back {
            Some(li) => self.enqueue_layer_back(li, rows, false, true)?,
            None => Delta::NONE,
        };
        match front {
            Some(li) => {
                self.enqueue_layer_front(li, rows, delta, false, true)?;
                Ok(Delta::NONE)
            }
            None => Ok(delta),
        }
    }

    /// Captures the pieces of bucket `tb`; with GEMM tuning on, their
    /// shapes not tuned yet are noted and tuned first.
    fn capture_pieces(&self, tb: usize) -> Result<PieceGraphs, RunnerError> {
        let rows = TokenRows::new(tb);
        let layers = self.weights.layers.len();
        let all = || (0..=layers).try_for_each(|p| self.enqueue_piece(p, &rows).map(drop));
        self.note_gemms(&all)?;
        self.gemm.tune_noted();
        let mut graphs = Vec::with_capacity(layers + 1);
        let mut head_delta = Delta::NONE;
        for p in 0..=layers {
            let (graph, delta) = self.capture_graph(|| self.enqueue_piece(p, &rows))?;
            graphs.push(graph);
            head_delta = delta;
        }
        Ok(PieceGraphs { graphs, head_delta })
    }

    /// Captures bucket `tb`'s pieces unless they are captured already.
    pub(super) fn ensure_pieces(&mut self, tb: usize) -> Result<(), RunnerError> {
        if !self.pieces.contains_key(&tb) {
            let pieces = self.capture_pieces(tb)?;
            self.pieces.insert(tb, pieces);
        }
        Ok(())
    }

    /// Captures the pieces of every token bucket ([`Self::piece_buckets`]).
    pub(super) fn warm_up_pieces(&mut self) -> Result<(), RunnerError> {
        for tb in self.piece_buckets() {
            self.ensure_pieces(tb)?;
        }
        Ok(())
    }

    /// Enqueues the step `lay` (packed with [`super::meta::Padding::Tokens`]
    /// for `tb`) from bucket `tb`'s pieces: each layer's attention
    /// (`nsplit` splits of the decode path) between two pieces, the head
    /// after the last.
    pub(super) fn launch_piecewise(
        &self,
        lay: &StepLayout,
        tb: usize,
        nsplit: usize,
    ) -> Result<(), RunnerError> {
        let pieces = self.pieces.get(&tb).ok_or_else(|| {
            RunnerError::Model(format!("the pieces of token bucket {tb} are not captured"))
        })?;
        if lay.token_rows() != TokenRows::new(tb) {
            return Err(RunnerError::BadBatch(format!(
                "a step of {} token rows cannot run from the pieces of bucket {tb}",
                lay.num_tokens
            )));
        }
        let launch = |p: usize| {
            pieces.graphs[p]
                .launch()
                .map_err(|e| dev_err("piece graph launch", e))
        };
        let kernel = self.decode_kernel_for(lay.num_decodes);
        let layers = self.weights.layers.len();
        for li in 0..layers {
            launch(li)?;
            self.enqueue_attention(li, lay, nsplit, false, kernel, None)?;
        }
        launch(layers)?;
        self.enqueue_head(lay, pieces.head_delta, false)
    }
}
