//! GEMM tuning: the cuBLASLt algorithm of each product shape of the decode
//! graphs and of the piecewise graphs' pieces (piecewise.rs), measured on
//! the device.
//!
//! `cublasGemmEx` runs the first choice of cuBLAS's heuristic. On the H200 it
//! is not the fastest for every decode product: at 64 rows, timing every
//! algorithm the cuBLASLt heuristic offers gives QKV 4.92 µs against 5.00,
//! gate-up 5.95 against 6.19, O (4 slices of K) 4.23 against 4.37, down
//! 4.77 against 5.02 and the LM head 85.2 against 92.9
//! (`scripts/gemm_lt_search.cu`, docs/performance.md; no configuration
//! outside the heuristic's offers came closer, which is why tuning times
//! those offers only). In the decode graphs that is worth 0.3–0.5 % a step:
//! batch 64 1.619–1.628 ms against 1.628–1.637, batch 256 3.681–3.692
//! against 3.686–3.718 (a fresh process per run, docs/performance.md);
//! what each shape measured is in `engine-bench`'s `gemm_tuning.csv`.
//!
//! Contract: [`LtGemms::with_plan`] runs the tuned algorithm of a shape, or
//! returns nothing (not tuned, tuning off, or `cublasGemmEx` measured
//! fastest): the caller then runs `cublasGemmEx`. While noting
//! ([`LtGemms::set_noting`], during a capture of the forward pass that is
//! never instantiated), a shape without a plan is noted with its calls; the
//! runner tunes the noted shapes ([`super::gemm::Gemm::tune_noted`]) before
//! it captures the graphs it keeps. A tuned plan serves every path that runs
//! its shape (a decode graph, a piece, an eager step). Where the algorithm does not split K
//! further, the results are bit-for-bit those of `cublasGemmEx` (every check
//! of `cuda-check` gave the same figures with and without tuning); the
//! self-test checks every offer against a host product.

use super::gemm::{GemmArgs, OutType};
pub(crate) use super::gemm_lt_desc::LtDescs;
use super::gemm_lt_desc::{lt, lt_err};
use crate::runner::RunnerError;
use cudarc::cublaslt::sys::{self as lt_sys, cublasLtMatmulAlgo_t};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Calls of one shape timed together when tuning: as many as a 28-layer model
/// makes, each with the next of the shape's weight matrices.
pub(crate) const TUNE_CALLS: usize = 28;
/// A cuBLASLt algorithm replaces `cublasGemmEx` only when this much faster:
/// closer than that is run-to-run noise.
pub(crate) const MIN_GAIN: f64 = 0.01;

/// One product shape: `y[m, n] = x[m, k] · w[n, k]ᵀ`, over `splits` slices of
/// K written as strided fp32 partials when `splits > 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct GemmKey {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub splits: usize,
    pub out: OutType,
}

impl GemmKey {
    pub fn of(a: &GemmArgs, splits: usize) -> Self {
        GemmKey {
            m: a.m,
            n: a.n,
            k: a.k,
            splits,
            out: a.out,
        }
    }
}

/// What tuning measured for one shape (µs per call, 28 calls in a graph).
#[derive(Debug, Clone, PartialEq)]
pub struct GemmTuneReport {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub splits: usize,
    /// `None` when the tuning failed (see `error`).
    pub gemm_ex_us: Option<f64>,
    /// The fastest heuristic offer, if any, and its rank among the offers.
    pub best_lt_us: Option<f64>,
    pub best_lt_rank: Option<usize>,
    pub offers: usize,
    pub chosen: &'static str,
    /// Why the shape kept `cublasGemmEx` without being measured.
    pub error: Option<String>,
}

impl GemmTuneReport {
    /// The report of shape `key` before anything is measured: it keeps `cublasGemmEx`.
    pub(crate) fn unmeasured(key: &GemmKey) -> Self {
        GemmTuneReport {
            m: key.m,
            n: key.n,
            k: key.k,
            splits: key.splits,
            gemm_ex_us: None,
            best_lt_us: None,
            best_lt_rank: None,
            offers: 0,
            chosen: "cublas",
            error: None,
        }
    }
}

/// Notes one call of shape `key`: each shape keeps its calls with distinct
/// weights, up to [`TUNE_CALLS`] (a model's layers), in order of appearance.
fn note_call(noted: &mut Vec<(GemmKey, Vec<GemmArgs>)>, key: &GemmKey, a: &GemmArgs) {
    match noted.iter_mut().find(|(k, _)| k == key) {
        Some((_, calls)) => {
            if calls.len() < TUNE_CALLS && calls.iter().all(|c| c.w != a.w) {
                calls.push(*a);
            }
        }
        None => noted.push((*key, vec![*a])),
    }
}

/// A tuned shape: its descriptors and the algorithm that won.
pub(crate) struct LtPlan {
    pub descs: LtDescs,
    pub algo: cublasLtMatmulAlgo_t,
}

/// The cuBLASLt handle, the tuned plans, and the shapes noted for tuning.
pub(crate) struct LtGemms {
    pub handle: lt_sys::cublasLtHandle_t,
    /// `None`: tuned, and `cublasGemmEx` won.
    plans: RefCell<HashMap<GemmKey, Option<LtPlan>>>,
    noted: RefCell<Vec<(GemmKey, Vec<GemmArgs>)>>,
    noting: Cell<bool>,
    /// Off: no plan is used or noted (every shape runs `cublasGemmEx`); the plans are kept.
    enabled: Cell<bool>,
    pub reports: RefCell<Vec<GemmTuneReport>>,
}

// SAFETY: the handle and descriptors are host objects that the runner, which
// owns them, uses from one thread at a time (it is not Sync: RefCell).
unsafe impl Send for LtGemms {}

impl LtGemms {
    pub fn new() -> Result<Self, RunnerError> {
        Ok(LtGemms {
            handle: lt::create_handle().map_err(|e| lt_err("handle", e))?,
            plans: RefCell::new(HashMap::new()),
            noted: RefCell::new(Vec::new()),
            noting: Cell::new(false),
            enabled: Cell::new(true),
            reports: RefCell::new(Vec::new()),
        })
    }

    /// Note untuned shapes (with their calls) from now on, or stop.
    pub fn set_noting(&self, on: bool) {
        self.noting.set(on);
    }

    /// Runs `f` with the tuned plan of `key`, if there is one; otherwise notes
    /// the call while noting, and returns `None`.
    pub fn with_plan<R>(
        &self,
        key: &GemmKey,
        a: &GemmArgs,
        f: impl FnOnce(&LtPlan) -> R,
    ) -> Option<R> {
        if !self.enabled.get() {
            return None;
        }
        let plans = self.plans.borrow();
        match plans.get(key) {
            Some(Some(plan)) => return Some(f(plan)),
            Some(None) => return None,
            None => {}
        }
        if self.noting.get() {
            note_call(&mut self.noted.borrow_mut(), key, a);
        }
        None
    }

    pub fn take_noted(&self) -> Vec<(GemmKey, Vec<GemmArgs>)> {
        std::mem::take(&mut *self.noted.borrow_mut())
    }

    pub fn install(&self, key: GemmKey, plan: Option<LtPlan>) {
        self.plans.borrow_mut().insert(key, plan);
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.set(on);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.get()
    }
}

impl Drop for LtGemms {
    fn drop(&mut self) {
        self.plans.borrow_mut().clear();
        unsafe {
            let _ = lt::destroy_handle(self.handle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(m: usize, n: usize, w: u64) -> GemmArgs {
        GemmArgs {
            x: 1,
            w,
            y: 2,
            m,
            n,
            k: 1024,
            out: OutType::Bf16,
        }
    }

    #[test]
    fn noting_keeps_each_shapes_distinct_weights_up_to_a_models_layers() {
        let mut noted = Vec::new();
        // Two passes over 40 "layers" of two shapes: QKV (n 4096) and gate-up (n 6144).
        for _ in 0..2 {
            for layer in 0..40u64 {
                for n in [4096, 6144] {
                    let a = call(64, n, 1000 * n as u64 + layer);
                    note_call(&mut noted, &GemmKey::of(&a, 1), &a);
                }
            }
        }
        assert_eq!(noted.len(), 2);
        for (key, calls) in &noted {
            assert_eq!(calls.len(), TUNE_CALLS);
            let first: Vec<u64> = (0..TUNE_CALLS as u64)
                .map(|l| 1000 * key.n as u64 + l)
                .collect();
            assert_eq!(calls.iter().map(|c| c.w).collect::<Vec<_>>(), first);
        }
        // The same weights split over K are another shape.
        let a = call(64, 4096, 7);
        note_call(&mut noted, &GemmKey::of(&a, 4), &a);
        assert_eq!(noted.len(), 3);
        assert_eq!(noted[2].0.splits, 4);
    }
}
