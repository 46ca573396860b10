// Decode attention on tensor cores with K and V loaded from the cache straight into MMA
// fragments, no shared-memory staging (appended after decode_mma_attention.cu: uses its DM_PAD
// query rows, decode_block_attention.cu's RopeIn, db_norm_rope, db_new_key and db_merge_write,
// attention.cu's MMA helpers, decode_attention.cu's key_split and partial-output layout).
//
// Why: the CUDA-core block kernel spends its issue slots on conversions, FMAs and shuffle
// reductions (12.6 M warp instructions per layer at 64 decodes), and the staged tensor-core
// kernel (attn_decode_mma) lost on its 107 KB of shared memory: 2 blocks per SM. Here a warp's
// 16-key tile costs 16 loads, 32 movmatrix and 32 MMAs, and a block needs a few KB of shared
// memory, so as many warps fit an SM as registers allow.
//
// Fragment layout. For a 16-key tile, lane (g, tig) holds keys g and g + 8 and, for each 32-dim
// chunk c of the head, the 16 bytes of their K and V rows at dims [32c + 8 tig, 32c + 8 tig + 8)
// (4 lanes read a 64-byte run of a row). S = Q Kᵀ: inside a chunk the MMA's k order is permuted,
// the same way for Q and K (a bijection over dims, so the dot products are unchanged): MMA step
// 2c + h takes the lane's words 2h and 2h + 1. O = P V: word s of a lane's V chunk c is the
// lane's part of an 8-key x 8-dim piece of V (logical dim tile 4c + s, columns 2 tig, 2 tig + 1
// = dims 32c + 8 tig + 2s + {0, 1}); movmatrix transposes it into the MMA's B fragment. Output
// column e of tile 4c + s, held by lane tig, is thus dim 32c + 8 tig + 2s + e; the warp's
// result is put back in dim order when it goes to shared memory.
//
// A block of WARPS warps per (decode sequence, KV head, split): warp w takes the split's 16-key
// tiles w, w + WARPS, ...; the next tile's K is loaded once this tile's scores are computed, its
// V once this tile's P V is done, so a tile's loads overlap the previous tile's math. Warps
// merge in shared memory. Needs HEAD_DIM % 32 == 0, HEAD_DIM <= 128 and GQA_GROUP <= 16
// (DecodeKernel::supports); traps otherwise. ROPE as in attn_decode_block: the block whose
// split holds the new key (position L - 1) writes it to the cache and takes it from shared
// memory instead of the cache.

#define DR_CHUNKS (HEAD_DIM / 32)
// Warps per SM the register cap allows for (16: 128 registers per thread), so that enough tiles
// are in flight per SM.
#ifndef DR_WARPS_PER_SM
#define DR_WARPS_PER_SM 16
#endif
#define DR_SUPPORTED (HEAD_DIM % 32 == 0 && HEAD_DIM <= 128 && GQA_GROUP <= 8)

__device__ __forceinline__ u32 movmatrix_trans(u32 a) {
    u32 d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
    return d;
}

__device__ __forceinline__ u32 uint4_word(const uint4& u, int i) {
    return i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w;
}

// Element offsets (slot * NUM_KV_HEADS + kvh) * HEAD_DIM + 8 tig of the cache rows of the lane's
// two keys (tile keys g and g + 8) of the 16-key tile at `base`; -1 for keys at or past `end`.
__device__ __forceinline__ void dr_offsets(long long* off, const int* __restrict__ bt, int block_size,
                                           bool one_block, int kvh, int base, int end, int g, int tig) {
    const long long slot0 =
        one_block && base < end ? (long long)bt[base / block_size] * block_size + base % block_size : 0;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int key = base + h * 8 + g;
        long long o = -1;
        if (key < end) {
            const long long slot =
                one_block ? slot0 + h * 8 + g : (long long)bt[key / block_size] * block_size + key % block_size;
            o = (slot * NUM_KV_HEADS + kvh) * HEAD_DIM + tig * 8;
        }
        off[h] = o;
    }
}

// One cache's chunks of the lane's two keys (zeros for a key past the end: zero V keeps
// 0 * garbage from making NaN).
__device__ __forceinline__ void dr_load(uint4 (&r)[2][DR_CHUNKS], const bf16* __restrict__ cache,
                                        const long long* off) {
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int c = 0; c < DR_CHUNKS; c++)
            r[h][c] = off[h] >= 0 ? __ldg(reinterpret_cast<const uint4*>(cache + off[h] + 32 * c))
                                  : make_uint4(0, 0, 0, 0);
}

template <int WARPS, bool ROPE>
__device__ __forceinline__ void attn_decode_mmr_impl(
    bf16* __restrict__ qkv, bf16* __restrict__ k_cache, bf16* __restrict__ v_cache, bf16* __restrict__ out,
    const int* __restrict__ decodes, const int* __restrict__ block_tables, const int* __restrict__ hdr,
    int block_size, float scale_log2, float* __restrict__ part_o, float* __restrict__ part_ml, int nsplit,
    const RopeIn& rope) {
    PDL_ENTER();
    __shared__ __align__(16) bf16 q_tile[8][DM_PAD];
    __shared__ __align__(16) bf16 new_kv[2][DM_PAD];  // the new key's rotated K and its V
    __shared__ float sm_o[WARPS * GQA_GROUP * HEAD_DIM];
    __shared__ float sm_ml[WARPS * GQA_GROUP * 2];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;

    const int unit = blockIdx.x;
    const int z = unit % nsplit;
    const int kvh = (unit / nsplit) % NUM_KV_HEADS;
    const int i = unit / (nsplit * NUM_KV_HEADS);
    const int seq = decodes[3 * i], row = decodes[3 * i + 1], L = decodes[3 * i + 2];
    const int* bt = block_tables + (long long)seq * hdr[0];
    const KeySplit sp = key_split(L, nsplit, z, 16);
    const int kb = sp.kb, ke = sp.ke, per = sp.per;
    const bool one_block = (block_size % 16) == 0;
    const bool owns_new = ROPE && L > 0 && kb <= L - 1 && L - 1 < kb + per;
    const int pos = ROPE ? min(max(L - 1, 0), rope.max_pos - 1) : 0;

    // Warp w takes a contiguous run of the split's 16-key tiles (keys [first, kend)). Start its
    // first tile now; the query set-up below overlaps its latency.
    const int tiles_per_warp = max(0, ((ke - kb + 15) / 16 + WARPS - 1) / WARPS);
    const int first = kb + warp * tiles_per_warp * 16, stride = 16;
    const int kend = min(ke, first + tiles_per_warp * 16);
    long long off[2];
    uint4 kr[2][DR_CHUNKS], vr[2][DR_CHUNKS];
    dr_offsets(off, bt, block_size, one_block, kvh, first, kend, g, tig);
    dr_load(kr, k_cache, off);
    dr_load(vr, v_cache, off);

    // Query rows: head kvh * GQA_GROUP + j in row j, rows past the group (up to 8) zero.
    {
        const int part = lane / DB_LPK, sub = lane % DB_LPK, dim0 = sub * 8;
        constexpr int ROWS = (GQA_GROUP + DB_KPW - 1) / DB_KPW * DB_KPW;
        for (int j0 = warp * DB_KPW; j0 < ROWS; j0 += WARPS * DB_KPW) {
            const int j = j0 + part;
            uint4 u = make_uint4(0, 0, 0, 0);
            if (j < GQA_GROUP && dim0 < HEAD_DIM)
                u = *reinterpret_cast<const uint4*>(qkv + (long long)row * QKV_DIM + (kvh * GQA_GROUP + j) * HEAD_DIM +
                                                    dim0);
            if (ROPE) {  // every lane of the warp takes part (shuffles)
                float x[8];
                bf16x8_to_float(u, x);
                db_norm_rope(x, rope.q_norm, rope, pos, dim0, lane);
                if (j < GQA_GROUP) u = float8_to_bf16x8(x);
            }
            if (dim0 < HEAD_DIM) *reinterpret_cast<uint4*>(&q_tile[j][dim0]) = u;
        }
        for (int idx = threadIdx.x; idx < (8 - ROWS) * (HEAD_DIM / 8); idx += WARPS * 32)
            *reinterpret_cast<uint4*>(&q_tile[ROWS + idx / (HEAD_DIM / 8)][(idx % (HEAD_DIM / 8)) * 8]) =
                make_uint4(0, 0, 0, 0);
    }
    if (owns_new && warp == 0) {
        const int dim0 = (lane % DB_LPK) * 8;
        float kx[8];
        const uint4 vraw = db_new_key(qkv, k_cache, v_cache, rope, row, kvh, pos, dim0, lane, kx);
        if (lane / DB_LPK == 0) {
            *reinterpret_cast<uint4*>(&new_kv[0][dim0]) = float8_to_bf16x8(kx);
            *reinterpret_cast<uint4*>(&new_kv[1][dim0]) = vraw;
        }
    }
    __syncthreads();

    // Qᵀ as the B operand: head g (a column), MMA step 2c + h takes dims 32c + 8 tig + 4h + {0..3}.
    u32 qb[HEAD_DIM / 16][2];
#pragma unroll
    for (int c = 0; c < DR_CHUNKS; c++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int d = 32 * c + 8 * tig + 4 * h;
            qb[2 * c + h][0] = *reinterpret_cast<const u32*>(&q_tile[g][d]);
            qb[2 * c + h][1] = *reinterpret_cast<const u32*>(&q_tile[g][d + 2]);
        }
    // Oᵀ: 16-dim row tiles x the 8 head columns; this lane's heads are 2 tig and 2 tig + 1.
    float o[HEAD_DIM / 16][4];
#pragma unroll
    for (int d = 0; d < HEAD_DIM / 16; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    float m[2] = {NEG_BIG, NEG_BIG}, l[2] = {0.0f, 0.0f};  // l: this lane's keys only

    for (int base = first; base < kend; base += stride) {
        if (owns_new && base <= L - 1 && L - 1 < base + 16) {
#pragma unroll
            for (int h = 0; h < 2; h++)
                if (base + h * 8 + g == L - 1) {
#pragma unroll
                    for (int c = 0; c < DR_CHUNKS; c++) {
                        kr[h][c] = *reinterpret_cast<const uint4*>(&new_kv[0][32 * c + 8 * tig]);
                        vr[h][c] = *reinterpret_cast<const uint4*>(&new_kv[1][32 * c + 8 * tig]);
                    }
                }
        }
        // Sᵀ = K Qᵀ: s[0], s[1] = key g, heads 2 tig and 2 tig + 1; s[2], s[3] = key g + 8.
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int c = 0; c < DR_CHUNKS; c++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const u32 a[4] = {uint4_word(kr[0][c], 2 * h), uint4_word(kr[1][c], 2 * h),
                                  uint4_word(kr[0][c], 2 * h + 1), uint4_word(kr[1][c], 2 * h + 1)};
                mma_bf16_16816(s, a, qb[2 * c + h][0], qb[2 * c + h][1]);
            }
        // The next tile's K goes in flight while this tile's softmax and P V run.
        const int next = base + stride;
        dr_offsets(off, bt, block_size, one_block, kvh, next, kend, g, tig);
        dr_load(kr, k_cache, off);

        float mx[2];
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (base + g + 8 * (e >> 1) >= kend) s[e] = -INFINITY;
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            float x = fmaxf(s[hh], s[hh + 2]) * scale_log2;
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
            mx[hh] = fmaxf(m[hh], x);
            const float cf = exp2f(m[hh] - mx[hh]);
            m[hh] = mx[hh];
            l[hh] *= cf;
#pragma unroll
            for (int d = 0; d < HEAD_DIM / 16; d++) {
                o[d][hh] *= cf;
                o[d][hh + 2] *= cf;
            }
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
            s[e] = exp2f(s[e] * scale_log2 - m[e & 1]);
            l[e & 1] += s[e];
        }
        // Pᵀ's 8-key x 8-head pieces transposed: B fragments with the keys as k.
        const u32 pb0 = movmatrix_trans(pack_bf16(s[0], s[1]));
        const u32 pb1 = movmatrix_trans(pack_bf16(s[2], s[3]));
        // Oᵀ += Vᵀ Pᵀ: row tile 2c + p holds logical dim tiles 4c + 2p (rows g) and 4c + 2p + 1
        // (rows g + 8).
#pragma unroll
        for (int c = 0; c < DR_CHUNKS; c++)
#pragma unroll
            for (int p = 0; p < 2; p++) {
                const u32 a[4] = {movmatrix_trans(uint4_word(vr[0][c], 2 * p)),
                                  movmatrix_trans(uint4_word(vr[0][c], 2 * p + 1)),
                                  movmatrix_trans(uint4_word(vr[1][c], 2 * p)),
                                  movmatrix_trans(uint4_word(vr[1][c], 2 * p + 1))};
                mma_bf16_16816(o[2 * c + p], a, pb0, pb1);
            }
        dr_load(vr, v_cache, off);
    }
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        l[hh] += __shfl_xor_sync(0xffffffffu, l[hh], 4);
        l[hh] += __shfl_xor_sync(0xffffffffu, l[hh], 8);
        l[hh] += __shfl_xor_sync(0xffffffffu, l[hh], 16);
    }

    // Back to dim order: row g of row tile 2c + p is dim 32c + 8 (g / 2) + 4p + (g % 2), row
    // g + 8 that plus 2.
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int j = 2 * tig + hh;
        if (j < GQA_GROUP) {
            float* dst = sm_o + (warp * GQA_GROUP + j) * HEAD_DIM + 8 * (g >> 1) + (g & 1);
#pragma unroll
            for (int c = 0; c < DR_CHUNKS; c++)
#pragma unroll
                for (int p = 0; p < 2; p++) {
                    dst[32 * c + 4 * p] = o[2 * c + p][hh];
                    dst[32 * c + 4 * p + 2] = o[2 * c + p][hh + 2];
                }
            if (g == 0) {
                sm_ml[(warp * GQA_GROUP + j) * 2] = m[hh];
                sm_ml[(warp * GQA_GROUP + j) * 2 + 1] = l[hh];
            }
        }
    }
    __syncthreads();
    db_merge_write(sm_o, sm_ml, WARPS, kvh, i, row, z, nsplit, out, part_o, part_ml);
}

template <int WARPS, bool ROPE>
__device__ __forceinline__ void attn_decode_mmr_body(
    bf16* __restrict__ qkv, bf16* __restrict__ k_cache, bf16* __restrict__ v_cache, bf16* __restrict__ out,
    const int* __restrict__ decodes, const int* __restrict__ block_tables, const int* __restrict__ hdr,
    int block_size, float scale_log2, float* __restrict__ part_o, float* __restrict__ part_ml, int nsplit,
    const RopeIn& rope) {
    if constexpr (DR_SUPPORTED && (!ROPE || HEAD_DIM == 8 * DB_LPK)) {
        attn_decode_mmr_impl<WARPS, ROPE>(qkv, k_cache, v_cache, out, decodes, block_tables, hdr, block_size,
                                          scale_log2, part_o, part_ml, nsplit, rope);
    } else {
        __trap();
    }
}

// Grid: one block of WARPS warps per unit (split fastest), no dynamic shared memory; parameters
// as attn_decode_block's.
#define DECODE_MMR_ENTRY(NAME, WARPS)                                                                        \
    extern "C" __global__ void __launch_bounds__((WARPS) * 32, DR_WARPS_PER_SM / (WARPS)) NAME(DECODE_BLOCK_PARAMS) {                  \
        if ((int)blockIdx.x >= n_units) return;                                                             \
        const RopeIn none = {nullptr, nullptr, nullptr, nullptr, nullptr, 1, 0.0f};                          \
        attn_decode_mmr_body<WARPS, false>(DECODE_BLOCK_ARGS, none);                                        \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__((WARPS) * 32, DR_WARPS_PER_SM / (WARPS)) NAME##_rope(      \
        DECODE_BLOCK_PARAMS, const bf16* __restrict__ q_norm, const bf16* __restrict__ k_norm,              \
        const float* __restrict__ cos_t, const float* __restrict__ sin_t, const int* __restrict__ slots,    \
        int max_pos, float eps) {                                                                           \
        if ((int)blockIdx.x >= n_units) return;                                                             \
        const RopeIn rope = {q_norm, k_norm, cos_t, sin_t, slots, max_pos, eps};                            \
        attn_decode_mmr_body<WARPS, true>(DECODE_BLOCK_ARGS, rope);                                         \
    }
DECODE_MMR_ENTRY(attn_decode_mmr_w2, 2)
DECODE_MMR_ENTRY(attn_decode_mmr_w4, 4)
