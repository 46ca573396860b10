//! Tests of the attention model: hand computations of decode and prefill
//! layers and the block layouts they price.

use super::*;
use engine::SeqShape;

/// The initial parameters, an SM-bound kernel's work and its DRAM time
/// joined by a hard maximum, and no waves: an SM's work is its blocks'
/// shared cost.
fn hard_max() -> OperatorParams {
    OperatorParams {
        contention_exponent: 1e6,
        decode_wave_latency: 0.0,
        decode_warp_key_latency: 0.0,
        ..OperatorParams::initial()
    }
}

/// [`hard_max`] with no SM work in decode attention: a layer is its
/// latency-free DRAM term (and the merge of any split partials).
fn dram_only() -> OperatorParams {
    OperatorParams {
        decode_block_cost: 0.0,
        decode_key_cost: 0.0,
        decode_kv_key_cost: 0.0,
        attention_latency: 0.0,
        ..hard_max()
    }
}

/// [`hard_max`] with decode attention priced by its waves alone: no
/// shared cost per block or key, no kernel latency; a wave is 3 µs plus
/// 200 ns a warp's key.
fn waves_only() -> OperatorParams {
    OperatorParams {
        decode_block_cost: 0.0,
        decode_key_cost: 0.0,
        decode_kv_key_cost: 0.0,
        attention_latency: 0.0,
        decode_wave_latency: 3e-6,
        decode_warp_key_latency: 200e-9,
        ..hard_max()
    }
}

/// The H200 with bandwidth to spare, so that the SMs' work sets a
/// decode's time.
fn sm_bound_h200() -> GpuSpec {
    GpuSpec {
        mem_bandwidth: 1e15,
        ..crate::datasheet::lookup("h200-sxm").expect("h200 in the table")
    }
}

fn qwen3_8b() -> ModelShape {
    ModelShape::from_qwen3(&engine::model::Qwen3Config::preset("qwen3-8b").expect("preset"))
}

fn seq(new: u32, ctx: u32) -> SeqShape {
    SeqShape {
        new_tokens: new,
        context_before: ctx,
        samples: true,
    }
}

#[test]
fn a_decode_batch_launches_the_runners_grid() {
    let m = ModelShape::qwen3_0_6b(); // 8 KV heads, group 2
    let one = BatchShape {
        seqs: vec![seq(1, 299)],
    };
    // Batch 1: 8-warp blocks, 2048 / (8 heads × 8 warps) = 32 splits.
    let w = decode_work(&m, &one, true);
    assert_eq!((w.entries, w.splits, w.blocks), (1, 32, 256));
    assert_eq!(w.keys, 300.0);
    // Batch 50 replays the graph of 64: 4-warp blocks, one split.
    let fifty = BatchShape {
        seqs: vec![seq(1, 299); 50],
    };
    let w = decode_work(&m, &fifty, true);
    assert_eq!((w.entries, w.splits, w.blocks), (64, 1, 512));
    // Eager, the 300 keys bound the splits: 300 / (32 keys × 8 warps) → 2.
    let w = decode_work(&m, &one, false);
    assert_eq!(w.splits, 2);
}

#[test]
fn a_short_chunks_entries_share_their_sequences_keys_in_dram() {
    let m = ModelShape::qwen3_0_6b(); // 32-token tiles: a 32-token chunk is on the decode path
    let chunk = BatchShape {
        seqs: vec![seq(32, 3200)],
    };
    let w = decode_work(&m, &chunk, false);
    // 32 entries, token j reading the 3,200 cached keys and j + 1 new ones;
    // DRAM delivers the sequence's 3,232 keys once.
    assert_eq!(w.entries, 32);
    assert_eq!(w.keys, 32.0 * 3200.0 + 32.0 * 33.0 / 2.0);
    assert_eq!(w.unique_keys, 3232.0);
    // Plain decodes: each sequence's keys once either way.
    let decodes = BatchShape {
        seqs: vec![seq(1, 299); 4],
    };
    let w = decode_work(&m, &decodes, false);
    assert_eq!((w.keys, w.unique_keys), (1200.0, 1200.0));
    // So the chunk's DRAM term is a decode's, not 32 decodes'.
    let gpu = crate::datasheet::lookup("h100-sxm").expect("h100 in the table");
    let p = dram_only();
    let w = decode_work(&m, &chunk, false);
    let t = decode_seconds(&p, &m, &gpu, &w);
    let bytes = 3232.0 * 4096.0;
    // At a read stream's share of the copy bandwidth.
    let dram = bytes / (gpu.mem_bandwidth * super::super::COPY_FRACTION * p.read_bandwidth_share);
    // Besides the merge of its split partials.
    let merged = merge_seconds(&p, &m, &gpu, &w);
    assert!(merged > 0.0);
    assert!((t - dram - merged).abs() < 1e-9 * dram, "{t} {dram}");
}

#[test]
fn decode_attention_by_hand() {
    let m = ModelShape::qwen3_0_6b();
    let gpu = crate::datasheet::lookup("h200-sxm").expect("h200 in the table");
    let p = hard_max();
    let w = DecodeWork {
        entries: 64,
        splits: 1,
        blocks: 512,
        keys: 64.0 * 300.0,
        unique_keys: 64.0 * 300.0,
        max_keys: 300.0,
        heads_kernel: false,
        warps_per_block: 4,
        blocks_per_sm: 4,
        graphed: true,
    };
    // 512 blocks on 132 SMs: 4 on the busiest. Each block reads its
    // share of the 64 × 300 keys over 8 KV heads, for 2 query heads each.
    let kv_keys = 64.0 * 300.0 * 8.0 / 512.0;
    let work =
        4.0 * (p.decode_block_cost + kv_keys * (p.decode_kv_key_cost + 2.0 * p.decode_key_cost));
    let dram = 64.0 * 300.0 * 4096.0
        / (gpu.mem_bandwidth * super::super::COPY_FRACTION * p.read_bandwidth_share);
    let t = decode_seconds(&p, &m, &gpu, &w);
    assert!((t - (p.attention_latency + work.max(dram))).abs() < 1e-9 * t);
}

#[test]
fn the_blocks_of_the_longest_sequence_set_the_decode_time() {
    // 8 KV heads, group 2.
    let m = ModelShape::qwen3_0_6b();
    let (gpu, p) = (sm_bound_h200(), hard_max());
    assert_eq!(p.decode_wave_latency, 0.0);
    // 16 decodes at 1,000 keys each, and the same 16,000 keys with one
    // sequence at 8,500 and fifteen at 500.
    let even = BatchShape {
        seqs: vec![seq(1, 999); 16],
    };
    let mut skewed = vec![seq(1, 499); 15];
    skewed.push(seq(1, 8499));
    let skewed = BatchShape { seqs: skewed };
    let (we, ws) = (decode_work(&m, &even, true), decode_work(&m, &skewed, true));
    assert_eq!(we.keys, ws.keys);
    assert_eq!((we.blocks, we.splits), (ws.blocks, ws.splits));
    // The same keys over the same grid: only the longest blocks differ.
    // 16 decodes × 8 KV heads × 2 splits = 256 blocks, 2 on the busiest
    // of 132 SMs, both fitting at once: one wave, as long as its longest
    // block alone, 8,500 / 2 keys over 8 warps, where the even batch's is
    // 500. Priced by the waves alone (no shared cost per block or key):
    let p = OperatorParams {
        decode_block_cost: 0.0,
        decode_key_cost: 0.0,
        decode_kv_key_cost: 0.0,
        decode_wave_latency: 1e-6,
        decode_warp_key_latency: 200e-9,
        ..p
    };
    let (te, ts) = (
        decode_seconds(&p, &m, &gpu, &we),
        decode_seconds(&p, &m, &gpu, &ws),
    );
    let wave = |keys: f64| p.decode_wave_latency + keys / 8.0 * p.decode_warp_key_latency;
    let merged = merge_seconds(&p, &m, &gpu, &we);
    assert_eq!(merge(&m, &we), merge(&m, &ws));
    let latency = p.attention_latency + merged;
    assert!((te - (latency + wave(500.0))).abs() < 1e-9 * te, "{te}");
    assert!((ts - (latency + wave(4250.0))).abs() < 1e-9 * ts, "{ts}");
    assert!(ts > 5.0 * te, "{ts} {te}");
}

#[test]
fn the_longest_blocks_tail_is_its_last_wave_at_one_latency_per_key_whatever_the_group() {
    // One sequence at 2,048 keys among four at 300, in the graph of 8: 4
    // splits of 8-warp blocks, 256 blocks, 2 an SM; the longest block reads
    // 2,049 / 4 keys, the mean block (2,049 + 4 × 301) × 8 / 256; in the
    // uniform batch 301 / 4 and 5 × 301 × 8 / 256. Priced by the waves
    // alone: at group 2 (qwen3-0.6b) both blocks fit at once, one wave as
    // long as the longest; at group 4 (qwen3-8b, 8 KV heads too) one fits,
    // two waves, the mean block's then the longest's. A key costs a warp
    // the same in both.
    let (gpu, p) = (
        sm_bound_h200(),
        OperatorParams {
            decode_block_cost: 0.0,
            decode_key_cost: 0.0,
            decode_kv_key_cost: 0.0,
            decode_wave_latency: 1e-6,
            decode_warp_key_latency: 200e-9,
            ..hard_max()
        },
    );
    let mut seqs = vec![seq(1, 300); 4];
    seqs.insert(0, seq(1, 2048));
    let mixed = BatchShape { seqs };
    let uniform = BatchShape {
        seqs: vec![seq(1, 300); 5],
    };
    let tail = |m: &ModelShape| {
        decode_seconds(&p, m, &gpu, &decode_work(m, &mixed, true))
            - decode_seconds(&p, m, &gpu, &decode_work(m, &uniform, true))
    };
    let eight_b = ModelShape::from_qwen3(&engine::model::Qwen3Config::preset("qwen3-8b").unwrap());
    let (t2, t4) = (tail(&ModelShape::qwen3_0_6b()), tail(&eight_b));
    let per_key = p.decode_warp_key_latency / 8.0;
    let (longest, uniform_longest) = (2049.0 / 4.0, 301.0 / 4.0);
    let (mean, uniform_mean) = (
        (2049.0 + 4.0 * 301.0) * 8.0 / 256.0,
        5.0 * 301.0 * 8.0 / 256.0,
    );
    let one_wave = (longest - uniform_longest) * per_key;
    assert!((t2 - one_wave).abs() < 1e-12, "{t2}");
    let two_waves = one_wave + (mean - uniform_mean) * per_key;
    assert!((t4 - two_waves).abs() < 1e-12, "{t2} {t4}");
}

#[test]
fn on_an_sm_that_holds_several_blocks_the_longest_runs_beside_the_others_waves() {
    // qwen3-8b (group 4) in the graph of 64: 512 unsplit 4-warp blocks, 3
    // an SM, 4 on the busiest of 132 SMs: two waves. One sequence at 2,048
    // keys among 63 at 300: its block holds one slot for its whole read
    // while the other blocks stream through the SM's other slots, so the
    // work is the longer of the two waves of mean blocks and the longest
    // block alone, not their sum.
    let m = qwen3_8b();
    let p = waves_only();
    let gpu = sm_bound_h200();
    let wave = |keys: f64| p.decode_wave_latency + keys / 4.0 * p.decode_warp_key_latency;
    // The layer's time, the longest block's wave and two of the mean block's.
    let waves_of = |longest| {
        let mut seqs = vec![seq(1, 299); 63];
        seqs.push(seq(1, longest));
        let w = decode_work(&m, &BatchShape { seqs }, true);
        assert_eq!((w.blocks, w.splits, w.blocks_per_sm), (512, 1, 3));
        let t = decode_seconds(&p, &m, &gpu, &w);
        (t, wave(w.max_keys), 2.0 * wave(w.keys * 8.0 / 512.0))
    };
    for longest in [2047, 399] {
        let (t, alone, two) = waves_of(longest);
        let expected = two.max(alone);
        assert!((t - expected).abs() < 1e-9 * t, "{longest}: {t} {expected}");
    }
    // At 2,048 keys the longest block is the longer; at 400 the waves are.
    let (_, alone, two) = waves_of(2047);
    assert!(alone > two, "{alone} {two}");
    let (_, alone, two) = waves_of(399);
    assert!(alone < two, "{alone} {two}");
}

#[test]
fn split_partials_are_merged_by_an_elementwise_kernel() {
    let m = ModelShape::qwen3_0_6b(); // 16 query heads of 128 dimensions
    let one = BatchShape {
        seqs: vec![seq(1, 299)],
    };
    // Batch 1 in a graph: 32 splits. attn_combine runs a block per query
    // head; each reads 32 partial rows of 128 f32 and a (max, sum) pair
    // per split, and writes a bf16 row of 128.
    let w = decode_work(&m, &one, true);
    let k = merge(&m, &w).expect("32 splits are merged");
    assert_eq!(k.blocks, 16);
    assert_eq!(k.bytes, 16.0 * (32.0 * (128.0 * 4.0 + 8.0) + 128.0 * 2.0));
    // One split writes the output itself: no second kernel.
    let fifty = BatchShape {
        seqs: vec![seq(1, 299); 50],
    };
    assert_eq!(merge(&m, &decode_work(&m, &fifty, true)), None);
}

#[test]
fn blocks_writing_split_partials_pay_their_fixed_cost_per_query_head() {
    let p = hard_max();
    let one = BatchShape {
        seqs: vec![seq(1, 299)],
    };
    let fifty = BatchShape {
        seqs: vec![seq(1, 299); 50],
    };
    // Batch 1 (32 splits): group 2 for qwen3-0.6b, 4 for qwen3-8b.
    for (m, group) in [(ModelShape::qwen3_0_6b(), 2.0), (qwen3_8b(), 4.0)] {
        let w = decode_work(&m, &one, true);
        assert!(w.splits > 1 && !w.heads_kernel);
        assert_eq!(block_cost(&p, &m, &w), group * p.decode_block_cost);
        // Batch 50 (graph of 64) writes its output in one split.
        let w = decode_work(&m, &fifty, true);
        assert_eq!(w.splits, 1);
        assert_eq!(block_cost(&p, &m, &w), p.decode_block_cost);
    }
    // The kernel of a warp per KV head, split or not: once a block.
    let m = qwen3_8b();
    let w = DecodeWork {
        splits: 2,
        heads_kernel: true,
        ..decode_work(&m, &one, true)
    };
    assert_eq!(block_cost(&p, &m, &w), p.decode_block_cost);
}

#[test]
fn the_kernel_of_a_warp_per_kv_head_has_its_own_key_costs() {
    let m = ModelShape::qwen3_0_6b();
    let (gpu, p) = (sm_bound_h200(), hard_max());
    // 256 decodes take the warp-per-KV-head kernel, 128 the 4-warp one.
    let big = decode_work(
        &m,
        &BatchShape {
            seqs: vec![seq(1, 999); 256],
        },
        true,
    );
    let small = decode_work(
        &m,
        &BatchShape {
            seqs: vec![seq(1, 999); 128],
        },
        true,
    );
    assert!(big.heads_kernel && !small.heads_kernel);
    let dearer = OperatorParams {
        heads_key_cost: 2.0 * p.heads_key_cost,
        ..p
    };
    assert!(decode_seconds(&dearer, &m, &gpu, &big) > decode_seconds(&p, &m, &gpu, &big));
    assert_eq!(
        decode_seconds(&dearer, &m, &gpu, &small),
        decode_seconds(&p, &m, &gpu, &small)
    );
}

#[test]
fn prefill_blocks_are_tiles_times_heads_in_launch_order() {
    let m = ModelShape::qwen3_0_6b(); // 32-token tiles
    let b = prefill_blocks(
        &m,
        &BatchShape {
            seqs: vec![seq(100, 0)],
        },
    );
    // Tiles end at 32, 64, 96, 100 keys: 1, 1, 2, 2 iterations, launched
    // longest first, per KV head.
    assert_eq!(b.len(), 4 * 8);
    assert_eq!(&b[..4], &[2, 2, 1, 1]);
    assert_eq!(&b[4..8], &[2, 2, 1, 1]);
    // Two sequences: every tile sorted by its keys, a chunk over 64 cached
    // keys (tiles ending at 96, 128) before a fresh prompt's (32, 64).
    let two = prefill_blocks(
        &m,
        &BatchShape {
            seqs: vec![seq(64, 0), seq(64, 64)],
        },
    );
    assert_eq!(&two[..4], &[2, 2, 1, 1]);
}

#[test]
fn a_prefill_layer_by_hand_where_fewer_resident_blocks_run_faster() {
    let m = ModelShape::qwen3_0_6b(); // 32-token tiles, 8 KV heads
    let gpu = crate::datasheet::lookup("h200-sxm").expect("h200 in the table");
    let p = OperatorParams::initial();
    let sm_flops = gpu.bf16_flops / 132.0 * p.prefill_attention_flops_share;
    let work = 4.0 * (64 * 64 * 128) as f64 / sm_flops;
    // A 512-token prompt: 16 tiles × 8 KV heads = 128 blocks, one an SM;
    // the last tiles' 8 iterations set the layer.
    let prompt = prefill_blocks(
        &m,
        &BatchShape {
            seqs: vec![seq(512, 0)],
        },
    );
    assert_eq!(prompt.len(), 128);
    let alone =
        p.attention_latency + p.prefill_block_cost + 8.0 * (p.prefill_iteration_latency + work);
    assert!((prefill_seconds(&p, &m, &gpu, &prompt) - alone).abs() < 1e-12);
    // 396 one-iteration blocks, three an SM: each iteration's work is shared.
    let shared =
        p.attention_latency + p.prefill_block_cost + p.prefill_iteration_latency + 3.0 * work;
    assert!((prefill_seconds(&p, &m, &gpu, &[1; 396]) - shared).abs() < 1e-12);
    // One more block waits for a slot: two rounds.
    let two_rounds = p.attention_latency
        + 2.0 * (p.prefill_block_cost + p.prefill_iteration_latency + 3.0 * work);
    assert!((prefill_seconds(&p, &m, &gpu, &[1; 397]) - two_rounds).abs() < 1e-12);
}

#[test]
fn decode_attention_reads_its_keys_at_the_read_share_of_the_copy_bandwidth() {
    // 64 decodes at 2,000 keys of qwen3-0.6b on the H100, no SM work: the
    // layer is its KV bytes at the share, which a faster read stream shortens.
    let m = ModelShape::qwen3_0_6b();
    let gpu = crate::datasheet::lookup("h100-sxm").expect("h100 in the table");
    let base = dram_only();
    let batch = BatchShape {
        seqs: vec![seq(1, 1999); 64],
    };
    let w = decode_work(&m, &batch, true);
    assert_eq!(w.splits, 1, "no merge kernel in this batch");
    let at = |share: f64| {
        let p = OperatorParams {
            read_bandwidth_share: share,
            ..base
        };
        decode_seconds(&p, &m, &gpu, &w)
    };
    let copy = 64.0 * 2000.0 * 4096.0 / (gpu.mem_bandwidth * super::super::COPY_FRACTION);
    assert!((at(1.0) - copy).abs() < 1e-9 * copy, "{} {copy}", at(1.0));
    assert!((at(1.25) - copy / 1.25).abs() < 1e-9 * copy);
}

#[test]
fn decode_blocks_run_in_waves_of_what_fits_on_an_sm() {
    // qwen3-8b (group 4): batch 64 at 300 keys, 512 unsplit 4-warp blocks
    // of 167 registers, 3 an SM. The wave's length sets the work.
    let m = qwen3_8b();
    let p = waves_only();
    let batch = BatchShape {
        seqs: vec![seq(1, 299); 64],
    };
    let w = decode_work(&m, &batch, true);
    assert_eq!((w.blocks, w.splits, w.warps_per_block), (512, 1, 4));
    assert_eq!(w.blocks_per_sm, 3);
    let wave = p.decode_wave_latency + 300.0 / 4.0 * p.decode_warp_key_latency;
    for (sms, waves) in [(132, 2.0), (64, 3.0), (32, 6.0)] {
        let gpu = GpuSpec {
            sm_count: sms,
            ..sm_bound_h200()
        };
        let t = decode_seconds(&p, &m, &gpu, &w);
        assert!((t - waves * wave).abs() < 1e-9 * t, "{sms} SMs: {t}");
    }
    // Where the blocks' shared cost is far longer, it sets the work.
    let slow = OperatorParams {
        decode_block_cost: 1e-3,
        ..p
    };
    let gpu = GpuSpec {
        sm_count: 132,
        ..sm_bound_h200()
    };
    let t = decode_seconds(&slow, &m, &gpu, &w);
    assert!((t - 4.0 * 1e-3).abs() < 1e-6 * t, "{t}");
}
