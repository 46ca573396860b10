// Decode attention on tensor cores, its operands loaded from the cache straight into MMA
// fragments (appended after decode_mma_attention.cu: uses decode_block_attention.cu's RopeIn,
// db_new_key, db_norm_rope and db_merge_write, attention.cu's MMA and pack helpers).
//
// Why: the block kernel (decode_block_attention.cu) keeps 4 KB of loads in flight per warp
// and spends most of its issue slots on bf16 conversions, FMAs and shuffle reductions; the
// cp.async kernel (decode_mma_attention.cu) cuts the instructions but its shared-memory stages
// cost occupancy. Here each lane loads 16-byte pieces of K and V rows into registers laid out
// as the MMA wants them, so a warp has a whole 16-key tile (8 KB) in flight with no shared
// memory, and the math of 16 keys is 24 MMAs and about 100 other instructions.
//
// The layouts use two freedoms of the products. S = Q Kᵀ sums over the head dimension, so
// any permutation of the dimensions, applied to Q and K alike, gives the same S: lane (g, t)
// (g = lane / 4, t = lane % 4) loads chunk t + 4 j (8 dimensions) of key row g (and g + 8)
// and uses its four 32-bit words as the B fragments of two 16-wide steps; the query's A
// fragments take the same words of the same chunks. Oᵀ = Vᵀ Pᵀ (dimensions as rows, query
// heads as the 8 columns) sums over the keys, whose order S fixes; its row order is ours to
// choose: m-tile mt row g is dimension 8 g + mt and row g + 8 is 64 + 8 g + mt, so lane (g, t)
// loads chunks g and g + 8 of keys 2t, 2t + 1, 2t + 8, 2t + 9 and pairs the keys' halves with
// byte permutes. S's accumulator fragment is then Pᵀ's B fragment as it stands (the
// FlashAttention-2 register reuse), and Oᵀ's fragment holds, in lane (g, t), heads 2t and
// 2t + 1.
//
// Needs HEAD_DIM == 128 and GQA_GROUP <= 8 (query heads are the 8 columns);
// DecodeKernel::supports checks, the kernel traps otherwise. P enters the second product
// rounded to bf16 (as in FlashAttention) while the softmax sums take it in fp32. ROPE as in
// attn_decode_block: the block whose split holds the new key writes it to the cache, and its
// first warp starts its softmax from that key instead of reading it back.

#define DF_KEYS 16
#define DF_SUPPORTED (HEAD_DIM == 128 && GQA_GROUP <= 8)

__device__ __forceinline__ u32 df_word(const uint4& u, int w) {
    return w == 0 ? u.x : w == 1 ? u.y : w == 2 ? u.z : u.w;
}

// Halves `half` (0: low, 1: high) of a and b packed as (a's, b's): the bf16 pair of one
// dimension of two keys, lower key in the low half.
__device__ __forceinline__ u32 df_pair(u32 a, u32 b, int half) {
    return __byte_perm(a, b, half ? 0x7632 : 0x5410);
}

// The cache row offset (in bf16) of key `key` of KV head kvh, through the block table.
__device__ __forceinline__ long long df_row(const int* __restrict__ bt, int block_size, int kvh, int key) {
    const long long slot = (long long)bt[key / block_size] * block_size + key % block_size;
    return (slot * NUM_KV_HEADS + kvh) * HEAD_DIM;
}

// Loads of one 16-key tile starting at key `base` (a multiple of DF_KEYS) of KV head kvh, for
// lane (g, t): K rows base + g and base + 8 + g, chunks t + 4j (df_load_k); V rows base + 2t,
// 2t + 1, 2t + 8, 2t + 9, chunks g and g + 8 (df_load_v). Keys at or past `end` read as zeros
// (zero V keeps 0 * garbage from making NaN; their scores are masked). When the tile lies in
// one KV block (`one_block`), every address is one lane base plus a constant, so the loads need
// no more address registers than that.
#define DF_STEP ((long long)NUM_KV_HEADS * HEAD_DIM)  // bf16 from one cache slot to the next
__device__ __forceinline__ void df_load_k(uint4 (&kr)[2][4], const bf16* __restrict__ k_cache,
                                          const int* __restrict__ bt, int block_size, bool one_block, int kvh,
                                          int base, int end, int g, int t) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const bool ok[2] = {base + g < end, base + 8 + g < end};
    if (one_block) {
        const bf16* kp = k_cache + df_row(bt, block_size, kvh, base) + g * DF_STEP + t * 8;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            kr[0][j] = ok[0] ? __ldcs(reinterpret_cast<const uint4*>(kp + 32 * j)) : zero;
            kr[1][j] = ok[1] ? __ldcs(reinterpret_cast<const uint4*>(kp + 8 * DF_STEP + 32 * j)) : zero;
        }
    } else {
#pragma unroll
        for (int a = 0; a < 2; a++) {
            const bf16* kp = k_cache + (ok[a] ? df_row(bt, block_size, kvh, base + 8 * a + g) : 0) + t * 8;
#pragma unroll
            for (int j = 0; j < 4; j++) kr[a][j] = ok[a] ? __ldcs(reinterpret_cast<const uint4*>(kp + 32 * j)) : zero;
        }
    }
}

__device__ __forceinline__ void df_load_v(uint4 (&vr)[4][2], const bf16* __restrict__ v_cache,
                                          const int* __restrict__ bt, int block_size, bool one_block, int kvh,
                                          int base, int end, int g, int t) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
    constexpr int VK[4] = {0, 1, 8, 9};
    if (one_block) {
        const bf16* vp = v_cache + df_row(bt, block_size, kvh, base) + 2 * t * DF_STEP + g * 8;
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const bool ok = base + 2 * t + VK[a] < end;
#pragma unroll
            for (int h = 0; h < 2; h++)
                vr[a][h] = ok ? __ldcs(reinterpret_cast<const uint4*>(vp + VK[a] * DF_STEP + 64 * h)) : zero;
        }
    } else {
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const int key = base + 2 * t + VK[a];
            const bool ok = key < end;
            const bf16* vp = v_cache + (ok ? df_row(bt, block_size, kvh, key) : 0) + g * 8;
#pragma unroll
            for (int h = 0; h < 2; h++) vr[a][h] = ok ? __ldcs(reinterpret_cast<const uint4*>(vp + 64 * h)) : zero;
        }
    }
}

template <int WARPS, bool ROPE>
__device__ __forceinline__ void attn_decode_frag_impl(DECODE_UNIT_PARAMS, const RopeIn& rope) {
    PDL_ENTER();
    __shared__ __align__(16) bf16 q_tile[GQA_GROUP][HEAD_DIM];
    __shared__ __align__(16) bf16 new_kv[2][HEAD_DIM];  // the new key's rotated K and its V
    __shared__ float sm_ml[WARPS][GQA_GROUP][2];
    __shared__ float sm_o[WARPS][GQA_GROUP][HEAD_DIM];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;

    const int unit = blockIdx.x;
    const int z = unit % nsplit;
    const int kvh = (unit / nsplit) % NUM_KV_HEADS;
    const int i = unit / (nsplit * NUM_KV_HEADS);
    const DecodeUnit du = decode_unit<ROPE>(decodes, block_tables, hdr, i, nsplit, z, DF_KEYS, rope.max_pos);
    const int row = du.row, L = du.L, kb = du.kb, pos = du.pos;
    const int* bt = du.bt;
    const bool owns_new = du.owns_new;
    // The owner of the new key (position L - 1) takes it from registers, not from the cache.
    const int kend = owns_new ? L - 1 : du.ke;
    const bool one_block = (block_size % DF_KEYS) == 0;


    // The group's query rows (q-norm + RoPE first with ROPE), lane groups of DB_LPK lanes a row.
    {
        const int part = lane / DB_LPK, dim0 = (lane % DB_LPK) * 8;
        for (int j0 = warp * DB_KPW; j0 < GQA_GROUP; j0 += WARPS * DB_KPW) {
            const int j = j0 + part;
            uint4 u = make_uint4(0, 0, 0, 0);
            if (j < GQA_GROUP)
                u = *reinterpret_cast<const uint4*>(qkv + (long long)row * QKV_DIM + (kvh * GQA_GROUP + j) * HEAD_DIM +
                                                    dim0);
            if (ROPE) {  // every lane of the warp takes part (shuffles)
                float x[8];
                bf16x8_to_float(u, x);
                db_norm_rope(x, rope.q_norm, rope, pos, dim0, lane);
                u = float8_to_bf16x8(x);
            }
            if (j < GQA_GROUP) *reinterpret_cast<uint4*>(&q_tile[j][dim0]) = u;
        }
    }
    if (owns_new && warp == 0) {  // the new key: k-norm + RoPE, into the cache slot and new_kv
        const int dim0 = (lane % DB_LPK) * 8;
        float kx[8];
        const uint4 vraw = db_new_key(qkv, k_cache, v_cache, rope, row, kvh, pos, dim0, lane, kx);
        if (lane / DB_LPK == 0) {
            *reinterpret_cast<uint4*>(&new_kv[0][dim0]) = float8_to_bf16x8(kx);
            *reinterpret_cast<uint4*>(&new_kv[1][dim0]) = vraw;
        }
    }
    __syncthreads();  // the query rows and the new key are complete

    // Softmax state of query head g (row g of S; log2 units) and this lane's share of its sum;
    // the output fragments: o[mt] = (dim 8g + mt, heads 2t, 2t + 1), (dim 64 + 8g + mt, same).
    float m = NEG_BIG, l = 0.0f;
    float o[8][4];
#pragma unroll
    for (int mt = 0; mt < 8; mt++) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
    if (owns_new && warp == 0) {
        float d = 0.0f;
        if (g < GQA_GROUP) {
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 8; e++)
                    d += __bfloat162float(q_tile[g][(t + 4 * j) * 8 + e]) *
                         __bfloat162float(new_kv[0][(t + 4 * j) * 8 + e]);
        }
        d += __shfl_xor_sync(0xffffffffu, d, 1);
        d += __shfl_xor_sync(0xffffffffu, d, 2);
        m = d * scale_log2;
        l = t == 0 ? 1.0f : 0.0f;  // one lane of the row counts the key
#pragma unroll
        for (int mt = 0; mt < 8; mt++) {
            o[mt][0] = o[mt][1] = __bfloat162float(new_kv[1][8 * g + mt]);
            o[mt][2] = o[mt][3] = __bfloat162float(new_kv[1][64 + 8 * g + mt]);
        }
    }

    // Loading the first tile before the query's prologue, or the next tile's K or V during
    // this tile's math (into the same registers), made batch 64 slower on the H200
    // (results/h200/NOTES.md, tenth session).
    const int stride = WARPS * DF_KEYS;
    for (int base = kb + warp * DF_KEYS; base < kend; base += stride) {
        uint4 kr[2][4], vr[4][2];
        df_load_k(kr, k_cache, bt, block_size, one_block, kvh, base, kend, g, t);
        df_load_v(vr, v_cache, bt, block_size, one_block, kvh, base, kend, g, t);
        // S = Q Kᵀ: rows = query heads, columns = keys (n-tile nt: keys base + 8 nt ..). Q's A
        // fragments for the 8 steps of 16 dimensions: step 2j takes words 0 and 1 of chunk
        // t + 4j, step 2j + 1 words 2 and 3; rows past the group are zero. They are read from
        // shared memory each tile: held in registers they cost 16 of them, and the warps.
        float s[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint4 qf = g < GQA_GROUP ? *reinterpret_cast<const uint4*>(&q_tile[g][(t + 4 * j) * 8])
                                           : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                const u32 a0[4] = {qf.x, 0u, qf.y, 0u};
                const u32 a1[4] = {qf.z, 0u, qf.w, 0u};
                mma_bf16_16816(s[nt], a0, kr[nt][j].x, kr[nt][j].y);
                mma_bf16_16816(s[nt], a1, kr[nt][j].z, kr[nt][j].w);
            }
        }
        // Lane (g, t) holds head g's scores of keys base + 8 nt + 2t + e.
        float x[2][2];
        float mx = m;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                x[nt][e] = base + 8 * nt + 2 * t + e < kend ? s[nt][e] * scale_log2 : -INFINITY;
                mx = fmaxf(mx, x[nt][e]);
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float c = exp2f(m - mx);
        m = mx;
        float p[2][2];
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++) p[nt][e] = exp2f(x[nt][e] - m);
        l = l * c + (p[0][0] + p[0][1]) + (p[1][0] + p[1][1]);
        // Output columns 2t and 2t + 1 are heads 2t and 2t + 1, whose rescale rows 2t, 2t + 1 hold.
        const float ca = __shfl_sync(0xffffffffu, c, 8 * t), cb = __shfl_sync(0xffffffffu, c, 8 * t + 4);
        const u32 pb0 = pack_bf16(p[0][0], p[0][1]), pb1 = pack_bf16(p[1][0], p[1][1]);
#pragma unroll
        for (int mt = 0; mt < 8; mt++) {
            o[mt][0] *= ca;
            o[mt][1] *= cb;
            o[mt][2] *= ca;
            o[mt][3] *= cb;
            const int w = mt >> 1, half = mt & 1;
            const u32 a[4] = {
                df_pair(df_word(vr[0][0], w), df_word(vr[1][0], w), half),
                df_pair(df_word(vr[0][1], w), df_word(vr[1][1], w), half),
                df_pair(df_word(vr[2][0], w), df_word(vr[3][0], w), half),
                df_pair(df_word(vr[2][1], w), df_word(vr[3][1], w), half),
            };
            mma_bf16_16816(o[mt], a, pb0, pb1);
        }
    }
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);

    if (g < GQA_GROUP && t == 0) {
        sm_ml[warp][g][0] = m;
        sm_ml[warp][g][1] = l;
    }
#pragma unroll
    for (int c2 = 0; c2 < 2; c2++) {
        const int h = 2 * t + c2;
        if (h < GQA_GROUP) {
#pragma unroll
            for (int mt = 0; mt < 8; mt++) {
                sm_o[warp][h][8 * g + mt] = o[mt][c2];
                sm_o[warp][h][64 + 8 * g + mt] = o[mt][2 + c2];
            }
        }
    }
    __syncthreads();
    db_merge_write(&sm_o[0][0][0], &sm_ml[0][0][0], WARPS, kvh, i, row, z, nsplit, out, part_o, part_ml);
}

template <int WARPS, bool ROPE>
__device__ __forceinline__ void attn_decode_frag_body(DECODE_UNIT_PARAMS, const RopeIn& rope) {
    if constexpr (DF_SUPPORTED && DB_FITS(WARPS) && (!ROPE || HEAD_DIM == 8 * DB_LPK)) {
        attn_decode_frag_impl<WARPS, ROPE>(DECODE_UNIT_ARGS, rope);
    } else {
        __trap();
    }
}

// Grid: one block of WARPS warps per unit (split fastest); parameters as attn_decode_block's
// (DECODE_ENTRIES there).
DECODE_ENTRIES_MINB(attn_decode_frag_w2, 2 * 32, 8, attn_decode_frag_body, 2)
DECODE_ENTRIES_MINB(attn_decode_frag_w4, 4 * 32, 4, attn_decode_frag_body, 4)
DECODE_ENTRIES_MINB(attn_decode_frag_w8, 8 * 32, 2, attn_decode_frag_body, 8)
