//! Which kernel the CUDA runner gives a Linear product, and how it splits it:
//! rules measured on the H200, shared by the runner (`cuda::linear`) and the
//! cost model that prices the runner's steps without a GPU (crate
//! `calibration`, `operators`).

/// Most tokens of a step that runs piecewise-graphed
/// (`CudaTuning::piecewise_max_tokens`): beyond it the GPU's work hides
/// the eager launches, so graphs would only cost warm-up time and memory.
/// Qwen3-0.6B on the H200: a 512-token prefill takes 2.67 ms eagerly, its
/// GEMMs alone 1.19 ms and its attention about 0.85 (results/h200/
/// profile.csv); its GPU work (about 2.5 ms) is then about as long as the
/// same launches take the host on a slow machine (a 64-token prefill, as
/// many launches, 1.35–2.31 ms: docs/performance.md), and at 1,024 tokens
/// about twice as long. `engine-bench --mixed` times prefills of 256 to
/// 2,048 tokens both ways, to check. Only the GEMM shapes of these steps
/// and of the decode graphs are tuned: longer steps run cuBLAS untuned.
pub const PIECEWISE_MAX_TOKENS: usize = 1024;

/// The skinny kernel re-reads all of `x` in every block of 8 output columns,
/// so it wins only while `m · n` is small: measured on the H200 by
/// `scripts/gemm_bench.cu` (28-layer graphs, 2026-11-30) it beats cuBLAS for
/// Qwen3-0.6B's O and down projections (n = 1024) up to 24–32 rows and for
/// its QKV (n = 4096) up to 8 rows, and loses for gate-up (n = 6144) and the
/// LM head at any row count.
const SKINNY_MAX_PRODUCT: usize = 32 * 1024;
const SKINNY_MAX_COLS: usize = 4096;
/// Most weight elements (`n · k`) per SM for which the skinny kernel wins:
/// each of its blocks streams K for 8 columns, so with more weights per SM
/// than this its blocks queue up and cuBLAS's split tiles win. Measured on
/// the H200 with `engine-bench --profile` on the whole GPU and on green
/// contexts (results/h200/operators/groups.csv, `full` against
/// `full_cublas`): batch-1 decode of qwen3-0.6b (O and down at 16–24 K
/// elements per SM on 132 SMs) is 11 % faster with the skinny kernel and
/// still 7 % at 64 SMs (33–49 K), ties at 32 SMs (65–98 K) and is 13–15 %
/// slower at 16 and 8; qwen3-1.7b, -4b and -8b, whose down products hold
/// 95 K elements per SM and more on the whole GPU, are 2–11 % slower with it.
const SKINNY_MAX_WEIGHTS_PER_SM: usize = 64 * 1024;

/// Whether the skinny kernel can compute an `m × k` by `n × k` product at
/// all: 1–64 rows (four 16-row tiles), K a multiple of 256, N of 8.
pub fn skinny_takes(m: usize, n: usize, k: usize) -> bool {
    (1..=64).contains(&m) && k.is_multiple_of(256) && n.is_multiple_of(8)
}

/// Whether the skinny kernel takes, and beats cuBLAS on, an `m × k` by
/// `n × k` product on a GPU (or green context) of `sm_count` SMs.
pub fn skinny_wins(m: usize, n: usize, k: usize, sm_count: usize) -> bool {
    skinny_takes(m, n, k)
        && m * n <= SKINNY_MAX_PRODUCT
        && n <= SKINNY_MAX_COLS
        && n * k <= SKINNY_MAX_WEIGHTS_PER_SM * sm_count
}

/// Most slices of K a residual product is split into (also the most
/// [`super::CudaTuning::split_k`] takes).
pub const SPLIT_K_MAX: usize = 8;
/// Most partials `add_rmsnorm` adds up (`NORM_MAX_PARTS` in kernels.cu).
const NORM_MAX_PARTS: usize = 8;
const _: () = assert!(SPLIT_K_MAX <= NORM_MAX_PARTS);
/// Most rows a residual product is split for; the partials' buffer holds
/// `SPLIT_K_MAX` fp32 matrices of this many (padded) rows.
pub const SPLIT_K_MAX_ROWS: usize = 256;

/// Slices of K for a residual product of `m` rows (1: one plain GEMM), in a
/// step captured into a graph (`graphed`: decode graphs and the pieces of
/// piecewise steps) or launched eagerly. Measured on the
/// H200 (engine-bench --split-sweep, results/h200/split_k.csv, 2026-11-30):
/// - in decode graphs 4 slices take 0.06–0.14 ms off a step at 24–128 rows
///   (batch 64: 1.670 ms against 1.761 with one GEMM), 2 slices 1.3 % at
///   256 rows; at 16 rows and fewer the skinny kernel is as fast;
/// - eagerly, where each launch costs host time, the strided-batched cuBLAS
///   call is 0.4 ms per step slower than the skinny kernel where that takes
///   the product (a 24- or 32-token prefill: 2.07 against 1.65 ms), and
///   0.13–0.2 ms faster than one cuBLAS GEMM at 64–128 tokens.
///
/// More slices lose: the norm reads every partial.
pub fn split_k_for(m: usize, n: usize, k: usize, graphed: bool, sm_count: usize) -> usize {
    if n > 2048 || (!graphed && skinny_wins(m, n, k, sm_count)) {
        return 1;
    }
    let splits = match m {
        17..=192 => 4,
        193..=SPLIT_K_MAX_ROWS => 2,
        _ => 1,
    };
    largest_split(k, splits)
}

/// The largest split up to `most` that cuts K into slices of a multiple of 64.
pub fn largest_split(k: usize, most: usize) -> usize {
    (1..=most)
        .rev()
        .find(|&s| k.is_multiple_of(s) && (k / s).is_multiple_of(64))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200_SMS: usize = 132;

    #[test]
    fn skinny_takes_the_products_it_wins_on_the_h200() {
        // Qwen3-0.6B: O and down (n = 1024), QKV (4096), gate-up (6144), LM head.
        assert!(skinny_wins(32, 1024, 2048, H200_SMS));
        assert!(!skinny_wins(48, 1024, 3072, H200_SMS));
        assert!(skinny_wins(8, 4096, 1024, H200_SMS));
        assert!(!skinny_wins(16, 4096, 1024, H200_SMS));
        assert!(!skinny_wins(1, 6144, 1024, H200_SMS));
        assert!(!skinny_wins(1, 151_936, 1024, H200_SMS));
        // Shapes the kernel cannot take.
        assert!(!skinny_wins(0, 1024, 1024, H200_SMS));
        assert!(!skinny_wins(1, 1024, 1000, H200_SMS));
        assert!(!skinny_wins(1, 1020, 1024, H200_SMS));
    }

    #[test]
    fn skinny_gives_way_to_cublas_where_an_sm_holds_many_weights() {
        // Qwen3-0.6B's O (k 2048) and down (k 3072) at batch 1: skinny on
        // 64 SMs and more, cuBLAS on 32 and fewer.
        for sms in [64, 132] {
            assert!(skinny_wins(1, 1024, 2048, sms), "{sms} SMs");
            assert!(skinny_wins(1, 1024, 3072, sms), "{sms} SMs");
        }
        for sms in [8, 16, 32] {
            assert!(!skinny_wins(1, 1024, 3072, sms), "{sms} SMs");
        }
        // Qwen3-8B's down (n 4096, k 12288) and Qwen3-1.7B's (n 2048, k 6144)
        // on the whole GPU; 1.7B's O (n 2048, k 2048) keeps the skinny kernel.
        assert!(!skinny_wins(1, 4096, 12288, H200_SMS));
        assert!(!skinny_wins(1, 2048, 6144, H200_SMS));
        assert!(skinny_wins(1, 2048, 2048, H200_SMS));
        // An eager product cuBLAS now takes is split like any other.
        assert_eq!(split_k_for(32, 1024, 3072, false, 16), 4);
    }

    #[test]
    fn residual_products_split_where_the_h200_measured_a_gain() {
        // O (k 2048) and down (k 3072) of Qwen3-0.6B: (rows, in a graph, slices).
        let cases = [
            (16, true, 1), // the skinny kernel's rows
            (17, true, 4),
            (64, true, 4),
            (192, true, 4),
            (256, true, 2),
            (257, true, 1), // past the partials' buffer
            // Eagerly, not where the skinny kernel takes the product (up to 32 rows).
            (32, false, 1),
            (33, false, 4),
            (256, false, 2),
        ];
        for k in [2048, 3072] {
            for (m, graphed, want) in cases {
                let got = split_k_for(m, 1024, k, graphed, H200_SMS);
                assert_eq!(got, want, "{m} rows, k {k}, graphed {graphed}");
            }
        }
        // Wide products have blocks enough.
        assert_eq!(split_k_for(64, 4096, 1024, true, H200_SMS), 1);
        // Slices stay multiples of 64 wide, or the split shrinks.
        assert_eq!(split_k_for(64, 1024, 192, true, H200_SMS), 3);
        assert_eq!(split_k_for(64, 1024, 100, true, H200_SMS), 1);
        assert_eq!(largest_split(512, 8), 8);
    }
}
