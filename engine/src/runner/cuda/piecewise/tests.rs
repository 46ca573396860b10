//! Token buckets (which steps run piecewise-graphed, padded to how many
//! rows) and the pieces' boundaries.

use super::{piece_parts, token_bucket, token_buckets, SMALLEST_BUCKET};
use crate::runner::gemm_padded_rows;

#[test]
fn steps_pad_to_the_gemms_row_classes_from_eight_rows() {
    let (max, limit) = (3200, 1024);
    let cases = [
        (1, 8),
        (8, 8),
        (9, 16),
        (16, 16),
        (17, 32),
        (49, 64),
        (64, 64),
        (65, 128),
        (72, 128), // a 64-token chunk beside 8 decodes
        (129, 192),
        (1000, 1024),
        (1024, 1024),
    ];
    for (t, want) in cases {
        assert_eq!(token_bucket(t, max, limit), Some(want), "{t} tokens");
    }
    // Past 8 rows a bucket is the rows the GEMMs run with anyway: no extra GEMM work.
    for t in SMALLEST_BUCKET + 1..=limit {
        assert_eq!(token_bucket(t, max, limit), Some(gemm_padded_rows(t)));
    }
}

#[test]
fn long_and_empty_steps_run_eagerly() {
    assert_eq!(token_bucket(1025, 3200, 1024), None);
    assert_eq!(token_bucket(3200, 3200, 1024), None);
    assert_eq!(token_bucket(0, 3200, 1024), None);
    // A limit of 0 turns the pieces off for every step.
    assert_eq!(token_bucket(1, 3200, 0), None);
    assert!(token_buckets(3200, 0).is_empty());
    // More tokens than the runner takes never get a bucket.
    assert_eq!(token_bucket(33, 32, 1024), None);
}

#[test]
fn buckets_never_outgrow_the_largest_step() {
    // A budget between two classes: its own bucket is the largest one, so
    // the workspace and metadata (sized for 100 tokens) hold every bucket.
    assert_eq!(token_bucket(65, 100, 1024), Some(100));
    assert_eq!(token_bucket(100, 100, 1024), Some(100));
    assert_eq!(token_buckets(100, 1024), vec![8, 16, 32, 48, 64, 100]);
    assert_eq!(token_buckets(4, 1024), vec![4]);
}

#[test]
fn the_bucket_list_is_every_bucket_a_step_can_get_once() {
    let (max, limit) = (3200, 1024);
    let list = token_buckets(max, limit);
    assert_eq!(&list[..6], &[8, 16, 32, 48, 64, 128]);
    assert_eq!(list.last(), Some(&1024));
    assert_eq!(list.len(), 5 + 15);
    assert!(list.windows(2).all(|w| w[0] < w[1]));
    for t in 1..=limit {
        let b = token_bucket(t, max, limit).unwrap();
        assert!(list.contains(&b) && b >= t, "{t} tokens: bucket {b}");
    }
    // A limit between classes: steps up to it are covered, by the class above it.
    let list = token_buckets(max, 1000);
    assert_eq!(list.last(), Some(&1024));
    assert_eq!(token_bucket(1001, max, 1000), None);
}

#[test]
fn the_pieces_and_the_attention_between_them_run_the_layers_in_order() {
    for layers in [1usize, 2, 28] {
        // Piece p, then layer p's attention (none after the last piece), as
        // `launch_piecewise` runs them.
        let mut order = Vec::new();
        for p in 0..=layers {
            let (back, front) = piece_parts(p, layers);
            order.extend(back.map(|l| ("back", l)));
            order.extend(front.map(|l| ("front", l)));
            if p < layers {
                order.push(("attention", p));
            }
        }
        let want: Vec<_> = (0..layers)
            .flat_map(|l| [("front", l), ("attention", l), ("back", l)])
            .collect();
        assert_eq!(order, want, "{layers} layers");
    }
    // The first piece starts from the embeddings, the last leaves its output to the head.
    assert_eq!(piece_parts(0, 28), (None, Some(0)));
    assert_eq!(piece_parts(28, 28), (Some(27), None));
}
