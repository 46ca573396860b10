// Decode attention (appended after attention.cu, whose helpers and #defines it uses): one query
// token per sequence, flash-decoding splits merged by attn_combine.

#define DEC_WARPS 4

// A unit's decode entry and keys: entry i's token row and L (the keys it attends to), its
// sequence's block-table row, and split z's keys [kb, ke) when the L keys are cut into nsplit
// splits of a whole number of `chunk`s, so that every split, and every chunk in it, starts at
// a multiple of `chunk`. With ROPE (the kernel also handles the new token's key): whether split
// z holds that key (position L - 1), and its RoPE position, within the table's max_pos rows.
struct DecodeUnit {
    int row, L;
    const int* bt;
    int kb, ke;
    bool owns_new;
    int pos;
};
template <bool ROPE>
__device__ __forceinline__ DecodeUnit decode_unit(const int* __restrict__ decodes, const int* __restrict__ block_tables,
                                                  const int* __restrict__ hdr, int i, int nsplit, int z, int chunk,
                                                  int max_pos) {
    const int seq = decodes[3 * i], row = decodes[3 * i + 1], L = decodes[3 * i + 2];
    const int* bt = block_tables + (long long)seq * hdr[0];
    int per = (L + nsplit - 1) / nsplit;
    per = (per + chunk - 1) / chunk * chunk;
    const int kb = z * per, ke = kb + per < L ? kb + per : L;
    const bool owns_new = ROPE && L > 0 && kb <= L - 1 && L - 1 < kb + per;
    return {row, L, bt, kb, ke, owns_new, ROPE ? min(max(L - 1, 0), max_pos - 1) : 0};
}
#define DEC_EPL (HEAD_DIM / 32)

__device__ __forceinline__ void bf16x_to_float(const u32* raw, float* f) {
#pragma unroll
    for (int e = 0; e < DEC_EPL / 2; e++) {
        float2 a = __bfloat1622float2(*reinterpret_cast<const bf162*>(&raw[e]));
        f[2 * e] = a.x;
        f[2 * e + 1] = a.y;
    }
#if DEC_EPL % 2 == 1
    f[DEC_EPL - 1] = __bfloat162float(*reinterpret_cast<const bf16*>(&raw[DEC_EPL / 2]));
#endif
}

// One lane's result for N dimensions from dim0 of every query head of KV head kvh's group,
// whose keys it has seen whole (acc, running max m and sum l per head): the output row of
// decode entry i (nsplit == 1), or split z's partials for attn_combine, (max, sum) written by
// the lane with `writes_ml`.
template <int N>
__device__ __forceinline__ void dec_write_lane(const float (&acc)[GQA_GROUP][N], const float* m, const float* l,
                                               bool writes_ml, int dim0, int kvh, int i, int row, int z, int nsplit,
                                               bf16* __restrict__ out, float* __restrict__ part_o,
                                               float* __restrict__ part_ml) {
#pragma unroll
    for (int j = 0; j < GQA_GROUP; j++) {
        const int h = kvh * GQA_GROUP + j;
        if (nsplit == 1) {
            const float inv = l[j] > 0.0f ? 1.0f / l[j] : 0.0f;
#pragma unroll
            for (int e = 0; e < N; e++)
                out[(long long)row * Q_DIM + h * HEAD_DIM + dim0 + e] = __float2bfloat16(acc[j][e] * inv);
        } else {
            const long long b = ((long long)i * NUM_Q_HEADS + h) * nsplit + z;
#pragma unroll
            for (int e = 0; e < N; e++) part_o[b * HEAD_DIM + dim0 + e] = acc[j][e];
            if (writes_ml) {
                part_ml[b * 2] = m[j];
                part_ml[b * 2 + 1] = l[j];
            }
        }
    }
}

// Raw bf16 of DEC_EPL consecutive elements, one u32 per pair (the odd tail in the low half).
__device__ __forceinline__ void load_raw(const bf16* p, u32* raw) {
#if DEC_EPL == 4
    uint2 u = *reinterpret_cast<const uint2*>(p);
    raw[0] = u.x;
    raw[1] = u.y;
#elif DEC_EPL == 2
    raw[0] = *reinterpret_cast<const u32*>(p);
#else
#pragma unroll
    for (int e = 0; e < DEC_EPL / 2; e++) raw[e] = *reinterpret_cast<const u32*>(p + 2 * e);
#if DEC_EPL % 2 == 1
    raw[DEC_EPL / 2] = (u32) * reinterpret_cast<const unsigned short*>(p + DEC_EPL - 1);
#endif
#endif
}

#define DEC_RAW ((DEC_EPL + 1) / 2)

// Loads keys [base, base + GROUP) of one KV head (zeros at or past `end`). `base` is a
// multiple of GROUP, so when block_size is too the group lies in one KV block: one table
// lookup and no per-key division.
template <int GROUP>
__device__ __forceinline__ void load_group(u32 (*kr)[DEC_RAW], u32 (*vr)[DEC_RAW], const bf16* __restrict__ k_cache,
                                           const bf16* __restrict__ v_cache, const int* __restrict__ bt,
                                           int block_size, int kvh, int lane, int base, int end) {
    if (base >= end) return;  // nothing left: the caller never reads these registers
    const bool one_block = (block_size % GROUP) == 0;
    const long long slot0 = one_block ? (long long)bt[base / block_size] * block_size + base % block_size : 0;
#pragma unroll
    for (int u = 0; u < GROUP; u++) {
        int key = base + u;
        if (key < end) {
            long long slot = one_block ? slot0 + u : (long long)bt[key / block_size] * block_size + key % block_size;
            long long off = (slot * NUM_KV_HEADS + kvh) * HEAD_DIM + lane * DEC_EPL;
            load_raw(k_cache + off, kr[u]);
            load_raw(v_cache + off, vr[u]);
        } else {
#pragma unroll
            for (int e = 0; e < DEC_RAW; e++) kr[u][e] = vr[u][e] = 0u;
        }
    }
}

// One WARP per (decode sequence, KV head, split): the split's keys in groups of GROUP, the
// next group's loads issued before the current group's math (software pipelining), online
// softmax across groups; lanes split the head dimension. Block = 4 warps = 4 consecutive units.
// decodes[3i .. 3i + 3] = (batch index of the sequence, token row, keys it attends to) of the
// i-th query token on this path (meta.rs).
// With nsplit > 1 each warp writes a partial (max, sum, unnormalised output) for attn_combine:
// part_o: [n_dec][NUM_Q_HEADS][nsplit][HEAD_DIM], part_ml: [n_dec][NUM_Q_HEADS][nsplit][2].
template <int GROUP>
__device__ __forceinline__ void attn_decode_body(
    const bf16* __restrict__ qkv, const bf16* __restrict__ k_cache, const bf16* __restrict__ v_cache,
    bf16* __restrict__ out, const int* __restrict__ decodes, const int* __restrict__ block_tables,
    const int* __restrict__ hdr, int block_size, float scale_log2, float* __restrict__ part_o,
    float* __restrict__ part_ml, int nsplit, int n_units) {
    PDL_ENTER();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    // Work units (decode sequence, KV head, split), split fastest, one per warp: every warp of
    // a block works whatever the split count.
    const int unit = blockIdx.x * DEC_WARPS + warp;
    if (unit >= n_units) return;  // no block-wide barrier below, so idle warps may leave
    const int z = unit % nsplit, kvh = (unit / nsplit) % NUM_KV_HEADS, i = unit / (nsplit * NUM_KV_HEADS);
    const DecodeUnit du = decode_unit<false>(decodes, block_tables, hdr, i, nsplit, z, GROUP, 1);
    const int row = du.row, kb = du.kb, ke = du.ke;
    const int* bt = du.bt;

    float q[GQA_GROUP][DEC_EPL];
#pragma unroll
    for (int j = 0; j < GQA_GROUP; j++) {
        u32 raw[DEC_RAW];
        load_raw(qkv + (long long)row * QKV_DIM + (kvh * GQA_GROUP + j) * HEAD_DIM + lane * DEC_EPL, raw);
        bf16x_to_float(raw, q[j]);
#pragma unroll
        for (int e = 0; e < DEC_EPL; e++) q[j][e] *= scale_log2;
    }
    float m[GQA_GROUP], l[GQA_GROUP], acc[GQA_GROUP][DEC_EPL];
#pragma unroll
    for (int j = 0; j < GQA_GROUP; j++) {
        m[j] = NEG_BIG;
        l[j] = 0.0f;
#pragma unroll
        for (int e = 0; e < DEC_EPL; e++) acc[j][e] = 0.0f;
    }
    u32 kr[GROUP][DEC_RAW], vr[GROUP][DEC_RAW];
    load_group<GROUP>(kr, vr, k_cache, v_cache, bt, block_size, kvh, lane, kb, ke);
    for (int base = kb; base < ke; base += GROUP) {
        u32 kn[GROUP][DEC_RAW], vn[GROUP][DEC_RAW];
        load_group<GROUP>(kn, vn, k_cache, v_cache, bt, block_size, kvh, lane, base + GROUP, ke);
#pragma unroll
        for (int j = 0; j < GQA_GROUP; j++) {
            float sc[GROUP];
#pragma unroll
            for (int u = 0; u < GROUP; u++) {
                float kf[DEC_EPL];
                bf16x_to_float(kr[u], kf);
                float d = 0.0f;
#pragma unroll
                for (int e = 0; e < DEC_EPL; e++) d += q[j][e] * kf[e];
                sc[u] = d;
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
                for (int u = 0; u < GROUP; u++) sc[u] += __shfl_xor_sync(0xffffffffu, sc[u], o);
            }
            float mx = m[j];
#pragma unroll
            for (int u = 0; u < GROUP; u++) {
                if (base + u >= ke) sc[u] = -INFINITY;
                mx = fmaxf(mx, sc[u]);
            }
            const float c = exp2f(m[j] - mx);
            m[j] = mx;
            l[j] *= c;
#pragma unroll
            for (int e = 0; e < DEC_EPL; e++) acc[j][e] *= c;
#pragma unroll
            for (int u = 0; u < GROUP; u++) {
                const float p = exp2f(sc[u] - mx);
                l[j] += p;
                float vf[DEC_EPL];
                bf16x_to_float(vr[u], vf);
#pragma unroll
                for (int e = 0; e < DEC_EPL; e++) acc[j][e] += p * vf[e];
            }
        }
#pragma unroll
        for (int u = 0; u < GROUP; u++) {
#pragma unroll
            for (int e = 0; e < DEC_RAW; e++) {
                kr[u][e] = kn[u][e];
                vr[u][e] = vn[u][e];
            }
        }
    }
    dec_write_lane<DEC_EPL>(acc, m, l, lane == 0, lane * DEC_EPL, kvh, i, row, z, nsplit, out, part_o, part_ml);
}

// 8-key groups with the next group prefetched (16-key groups without prefetch, and a cp.async
// shared-memory pipeline per warp, were measured slower: docs/performance.md).
#define DECODE_ENTRY(NAME, GROUP)                                                                           \
    extern "C" __global__ void __launch_bounds__(128) NAME(                                                 \
        const bf16* __restrict__ qkv, const bf16* __restrict__ k_cache, const bf16* __restrict__ v_cache,   \
        bf16* __restrict__ out, const int* __restrict__ decodes, const int* __restrict__ block_tables,      \
        const int* __restrict__ hdr, int block_size, float scale_log2, float* __restrict__ part_o,          \
        float* __restrict__ part_ml, int nsplit, int n_units) {                                             \
        attn_decode_body<GROUP>(qkv, k_cache, v_cache, out, decodes, block_tables, hdr, block_size,         \
                                scale_log2, part_o, part_ml, nsplit, n_units);                              \
    }
DECODE_ENTRY(attn_decode, 8)

// grid (n_dec, NUM_Q_HEADS), block 128 threads; nsplit <= 128. The split weights are computed
// once into shared memory, then each thread sums its output dimensions over the splits with
// independent loads (no chain of dependent loads).
extern "C" __global__ void __launch_bounds__(128) attn_combine(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                                        bf16* __restrict__ out, const int* __restrict__ decodes, int nsplit) {
    PDL_ENTER();
    __shared__ float wz[128];
    __shared__ float red[4];
    const int i = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int row = decodes[3 * i + 1];
    const long long base = ((long long)i * NUM_Q_HEADS + h) * nsplit;
    const float mz = tid < nsplit ? part_ml[(base + tid) * 2] : NEG_BIG;
    const float lz = tid < nsplit ? part_ml[(base + tid) * 2 + 1] : 0.0f;
    float M = mz;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    if (lane == 0) red[warp] = M;
    __syncthreads();
    M = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
    const float w = tid < nsplit ? exp2f(mz - M) : 0.0f;
    wz[tid] = w;
    float Ls = warp_sum(w * lz);
    __syncthreads();
    if (lane == 0) red[warp] = Ls;
    __syncthreads();
    Ls = red[0] + red[1] + red[2] + red[3];
    const float inv = Ls > 0.0f ? 1.0f / Ls : 0.0f;
    for (int d = tid; d < HEAD_DIM; d += blockDim.x) {
        float A = 0.0f;
#pragma unroll 8
        for (int z = 0; z < nsplit; z++) A += part_o[(base + z) * HEAD_DIM + d] * wz[z];
        out[(long long)row * Q_DIM + h * HEAD_DIM + d] = __float2bfloat16(A * inv);
    }
}
