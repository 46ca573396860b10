use super::{
    attention_tile_tokens, gemm_padded_rows, BatchShape, SeqShape, SmCountError, StepCounts,
};

fn seq(new_tokens: u32, context_before: u32, samples: bool) -> SeqShape {
    SeqShape {
        new_tokens,
        context_before,
        samples,
    }
}

#[test]
fn counts_split_decodes_from_prefills_in_one_pass() {
    let shape = BatchShape {
        seqs: vec![
            seq(1, 40, true),   // decode
            seq(1, 9, true),    // decode
            seq(100, 0, false), // prompt chunk that does not reach the end
            seq(1, 0, true),    // one-token prompt: no context, so a prefill
            seq(30, 500, true), // last chunk of a long prompt
            seq(1, 12, false),  // one token that does not sample: a prefill
        ],
    };
    let c = shape.counts();
    assert_eq!(
        c,
        StepCounts {
            seqs: 6,
            tokens: 134,
            decode_seqs: 2,
            prefill_seqs: 4,
            prefill_tokens: 132,
            sampled: 4,
            context_tokens: 41 + 10 + 100 + 1 + 530 + 13,
            max_context: 530,
        }
    );
    assert!(!c.is_decode_only());
    assert_eq!(shape.num_tokens(), c.tokens);
    assert_eq!(shape.num_decodes() + shape.num_prefills(), c.seqs);
    assert_eq!(shape.prefill_tokens(), c.prefill_tokens);
    assert_eq!(shape.num_sampled(), c.sampled);
    let decodes = BatchShape {
        seqs: shape.seqs[..2].to_vec(),
    };
    assert!(decodes.counts().is_decode_only() && decodes.is_decode_only());
    let empty = BatchShape::default().counts();
    assert_eq!(empty, StepCounts::default());
    assert!(!empty.is_decode_only(), "an empty step is no decode step");
}

#[test]
fn a_tile_holds_the_whole_tokens_of_the_group_that_fit_64_rows() {
    // Qwen3 0.6b/1.7b, 4b/8b, 14b, 32b: 16, 32, 40 and 64 query heads over 8.
    let tokens: Vec<usize> = [16, 24, 32, 40, 64]
        .iter()
        .map(|&nq| attention_tile_tokens(nq, 8))
        .collect();
    assert_eq!(tokens, [32, 21, 16, 12, 8]);
    assert_eq!(attention_tile_tokens(128, 1), 1);
}

#[test]
fn an_sm_count_error_names_what_can_be_had() {
    let e = SmCountError::NotOffered {
        asked: 12,
        offered: (1..=16).map(|k| 8 * k).chain([132]).collect(),
    };
    assert_eq!(
        e.to_string(),
        "the driver cannot give exactly 12 SMs; it gives 8, 16, 24, ..., 128 or 132"
    );
    let e = SmCountError::NotOffered {
        asked: 3,
        offered: vec![8, 16, 20],
    };
    assert_eq!(
        e.to_string(),
        "the driver cannot give exactly 3 SMs; it gives 8, 16 or 20"
    );
    let e = SmCountError::MoreThanDevice {
        asked: 200,
        device: 132,
    };
    assert_eq!(e.to_string(), "200 SMs asked for; the device has 132");
}

#[test]
fn gemm_padded_rows_fall_into_few_classes_and_never_shrink() {
    assert_eq!(gemm_padded_rows(1), 16);
    assert_eq!(gemm_padded_rows(64), 64);
    assert_eq!(gemm_padded_rows(65), 128);
    assert_eq!(gemm_padded_rows(3200), 3200);
    assert_eq!(gemm_padded_rows(3201), 3264);
    let classes: std::collections::BTreeSet<usize> = (1..=4096).map(gemm_padded_rows).collect();
    assert_eq!(classes.len(), 4 + 63);
    assert!((1..=5000).all(|m| gemm_padded_rows(m) >= m));
}
