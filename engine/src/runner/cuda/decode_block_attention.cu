// Decode attention with a thread block per (decode sequence, KV head, split) (appended after
// decode_attention.cu, whose partial-output layout and attn_combine it shares).
//
// Why: one warp per unit (attn_decode) leaves a batch of 64 with 512 warps unless it splits
// every sequence, and each split costs a partial write plus the attn_combine launch. Here the
// WARPS warps of a block share the split's keys, in interleaved chunks of DB_CHUNK keys, and
// meet in shared memory, so batches of 64 and more need no split and no combine.
//
// Lanes: a key row of HEAD_DIM bf16 is read by DB_LPK lanes, 8 elements (16 bytes) each, so a
// warp reads DB_KPW rows per load and has DB_U loads of K and of V in flight per lane. Each
// lane keeps its own online softmax over the keys of its lane group; groups merge by shuffles,
// warps in shared memory. nsplit == 1 writes the output; nsplit > 1 writes partials (max, sum,
// unnormalised output) for attn_combine, in attn_decode's layout.

#if HEAD_DIM <= 32
#define DB_LPK 4
#elif HEAD_DIM <= 64
#define DB_LPK 8
#elif HEAD_DIM <= 128
#define DB_LPK 16
#else
#define DB_LPK 32
#endif
#define DB_KPW (32 / DB_LPK)

__device__ __forceinline__ void bf16x8_to_float(const uint4& u, float* f) {
    const u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int e = 0; e < 4; e++) {
        float2 a = __bfloat1622float2(*reinterpret_cast<const bf162*>(&w[e]));
        f[2 * e] = a.x;
        f[2 * e + 1] = a.y;
    }
}

// The bf16 rounding of 8 floats, packed as they lie in memory.
__device__ __forceinline__ uint4 float8_to_bf16x8(const float* f) {
    u32 w[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        bf162 p = __floats2bfloat162_rn(f[2 * e], f[2 * e + 1]);
        w[e] = *reinterpret_cast<u32*>(&p);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// The parameters every decode kernel body takes (the entries add n_units and, with RoPE, its
// inputs), and the same as arguments.
#define DECODE_UNIT_PARAMS                                                                                   \
    bf16 *__restrict__ qkv, bf16 *__restrict__ k_cache, bf16 *__restrict__ v_cache, bf16 *__restrict__ out, \
        const int *__restrict__ decodes, const int *__restrict__ block_tables, const int *__restrict__ hdr, \
        int block_size, float scale_log2, float *__restrict__ part_o, float *__restrict__ part_ml, int nsplit
#define DECODE_UNIT_ARGS \
    qkv, k_cache, v_cache, out, decodes, block_tables, hdr, block_size, scale_log2, part_o, part_ml, nsplit

// Whether the partial outputs of WARPS key-sharing warps fit in 48 KB of static shared memory;
// the runner (DecodeKernel::supports) uses these kernels only then, and they trap otherwise.
#define DB_FITS(WARPS) ((WARPS) * GQA_GROUP * (HEAD_DIM + 2) * 4 <= 48 * 1024)

// Loads the K and V rows of keys base + u * DB_KPW + part (u < U) of KV head kvh; zeros at or
// past `end` (zero V keeps 0 * garbage from making NaN).
template <int U>
__device__ __forceinline__ void db_load(uint4* kr, uint4* vr, const bf16* __restrict__ k_cache,
                                        const bf16* __restrict__ v_cache, const int* __restrict__ bt, int block_size,
                                        bool one_block, int kvh, int part, int dim0, bool has_dims, int base, int end) {
    const long long slot0 =
        one_block && base < end ? (long long)bt[base / block_size] * block_size + base % block_size : 0;
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int key = base + u * DB_KPW + part;
        kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
        if (key < end && has_dims) {
            const long long slot = one_block ? slot0 + u * DB_KPW + part
                                             : (long long)bt[key / block_size] * block_size + key % block_size;
            const long long off = (slot * NUM_KV_HEADS + kvh) * HEAD_DIM + dim0;
            // A step reads each cached key once: evict-first (ld.global.cs) keeps these loads
            // from pushing the weights and activations out of L2. On the H200
            // (docs/performance.md): batch 64 1.635 / 1.624 ms against 1.649 / 1.650,
            // batch 256 3.705 / 3.680 against 3.735 / 3.724; batch 1 and 16 within 0.01 ms.
            kr[u] = __ldcs(reinterpret_cast<const uint4*>(k_cache + off));
            vr[u] = __ldcs(reinterpret_cast<const uint4*>(v_cache + off));
        }
    }
}

// q/k-norm + RoPE of one head row held 8 elements per lane (dims dim0 .. dim0 + 8 of a lane
// group of DB_LPK lanes), as qk_norm_rope_cache does it: RMSNorm over the head, times the norm
// weight, rounded to bf16; then rotate-half RoPE at `pos`, rounded to bf16. Needs HEAD_DIM ==
// 8 * DB_LPK (a power of two), so that the partner half of every element sits DB_LPK / 2 lanes
// away. Every lane of the warp must call it (shuffles).
struct RopeIn {
    const bf16* q_norm;
    const bf16* k_norm;
    const float* cos_t;
    const float* sin_t;
    const int* slots;
    int max_pos;
    float eps;
};

__device__ __forceinline__ void db_norm_rope(float* x, const bf16* __restrict__ w, const RopeIn& r, int pos,
                                             int dim0, int lane) {
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; e++) ss += x[e] * x[e];
#pragma unroll
    for (int o = DB_LPK / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = rsqrtf(ss / (float)HEAD_DIM + r.eps);
    float xn[8], other[8];
#pragma unroll
    for (int e = 0; e < 8; e++) xn[e] = __bfloat162float(__float2bfloat16(x[e] * inv * __bfloat162float(w[dim0 + e])));
#pragma unroll
    for (int e = 0; e < 8; e++) other[e] = __shfl_xor_sync(0xffffffffu, xn[e], DB_LPK / 2);
    constexpr int half = HEAD_DIM / 2;
    const bool first = dim0 < half;
    const int d0 = first ? dim0 : dim0 - half;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const float c = r.cos_t[(long long)pos * half + d0 + e], s = r.sin_t[(long long)pos * half + d0 + e];
        const float y = first ? xn[e] * c - other[e] * s : xn[e] * c + other[e] * s;
        x[e] = __bfloat162float(__float2bfloat16(y));
    }
}

// The new token's key of KV head kvh (token row `row` of qkv), 8 dimensions from dim0 per lane
// as db_norm_rope lays them out: k-norm + RoPE at `pos` into kx, then K and V into the token's
// cache slot (lane group 0 writes; a slot < 0 is not cached). Returns the raw V. Every lane of
// the warp must call it (shuffles).
__device__ __forceinline__ uint4 db_new_key(const bf16* __restrict__ qkv, bf16* __restrict__ k_cache,
                                            bf16* __restrict__ v_cache, const RopeIn& r, int row, int kvh, int pos,
                                            int dim0, int lane, float* kx) {
    const bf16* kv_row = qkv + (long long)row * QKV_DIM + (NUM_Q_HEADS + kvh) * HEAD_DIM + dim0;
    bf16x8_to_float(*reinterpret_cast<const uint4*>(kv_row), kx);
    db_norm_rope(kx, r.k_norm, r, pos, dim0, lane);
    const uint4 vraw = *reinterpret_cast<const uint4*>(kv_row + NUM_KV_HEADS * HEAD_DIM);
    const int slot = r.slots[row];
    if (lane / DB_LPK == 0 && slot >= 0) {
        const long long off = ((long long)slot * NUM_KV_HEADS + kvh) * HEAD_DIM + dim0;
        *reinterpret_cast<uint4*>(k_cache + off) = float8_to_bf16x8(kx);
        *reinterpret_cast<uint4*>(v_cache + off) = vraw;
    }
    return vraw;
}

// Merges the partial results of `warps` warps that shared a unit's keys: sm_o[w][j][d] (the
// unnormalised output of query head j of the group) and sm_ml[w][j] = (max, sum). Writes the
// output rows of decode entry i (nsplit == 1) or split z's partials for attn_combine. All
// threads of the block take part.
__device__ __forceinline__ void db_merge_write(const float* sm_o, const float* sm_ml, int warps, int kvh, int i,
                                               int row, int z, int nsplit, bf16* __restrict__ out,
                                               float* __restrict__ part_o, float* __restrict__ part_ml) {
    for (int idx = threadIdx.x; idx < GQA_GROUP * HEAD_DIM; idx += blockDim.x) {
        const int j = idx / HEAD_DIM, d = idx % HEAD_DIM;
        float M = NEG_BIG;
        for (int w = 0; w < warps; w++) M = fmaxf(M, sm_ml[(w * GQA_GROUP + j) * 2]);
        float Ls = 0.0f, O = 0.0f;
        for (int w = 0; w < warps; w++) {
            const float s = exp2f(sm_ml[(w * GQA_GROUP + j) * 2] - M);
            Ls += sm_ml[(w * GQA_GROUP + j) * 2 + 1] * s;
            O += sm_o[(w * GQA_GROUP + j) * HEAD_DIM + d] * s;
        }
        const int h = kvh * GQA_GROUP + j;
        if (nsplit == 1) {
            out[(long long)row * Q_DIM + h * HEAD_DIM + d] = __float2bfloat16(Ls > 0.0f ? O / Ls : 0.0f);
        } else {
            const long long b = ((long long)i * NUM_Q_HEADS + h) * nsplit + z;
            part_o[b * HEAD_DIM + d] = O;
            if (d == 0) {
                part_ml[b * 2] = M;
                part_ml[b * 2 + 1] = Ls;
            }
        }
    }
}

// HEADS: a block per (sequence, split) whose warp w takes KV head w over all of the split's
// keys (the block reads whole slot rows of the cache at once). Otherwise a block per (sequence,
// KV head, split) whose WARPS warps share the keys. (Loading the next chunk into registers, or
// into L2, before the current chunk's math, and capping registers for more warps per SM, were
// measured slower on the H200: docs/performance.md.)
// ROPE: q/k-norm + RoPE + the KV-cache write of the new token are done here (decode-only steps,
// where qk_norm_rope_cache is then not launched): every block normalises and rotates its query
// heads; the block whose split holds the new key (position L - 1) rotates it, writes K and V to
// the cache slot, and folds the key in from registers (its cache loop stops before it, since
// this kernel's own writes are not visible to its read-only loads).
template <int WARPS, int U, bool HEADS, bool ROPE>
__device__ __forceinline__ void attn_decode_block_impl(
    DECODE_UNIT_PARAMS, const RopeIn& rope) {
    PDL_ENTER();
    constexpr int CHUNK = DB_KPW * U;  // keys one warp takes per iteration
    constexpr int SHARERS = HEADS ? 1 : WARPS;  // warps that share one unit's keys
    __shared__ float sm_ml[SHARERS][GQA_GROUP][2];
    __shared__ float sm_o[SHARERS][GQA_GROUP][HEAD_DIM];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int part = lane / DB_LPK, sub = lane % DB_LPK, dim0 = sub * 8;
    const bool has_dims = dim0 < HEAD_DIM;  // lanes past the row (head_dim not a power of two) idle
    const int unit = blockIdx.x;
    const int z = unit % nsplit;
    const int kvh = HEADS ? warp : (unit / nsplit) % NUM_KV_HEADS;
    const int i = HEADS ? unit / nsplit : unit / (nsplit * NUM_KV_HEADS);
    const int wk = HEADS ? 0 : warp;  // this warp's place among the sharers
    const DecodeUnit du = decode_unit<ROPE>(decodes, block_tables, hdr, i, nsplit, z, CHUNK, rope.max_pos);
    const int row = du.row, L = du.L, kb = du.kb, ke = du.ke, pos = du.pos;
    const int* bt = du.bt;
    // Chunks start at multiples of CHUNK, so when block_size is one too a chunk lies in one KV
    // block: one table lookup per chunk instead of one division per key.
    const bool one_block = (block_size % CHUNK) == 0;

    // The new key (position L - 1) belongs to exactly one split; with ROPE that split's block
    // takes it from registers, so its cache loop ends before it.
    const bool owns_new = du.owns_new;
    const int kend = owns_new ? L - 1 : ke;

    float q[GQA_GROUP][8];
#pragma unroll
    for (int j = 0; j < GQA_GROUP; j++) {
        const uint4 u = has_dims ? *reinterpret_cast<const uint4*>(qkv + (long long)row * QKV_DIM +
                                                                   (kvh * GQA_GROUP + j) * HEAD_DIM + dim0)
                                 : make_uint4(0, 0, 0, 0);
        bf16x8_to_float(u, q[j]);
        if (ROPE) db_norm_rope(q[j], rope.q_norm, rope, pos, dim0, lane);
#pragma unroll
        for (int e = 0; e < 8; e++) q[j][e] *= scale_log2;
    }
    float m[GQA_GROUP], l[GQA_GROUP], acc[GQA_GROUP][8];
#pragma unroll
    for (int j = 0; j < GQA_GROUP; j++) {
        m[j] = NEG_BIG;
        l[j] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; e++) acc[j][e] = 0.0f;
    }
    if (owns_new && wk == 0) {  // warp-uniform: the first sharing warp (every warp with HEADS)
        float kx[8];
        const uint4 vraw = db_new_key(qkv, k_cache, v_cache, rope, row, kvh, pos, dim0, lane, kx);
        float vf[8];
        bf16x8_to_float(vraw, vf);
#pragma unroll
        for (int j = 0; j < GQA_GROUP; j++) {
            float d = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; e++) d += q[j][e] * kx[e];
#pragma unroll
            for (int o = DB_LPK / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
            if (part == 0) {  // one lane group holds the key; the others start empty
                m[j] = d;
                l[j] = 1.0f;
#pragma unroll
                for (int e = 0; e < 8; e++) acc[j][e] = vf[e];
            }
        }
    }
    for (int base = kb + wk * CHUNK; base < kend; base += SHARERS * CHUNK) {
        uint4 kr[U], vr[U];
        db_load<U>(kr, vr, k_cache, v_cache, bt, block_size, one_block, kvh, part, dim0, has_dims, base, kend);
#pragma unroll
        for (int j = 0; j < GQA_GROUP; j++) {
            float sc[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                float kf[8];
                bf16x8_to_float(kr[u], kf);
                float d = 0.0f;
#pragma unroll
                for (int e = 0; e < 8; e++) d += q[j][e] * kf[e];
                sc[u] = d;
            }
#pragma unroll
            for (int o = DB_LPK / 2; o > 0; o >>= 1) {
#pragma unroll
                for (int u = 0; u < U; u++) sc[u] += __shfl_xor_sync(0xffffffffu, sc[u], o);
            }
            float mx = m[j];
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (base + u * DB_KPW + part >= kend) sc[u] = -INFINITY;
                mx = fmaxf(mx, sc[u]);
            }
            const float c = exp2f(m[j] - mx);
            m[j] = mx;
            l[j] *= c;
#pragma unroll
            for (int e = 0; e < 8; e++) acc[j][e] *= c;
#pragma unroll
            for (int u = 0; u < U; u++) {
                const float p = exp2f(sc[u] - mx);
                l[j] += p;
                float vf[8];
                bf16x8_to_float(vr[u], vf);
#pragma unroll
                for (int e = 0; e < 8; e++) acc[j][e] += p * vf[e];
            }
        }
    }
    // Lane groups of a warp (same dims, different keys) merge by shuffles.
#pragma unroll
    for (int o = DB_LPK; o < 32; o <<= 1) {
#pragma unroll
        for (int j = 0; j < GQA_GROUP; j++) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m[j], o);
            const float l2 = __shfl_xor_sync(0xffffffffu, l[j], o);
            const float mx = fmaxf(m[j], m2);
            const float a = exp2f(m[j] - mx), b = exp2f(m2 - mx);
            m[j] = mx;
            l[j] = l[j] * a + l2 * b;
#pragma unroll
            for (int e = 0; e < 8; e++) acc[j][e] = acc[j][e] * a + __shfl_xor_sync(0xffffffffu, acc[j][e], o) * b;
        }
    }
    if (HEADS) {
        if (part == 0 && has_dims)
            dec_write_lane<8>(acc, m, l, lane == 0, dim0, kvh, i, row, z, nsplit, out, part_o, part_ml);
        return;
    }
    if (part == 0) {
#pragma unroll
        for (int j = 0; j < GQA_GROUP; j++) {
            if (has_dims) {
#pragma unroll
                for (int e = 0; e < 8; e++) sm_o[warp][j][dim0 + e] = acc[j][e];
            }
            if (lane == 0) {
                sm_ml[warp][j][0] = m[j];
                sm_ml[warp][j][1] = l[j];
            }
        }
    }
    __syncthreads();
    // Warps merge in shared memory: one thread per (query head of the group, dimension).
    db_merge_write(&sm_o[0][0][0], &sm_ml[0][0][0], SHARERS, kvh, i, row, z, nsplit, out, part_o, part_ml);
}

template <int WARPS, int U, bool HEADS, bool ROPE>
__device__ __forceinline__ void attn_decode_block_body(
    DECODE_UNIT_PARAMS, const RopeIn& rope) {
    if constexpr (DB_FITS(HEADS ? 1 : WARPS) && WARPS <= 32 && (!ROPE || HEAD_DIM == 8 * DB_LPK)) {
        attn_decode_block_impl<WARPS, U, HEADS, ROPE>(DECODE_UNIT_ARGS, rope);
    } else {
        __trap();
    }
}

// Grid: one block per unit, split fastest: n_dec * NUM_KV_HEADS * nsplit blocks of WARPS warps,
// or with HEADS n_dec * nsplit blocks of NUM_KV_HEADS warps. The _rope entries take the
// q/k-norm + RoPE inputs of qk_norm_rope_cache as well.
//
// DECODE_ENTRIES(NAME, THREADS, BODY, TEMPLATE_ARGS...): the pair of kernels NAME and NAME_rope
// of a decode kernel family whose BODY<TEMPLATE_ARGS..., ROPE> takes DECODE_UNIT_PARAMS and a
// RopeIn.
#define DECODE_ENTRIES(NAME, THREADS, BODY, ...)                                                              \
    extern "C" __global__ void __launch_bounds__(THREADS) NAME(DECODE_UNIT_PARAMS, int n_units) {           \
        if ((int)blockIdx.x >= n_units) return;                                                             \
        const RopeIn none = {nullptr, nullptr, nullptr, nullptr, nullptr, 1, 0.0f};                          \
        BODY<__VA_ARGS__, false>(DECODE_UNIT_ARGS, none);                                                   \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(THREADS) NAME##_rope(                                      \
        DECODE_UNIT_PARAMS, int n_units, const bf16* __restrict__ q_norm, const bf16* __restrict__ k_norm,  \
        const float* __restrict__ cos_t, const float* __restrict__ sin_t, const int* __restrict__ slots,    \
        int max_pos, float eps) {                                                                           \
        if ((int)blockIdx.x >= n_units) return;                                                             \
        const RopeIn rope = {q_norm, k_norm, cos_t, sin_t, slots, max_pos, eps};                            \
        BODY<__VA_ARGS__, true>(DECODE_UNIT_ARGS, rope);                                                    \
    }
DECODE_ENTRIES(attn_decode_block_w4u4, 4 * 32, attn_decode_block_body, 4, 4, false)
DECODE_ENTRIES(attn_decode_block_w8u4, 8 * 32, attn_decode_block_body, 8, 4, false)
DECODE_ENTRIES(attn_decode_heads_u4, NUM_KV_HEADS * 32, attn_decode_block_body, NUM_KV_HEADS, 4, true)
