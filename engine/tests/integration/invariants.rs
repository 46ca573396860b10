//! Property tests: random workloads (arrivals over steps, shared prefixes,
//! salts, pools small enough to force preemption, aborts), with the engine's
//! invariants checked after every step against an independent model.
//!
//! The content model records, per block id and slot, the (salt, token) that
//! the runner was asked to write there. Every position a sequence attends to
//! (below its `start_pos` in a batch, below its computed tokens after a step)
//! must hold that sequence's own (salt, token): a prefix-cache hit on a block
//! of other content or another salt fails the test.

use engine::config::HashAlgo;
use engine::kv_cache::NULL_BLOCK;
use engine::request::{FinishReason, RequestStatus};
use engine::runner::{ModelRunner, RunnerError, RunnerOutput, ScheduledBatch};
use engine::testing::FixedTokenRunner;
use engine::{EngineConfig, EngineCore, Request, RequestId};
use proptest::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

type Slot = Option<(Option<String>, u32)>;

/// Small, so EOS tokens come up often.
const VOCAB: u32 = 11;

#[derive(Default)]
struct ContentModel {
    /// What each block slot was last written with.
    blocks: HashMap<u32, Vec<Slot>>,
    /// Salt and known tokens (prompt + outputs so far) of every request.
    requests: HashMap<RequestId, (Option<String>, Vec<u32>)>,
}

impl ContentModel {
    fn slot(&self, table: &[u32], bs: usize, pos: usize) -> Slot {
        self.blocks
            .get(&table[pos / bs])
            .and_then(|b| b[pos % bs].clone())
    }

    /// Positions `0..upto` of `id` read back its own salt and tokens.
    fn check_reads(
        &self,
        id: RequestId,
        table: &[u32],
        bs: usize,
        upto: usize,
    ) -> Result<(), String> {
        let (salt, tokens) = &self.requests[&id];
        for (pos, &token) in tokens[..upto].iter().enumerate() {
            let want = Some((salt.clone(), token));
            let got = self.slot(table, bs, pos);
            if got != want {
                return Err(format!(
                    "request {id} position {pos}: block holds {got:?}, want {want:?}"
                ));
            }
        }
        Ok(())
    }
}

struct CheckingRunner {
    inner: FixedTokenRunner,
    model: Rc<RefCell<ContentModel>>,
}

impl ModelRunner for CheckingRunner {
    fn num_kv_blocks(&self) -> usize {
        self.inner.num_kv_blocks()
    }

    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        let bs = batch.block_size;
        let mut model = self.model.borrow_mut();
        // Write every sequence's K/V first, then check what each attends to,
        // as the runner contract orders it.
        for seq in &batch.seqs {
            let bad = |m: String| RunnerError::BadBatch(format!("request {}: {m}", seq.request_id));
            if seq.block_table.contains(&NULL_BLOCK) {
                return Err(bad("null block in block table".into()));
            }
            let (salt, tokens) = model.requests[&seq.request_id].clone();
            let end = seq.start_pos + seq.token_ids.len();
            if seq.token_ids != &tokens[seq.start_pos..end] {
                return Err(bad(format!(
                    "wrong tokens for positions {}..{end}",
                    seq.start_pos
                )));
            }
            if seq.samples != (end == tokens.len()) {
                return Err(bad("samples flag disagrees with the known tokens".into()));
            }
            for pos in seq.start_pos..end {
                let block = model
                    .blocks
                    .entry(seq.block_table[pos / bs])
                    .or_insert_with(|| vec![None; bs]);
                block[pos % bs] = Some((salt.clone(), tokens[pos]));
            }
        }
        for seq in &batch.seqs {
            model
                .check_reads(seq.request_id, seq.block_table, bs, seq.start_pos)
                .map_err(RunnerError::BadBatch)?;
        }
        drop(model);
        self.inner.execute(batch)
    }
}

#[derive(Debug, Clone)]
struct Spec {
    arrival: usize,
    prefix: usize,
    prefix_len: usize,
    tail: Vec<u32>,
    max_tokens: usize,
    salt: Option<&'static str>,
    abort_after: Option<usize>,
    /// Stops on this token (`ignore_eos` off) when set.
    eos: Option<u32>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..40usize,
        0..3usize,
        0..40usize,
        prop::collection::vec(0..6u32, 1..20),
        1..20usize,
        prop::sample::select(vec![None, Some("a"), Some("b")]),
        prop::option::weighted(0.15, 0..30usize),
        prop::option::weighted(0.2, 0..VOCAB),
    )
        .prop_map(
            |(arrival, prefix, prefix_len, tail, max_tokens, salt, abort_after, eos)| Spec {
                arrival,
                prefix,
                prefix_len,
                tail,
                max_tokens,
                salt,
                abort_after,
                eos,
            },
        )
}

fn config() -> impl Strategy<Value = EngineConfig> {
    (
        prop::sample::select(vec![1usize, 2, 4, 16]),
        1..8usize,
        any::<bool>(),
        prop::sample::select(vec![0usize, 5, 24]),
        any::<bool>(),
        any::<bool>(),
        0..30usize,
        0..100usize,
    )
        .prop_map(
            |(block_size, max_num_seqs, chunked, threshold, caching, xxhash, spare, budget)| {
                let max_model_len = 64;
                let min_budget = if chunked { max_num_seqs } else { max_model_len };
                let mut c = EngineConfig {
                    max_num_seqs,
                    max_num_batched_tokens: min_budget.max(budget),
                    max_model_len,
                    enable_chunked_prefill: chunked,
                    long_prefill_token_threshold: threshold,
                    block_size,
                    enable_prefix_caching: caching,
                    prefix_caching_hash_algo: if xxhash {
                        HashAlgo::Xxhash
                    } else {
                        HashAlgo::Sha256
                    },
                    ..EngineConfig::default()
                };
                // From the smallest legal pool up: small pools force preemption.
                c.num_gpu_blocks = Some(c.blocks_for(max_model_len) + 1 + spare * 4 / block_size);
                c
            },
        )
}

fn prompt_of(spec: &Spec, max_model_len: usize) -> Vec<u32> {
    let mut prompt: Vec<u32> = (0..spec.prefix_len)
        .map(|i| (spec.prefix * 7 + i * 3) as u32 % 11)
        .collect();
    prompt.extend(&spec.tail);
    prompt.truncate(max_model_len - spec.max_tokens);
    prompt
}

fn check_step_invariants(
    e: &EngineCore<CheckingRunner>,
    model: &ContentModel,
    tokens_this_step: usize,
) -> Result<(), TestCaseError> {
    let c = e.config();
    let kv = e.kv_cache();
    prop_assert!(tokens_this_step <= c.max_num_batched_tokens);
    prop_assert!(e.num_running() <= c.max_num_seqs);
    let mut uses = vec![0u32; kv.num_blocks()];
    for id in e.running_ids().chain(e.waiting_ids()) {
        let table = e.block_table(id).unwrap();
        let computed = e.num_computed_tokens(id).unwrap();
        prop_assert!(
            computed <= c.max_model_len && computed <= e.request_tokens(id).unwrap().len()
        );
        match e.request_status(id).unwrap() {
            RequestStatus::Running => prop_assert_eq!(table.len(), computed.div_ceil(c.block_size)),
            _ => prop_assert!(table.is_empty() && computed == 0),
        }
        for &b in table {
            prop_assert_ne!(b, NULL_BLOCK);
            uses[b as usize] += 1;
        }
        model
            .check_reads(id, table, c.block_size, computed)
            .map_err(TestCaseError::fail)?;
    }
    for (b, &n) in uses.iter().enumerate() {
        prop_assert_eq!(kv.ref_count(b as u32), n, "block {}", b);
    }
    let free = uses.iter().skip(1).filter(|&&n| n == 0).count();
    prop_assert_eq!(kv.num_free_blocks(), free);
    prop_assert_eq!(
        kv.num_free_blocks() + kv.num_used_blocks(),
        kv.num_blocks() - 1
    );
    Ok(())
}

fn run_workload(config: EngineConfig, specs: Vec<Spec>) -> Result<(), TestCaseError> {
    let model = Rc::new(RefCell::new(ContentModel::default()));
    let blocks = config.num_gpu_blocks.unwrap();
    let runner = CheckingRunner {
        inner: FixedTokenRunner::new(blocks, VOCAB),
        model: model.clone(),
    };
    let mut e = EngineCore::new(config.clone(), runner).unwrap();
    let mut outputs: HashMap<RequestId, usize> = HashMap::new();
    let mut done: HashMap<RequestId, FinishReason> = HashMap::new();
    let mut prompt_lens: HashMap<RequestId, usize> = HashMap::new();
    let last_arrival = specs.iter().map(|s| s.arrival).max().unwrap_or(0);
    let mut step = 0;
    while step <= last_arrival || e.has_unfinished() {
        prop_assert!(step < 20_000, "no progress");
        for (i, s) in specs.iter().enumerate() {
            let id = RequestId(i as u64);
            if s.arrival == step {
                let mut r =
                    Request::new(i as u64, prompt_of(s, config.max_model_len), s.max_tokens);
                r.cache_salt = s.salt.map(str::to_string);
                r.ignore_eos = s.eos.is_none();
                r.eos_token_id = s.eos;
                prompt_lens.insert(id, r.prompt_token_ids.len());
                model
                    .borrow_mut()
                    .requests
                    .insert(id, (r.cache_salt.clone(), r.prompt_token_ids.clone()));
                e.add_request(r).unwrap();
            }
            if s.abort_after.map(|a| s.arrival + a) == Some(step) {
                let unfinished = !done.contains_key(&id);
                prop_assert_eq!(e.abort(id).is_ok(), unfinished);
                if unfinished {
                    done.insert(id, FinishReason::Aborted);
                }
            }
        }
        let o = e
            .step()
            .map_err(|err| TestCaseError::fail(err.to_string()))?;
        let mut m = model.borrow_mut();
        for &(id, token) in &o.tokens {
            let known = &mut m.requests.get_mut(&id).unwrap().1;
            // The runner's token for this position: nothing skipped or repeated.
            prop_assert_eq!(token, e.runner().inner.token_at(known.len()));
            known.push(token);
            *outputs.entry(id).or_default() += 1;
        }
        for &(id, reason) in &o.finished {
            let s = &specs[id.0 as usize];
            let outs = &m.requests[&id].1[prompt_lens[&id]..];
            // EOS ends a request at its first occurrence, unless the length
            // limit ends it on the same token.
            let eos_before_last = s
                .eos
                .is_some_and(|eos| outs[..outs.len() - 1].contains(&eos));
            prop_assert!(!eos_before_last, "request {} ran past its EOS", id);
            match reason {
                FinishReason::Length => prop_assert_eq!(outs.len(), s.max_tokens),
                FinishReason::Stop => {
                    prop_assert!(outs.len() < s.max_tokens);
                    prop_assert_eq!(outs.last().copied(), s.eos);
                }
                FinishReason::Aborted => prop_assert!(false, "abort reported as a finish"),
            }
            prop_assert!(done.insert(id, reason).is_none());
        }
        prop_assert_eq!(o.kv_blocks_used, e.kv_cache().num_used_blocks());
        check_step_invariants(&e, &m, o.shape.num_tokens())?;
        step += 1;
    }
    for (i, s) in specs.iter().enumerate() {
        let id = RequestId(i as u64);
        match done.get(&id) {
            Some(FinishReason::Length) => prop_assert_eq!(outputs[&id], s.max_tokens),
            Some(FinishReason::Stop) => prop_assert!(s.eos.is_some()),
            Some(FinishReason::Aborted) => {
                prop_assert!(outputs.get(&id).copied().unwrap_or(0) < s.max_tokens)
            }
            other => prop_assert!(false, "request {} ended as {:?}", i, other),
        }
    }
    prop_assert_eq!(e.kv_cache().num_used_blocks(), 0);
    prop_assert_eq!(e.num_free_blocks(), e.kv_cache().num_blocks() - 1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_on_random_workloads(config in config(), specs in prop::collection::vec(spec(), 1..24)) {
        run_workload(config, specs)?;
    }
}
