//! Tests of the GEMM model: a hand computation, the bandwidth and wave
//! terms, and the blocks each kernel runs as.

use super::*;

fn gpu(bandwidth: f64) -> GpuSpec {
    GpuSpec {
        name: "test".into(),
        bf16_flops: 1e15,
        mem_bandwidth: bandwidth,
        mem_bytes: 80e9,
        sm_count: 100,
        source: "test".into(),
    }
}

fn params() -> OperatorParams {
    OperatorParams {
        read_bandwidth_share: 1.0,
        gemm_bytes_per_sm: 1e12,
        skinny_bytes_per_sm: 1e12,
        gemm_flops_share: 0.5,
        gemm_latency: 3e-6,
        gemm_wave_latency: 1e-6,
        overlap_exponent: 1e6, // a hard maximum
        ..OperatorParams::initial()
    }
}

#[test]
fn one_gemm_by_hand() {
    // 4096 x 4096 x 4096 on 100 SMs: 32 x 32 = 1024 tiles, 10 whole waves
    // and a last partial one that stream-K spreads over every SM: 10.24
    // waves, no slot idle. FLOPs 2 * 4096^3 at 0.5 of 1e15 FLOP/s (under
    // the burst share, 0.75); bytes 3 * 2 * 4096^2, at 4e12 * COPY_FRACTION,
    // or 100 SMs at 1e12 each: compute bound.
    let g = Gemm {
        m: 4096,
        n: 4096,
        k: 4096,
    };
    let t = gemm_time(
        &params(),
        &gpu(4e12),
        &g,
        GemmKernel::Cublas { split: 1 },
        true,
    );
    let flops = 2.0 * 4096f64.powi(3);
    let compute = flops / 0.5e15;
    let bytes = 6.0 * 4096f64.powi(2);
    let memory = (bytes / (4e12 * COPY_FRACTION)).max(bytes / 1e14);
    // 11 waves of blocks, of which the first EXPOSED_WAVES pay the fill.
    let latency = 3e-6 + 4.0 * 1e-6;
    assert!((t.compute - compute).abs() < 1e-12 * compute);
    assert!((t.memory - memory).abs() < 1e-9 * memory);
    assert!(
        (t.total - (latency + compute)).abs() < 1e-9 * t.total,
        "{t:?}"
    );
}

#[test]
fn doubling_the_bandwidth_halves_a_bandwidth_bound_gemm_but_not_its_latency() {
    // A decode product (one row): memory bound.
    let g = Gemm {
        m: 1,
        n: 8192,
        k: 8192,
    };
    let kernel = GemmKernel::Cublas { split: 1 };
    let slow = gemm_time(&params(), &gpu(0.5e12), &g, kernel, true);
    let fast = gemm_time(&params(), &gpu(1e12), &g, kernel, true);
    assert!(slow.memory > 10.0 * slow.compute);
    assert!((fast.memory - slow.memory / 2.0).abs() < 1e-9 * slow.memory);
    assert_eq!(fast.latency, slow.latency);
    assert!(((fast.total - fast.latency) - (slow.total - slow.latency) / 2.0).abs() < 1e-9);
}

#[test]
fn blocks_follow_the_kernel() {
    let g = Gemm {
        m: 1,
        n: 1024,
        k: 2048,
    };
    assert_eq!(g.blocks(GemmKernel::Skinny, 132), 128);
    assert_eq!(g.blocks(GemmKernel::Cublas { split: 4 }, 132), 32);
    // cuBLAS's own split: 8 tiles on 132 SMs, K 2048 in 4 slices of 512.
    assert_eq!(g.blocks(GemmKernel::Cublas { split: 1 }, 132), 32);
    // The runner's 2 slices of 1,536 (16 tiles each) split again in 3 of
    // 512: 96 blocks; on 16 SMs the 32 tiles fill them, no further split.
    let down = Gemm {
        m: 256,
        n: 1024,
        k: 3072,
    };
    assert_eq!(down.k_slices(GemmKernel::Cublas { split: 2 }, 132), 6);
    assert_eq!(down.blocks(GemmKernel::Cublas { split: 2 }, 132), 96);
    assert_eq!(down.k_slices(GemmKernel::Cublas { split: 2 }, 16), 2);
}

#[test]
fn a_one_row_product_computes_sixteen_rows_and_sixty_four_rows_compute_sixty_four() {
    let g = |m| Gemm {
        m,
        n: 1024,
        k: 1024,
    };
    let kernel = GemmKernel::Cublas { split: 1 };
    // 8 tiles of 128 columns on 8 SMs: one wave, K whole.
    let one_tile = |rows: usize| 2.0 * (rows * TILE * 1024) as f64;
    assert_eq!(g(1).tile_flops(kernel, 8), one_tile(16));
    assert_eq!(g(17).tile_flops(kernel, 8), one_tile(32));
    assert_eq!(g(64).tile_flops(kernel, 8), one_tile(64));
    assert_eq!(g(65).tile_flops(kernel, 8), one_tile(128));
    let mut gpu8 = gpu(1e12);
    gpu8.sm_count = 8;
    let t1 = gemm_time(&params(), &gpu8, &g(1), kernel, true);
    let t64 = gemm_time(&params(), &gpu8, &g(64), kernel, true);
    assert!((t64.compute - 4.0 * t1.compute).abs() < 1e-12 * t64.compute);
}

#[test]
fn skinny_blocks_share_an_sm_so_a_wave_holds_several() {
    // 512 skinny blocks of one row tile on 64 SMs holding 5 each: 2 waves
    // (cuBLAS's tiles, one an SM, would take 8).
    let g = Gemm {
        m: 1,
        n: 512 * SKINNY_COLUMNS,
        k: 1024,
    };
    let mut gpu64 = gpu(1e12);
    gpu64.sm_count = 64;
    let p = params();
    let t = gemm_time(&p, &gpu64, &g, GemmKernel::Skinny, true);
    assert!((t.latency - (p.gemm_latency + 2.0 * p.gemm_wave_latency)).abs() < 1e-15);
    assert_eq!(g.blocks_per_sm(GemmKernel::Skinny), 5);
    let four_tiles = Gemm { m: 64, ..g };
    assert_eq!(four_tiles.blocks_per_sm(GemmKernel::Skinny), 3);
    assert_eq!(g.blocks_per_sm(GemmKernel::Cublas { split: 1 }), 1);
}

#[test]
fn waves_past_the_exposed_ones_add_no_latency() {
    // One-row products of 128-column tiles on 8 SMs: 8, 32 and 1,024
    // tiles are 1, 4 and 128 waves.
    let mut gpu8 = gpu(1e12);
    gpu8.sm_count = 8;
    let p = params();
    let latency = |tiles: usize| {
        let g = Gemm {
            m: 1,
            n: tiles * TILE,
            k: 1024,
        };
        gemm_time(&p, &gpu8, &g, GemmKernel::Cublas { split: 1 }, true).latency
    };
    let fill = |waves: f64| p.gemm_latency + waves * p.gemm_wave_latency;
    assert!((latency(8) - fill(1.0)).abs() < 1e-15);
    assert!((latency(32) - fill(EXPOSED_WAVES as f64)).abs() < 1e-15);
    assert_eq!(latency(1024), latency(32));
}

#[test]
fn only_the_last_partial_wave_of_a_product_of_128_row_tiles_is_spread_over_every_sm() {
    let p = params();
    let kernel = GemmKernel::Cublas { split: 1 };
    let compute = |m: usize, tiles_n: usize| {
        let g = Gemm {
            m,
            n: tiles_n * TILE,
            k: 4096,
        };
        gemm_time(&p, &gpu(1e12), &g, kernel, true).compute
    };
    let tile = |rows: usize| 2.0 * (rows * TILE * 4096) as f64 / (1e15 / 100.0 * 0.5);
    // 150 tiles of 128 rows on 100 SMs: 1.5 waves (stream-K).
    assert!((compute(128, 150) - 1.5 * tile(128)).abs() < 1e-12);
    // 150 tiles of 64 rows (a decode batch): 2 whole waves.
    assert!((compute(64, 150) - 2.0 * tile(64)).abs() < 1e-12);
}

#[test]
fn the_busy_sms_together_reach_at_most_the_burst_share_of_the_chip() {
    let p = OperatorParams {
        gemm_flops_share: 0.9,
        burst_flops_share: 0.6,
        ..params()
    };
    let kernel = GemmKernel::Cublas { split: 1 };
    // K of one MIN_SPLIT_K slice: cuBLAS cannot split it to fill the SMs.
    let g = |tiles_n: usize| Gemm {
        m: 128,
        n: tiles_n * TILE,
        k: MIN_SPLIT_K,
    };
    let per_sm_peak = 1e15 / 100.0;
    let tile = 2.0 * (128 * TILE * MIN_SPLIT_K) as f64;
    // Every SM busy: 0.6 of the chip's peak, 0.6 of each SM's.
    let full = gemm_time(&p, &gpu(1e12), &g(100), kernel, true).compute;
    assert!((full - tile / (0.6 * per_sm_peak)).abs() < 1e-12, "{full}");
    // 50 busy SMs share the same burst: 1.2 of an SM's peak each, so the
    // SM's own share, 0.9, binds.
    let half = gemm_time(&p, &gpu(1e12), &g(50), kernel, true).compute;
    assert!((half - tile / (0.9 * per_sm_peak)).abs() < 1e-12, "{half}");
}

#[test]
fn a_slice_reads_the_chips_dram_at_its_sms_rate_not_its_copy_bandwidth() {
    let whole = crate::datasheet::lookup("h200-sxm").expect("h200 in the table");
    // 8 SMs whose copy kernel moves 0.76 TB/s (the H200's green context).
    let slice = crate::operators::slices::slice_of(&whole, 8, 0.76);
    let p = OperatorParams {
        gemm_bytes_per_sm: 140e9,
        overlap_exponent: 1e6,
        ..params()
    };
    // A one-row product of 64 tiles: 8 busy SMs, memory bound.
    let g = Gemm {
        m: 1,
        n: 64 * TILE,
        k: 8192,
    };
    let t = gemm_time(&p, &slice, &g, GemmKernel::Cublas { split: 1 }, true);
    let sm_bound = g.bytes() / (8.0 * 140e9);
    assert!((t.memory - sm_bound).abs() < 1e-9 * sm_bound, "{t:?}");
    // Faster than the slice's own copy bandwidth would let it.
    assert!(t.memory < g.bytes() / 0.76e12);
    // A GPU of the user's, not a slice of a datasheet GPU, is its own chip.
    let own = gpu(0.5e12);
    assert_eq!(crate::operators::slices::chip_of(&own), &own);
}

#[test]
fn smooth_max_is_between_the_max_and_the_sum() {
    assert_eq!(smooth_max(0.0, 0.0, 4.0), 0.0);
    let m = smooth_max(1.0, 1.0, 4.0);
    assert!(m > 1.0 && m < 2.0);
    assert!((smooth_max(3.0, 0.0, 4.0) - 3.0).abs() < 1e-12);
}
