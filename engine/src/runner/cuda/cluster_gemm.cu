// Split-K GEMM over a thread-block cluster for decode batches of up to 64 rows (appended after
// skinny_gemm.cu; uses attention.cu's mma_bf16_16816 and kernels.cu's silu_mul_pair):
// Y[m][n] = sum_k X[m][k] * W[n][k], M <= 64, N % CG_COLS == 0,
// K == cluster size * CG_WARPS * 32 * NC.
//
// Why: at 64 rows cuBLAS takes about 5.5 µs for Qwen3-0.6B's O projection and 7.2 µs for down
// (a split-K kernel plus a reduction kernel) for 4 and 6 MB of weights, and silu_mul before down
// is one more launch (results/h200/gemm_bench.csv). The skinny kernel loses there because every
// block of 8 columns re-reads all of X. Here:
// - a block of CG_WARPS warps owns CG_COLS output columns and one cluster rank's share of K;
//   its warps split that share, NC 32-wide chunks each, so X is read once per 32 columns;
// - the lane's W fragments (16-byte loads, the MMA k order permuted inside a chunk the same way
//   for X and W, as in skinny_gemm) are loaded before the programmatic-launch wait: the weights
//   do not depend on the previous kernel, so their DRAM latency overlaps its tail;
// - the warps' partial tiles meet in shared memory, the cluster's in distributed shared memory,
//   and each block of the cluster writes its share of the rows;
// - SILU: X is silu(gate) * up of the gate_up buffer (rows [gate | up], K = intermediate size),
//   rounded to bf16 exactly as silu_mul rounds it, so down needs no silu_mul launch.
// Rows m >= M read as zero and are not written.

#define CG_WARPS 8
#define CG_GROUPS 4  // 8-column MMA groups per block
#define CG_COLS (8 * CG_GROUPS)
#define CG_ROWS 64
// A partial tile's row stride in floats: 8 more than its width, so that the 8 rows a warp's
// fragment store touches fall in different banks.
#define CG_STRIDE (CG_COLS + 8)
// Dynamic shared memory: every warp's partial tile, fp32.
#define CG_SMEM_BYTES (CG_WARPS * CG_ROWS * CG_STRIDE * 4)

__device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// 8 elements of row `row` of the GEMM's X at column k (16 bytes), zero past M.
template <bool SILU>
__device__ __forceinline__ uint4 cg_load_x(const bf16* __restrict__ X, int row, int M, int K, int k) {
    if (row >= M) return make_uint4(0, 0, 0, 0);
    if (!SILU) return *reinterpret_cast<const uint4*>(X + (long long)row * K + k);
    const bf16* gate = X + (long long)row * 2 * K + k;
    const uint4 gv = *reinterpret_cast<const uint4*>(gate);
    const uint4 uv = *reinterpret_cast<const uint4*>(gate + K);
    return make_uint4(silu_mul_pair(gv.x, uv.x), silu_mul_pair(gv.y, uv.y), silu_mul_pair(gv.z, uv.z),
                      silu_mul_pair(gv.w, uv.w));
}

template <int NC, bool SILU>
__device__ __forceinline__ void cluster_gemm_body(const bf16* __restrict__ X, const bf16* __restrict__ W,
                                                  bf16* __restrict__ Y, int M, int N, int K) {
    extern __shared__ __align__(16) float cg_red[];  // [CG_WARPS][CG_ROWS][CG_STRIDE]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    u32 rank, csize;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(csize));
    const int n0 = blockIdx.y * CG_COLS;
    const int kbeg = ((int)rank * CG_WARPS + warp) * NC * 32 + tig * 8;

    uint4 wv[NC][CG_GROUPS];
#pragma unroll
    for (int c = 0; c < NC; c++)
#pragma unroll
        for (int j = 0; j < CG_GROUPS; j++)
            wv[c][j] = __ldg(reinterpret_cast<const uint4*>(W + (long long)(n0 + 8 * j + g) * K + kbeg + 32 * c));
    PDL_ENTER();

    float acc[4][CG_GROUPS][4];
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int j = 0; j < CG_GROUPS; j++) acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.0f;
    const int mtiles = (M + 15) / 16;
#pragma unroll
    for (int c = 0; c < NC; c++) {
        uint4 x[4][2];
#pragma unroll
        for (int mt = 0; mt < 4; mt++) {
            x[mt][0] = mt < mtiles ? cg_load_x<SILU>(X, mt * 16 + g, M, K, kbeg + 32 * c) : make_uint4(0, 0, 0, 0);
            x[mt][1] = mt < mtiles ? cg_load_x<SILU>(X, mt * 16 + g + 8, M, K, kbeg + 32 * c) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int mt = 0; mt < 4; mt++) {
            if (mt >= mtiles) continue;
            const u32 a[4] = {x[mt][0].x, x[mt][1].x, x[mt][0].y, x[mt][1].y};
            const u32 a2[4] = {x[mt][0].z, x[mt][1].z, x[mt][0].w, x[mt][1].w};
#pragma unroll
            for (int j = 0; j < CG_GROUPS; j++) {
                mma_bf16_16816(acc[mt][j], a, wv[c][j].x, wv[c][j].y);
                mma_bf16_16816(acc[mt][j], a2, wv[c][j].z, wv[c][j].w);
            }
        }
    }

    // The block's warps: each writes its tile, then thread t sums element t, t + 256, ... of all
    // warps' tiles into warp 0's.
    constexpr int TILE = CG_ROWS * CG_STRIDE;
    float* mine = cg_red + warp * TILE;
#pragma unroll
    for (int mt = 0; mt < 4; mt++) {
        if (mt >= mtiles) continue;
#pragma unroll
        for (int j = 0; j < CG_GROUPS; j++) {
            const int r = mt * 16 + g, col = 8 * j + 2 * tig;
            *reinterpret_cast<float2*>(&mine[r * CG_STRIDE + col]) = make_float2(acc[mt][j][0], acc[mt][j][1]);
            *reinterpret_cast<float2*>(&mine[(r + 8) * CG_STRIDE + col]) = make_float2(acc[mt][j][2], acc[mt][j][3]);
        }
    }
    __syncthreads();
    const int used = mtiles * 16 * CG_COLS;
    for (int e = threadIdx.x; e < used; e += CG_WARPS * 32) {
        const int idx = (e / CG_COLS) * CG_STRIDE + e % CG_COLS;
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < CG_WARPS; w++) s += cg_red[w * TILE + idx];
        cg_red[idx] = s;
    }
    // The cluster's blocks: block `rank` adds rows [rank * per, (rank + 1) * per) of every
    // block's sum, two columns per thread, and writes them.
    cluster_sync_all();
    const int rows = mtiles * 16;
    const int per = (rows + (int)csize - 1) / (int)csize;
    const int r_end = min(rows, ((int)rank + 1) * per);
    for (int idx = threadIdx.x; idx < per * (CG_COLS / 2); idx += CG_WARPS * 32) {
        const int r = (int)rank * per + idx / (CG_COLS / 2), col = (idx % (CG_COLS / 2)) * 2;
        if (r >= r_end) continue;
        const u32 local = (u32)__cvta_generic_to_shared(&cg_red[r * CG_STRIDE + col]);
        float s0 = 0.0f, s1 = 0.0f;
        for (u32 b = 0; b < csize; b++) {
            u32 remote;
            float v0, v1;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(b));
            asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n" : "=f"(v0), "=f"(v1) : "r"(remote));
            s0 += v0;
            s1 += v1;
        }
        if (r < M)
            *reinterpret_cast<bf162*>(Y + (long long)r * N + n0 + col) = __floats2bfloat162_rn(s0, s1);
    }
    cluster_sync_all();  // no block leaves while another may still read its shared memory
}

// Grid: (cluster size, N / CG_COLS) blocks of CG_WARPS * 32 threads in clusters of (cluster
// size, 1, 1), CG_SMEM_BYTES of dynamic shared memory.
#define CLUSTER_GEMM_ENTRY(NC, SILU, NAME)                                                                 \
    extern "C" __global__ void __launch_bounds__(CG_WARPS * 32) NAME(                                     \
        const bf16* __restrict__ X, const bf16* __restrict__ W, bf16* __restrict__ Y, int M, int N, int K) { \
        cluster_gemm_body<NC, SILU>(X, W, Y, M, N, K);                                                    \
    }
CLUSTER_GEMM_ENTRY(1, false, cluster_gemm_c1)
CLUSTER_GEMM_ENTRY(2, false, cluster_gemm_c2)
CLUSTER_GEMM_ENTRY(3, false, cluster_gemm_c3)
CLUSTER_GEMM_ENTRY(1, true, cluster_gemm_silu_c1)
CLUSTER_GEMM_ENTRY(2, true, cluster_gemm_silu_c2)
CLUSTER_GEMM_ENTRY(3, true, cluster_gemm_silu_c3)
