//! The datasheet roofline on an H200-like GPU and Qwen3-0.6B.

use crate::common;

use common::{config, h200, roofline};
use engine::{BatchShape, SeqShape};
use sim::{CostModel, ModelShape, RooflineModel};

fn decode_batch(batch: usize, context: u32) -> BatchShape {
    let seq = SeqShape {
        new_tokens: 1,
        context_before: context,
        samples: true,
    };
    BatchShape {
        seqs: vec![seq; batch],
    }
}

fn prefill(tokens: u32) -> BatchShape {
    BatchShape {
        seqs: vec![SeqShape {
            new_tokens: tokens,
            context_before: 0,
            samples: true,
        }],
    }
}

#[test]
fn decode_at_batch_1_takes_a_plausible_fraction_of_a_millisecond() {
    let t = roofline().step_seconds(&decode_batch(1, 256));
    assert!((0.3e-3..2e-3).contains(&t), "{t}");
}

#[test]
fn decode_grows_with_batch_much_slower_than_linearly() {
    let m = roofline();
    let t1 = m.step_seconds(&decode_batch(1, 256));
    let t64 = m.step_seconds(&decode_batch(64, 256));
    assert!(t64 > t1);
    assert!(t64 < 8.0 * t1, "batch 64 {t64} vs batch 1 {t1}");
    let terms = m.terms(&decode_batch(64, 256));
    assert!(
        terms.linear.memory_s > terms.linear.compute_s,
        "decode GEMMs are memory bound"
    );
}

#[test]
fn prefill_of_3200_tokens_is_compute_bound() {
    let m = roofline();
    let terms = m.terms(&prefill(3200));
    assert!(
        terms.linear.compute_s > 3.0 * terms.linear.memory_s,
        "{terms:?}"
    );
    assert!(
        terms.attention.compute_s > terms.attention.memory_s,
        "{terms:?}"
    );
    let t = m.step_seconds(&prefill(3200));
    let flops = 2.0 * ModelShape::qwen3_0_6b().linear_params() as f64 * 3200.0;
    assert!(t > flops / h200().bf16_flops, "not faster than peak FLOP/s");
}

#[test]
fn lm_head_counts_only_for_sampling_sequences() {
    let m = roofline();
    let mut chunk = prefill(512);
    chunk.seqs[0].samples = false;
    assert_eq!(m.terms(&chunk).lm_head, Default::default());
    let sampled = m.terms(&prefill(512)).lm_head;
    assert!(sampled.memory_s > 0.0 && sampled.compute_s > 0.0);
    assert!(m.step_seconds(&prefill(512)) > m.step_seconds(&chunk));
}

#[test]
fn the_step_is_overhead_plus_each_term_at_its_efficiency() {
    let m = roofline();
    let batch = decode_batch(16, 1000);
    let t = m.terms(&batch);
    let e = m.efficiencies;
    let expected = e.step_overhead_s
        + (t.linear.memory_s / e.linear.memory).max(t.linear.compute_s / e.linear.compute)
        + (t.attention.memory_s / e.attention.memory)
            .max(t.attention.compute_s / e.attention.compute)
        + (t.lm_head.memory_s / e.lm_head.memory).max(t.lm_head.compute_s / e.lm_head.compute);
    assert!((m.step_seconds(&batch) - expected).abs() < 1e-15);
    assert_eq!(
        m.step_seconds(&BatchShape::default()),
        0.0,
        "an empty step costs nothing"
    );
    let longer = decode_batch(16, 2000);
    assert!(m.terms(&longer).attention.memory_s > 1.9 * t.attention.memory_s);
}

#[test]
fn kv_capacity_is_what_memory_holds_after_weights_and_reserve() {
    let m = roofline();
    let cfg = config();
    let blocks = m.kv_cache_blocks(&cfg);
    let block_bytes = (cfg.block_size * m.model.kv_bytes_per_token()) as f64;
    let budget = 141e9 * 0.9 - m.model.weight_bytes() as f64 - m.activation_reserve_bytes(&cfg);
    assert_eq!(blocks, (budget / block_bytes).floor() as usize);
    // About a million tokens of Qwen3-0.6B KV cache on an H200.
    assert!((800_000..1_200_000).contains(&(blocks * 16)), "{blocks}");
    let mut tiny_gpu = h200();
    tiny_gpu.mem_bytes = 1e9;
    assert_eq!(
        RooflineModel::new(tiny_gpu, ModelShape::qwen3_0_6b()).kv_cache_blocks(&cfg),
        0
    );
}
