// Greedy sampling fused into the LM head (appended after attention.cu, whose mma_bf16_16816
// it uses, and kernels.cu, whose argmax_better and argmax_key it uses): best[r] = the
// argmax_rows key of row r of X * W^T for up to LMH_MAX_ROWS rows, without writing the logits.
//
// Why: at 64 sampled rows cuBLAS writes 39 MB of fp32 logits (Qwen3's 151,936 tokens) that
// argmax_rows reads back, two launches after the one that matters, which streams the 311 MB of
// W. Here the scores stay in registers and one kernel streams W.
//
// Work: tensor cores (mma.sync m16n8k16, fp32 accumulation), vocabulary rows as the MMA's 16
// rows, sampled rows as its 8 columns. X (rows x K bf16) is staged once per block in shared
// memory, padded with zero rows to a multiple of 8. Each warp takes a contiguous run of 16-row
// vocabulary tiles and loads W from global memory straight into A fragments, LMH_DEPTH
// 32-wide K steps ahead, and the two groups of steps after those asked of L2 in bulk
// prefetches (lmh_prefetch_group). Inside a 32-wide K step, lane c of a quad loads 8 consecutive elements of a
// row as one 16-byte word that feeds two MMAs; X is read with the same permutation of K, so
// every dot product is unchanged and every fragment is one 16-byte load.
//
// Ties go to the lowest index and NaN scores never win, as in argmax_rows; a block merges its
// warps in shared memory and folds each row into best[] with one 64-bit atomicMax (best[] must
// be zero before the kernel). Needs K % 64 == 0 (the swizzle of X) and rows <= LMH_MAX_ROWS;
// the runner checks both (and that X fits the block's shared memory) before choosing this
// kernel. Steps past K in a tile's last group of LMH_DEPTH are skipped.

#define LMH_WARPS 8
#define LMH_DEPTH 8
#define LMH_MAX_ROWS 64

// Body for NT column tiles of 8 rows (rows <= 8 * NT). Its 8 / NT sets of accumulators make 8
// independent MMA chains whatever NT is, so consecutive MMAs never wait on each other (one
// accumulator per column tile left a chain of 16 dependent MMAs per group at NT = 1, and the
// kernel ran at a third of the memory's bandwidth); the sets are added at the end of a tile.

// Asks L2 for the W rows that group (t, ks) of a warp will load: lane r < 16 requests row
// t * 16 + r from K step ks on, up to LMH_DEPTH steps (64 bytes each), in one bulk prefetch.
// A warp thus has two more groups on their way into L2 besides the one in its registers: the
// register loads alone kept too few bytes in flight (88 us for the 311 MB at 1 row), and a
// whole tile ahead per warp (67 MB for the grid) overflowed L2 and read W one and a half times.
__device__ __forceinline__ void lmh_prefetch_group(const bf16* w, int t, int ks, int ksteps, int K, int V,
                                                   int lane) {
    const int row = t * 16 + lane;
    if (lane >= 16 || row >= V) return;
    const int bytes = min(LMH_DEPTH, ksteps - ks) * 64;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(w + (long long)row * K + ks * 32),
                 "r"(bytes)
                 : "memory");
}

// X row r's 16-byte unit u sits at unit u ^ 4 of its row when r is odd: the 8 lanes of a
// quarter warp read rows g and g + 1 at the same four units, which then fall in different banks.
__device__ __forceinline__ int lmh_swizzle(int row, int unit) { return unit ^ ((row & 1) << 2); }

template <int NT>
__device__ __forceinline__ void lm_head_argmax_body(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                    unsigned long long* __restrict__ best, int rows, int K, int V) {
    constexpr int SETS = 8 / NT;
    extern __shared__ uint4 lmh_x[];  // [8 * NT rows][K / 8 units], swizzled
    __shared__ unsigned long long lmh_best[LMH_WARPS][LMH_MAX_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, c = lane & 3;
    const int units = K >> 3, ksteps = K >> 5;
    const int vtiles = (V + 15) >> 4;
    const int gw = blockIdx.x * LMH_WARPS + warp, nw = gridDim.x * LMH_WARPS;
    const int t_end = (int)((long long)vtiles * (gw + 1) / nw);
    int tile = (int)((long long)vtiles * gw / nw), ks0 = 0;  // the group of steps being computed
    int ltile = tile, lks = 0;                                // the group being loaded

    // W rows g and g + 8 of a tile (rows past V read row V - 1 and are never chosen).
    auto w_row = [&](int t, int r) { return w + (long long)min(t * 16 + r, V - 1) * K + c * 8; };
    uint4 wa[LMH_DEPTH] = {}, wb[LMH_DEPTH] = {};
    // W does not depend on the previous kernel: the first group goes to registers and the next
    // two to L2 before the wait.
    int ptile = tile, pks = 0;  // the last group asked of L2
    auto next_group = [&](int& t, int& ks) {
        ks += LMH_DEPTH;
        if (ks >= ksteps) {
            t++;
            ks = 0;
        }
    };
#pragma unroll
    for (int i = 0; i < 2; i++) {
        next_group(ptile, pks);
        if (ptile < t_end) lmh_prefetch_group(w, ptile, pks, ksteps, K, V, lane);
    }
    if (ltile < t_end) {
        const bf16 *ra = w_row(ltile, g), *rb = w_row(ltile, g + 8);
#pragma unroll
        for (int j = 0; j < LMH_DEPTH; j++) {
            if (j < ksteps) {
                wa[j] = __ldcs(reinterpret_cast<const uint4*>(ra + j * 32));
                wb[j] = __ldcs(reinterpret_cast<const uint4*>(rb + j * 32));
            }
        }
    }
    PDL_WAIT();
    for (int i = threadIdx.x; i < NT * 8 * units; i += blockDim.x) {
        const int r = i / units, u = i - r * units;
        const uint4 v = r < rows ? reinterpret_cast<const uint4*>(x + (long long)r * K)[u] : make_uint4(0, 0, 0, 0);
        lmh_x[r * units + lmh_swizzle(r, u)] = v;
    }
    __syncthreads();

    float acc[SETS][NT][4];
    float bv[NT][2];
    int bi[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
#pragma unroll
        for (int st = 0; st < SETS; st++) {
#pragma unroll
            for (int e = 0; e < 4; e++) acc[st][nt][e] = 0.0f;
        }
        bv[nt][0] = bv[nt][1] = -INFINITY;
        bi[nt][0] = bi[nt][1] = 0x7fffffff;
    }
    const uint4* xg = lmh_x + g * units;
    while (tile < t_end) {
        next_group(ptile, pks);
        if (ptile < t_end) lmh_prefetch_group(w, ptile, pks, ksteps, K, V, lane);
        next_group(ltile, lks);
        const bool refill = ltile < t_end;
        const bf16 *ra = w_row(ltile, g) + lks * 32, *rb = w_row(ltile, g + 8) + lks * 32;
#pragma unroll
        for (int j = 0; j < LMH_DEPTH; j++) {
            const uint4 a = wa[j], b = wb[j];
            if (refill && lks + j < ksteps) {
                wa[j] = __ldcs(reinterpret_cast<const uint4*>(ra + j * 32));
                wb[j] = __ldcs(reinterpret_cast<const uint4*>(rb + j * 32));
            }
            if (ks0 + j >= ksteps) continue;
            const int unit = lmh_swizzle(g, (ks0 + j) * 4 + c);
            uint4 xv[NT];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) xv[nt] = xg[nt * 8 * units + unit];
            const u32 a0[4] = {a.x, b.x, a.y, b.y}, a1[4] = {a.z, b.z, a.w, b.w};
            // MMA 2j + h of the group goes to set (2j + h) % SETS.
#pragma unroll
            for (int nt = 0; nt < NT; nt++) mma_bf16_16816(acc[(2 * j) % SETS][nt], a0, xv[nt].x, xv[nt].y);
#pragma unroll
            for (int nt = 0; nt < NT; nt++) mma_bf16_16816(acc[(2 * j + 1) % SETS][nt], a1, xv[nt].z, xv[nt].w);
        }
        ks0 += LMH_DEPTH;
        if (ks0 >= ksteps) {
            // The sum of the sets = scores of vocabulary rows r0 (e = 0, 1) and r0 + 8 (e = 2,
            // 3) for X rows 8 nt + 2c + (e & 1). Rows come in increasing order: a strict >
            // keeps the lowest index.
            const int r0 = tile * 16 + g;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                float sc[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    sc[e] = acc[0][nt][e];
                    acc[0][nt][e] = 0.0f;
#pragma unroll
                    for (int st = 1; st < SETS; st++) {
                        sc[e] += acc[st][nt][e];
                        acc[st][nt][e] = 0.0f;
                    }
                }
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    if (r0 < V && sc[e] > bv[nt][e]) {
                        bv[nt][e] = sc[e];
                        bi[nt][e] = r0;
                    }
                    if (r0 + 8 < V && sc[2 + e] > bv[nt][e]) {
                        bv[nt][e] = sc[2 + e];
                        bi[nt][e] = r0 + 8;
                    }
                }
            }
            tile++;
            ks0 = 0;
        }
    }
    // The 8 lanes of a column (same c) hold different vocabulary rows: merge them.
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
#pragma unroll
            for (int o = 4; o < 32; o <<= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, bv[nt][e], o);
                const int oi = __shfl_xor_sync(0xffffffffu, bi[nt][e], o);
                if (argmax_better(ov, oi, bv[nt][e], bi[nt][e])) {
                    bv[nt][e] = ov;
                    bi[nt][e] = oi;
                }
            }
            if (g == 0)
                lmh_best[warp][nt * 8 + 2 * c + e] = bi[nt][e] == 0x7fffffff ? 0ull : argmax_key(bv[nt][e], bi[nt][e]);
        }
    }
    __syncthreads();
    if ((int)threadIdx.x < rows) {
        unsigned long long k = 0;
#pragma unroll
        for (int wi = 0; wi < LMH_WARPS; wi++) k = max(k, lmh_best[wi][threadIdx.x]);
        if (k != 0) atomicMax(best + threadIdx.x, k);
    }
}

// lm_head_argmax_N: rows <= 8 * N (N column tiles).
#define LM_HEAD_ARGMAX_ENTRY(NT)                                                                              \
    extern "C" __global__ void __launch_bounds__(LMH_WARPS * 32, 1) lm_head_argmax_##NT(                      \
        const bf16* __restrict__ x, const bf16* __restrict__ w, unsigned long long* __restrict__ best, int rows, \
        int K, int V) {                                                                                        \
        lm_head_argmax_body<NT>(x, w, best, rows, K, V);                                                       \
    }
LM_HEAD_ARGMAX_ENTRY(1)
LM_HEAD_ARGMAX_ENTRY(2)
LM_HEAD_ARGMAX_ENTRY(4)
LM_HEAD_ARGMAX_ENTRY(8)
