// Prefetch GEMM for up to 64 rows on Hopper tensor cores (appended to kernels.cu): Y = X · Wᵀ
// for the products that follow an RMSNorm in a decode step (QKV, and gate-up with SiLU·mul fused
// into its epilogue).
//
// Why not cuBLAS: at 64 rows each cuBLAS call costs about 3 µs more than its weights take to
// stream, and cuBLAS kernels do not take part in programmatic dependent launch. This kernel is
// launched as a programmatic dependent of the norm before it (which lets its dependents start
// as soon as it begins): each block copies its weight tile into shared memory (cp.async, 16 bytes
// a thread at a time) *before* waiting for the norm, since the weights do not depend on it, so the weight stream
// overlaps the norm and the launch. Only X is loaded after the wait.
//
// X is what else limits a product this thin: every block needs all 64 rows of it (128 KB at
// K = 1024), and 128 blocks reading it each from L2 would move more bytes than the weights.
// So blocks run in clusters of PG_CLUSTER: block r of a cluster copies 1/PG_CLUSTER of X with a
// multicast bulk copy into the shared memory of every block of the cluster.
//
// Both operands are in wgmma's K-major layout without swizzle, 8-row groups of 16-byte core
// matrices, [row group][K / 8][8 rows][8 values]: the weights as tile_for_wgmma (below) leaves
// them, X as add_rmsnorm writes it when asked for the tiled layout. Each is then a few
// contiguous runs that bulk copies move as they are, and wgmma reads through descriptors.
//
// Block b owns 2 * NH weight rows: seg0 = rows [b * row_step, + NH) and seg1 = rows
// [b * row_step + seg1_off, + NH). Plain (SILU = 0): row_step = 2 * NH, seg1_off = NH; the block
// writes Y[:, b * 2NH + j]. SILU = 1 (gate-up, gate rows first then up rows): row_step = NH,
// seg1_off = inter; the block writes act[:, b * NH + j] = silu(bf16(gate_j)) * bf16(up_j),
// rounded as the separate silu_mul kernel rounds. ldy = Y's row stride. Warpgroup w takes seg w
// over all of K, so no sums need adding up across warps. Rows >= M of X are whatever the buffer
// holds; their outputs are not written. Needs sm_90a; elsewhere the kernels trap and the host
// does not use them. Requires K == PG_K, gridDim.x % PG_CLUSTER == 0, NH in {16, 24}.
#define PG_THREADS 256
#define PG_CLUSTER 2
// Bulk copies per block for its share of X.
#define PG_X_PIECES 8
// K is fixed (Qwen3-0.6B's hidden size) so that the wgmma loop unrolls: with a run-time trip
// count ptxas serializes the wgmma instructions. The host takes no other K.
#define PG_K 1024
// Timing-only variants for scripts/prefetch_gemm_bench.cu (wrong results): leave out the X
// copies, the MMAs, or the weight copies. The runner's kernels use none.
#define PG_SKIP_X 1
#define PG_SKIP_MMA 2
#define PG_SKIP_W 4

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PG_WGMMA 1
#endif

__device__ __forceinline__ u32 pg_smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// K-major, no swizzle: LBO = bytes between core matrices along K, SBO = between 8-row groups.
__device__ __forceinline__ unsigned long long pg_desc(u32 addr, u32 lbo, u32 sbo) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32);
}

#define PG_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

template <int N>
__device__ __forceinline__ void pg_wgmma_ss(float* d, unsigned long long da, unsigned long long db);

template <>
__device__ __forceinline__ void pg_wgmma_ss<16>(float* d, unsigned long long da, unsigned long long db) {
#ifdef PG_WGMMA
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
        : PG_D8(0)
        : "l"(da), "l"(db), "r"(1));
#endif
}

template <>
__device__ __forceinline__ void pg_wgmma_ss<24>(float* d, unsigned long long da, unsigned long long db) {
#ifdef PG_WGMMA
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11}, %12, %13, p, 1, 1, 0, 0;\n}\n"
        : PG_D8(0), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
        : "l"(da), "l"(db), "r"(1));
#endif
}

__device__ __forceinline__ void pg_wait(u32 bar) {
    asm volatile(
        "{\n.reg .pred P;\nPG_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], 0;\n@!P bra "
        "PG_WAIT;\n}\n" ::"r"(bar)
        : "memory");
}

template <int NH, int SILU, int SKIP = 0>
__device__ __forceinline__ void prefetch_gemm_body(const bf16* __restrict__ Xt, const bf16* __restrict__ Wt,
                                                   bf16* __restrict__ Y, int M, int row_step, int seg1_off,
                                                   int ldy) {
#ifndef PG_WGMMA
    __trap();
#else
    constexpr int K = PG_K, SBO = K * 16, SEG = NH * K * 2, XBYTES = 64 * K * 2;
    constexpr int XPART = XBYTES / PG_CLUSTER;
    extern __shared__ __align__(1024) unsigned char pg_smem[];
    __shared__ __align__(8) unsigned long long pg_bars[2];
    unsigned char* xs = pg_smem + 2 * SEG;
    const int wg = threadIdx.x >> 7, t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
    const int g = lane >> 2, tig = lane & 3;
    const u32 xbar = pg_smem_addr(&pg_bars[1]);
    u32 rank;
    asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(xbar), "n"(1));
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    // The other blocks of the cluster may write X into this block once its barrier exists.
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    if (!(SKIP & PG_SKIP_W)) {
        // 16-byte copies from every thread: many requests in flight per SM stream the weights
        // faster than one bulk copy per half (measured on the H200, prefetch_gemm.txt).
#pragma unroll 4
        for (int u = threadIdx.x; u < 2 * SEG / 16; u += PG_THREADS) {
            const int s = u / (SEG / 16), off = (u % (SEG / 16)) * 16;
            const long long row0 = (long long)blockIdx.x * row_step + (s ? seg1_off : 0);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(pg_smem_addr(pg_smem + u * 16)),
                         "l"(reinterpret_cast<const unsigned char*>(Wt + row0 * K) + off)
                         : "memory");
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    // Only now wait for the norm that wrote X.
    PDL_ENTER();
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    if (threadIdx.x < 32 && !(SKIP & PG_SKIP_X)) {
        if (threadIdx.x == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(xbar), "r"(XBYTES)
                         : "memory");
        __syncwarp();
        // This block's share of X in PG_X_PIECES bulk copies, each multicast to the whole cluster.
        const unsigned short mask = (1u << PG_CLUSTER) - 1;
        constexpr int PIECE = XPART / PG_X_PIECES;
        if (threadIdx.x < PG_X_PIECES) {
            const int off = rank * XPART + threadIdx.x * PIECE;
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], "
                "%2, [%3], %4;\n" ::"r"(pg_smem_addr(xs + off)),
                "l"(reinterpret_cast<const unsigned char*>(Xt) + off), "r"(PIECE), "r"(xbar), "h"(mask)
                : "memory");
        }
    }
    if (!(SKIP & PG_SKIP_W)) {
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        // Make this thread's copies visible to wgmma (the async proxy); the barrier below, to all.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    if (!(SKIP & PG_SKIP_X)) pg_wait(xbar);
    __syncthreads();
    constexpr int NT = NH / 8;
    float d[NT * 4];
#pragma unroll
    for (int i = 0; i < NT * 4; i++) d[i] = 0.0f;
    if (!(SKIP & PG_SKIP_MMA)) {
        const u32 a0 = pg_smem_addr(xs), b0 = pg_smem_addr(pg_smem + wg * SEG);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < K / 16; kk++)
            pg_wgmma_ss<NH>(d, pg_desc(a0 + kk * 256, 128, SBO), pg_desc(b0 + kk * 256, 128, SBO));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    // d[nt * 4 + e] is row warp * 16 + g + 8 * (e >> 1), column nt * 8 + 2 * tig + (e & 1) of
    // warpgroup wg's NH columns.
    const int r0 = warp * 16 + g;
    if (SILU) {
        // The up half (warpgroup 1) hands its sums to the gate half through shared memory.
        __syncthreads();  // every wgmma is done with the tiles
        float* up = reinterpret_cast<float*>(pg_smem);
        if (wg == 1) {
#pragma unroll
            for (int i = 0; i < NT * 4; i++) up[i * 128 + t] = d[i];
        }
        __syncthreads();
        if (wg == 0) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int row = r0 + 8 * h;
                    float o[2];
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int i = nt * 4 + 2 * h + e;
                        const float gf = __bfloat162float(__float2bfloat16(d[i]));
                        const float uf = __bfloat162float(__float2bfloat16(up[i * 128 + t]));
                        o[e] = gf / (1.0f + __expf(-gf)) * uf;
                    }
                    if (row < M)
                        *reinterpret_cast<bf162*>(Y + (long long)row * ldy + (long long)blockIdx.x * NH + nt * 8 +
                                                  2 * tig) = __floats2bfloat162_rn(o[0], o[1]);
                }
            }
        }
    } else {
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = r0 + 8 * h;
                if (row < M)
                    *reinterpret_cast<bf162*>(Y + (long long)row * ldy + (long long)blockIdx.x * 2 * NH + wg * NH +
                                              nt * 8 + 2 * tig) =
                        __floats2bfloat162_rn(d[nt * 4 + 2 * h], d[nt * 4 + 2 * h + 1]);
            }
        }
    }
#endif
}

#define PREFETCH_GEMM_ENTRY(NAME, NH, SILU)                                                                  \
    extern "C" __global__ void __launch_bounds__(PG_THREADS, 1)                                             \
        NAME(const bf16* __restrict__ Xt, const bf16* __restrict__ Wt, bf16* __restrict__ Y, int M,           \
             int row_step, int seg1_off, int ldy) {                                                          \
        prefetch_gemm_body<NH, SILU>(Xt, Wt, Y, M, row_step, seg1_off, ldy);                                 \
    }
PREFETCH_GEMM_ENTRY(prefetch_gemm_plain, 16, 0)
PREFETCH_GEMM_ENTRY(prefetch_gemm_silu, 24, 1)

// T = W (N x K, row-major) in wgmma's K-major layout without swizzle:
// T[((grp * (K / 8) + kc) * 8 + r) * 8 + el] = W[grp * 8 + r][kc * 8 + el]. One thread per
// 16-byte unit. N % 8 == 0, K % 8 == 0.
extern "C" __global__ void tile_for_wgmma(const bf16* __restrict__ W, bf16* __restrict__ T, int N, int K) {
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)N * K / 8) return;
    const int r = (int)(u % 8);
    const long long rest = u / 8;
    const int kc = (int)(rest % (K / 8));
    const long long grp = rest / (K / 8);
    *reinterpret_cast<uint4*>(T + u * 8) = *reinterpret_cast<const uint4*>(W + (grp * 8 + r) * K + kc * 8);
}
