//! The CPU runner honours the `ModelRunner` contract: chunking, prefix-cache
//! hits (earlier step or same step), mixed batches and batch order do not
//! change the result; greedy decoding is deterministic; bad batches are
//! rejected before anything runs.

use crate::cpu_runner_support;

use cpu_runner_support::{
    max_abs_diff, prefill_in_chunks, random_tokens, runner, step, Part, Seq, BLOCK_SIZE, NUM_BLOCKS,
};
use engine::model::{Qwen3Config, Qwen3Weights};
use engine::runner::cpu::CpuRunner;
use engine::{ModelRunner, RequestId, RunnerError, ScheduledBatch, ScheduledSeq};

/// Same f32 function evaluated with different matmul shapes and summation
/// orders; logits have std about 0.6. Measured: bitwise equal where every
/// step takes the runner's plain kernels, about 1e-6 where a long step goes
/// through gemm.
const TOLERANCE: f32 = 1e-4;

fn setup() -> (Qwen3Config, Qwen3Weights) {
    let config = Qwen3Config::tiny();
    let weights = Qwen3Weights::synthetic(&config, 42);
    (config, weights)
}

#[test]
fn chunked_prefill_matches_single_step() {
    let (config, weights) = setup();
    // Long enough that the one-step prefill's MLP goes through gemm while
    // short chunks take the plain kernel.
    let prompt = random_tokens(1, 300, config.vocab_size);
    let table: Vec<u32> = vec![
        9, 3, 17, 5, 30, 31, 32, 33, 40, 41, 42, 43, 50, 51, 52, 53, 60, 61, 62,
    ];
    let mut whole = Seq::new(1, prompt.clone(), table.clone());
    let reference = prefill_in_chunks(&mut runner(&config, &weights), &mut whole, prompt.len());
    for chunk in [1, 7, 16, 33] {
        let mut seq = Seq::new(1, prompt.clone(), table.clone());
        let logits = prefill_in_chunks(&mut runner(&config, &weights), &mut seq, chunk);
        let diff = max_abs_diff(&logits, &reference);
        eprintln!("chunk {chunk}: max abs logit diff {diff}");
        assert!(diff < TOLERANCE, "chunk {chunk}: max abs logit diff {diff}");
        assert_eq!(
            seq.tokens.last(),
            whole.tokens.last(),
            "chunk {chunk}: sampled token"
        );
    }
}

#[test]
fn prefix_cache_hit_from_an_earlier_step_matches_full_compute() {
    let (config, weights) = setup();
    let shared = random_tokens(2, 3 * BLOCK_SIZE, config.vocab_size);
    let mut prompt_b = shared.clone();
    prompt_b.extend(random_tokens(3, 13, config.vocab_size));

    // From scratch, in its own cache.
    let mut alone = Seq::new(2, prompt_b.clone(), vec![40, 41, 42, 43]);
    let reference = prefill_in_chunks(&mut runner(&config, &weights), &mut alone, prompt_b.len());

    // A fills blocks 1..=3 with the shared prefix (plus a partial block of its own);
    // B reuses those three full blocks and computes only its 13-token tail.
    let mut r = runner(&config, &weights);
    let mut prompt_a = shared.clone();
    prompt_a.extend(random_tokens(4, 5, config.vocab_size));
    let mut a = Seq::new(1, prompt_a, vec![1, 2, 3, 4]);
    prefill_in_chunks(&mut r, &mut a, 64);
    let mut b = Seq::new(2, prompt_b, vec![1, 2, 3, 8]);
    b.computed = shared.len();
    let hit = prefill_in_chunks(&mut r, &mut b, 64);
    let diff = max_abs_diff(&hit, &reference);
    eprintln!("prefix hit from an earlier step: max abs logit diff {diff}");
    assert!(diff < TOLERANCE, "max abs logit diff {diff}");
}

#[test]
fn prefix_cache_hit_on_blocks_written_in_the_same_step() {
    let (config, weights) = setup();
    let shared = random_tokens(5, 2 * BLOCK_SIZE, config.vocab_size);
    let mut prompt_b = shared.clone();
    prompt_b.extend(random_tokens(6, 9, config.vocab_size));
    let mut alone = Seq::new(2, prompt_b.clone(), vec![50, 51, 52]);
    let reference = prefill_in_chunks(&mut runner(&config, &weights), &mut alone, prompt_b.len());

    // A computes the shared blocks in this very step; B reads them, placed
    // after A in the batch and before it.
    for b_first in [false, true] {
        let mut r = runner(&config, &weights);
        let a = Seq::new(1, shared.clone(), vec![1, 2]);
        let mut b = Seq::new(2, prompt_b.clone(), vec![1, 2, 3]);
        b.computed = shared.len();
        let mut seqs = [a, b];
        let (part_a, part_b) = (
            Part {
                seq: 0,
                count: shared.len(),
            },
            Part { seq: 1, count: 9 },
        );
        let parts = if b_first {
            [part_b, part_a]
        } else {
            [part_a, part_b]
        };
        let (_, logits) = step(&mut r, &mut seqs, &parts);
        let b_logits = &logits[if b_first { 0 } else { 1 }];
        let diff = max_abs_diff(b_logits, &reference);
        eprintln!("same-step prefix hit (b_first {b_first}): max abs logit diff {diff}");
        assert!(
            diff < TOLERANCE,
            "b_first {b_first}: max abs logit diff {diff}"
        );
    }
}

#[test]
fn mixed_batch_matches_separate_runs() {
    let (config, weights) = setup();
    let prompt_a = random_tokens(7, 20, config.vocab_size);
    let prompt_b = random_tokens(8, 40, config.vocab_size);
    let start = |r: &mut CpuRunner| {
        let mut a = Seq::new(1, prompt_a.clone(), vec![1, 2]);
        prefill_in_chunks(r, &mut a, 64);
        vec![a, Seq::new(2, prompt_b.clone(), vec![5, 6, 7])]
    };

    // Separately: A decodes, then B's first chunk, in two steps.
    let mut r = runner(&config, &weights);
    let mut seqs = start(&mut r);
    let (_, decode_alone) = step(&mut r, &mut seqs, &[Part { seq: 0, count: 1 }]);
    let (_, prefill_alone) = step(&mut r, &mut seqs, &[Part { seq: 1, count: 40 }]);

    // Together in one batch, in both orders.
    for decode_first in [true, false] {
        let mut r = runner(&config, &weights);
        let mut seqs = start(&mut r);
        let decode = Part { seq: 0, count: 1 };
        let prefill = Part { seq: 1, count: 40 };
        let parts = if decode_first {
            [decode, prefill]
        } else {
            [prefill, decode]
        };
        let (_, logits) = step(&mut r, &mut seqs, &parts);
        let (d, p) = if decode_first {
            (&logits[0], &logits[1])
        } else {
            (&logits[1], &logits[0])
        };
        let dd = max_abs_diff(d, &decode_alone[0]);
        let dp = max_abs_diff(p, &prefill_alone[0]);
        eprintln!("mixed batch (decode first {decode_first}): decode diff {dd}, prefill diff {dp}");
        assert!(
            dd < TOLERANCE && dp < TOLERANCE,
            "decode diff {dd}, prefill diff {dp}"
        );
    }
}

fn generate(
    config: &Qwen3Config,
    weights: &Qwen3Weights,
    prompt: &[u32],
    steps: usize,
) -> Vec<u32> {
    let mut r = runner(config, weights);
    let mut seq = Seq::new(1, prompt.to_vec(), (1..=4).collect());
    prefill_in_chunks(&mut r, &mut seq, 32);
    let mut seqs = [seq];
    for _ in 1..steps {
        step(&mut r, &mut seqs, &[Part { seq: 0, count: 1 }]);
    }
    seqs[0].tokens[prompt.len()..].to_vec()
}

#[test]
fn greedy_generation_is_deterministic_and_depends_on_the_weights() {
    let (config, weights) = setup();
    let prompt = random_tokens(9, 25, config.vocab_size);
    let first = generate(&config, &weights, &prompt, 30);
    assert_eq!(first.len(), 30);
    assert_eq!(first, generate(&config, &weights, &prompt, 30));
    let other = Qwen3Weights::synthetic(&config, 43);
    assert_ne!(first, generate(&config, &other, &prompt, 30));
}

#[test]
fn only_sampling_sequences_get_logits_and_tokens() {
    let (config, weights) = setup();
    let mut r = runner(&config, &weights);
    let tokens = random_tokens(10, 20, config.vocab_size);
    let table = [1u32, 2];
    let seq = |id, samples| ScheduledSeq {
        request_id: RequestId(id),
        token_ids: &tokens,
        start_pos: 0,
        block_table: &table,
        samples,
    };
    let batch = ScheduledBatch {
        seqs: vec![seq(1, false)],
        block_size: BLOCK_SIZE,
    };
    let out = r.execute(&batch).unwrap();
    assert!(out.sampled.is_empty() && r.last_logits().is_empty());
    let batch = ScheduledBatch {
        seqs: vec![seq(1, true)],
        block_size: BLOCK_SIZE,
    };
    let out = r.execute(&batch).unwrap();
    assert_eq!(out.sampled.len(), 1);
    assert_eq!(r.last_logits()[0].len(), config.vocab_size);
    let best = r.last_logits()[0]
        .iter()
        .cloned()
        .fold(f32::NEG_INFINITY, f32::max);
    assert_eq!(r.last_logits()[0][out.sampled[0] as usize], best);
    assert_eq!(r.num_kv_blocks(), NUM_BLOCKS);
}

#[test]
fn bad_batches_are_rejected() {
    let (config, weights) = setup();
    let mut r = runner(&config, &weights);
    let tokens = [1u32, 2, 3];
    let out_of_vocab = [config.vocab_size as u32];
    let ok_table = [1u32];
    let short_table = [1u32];
    let far_table = [NUM_BLOCKS as u32];
    let cases: [(&[u32], usize, &[u32], usize); 5] = [
        (&tokens, 0, &ok_table, BLOCK_SIZE * 2), // block size differs from the cache's
        (&[], 0, &ok_table, BLOCK_SIZE),         // nothing to compute
        (&out_of_vocab, 0, &ok_table, BLOCK_SIZE), // token outside the vocabulary
        (&tokens, BLOCK_SIZE, &short_table, BLOCK_SIZE), // table does not cover the positions
        (&tokens, 0, &far_table, BLOCK_SIZE),    // block id outside the cache
    ];
    for (i, (token_ids, start_pos, block_table, block_size)) in cases.into_iter().enumerate() {
        let seqs = vec![ScheduledSeq {
            request_id: RequestId(1),
            token_ids,
            start_pos,
            block_table,
            samples: true,
        }];
        let result = r.execute(&ScheduledBatch { seqs, block_size });
        assert!(
            matches!(result, Err(RunnerError::BadBatch(_))),
            "case {i}: {result:?}"
        );
    }
}

#[test]
fn constructor_rejects_weights_of_another_shape_and_an_empty_cache() {
    let (config, weights) = setup();
    let wider = Qwen3Config {
        intermediate_size: 96,
        ..config.clone()
    };
    let err = CpuRunner::new(wider, &weights, NUM_BLOCKS, BLOCK_SIZE)
        .err()
        .expect("shape mismatch");
    assert!(
        matches!(&err, RunnerError::Model(m) if m.contains("gate_proj")),
        "{err}"
    );
    let untied = Qwen3Config {
        tie_word_embeddings: false,
        ..config.clone()
    };
    assert!(matches!(
        CpuRunner::new(untied, &weights, NUM_BLOCKS, BLOCK_SIZE),
        Err(RunnerError::Model(_))
    ));
    assert!(matches!(
        CpuRunner::new(config, &weights, 0, BLOCK_SIZE),
        Err(RunnerError::Model(_))
    ));
}
