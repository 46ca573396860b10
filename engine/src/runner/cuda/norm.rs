//! The fused residual-add RMSNorm launch (`add_rmsnorm`, kernels.cu): the
//! residual stream plus the previous product's output (bf16, or split-K
//! partials: [`Delta`]), or the token embeddings in the first layer,
//! normalised into the next product's input.

use super::device::Arg;
use super::linear::Delta;
use super::CudaRunner;
use crate::runner::RunnerError;

/// One `add_rmsnorm` launch: `n_rows` rows (residual rows listed at metadata
/// offset `rows`, or the first `n_rows`) plus `delta`, or the embeddings of
/// the tokens at metadata offset `embed_tokens` instead, normalised with
/// `weight` into `out`; `write_resid` stores the sum back in the residual stream.
pub(crate) struct NormArgs<'a> {
    pub name: &'a str,
    pub delta: Delta,
    pub embed_tokens: Option<usize>,
    pub weight: u64,
    pub out: u64,
    pub rows: Option<usize>,
    pub n_rows: usize,
    pub write_resid: bool,
}

/// The arguments of one `add_rmsnorm` launch in the kernel's parameter order
/// (kernels.cu); device addresses are 0 where absent. The runner and the
/// kernel self-tests both launch through it.
pub(crate) struct NormParams {
    pub resid: u64,
    pub delta: Delta,
    pub weight: u64,
    pub out: u64,
    /// Residual row of each output row, or 0: row t is residual row t.
    pub rows: u64,
    pub hidden: usize,
    pub eps: f32,
    pub write_resid: bool,
    /// With `tokens`, the rows start from these embeddings instead of `resid + delta`.
    pub embed: u64,
    pub tokens: u64,
}

impl NormParams {
    pub fn args(&self) -> [Arg; 13] {
        let [d0, d1, d2, d3] = self.delta.args();
        [
            Arg::Ptr(self.resid),
            d0,
            d1,
            d2,
            d3,
            Arg::Ptr(self.weight),
            Arg::Ptr(self.out),
            Arg::Ptr(self.rows),
            Arg::I32(self.hidden as i32),
            Arg::F32(self.eps),
            Arg::I32(self.write_resid as i32),
            Arg::Ptr(self.embed),
            Arg::Ptr(self.tokens),
        ]
    }
}

impl CudaRunner {
    /// Enqueues one fused residual-add RMSNorm (`add_rmsnorm`, which keeps its
    /// row in registers: no dynamic shared memory).
    pub(crate) fn enqueue_norm(
        &self,
        pdl: bool,
        group: u32,
        a: &NormArgs,
    ) -> Result<(), RunnerError> {
        let meta = |off: Option<usize>| off.map_or(0, |o| self.meta_ptr(o));
        let params = NormParams {
            resid: self.ws.resid.ptr,
            delta: a.delta,
            weight: a.weight,
            out: a.out,
            rows: meta(a.rows),
            hidden: self.cfg.hidden_size,
            eps: self.cfg.rms_norm_eps as f32,
            write_resid: a.write_resid,
            embed: a.embed_tokens.map_or(0, |_| self.weights.embed.ptr),
            tokens: meta(a.embed_tokens),
        };
        self.launch_in(
            pdl,
            group,
            &self.kernels.add_rmsnorm,
            a.name,
            (a.n_rows as u32, 1, 1),
            256,
            0,
            &params.args(),
        )
    }
}
