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
    // 4096 x 4096 x 4096 on 100 SMs: 32 x 32 = 1024 tiles, 11 waves
    // (1024 / 1100 of the slots filled). FLOPs 2 * 4096^3 at 0.5 of 1e15
    // FLOP/s; bytes 3 * 2 * 4096^2, at 4e12 * COPY_FRACTION, or 100 SMs
    // at 1e12 each: compute bound.
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
    let compute = flops / 0.5e15 / (1024.0 / 1100.0);
    let bytes = 6.0 * 4096f64.powi(2);
    let memory = (bytes / (4e12 * COPY_FRACTION)).max(bytes / 1e14);
    // 11 waves, of which the first EXPOSED_WAVES pay the fill.
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
fn smooth_max_is_between_the_max_and_the_sum() {
    assert_eq!(smooth_max(0.0, 0.0, 4.0), 0.0);
    let m = smooth_max(1.0, 1.0, 4.0);
    assert!(m > 1.0 && m < 2.0);
    assert!((smooth_max(3.0, 0.0, 4.0) - 3.0).abs() < 1e-12);
}
