//! Packing checks: sections, padding (decode buckets and token buckets), the
//! token sections' offsets, the decode path of short chunks, and the batches
//! `pack_step` rejects.

use super::*;
use crate::request::RequestId;
use crate::runner::ScheduledSeq;

fn limits() -> BatchLimits {
    BatchLimits {
        block_size: 4,
        num_blocks: 16,
        vocab_size: 100,
        max_tokens: 64,
        max_seqs: 8,
        max_len: 32,
        tokens_per_tile: 2,
    }
}

fn seq<'a>(tokens: &'a [u32], start: usize, bt: &'a [u32], samples: bool) -> ScheduledSeq<'a> {
    ScheduledSeq {
        request_id: RequestId(0),
        token_ids: tokens,
        start_pos: start,
        block_table: bt,
        samples,
    }
}

#[test]
fn mixed_batch_is_packed_section_by_section() {
    let (pre, dec) = ([5u32, 6, 7], [9u32]);
    let (bt_pre, bt_dec) = ([3u32, 4], [7u32, 8]);
    let batch = ScheduledBatch {
        seqs: vec![seq(&pre, 2, &bt_pre, false), seq(&dec, 5, &bt_dec, true)],
        block_size: 4,
    };
    let mut buf = vec![-7; 256];
    let lay = pack_step(&batch, &limits(), Padding::None, &mut buf).unwrap();
    assert_eq!(
        (
            lay.num_tokens,
            lay.num_seqs,
            lay.num_sampled,
            lay.num_decodes,
            lay.num_tiles
        ),
        (4, 2, 1, 1, 2)
    );
    assert_eq!(buf[0], 2);
    // Zeroed argmax keys and counts of blocks done: one sampled row.
    assert_eq!(lay.q_start - lay.argmax, 3);
    assert!(buf[lay.argmax..lay.q_start].iter().all(|&x| x == 0));
    assert_eq!(&buf[lay.tokens..lay.tokens + 4], &[5, 6, 7, 9]);
    assert_eq!(&buf[lay.positions..lay.positions + 4], &[2, 3, 4, 5]);
    // position 2 -> block 3 offset 2; 4 -> block 4 offset 0; 5 -> block 8 offset 1
    assert_eq!(&buf[lay.slots..lay.slots + 4], &[14, 15, 16, 33]);
    assert_eq!(&buf[lay.q_start..lay.q_start + 3], &[0, 3, 4]);
    assert_eq!(&buf[lay.ctx_len..lay.ctx_len + 2], &[5, 6]);
    assert_eq!(buf[lay.sample_rows], 3);
    // The decode: sequence 1, token row 3, 6 keys.
    assert_eq!(&buf[lay.decodes..lay.decodes + 3], &[1, 3, 6]);
    // Longest tile first: tokens 2.. of sequence 0 attend to 5 keys, tokens 0..2 to 4.
    assert_eq!(&buf[lay.tiles..lay.tiles + 4], &[0, 2, 0, 0]);
    assert_eq!(&buf[lay.block_tables..lay.block_tables + 4], &[3, 4, 7, 8]);
}

#[test]
fn decode_bucket_pads_with_uncached_rows() {
    let toks = [1u32];
    let bt = [2u32, 3];
    let batch = ScheduledBatch {
        seqs: vec![seq(&toks, 4, &bt, true)],
        block_size: 4,
    };
    let mut buf = vec![-7; 256];
    let lay = pack_step(&batch, &limits(), Padding::Sequences(4), &mut buf).unwrap();
    assert_eq!(lay, StepLayout::new(4, 4, 4, 4, 0, 2));
    assert_eq!(&buf[lay.slots..lay.slots + 4], &[12, -1, -1, -1]);
    assert_eq!(&buf[lay.ctx_len..lay.ctx_len + 4], &[5, 0, 0, 0]);
    assert_eq!(&buf[lay.q_start..lay.q_start + 5], &[0, 1, 2, 3, 4]);
    assert_eq!(
        &buf[lay.decodes..lay.decodes + 12],
        &[0, 0, 5, 1, 1, 0, 2, 2, 0, 3, 3, 0]
    );
    assert!(lay.is_decode_only());
}

#[test]
fn a_short_chunk_over_cached_context_takes_the_decode_path() {
    // 2 tokens (one tile's worth) after 5 cached: two decode entries, no tile; a
    // fresh 2-token prompt stays a tile.
    let (chunk, fresh) = ([5u32, 6], [7u32, 8]);
    let (bt_chunk, bt_fresh) = ([3u32, 4], [9u32]);
    let batch = ScheduledBatch {
        seqs: vec![
            seq(&chunk, 5, &bt_chunk, true),
            seq(&fresh, 0, &bt_fresh, true),
        ],
        block_size: 4,
    };
    let mut buf = vec![-7; 256];
    let lay = pack_step(&batch, &limits(), Padding::None, &mut buf).unwrap();
    assert_eq!((lay.num_decodes, lay.num_tiles), (2, 1));
    // Each token sees the keys up to itself: positions 5 and 6.
    assert_eq!(&buf[lay.decodes..lay.decodes + 6], &[0, 0, 6, 0, 1, 7]);
    assert_eq!(&buf[lay.tiles..lay.tiles + 2], &[1, 0]);
    assert!(!lay.is_decode_only());
    // A graph bucket takes only one-token sequences.
    assert!(matches!(
        pack_step(&batch, &limits(), Padding::Sequences(2), &mut buf),
        Err(RunnerError::BadBatch(_))
    ));
}

#[test]
fn bad_batches_are_rejected() {
    let mut buf = vec![0; 256];
    let toks = [1u32, 2];
    let short_bt = [1u32];
    let b = ScheduledBatch {
        seqs: vec![seq(&toks, 3, &short_bt, true)],
        block_size: 4,
    };
    assert!(matches!(
        pack_step(&b, &limits(), Padding::None, &mut buf),
        Err(RunnerError::BadBatch(_))
    ));
    let big_tok = [100u32];
    let bt = [1u32];
    let b = ScheduledBatch {
        seqs: vec![seq(&big_tok, 0, &bt, true)],
        block_size: 4,
    };
    assert!(matches!(
        pack_step(&b, &limits(), Padding::None, &mut buf),
        Err(RunnerError::BadBatch(_))
    ));
    let bad_block = [16u32];
    let b = ScheduledBatch {
        seqs: vec![seq(&toks, 0, &bad_block, true)],
        block_size: 4,
    };
    assert!(matches!(
        pack_step(&b, &limits(), Padding::None, &mut buf),
        Err(RunnerError::BadBatch(_))
    ));
    let b = ScheduledBatch {
        seqs: vec![seq(&toks, 0, &bt, true)],
        block_size: 8,
    };
    assert!(matches!(
        pack_step(&b, &limits(), Padding::None, &mut buf),
        Err(RunnerError::BadBatch(_))
    ));
    // A prefill cannot go through a decode graph.
    let bt2 = [1u32, 2];
    let b = ScheduledBatch {
        seqs: vec![seq(&toks, 0, &bt2, true)],
        block_size: 4,
    };
    assert!(matches!(
        pack_step(&b, &limits(), Padding::Sequences(2), &mut buf),
        Err(RunnerError::BadBatch(_))
    ));
}

#[test]
fn token_sections_depend_on_the_token_count_alone() {
    for t in [1usize, 7, 8, 16, 63, 64, 100, 128, 1024] {
        let want = TokenRows::new(t);
        for (s, n_samp, n_dec, n_tiles, stride) in [
            (1, 0, 0, 1, 1),
            (1, 1, 0, 3, 9),
            (t, t, t, 0, 1),
            (5, 2, 4, 7, 40),
            (3, 3, 1, 2, 257),
        ] {
            let lay = StepLayout::new(t, s, n_samp, n_dec, n_tiles, stride);
            assert_eq!(
                lay.token_rows(),
                want,
                "t {t}, composition {s} {n_samp} {n_dec} {n_tiles}"
            );
            // The argmax keys are 64-bit: an even offset, after the token sections.
            assert!(lay.argmax.is_multiple_of(2) && lay.argmax >= want.slots + t);
            assert!(lay.argmax - (want.slots + t) <= 1);
        }
    }
}

#[test]
fn the_capacity_holds_every_step_up_to_the_limits() {
    let (max_t, max_s, bps) = (64, 8, 5);
    let cap = StepLayout::capacity(max_t, max_s, bps);
    for t in 1..=max_t {
        for s in 1..=max_s.min(t) {
            // Decode entries and tiles hold a token each at least.
            let lay = StepLayout::new(t, s, s, t, t, bps);
            assert!(
                lay.total <= cap,
                "{t} tokens, {s} sequences: {} > {cap}",
                lay.total
            );
        }
    }
}

#[test]
fn a_token_bucket_pads_rows_that_write_nothing_and_belong_to_no_sequence() {
    let (pre, dec, chunk) = ([5u32, 6, 7], [9u32], [3u32, 4]);
    let (bt_pre, bt_dec, bt_chunk) = ([3u32, 4], [7u32, 8], [10u32, 11]);
    let batch = ScheduledBatch {
        seqs: vec![
            seq(&pre, 2, &bt_pre, false),
            seq(&dec, 5, &bt_dec, true),
            seq(&chunk, 5, &bt_chunk, true),
        ],
        block_size: 4,
    };
    let mut eager = vec![-7; 256];
    let e = pack_step(&batch, &limits(), Padding::None, &mut eager).unwrap();
    let mut padded = vec![-7; 256];
    let p = pack_step(&batch, &limits(), Padding::Tokens(16), &mut padded).unwrap();
    assert_eq!(p.token_rows(), TokenRows::new(16));
    assert_eq!(
        (p.num_seqs, p.num_sampled, p.num_decodes, p.num_tiles),
        (e.num_seqs, e.num_sampled, e.num_decodes, e.num_tiles)
    );
    // The real rows as the eager step has them, then padding: token 0, position 0, slot -1.
    for (off_e, off_p, pad) in [
        (e.tokens, p.tokens, 0),
        (e.positions, p.positions, 0),
        (e.slots, p.slots, -1),
    ] {
        assert_eq!(&padded[off_p..off_p + 6], &eager[off_e..off_e + 6]);
        assert!(padded[off_p + 6..off_p + 16].iter().all(|&x| x == pad));
    }
    // Everything after the token sections is the eager step's, shifted: the last
    // sequence ends at the real rows (q_start[S] = 6), the padding is nobody's.
    assert_eq!(&padded[p.argmax..p.total], &eager[e.argmax..e.total]);
    assert_eq!(padded[p.q_start + 3], 6);
    assert_eq!(padded[0], eager[0]);
}

#[test]
fn a_token_bucket_must_hold_the_step() {
    let toks = [1u32, 2, 3];
    let bt = [1u32];
    let b = ScheduledBatch {
        seqs: vec![seq(&toks, 0, &bt, true)],
        block_size: 4,
    };
    let mut buf = vec![0; 512];
    for tb in [2, 65] {
        // Fewer rows than tokens, or more than the runner's 64.
        assert!(
            matches!(
                pack_step(&b, &limits(), Padding::Tokens(tb), &mut buf),
                Err(RunnerError::BadBatch(_))
            ),
            "bucket {tb}"
        );
    }
    assert!(pack_step(&b, &limits(), Padding::Tokens(3), &mut buf).is_ok());
}
