// Fused decode-layer GEMMs on Hopper tensor cores (wgmma, sm_90a), for steps of at most 64
// token rows: one warpgroup per block computes a 64-row tile, rows past the step's `m` are
// computed from whatever the shared memory holds and never stored. The host compiles this
// file only for compute capability 9.0, with bf16/PDL helpers from kernels.cu's preamble and
// the model's FG_HIDDEN, FG_Q_DIM (query heads x head_dim) and FG_INTER defined before it.
//
// wg_norm_gemm_*: y = rmsnorm(resid) . W^T with the norm folded in: the block stages
//   bf16(resid * gain) as the A tile while it sums squares per row, and scales the product by
//   1/rms in the epilogue (sum_k x_k g_k w_nk / rms == (normed . w)_n). K = hidden, whole.
//   A cluster of FG_CL blocks (adjacent N tiles) shares the staging: each stages 64 / FG_CL
//   rows into every member's shared memory, so resid is read from L2 once per cluster.
//   _qkv: N tile 32, plain bf16 output. _silu: N tile 48 = 24 gate rows (W rows t*24..) and
//   the 24 matching up rows (W rows inter + t*24..); the epilogue writes silu(gate) * up.
// wg_resid_gemm_*: resid += x . W^T, K split over a cluster of 8 blocks (one per K slice),
//   N tile 64; the 8 partial tiles are summed through distributed shared memory in rank
//   order (deterministic) and added to the fp32 residual stream.
//
// Shared-memory operands use the no-swizzle K-major layout: 8x8 "core matrices" of 128
// contiguous bytes (8 rows of 16 bytes), core (r8, k8) of a tile with R rows at byte
// (k8 * R / 8 + r8) * 128. So within one k16 step the two K-adjacent cores are R * 16 bytes
// apart (the descriptor's leading byte offset) and M/N-adjacent cores 128 bytes apart (its
// stride byte offset).
typedef unsigned long long uint64_t;

__device__ __forceinline__ void wgmma_n32(float* d, uint64_t da, uint64_t db, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_n48(float* d, uint64_t da, uint64_t db, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, %24, %25, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
        : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_n64(float* d, uint64_t da, uint64_t db, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ uint64_t wg_desc(u32 smem_addr, u32 lbo, u32 sbo) {
    return (uint64_t)((smem_addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFF) << 32);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit_wait() {
    asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// Shared-memory stores above carry no "memory" clobber, so that the compiler may keep global
// loads in flight across them; the barriers and fences that order them do clobber memory.
// Generic-proxy writes to shared memory (stores, cp.async) made visible to wgmma's reads.
__device__ __forceinline__ void async_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async16(u32 dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.commit_group;\ncp.async.wait_all;\n" ::: "memory");
}
__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The address of this CTA's shared-memory `addr` in cluster member `rank`.
__device__ __forceinline__ u32 cluster_map(u32 addr, u32 rank) {
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
__device__ __forceinline__ void st_cluster_v4(u32 addr, uint4 v) {
    asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w));
}
__device__ __forceinline__ void st_cluster_f32(u32 addr, float v) {
    asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(v));
}
__device__ __forceinline__ float4 ld_cluster_v4(u32 addr) {
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}
// The block's whole weight tile arrives by bulk copies (the tensor memory accelerator), in the
// tile's shared-memory image: the host stores every tile pre-arranged (fused.rs), so one
// thread's few copies replace thousands of 16-byte loads. `bar` counts the bytes in.
__device__ __forceinline__ void bulk_tile(u32 dst, const bf16* src, u32 bytes, u32 bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
    constexpr u32 PIECE = 16384;
    for (u32 off = 0; off < bytes; off += PIECE) {
        const u32 n = bytes - off < PIECE ? bytes - off : PIECE;
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst + off),
            "l"(reinterpret_cast<const char*>(src) + off), "r"(n), "r"(bar)
            : "memory");
    }
}
__device__ __forceinline__ void bar_wait(u32 bar) {
    asm volatile(
        "{\n.reg .pred P;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], 0;\n@!P bra WAIT;\n}\n" ::"r"(bar)
        : "memory");
}

// Byte offset of the 16-byte chunk (row r, k8 chunk c) in a no-swizzle K-major tile of R rows.
__device__ __forceinline__ u32 core_off(int r, int c, int R) { return (u32)((c * (R >> 3) + (r >> 3)) * 128 + (r & 7) * 16); }

// Copies rows [0, R) x k chunks [0, KC) of a K-major bf16 matrix into a tile of R rows, rows
// at or past `live` skipped; `row_src(r)` gives row r's first element (already offset to the
// tile's first k). Each warp copies 8 rows x 4 chunks at a time: its 8-lane phases write the 8
// rows of one core matrix (conflict-free) and each row's 4 chunks are 64 contiguous bytes.
template <int R, int KC, typename RowSrc>
__device__ __forceinline__ void stage_rows(u32 tile, int live, RowSrc row_src) {
    static_assert(R % 8 == 0 && KC % 4 == 0, "tiles are whole 8-row x 4-chunk units");
    const int lane = threadIdx.x & 31;
    for (int u = threadIdx.x >> 5; u < (R / 8) * (KC / 4); u += 4) {
        const int r = (u % (R / 8)) * 8 + (lane & 7), c = (u / (R / 8)) * 4 + (lane >> 3);
        if (r < live) cp_async16(tile + core_off(r, c, R), row_src(r) + c * 8);
    }
}

// acc = A (64 x 16*KSTEPS) . B (NT x 16*KSTEPS)^T; the first step overwrites the accumulator.
template <int NT, int KSTEPS>
__device__ __forceinline__ void wgmma_tile(float* acc, u32 a, u32 b) {
    wg_fence();
#pragma unroll
    for (int s = 0; s < KSTEPS; s++) {
        // Each k16 step covers two core columns: 2 * R / 8 cores of 128 bytes.
        const uint64_t da = wg_desc(a + s * 2 * 8 * 128, 64 * 16, 128);
        const uint64_t db = wg_desc(b + s * 2 * (NT / 8) * 128, NT * 16, 128);
        if constexpr (NT == 32) wgmma_n32(acc, da, db, s > 0);
        if constexpr (NT == 48) wgmma_n48(acc, da, db, s > 0);
        if constexpr (NT == 64) wgmma_n64(acc, da, db, s > 0);
    }
    wg_commit_wait();
}

// Dynamic shared memory: A (64 x K bf16), B (NT x K bf16); static: 1/rms of the 64 rows.
template <int NT, int CL, bool SILU>
__device__ __forceinline__ void norm_gemm(const float* __restrict__ resid, const bf16* __restrict__ gain,
                                          const bf16* __restrict__ w, bf16* __restrict__ y, int m, int N, float eps) {
    constexpr int K = FG_HIDDEN;
    extern __shared__ __align__(1024) unsigned char fg_smem[];
    __shared__ float inv_rms[64];
    const u32 a_tile = (u32)__cvta_generic_to_shared(fg_smem);
    const u32 b_tile = a_tile + 64 * K * 2;
    const int tile = blockIdx.x;
    constexpr int kc = K / 8;
    // The weights do not depend on the previous kernel: start their copy before waiting on it.
    __shared__ __align__(8) unsigned long long w_bar;
    const u32 bar = (u32)__cvta_generic_to_shared(&w_bar);
    if (threadIdx.x == 0) bulk_tile(b_tile, w + (long long)tile * NT * K, NT * K * 2, bar);
    PDL_WAIT();
    PDL_LAUNCH_NEXT();
    const u32 rank = CL > 1 ? cluster_rank() : 0;
    // This block stages rows [rank * 64 / CL, ...): lanes cover RW rows x (32 / RW) chunks.
    constexpr int ROWS = 64 / CL, RW = ROWS / 4 < 8 ? ROWS / 4 : 8, PASSES = ROWS / 4 / RW;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    // Loads of FG_BATCH chunks are issued before any of them is used: the row reads are L2
    // latency bound otherwise.
    constexpr int STEP = 32 / RW, PER_LANE = kc / STEP;
    static_assert(PER_LANE % FG_BATCH == 0, "chunks per lane must be a multiple of FG_BATCH");
    for (int p = 0; p < PASSES; p++) {
        const int r = rank * ROWS + warp * (ROWS / 4) + p * RW + lane % RW;
        const bool live = r < m;
        const float* src = resid + (long long)r * K;
        float ss = 0.0f;
        // Rows past m are left as they are: their products are never stored.
        for (int b = 0; b < (live ? PER_LANE : 0); b += FG_BATCH) {
            float4 x[FG_BATCH][2];
            uint4 gr[FG_BATCH];
#pragma unroll
            for (int j = 0; j < FG_BATCH; j++) {
                const int c = lane / RW + (b + j) * STEP;
                gr[j] = *reinterpret_cast<const uint4*>(gain + c * 8);
                x[j][0] = *reinterpret_cast<const float4*>(src + c * 8);
                x[j][1] = *reinterpret_cast<const float4*>(src + c * 8 + 4);
            }
#pragma unroll
            for (int j = 0; j < FG_BATCH; j++) {
                const int c = lane / RW + (b + j) * STEP;
                const float v[8] = {x[j][0].x, x[j][0].y, x[j][0].z, x[j][0].w,
                                    x[j][1].x, x[j][1].y, x[j][1].z, x[j][1].w};
                const u32 gw[4] = {gr[j].x, gr[j].y, gr[j].z, gr[j].w};
                u32 q[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float2 g = __bfloat1622float2(*reinterpret_cast<const bf162*>(&gw[e]));
                    ss += v[2 * e] * v[2 * e] + v[2 * e + 1] * v[2 * e + 1];
                    bf162 h = __floats2bfloat162_rn(v[2 * e] * g.x, v[2 * e + 1] * g.y);
                    q[e] = *reinterpret_cast<u32*>(&h);
                }
                const uint4 packed = make_uint4(q[0], q[1], q[2], q[3]);
                const u32 off = a_tile + core_off(r, c, 64);
                if constexpr (CL > 1) {
#pragma unroll
                    for (int t = 0; t < CL; t++) st_cluster_v4(cluster_map(off, t), packed);
                } else {
                    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(off), "r"(packed.x),
                                 "r"(packed.y), "r"(packed.z), "r"(packed.w));
                }
            }
        }
        // Lanes with the same row differ in the bits above RW.
        for (int o = RW; o < 32; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane < RW) {
            const float inv = rsqrtf(ss / (float)K + eps);
            const u32 off = (u32)__cvta_generic_to_shared(&inv_rms[r]);
#pragma unroll
            for (int t = 0; t < CL; t++) st_cluster_f32(CL > 1 ? cluster_map(off, t) : off, inv);
        }
    }
    async_proxy_fence();
    if (CL > 1) cluster_sync(); else __syncthreads();
    async_proxy_fence();
    bar_wait(bar);
    float acc[NT / 2];
    wgmma_tile<NT, FG_HIDDEN / 16>(acc, a_tile, b_tile);
    // Accumulator layout: thread (warp, lane) holds rows warp*16 + lane/4 (+8) and columns
    // 8i + 2*(lane%4) (+1) of every 8-column group i.
    const int r0 = warp * 16 + lane / 4;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = r0 + 8 * h;
        if (r >= m) continue;
        const float inv = inv_rms[r];
        if constexpr (SILU) {
            const int half = NT / 2;
            bf16* dst = y + (long long)r * (N / 2) + tile * half;
#pragma unroll
            for (int i = 0; i < NT / 16; i++) {
                const int c = 8 * i + 2 * (lane % 4);
                float g0 = acc[4 * i + 2 * h] * inv, g1 = acc[4 * i + 2 * h + 1] * inv;
                float u0 = acc[4 * (i + NT / 16) + 2 * h] * inv, u1 = acc[4 * (i + NT / 16) + 2 * h + 1] * inv;
                *reinterpret_cast<bf162*>(dst + c) =
                    __floats2bfloat162_rn(g0 / (1.0f + __expf(-g0)) * u0, g1 / (1.0f + __expf(-g1)) * u1);
            }
        } else {
            bf16* dst = y + (long long)r * N + tile * NT;
#pragma unroll
            for (int i = 0; i < NT / 8; i++) {
                const int c = 8 * i + 2 * (lane % 4);
                *reinterpret_cast<bf162*>(dst + c) =
                    __floats2bfloat162_rn(acc[4 * i + 2 * h] * inv, acc[4 * i + 2 * h + 1] * inv);
            }
        }
    }
    // No member may exit while another could still write its staged rows into it: all writes
    // happened before the barrier above, so nothing more is needed.
}

#define FG_NORM(NAME, NT, CL, SILU)                                                                             \
    extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(128, 1)                            \
        NAME(const float* __restrict__ resid, const bf16* __restrict__ gain, const bf16* __restrict__ w,        \
             bf16* __restrict__ y, int m, int N, float eps) {                                                   \
        norm_gemm<NT, CL, SILU>(resid, gain, w, y, m, N, eps);                                                  \
    }
FG_NORM(wg_norm_gemm_qkv_c1, 32, 1, false)
FG_NORM(wg_norm_gemm_qkv_c4, 32, 4, false)
FG_NORM(wg_norm_gemm_silu_c1, 48, 1, true)
FG_NORM(wg_norm_gemm_silu_c4, 48, 4, true)

// resid[m, N] += x[m, K] . W[N, K]^T; grid (N / 64, 8), cluster (1, 8): block (t, s) multiplies
// K slice s (KS = K / 8 columns) of N tile t. Dynamic shared memory: A (64 x KS), B (64 x KS)
// bf16, then the fp32 partial tile [64][68].
template <int K>
__device__ __forceinline__ void resid_gemm(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                           float* __restrict__ resid, int m, int N) {
    extern __shared__ __align__(1024) unsigned char fg_smem[];
    constexpr int PSTRIDE = 68;
    constexpr int KS = K / 8, kc = KS / 8;
    const int tile = blockIdx.x;
    const u32 rank = cluster_rank();
    const u32 a_tile = (u32)__cvta_generic_to_shared(fg_smem);
    const u32 b_tile = a_tile + 64 * KS * 2;
    float* part = reinterpret_cast<float*>(fg_smem + 2 * 64 * KS * 2);
    const long long k0 = (long long)rank * KS;
    __shared__ __align__(8) unsigned long long w_bar;
    const u32 bar = (u32)__cvta_generic_to_shared(&w_bar);
    if (threadIdx.x == 0) bulk_tile(b_tile, w + ((long long)tile * 8 + rank) * 64 * KS, 64 * KS * 2, bar);
    PDL_WAIT();
    PDL_LAUNCH_NEXT();
    stage_rows<64, kc>(a_tile, m, [&](int r) { return x + (long long)r * K + k0; });
    cp_async_wait_all();
    async_proxy_fence();
    __syncthreads();
    async_proxy_fence();
    bar_wait(bar);
    float acc[32];
    wgmma_tile<64, KS / 16>(acc, a_tile, b_tile);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r0 = warp * 16 + lane / 4;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int c = 8 * i + 2 * (lane % 4);
        *reinterpret_cast<float2*>(&part[r0 * PSTRIDE + c]) = make_float2(acc[4 * i], acc[4 * i + 1]);
        *reinterpret_cast<float2*>(&part[(r0 + 8) * PSTRIDE + c]) = make_float2(acc[4 * i + 2], acc[4 * i + 3]);
    }
    cluster_sync();
    // Member `rank` sums rows rank*8 .. +8 of the 8 partial tiles, in rank order.
    const int r = rank * 8 + threadIdx.x / 16, c = 4 * (threadIdx.x % 16);
    const u32 off = (u32)__cvta_generic_to_shared(&part[r * PSTRIDE + c]);
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int q = 0; q < 8; q++) {
        const float4 v = ld_cluster_v4(cluster_map(off, q));
        s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
    }
    if (r < m) {
        float4* dst = reinterpret_cast<float4*>(resid + (long long)r * N + tile * 64 + c);
        float4 o = *dst;
        o.x += s.x; o.y += s.y; o.z += s.z; o.w += s.w;
        *dst = o;
    }
    // Keep this block's partial tile alive until every member has read it.
    cluster_sync();
}

#define FG_RESID(NAME, K)                                                                                      \
    extern "C" __global__ void __cluster_dims__(1, 8, 1) __launch_bounds__(128, 1)                             \
        NAME(const bf16* __restrict__ x, const bf16* __restrict__ w, float* __restrict__ resid, int m, int N) { \
        resid_gemm<K>(x, w, resid, m, N);                                                                      \
    }
// O (K = query heads x head_dim) and down (K = intermediate size).
FG_RESID(wg_resid_gemm_o, FG_Q_DIM)
FG_RESID(wg_resid_gemm_down, FG_INTER)
