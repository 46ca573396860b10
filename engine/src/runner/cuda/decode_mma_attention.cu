// Decode attention on tensor cores (appended after decode_block_attention.cu: uses its RopeIn,
// db_norm_rope and DB_* lane layout, attention.cu's MMA, ldmatrix and cp.async helpers, and
// decode_attention.cu's partial-output layout for attn_combine).
//
// Why it exists: the CUDA-core block kernel spends half its issue slots on bf16 conversions,
// FMAs and shuffle reductions (12.6 M warp instructions per layer at 64 decodes, 51 % issue
// utilisation; ncu, 2026-11-30). Here the query heads of a KV head's group are the rows of one
// 16-row MMA tile, so 16 keys cost 32 MMAs, 8 ldmatrix and the copies (5.3 M instructions), and
// the copies go through a cp.async pipeline of STAGES stages per warp. Measured on the H200 it
// is nonetheless slower at every batch size (batch 64: 1.88 vs 1.76 ms per step): with its
// shared memory, 2 blocks of 4 warps fit an SM, and each warp's chain of dependent MMAs,
// exponentials and waits leaves its schedulers issuing in only 20 % of cycles. So DecodeKernel::for_batch never
// picks it; `engine-bench --tune` times it, and the self-tests check it.
//
// A block of WARPS warps per (decode sequence, KV head, split), as in attn_decode_block:
// warp w takes the split's 16-key tiles w, w + WARPS, ...; warps merge in shared memory.
// Needs HEAD_DIM % 16 == 0, HEAD_DIM <= 128 (the fp32 output tile lives in registers) and
// GQA_GROUP <= 16 (one row tile); DecodeKernel::supports checks, the kernel traps otherwise.
// ROPE as in attn_decode_block: the block whose split holds the new key (position L - 1) writes
// it to the cache, and its warps take it from shared memory rather than from the cache.

#define DM_KEYS 16
#define DM_PAD (HEAD_DIM + 8)  // bf16 per staged row: 16-byte row shift keeps ldmatrix conflict-free
#define DM_TILE_BYTES (DM_KEYS * DM_PAD * 2)
// Dynamic shared memory of a block: per warp, STAGES x (K, V) tiles; then the query tile (16
// rows) and the new key's K and V rows.
#define DM_SMEM_BYTES(WARPS, STAGES) ((WARPS) * (STAGES) * 2 * DM_TILE_BYTES + 18 * DM_PAD * 2)
#define DM_SUPPORTED (HEAD_DIM % 16 == 0 && HEAD_DIM <= 128 && GQA_GROUP <= 16)

typedef bf16 DmRow[DM_PAD];

__device__ __forceinline__ void dm_cp_async16(void* smem, const void* gmem, bool valid) {
    const u32 dst = (u32)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}

// One warp starts the copy of keys [base, base + DM_KEYS) of KV head kvh into (Ks, Vs); keys at
// or past `end` are zero-filled (zero V keeps 0 * garbage from making NaN). Always commits a
// group, empty or not, so the caller's group count stays in step. Lane l copies the 16-byte
// chunks l + 32 i of the tile (row-major over DM_CHUNKS chunks per key); when the tile lies in
// one KV block its rows are a fixed stride apart, so each copy is a base plus a constant.
#define DM_CHUNKS (HEAD_DIM / 8)
#define DM_ITERS (DM_KEYS * DM_CHUNKS / 32)
__device__ __forceinline__ void dm_load_tile(DmRow* Ks, DmRow* Vs, const bf16* __restrict__ k_cache,
                                             const bf16* __restrict__ v_cache, const int* __restrict__ bt,
                                             int block_size, bool one_block, int kvh, int base, int end,
                                             unsigned lane) {
    if (base < end) {
        if (one_block) {
            const long long row0 =
                ((long long)bt[base / block_size] * block_size + base % block_size) * NUM_KV_HEADS + kvh;
            const bf16* kp = k_cache + row0 * HEAD_DIM;
            const bf16* vp = v_cache + row0 * HEAD_DIM;
#pragma unroll
            for (int i = 0; i < DM_ITERS; i++) {
                const unsigned c = lane + 32 * i;
                const int r = (32 % DM_CHUNKS == 0) ? lane / DM_CHUNKS + i * (32 / DM_CHUNKS) : c / DM_CHUNKS;
                const int col = (32 % DM_CHUNKS == 0) ? (lane % DM_CHUNKS) * 8 : (c % DM_CHUNKS) * 8;
                const int off = r * (NUM_KV_HEADS * HEAD_DIM) + col;
                const bool valid = base + r < end;
                dm_cp_async16(&Ks[r][col], kp + off, valid);
                dm_cp_async16(&Vs[r][col], vp + off, valid);
            }
        } else {
#pragma unroll
            for (int i = 0; i < DM_ITERS; i++) {
                const unsigned c = lane + 32 * i;
                const int r = c / DM_CHUNKS, col = (c % DM_CHUNKS) * 8;
                const int key = base + r;
                const bool valid = key < end;
                const long long slot = valid ? (long long)bt[key / block_size] * block_size + key % block_size : 0;
                const long long off = (slot * NUM_KV_HEADS + kvh) * HEAD_DIM + col;
                dm_cp_async16(&Ks[r][col], k_cache + off, valid);
                dm_cp_async16(&Vs[r][col], v_cache + off, valid);
            }
        }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int STAGES>
__device__ __forceinline__ void dm_wait_oldest() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 1) : "memory");
}

template <int WARPS, int STAGES, bool ROPE>
__device__ __forceinline__ void attn_decode_mma_impl(
    DECODE_UNIT_PARAMS, const RopeIn& rope) {
    PDL_ENTER();
    extern __shared__ __align__(16) unsigned char dm_smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    DmRow* const k_stage = reinterpret_cast<DmRow*>(dm_smem) + warp * STAGES * 2 * DM_KEYS;
    DmRow* const v_stage = k_stage + STAGES * DM_KEYS;
    DmRow* const q_tile = reinterpret_cast<DmRow*>(dm_smem) + WARPS * STAGES * 2 * DM_KEYS;
    DmRow* const new_kv = q_tile + 16;  // the new key's rotated K and its V

    const int unit = blockIdx.x;
    const int z = unit % nsplit;
    const int kvh = (unit / nsplit) % NUM_KV_HEADS;
    const int i = unit / (nsplit * NUM_KV_HEADS);
    const DecodeUnit du = decode_unit<ROPE>(decodes, block_tables, hdr, i, nsplit, z, DM_KEYS, rope.max_pos);
    const int row = du.row, L = du.L, kb = du.kb, ke = du.ke, pos = du.pos;
    const int* bt = du.bt;
    const bool one_block = (block_size % DM_KEYS) == 0;
    const bool owns_new = du.owns_new;

    // Start this warp's first tiles now. The new key (position L - 1) is not read from the
    // cache: the block that owns it zero-fills its row and patches in the rotated key below.
    const int first = kb + warp * DM_KEYS, stride = WARPS * DM_KEYS;
    const int load_end = owns_new ? L - 1 : ke;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++)
        dm_load_tile(k_stage + s * DM_KEYS, v_stage + s * DM_KEYS, k_cache, v_cache, bt, block_size, one_block, kvh,
                     first + s * stride, load_end, lane);

    // Query rows: head kvh * GQA_GROUP + j in row j, rows past the group zero. Lane groups of
    // DB_LPK lanes take a row, 8 elements per lane.
    {
        const int part = lane / DB_LPK, sub = lane % DB_LPK, dim0 = sub * 8;
        constexpr int ROWS = (GQA_GROUP + DB_KPW - 1) / DB_KPW * DB_KPW;  // whole warps' worth
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
        for (int idx = threadIdx.x; idx < (16 - ROWS) * (HEAD_DIM / 8); idx += WARPS * 32)
            *reinterpret_cast<uint4*>(&q_tile[ROWS + idx / (HEAD_DIM / 8)][(idx % (HEAD_DIM / 8)) * 8]) =
                make_uint4(0, 0, 0, 0);
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
    __syncthreads();  // the query tile and the new key's rows are complete

    u32 qa[HEAD_DIM / 16][4];
    {
        const int r0 = g, r1 = g + 8;
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
            qa[kk][0] = *reinterpret_cast<const u32*>(&q_tile[r0][kk * 16 + tig * 2]);
            qa[kk][1] = *reinterpret_cast<const u32*>(&q_tile[r1][kk * 16 + tig * 2]);
            qa[kk][2] = *reinterpret_cast<const u32*>(&q_tile[r0][kk * 16 + 8 + tig * 2]);
            qa[kk][3] = *reinterpret_cast<const u32*>(&q_tile[r1][kk * 16 + 8 + tig * 2]);
        }
    }
    float o[HEAD_DIM / 8][4];
#pragma unroll
    for (int d = 0; d < HEAD_DIM / 8; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    float m0 = NEG_BIG, m1 = NEG_BIG, l0 = 0.0f, l1 = 0.0f;

    int t = 0;
    for (int base = first; base < ke; base += stride, t++) {
        {  // keep STAGES - 1 tiles in flight: issue tile t + STAGES - 1 into the stage freed last time
            const int st = (t + STAGES - 1) % STAGES;
            dm_load_tile(k_stage + st * DM_KEYS, v_stage + st * DM_KEYS, k_cache, v_cache, bt, block_size, one_block,
                         kvh, base + (STAGES - 1) * stride, load_end, lane);
        }
        dm_wait_oldest<STAGES>();
        __syncwarp();
        DmRow* Ks = k_stage + (t % STAGES) * DM_KEYS;
        DmRow* Vs = v_stage + (t % STAGES) * DM_KEYS;
        if (owns_new && base <= L - 1 && L - 1 < base + DM_KEYS) {
            if (lane < HEAD_DIM / 8) {
                *reinterpret_cast<uint4*>(&Ks[L - 1 - base][lane * 8]) = *reinterpret_cast<const uint4*>(&new_kv[0][lane * 8]);
                *reinterpret_cast<uint4*>(&Vs[L - 1 - base][lane * 8]) = *reinterpret_cast<const uint4*>(&new_kv[1][lane * 8]);
            }
            __syncwarp();
        }

        float s[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
                const u32 b0 = *reinterpret_cast<const u32*>(&Ks[nt * 8 + g][kk * 16 + tig * 2]);
                const u32 b1 = *reinterpret_cast<const u32*>(&Ks[nt * 8 + g][kk * 16 + 8 + tig * 2]);
                mma_bf16_16816(s[nt], qa[kk], b0, b1);
            }
        }
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = base + nt * 8 + tig * 2 + (e & 1);
                const float x = key < ke ? s[nt][e] * scale_log2 : -INFINITY;
                s[nt][e] = x;
                if (e < 2) mx0 = fmaxf(mx0, x);
                else mx1 = fmaxf(mx1, x);
            }
        }
        // Rows g + 8 hold query heads only in groups of more than 8; otherwise they are padding
        // whose softmax is skipped (their P is zero).
        constexpr bool HI = GQA_GROUP > 8;
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        if (HI) {
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        }
        const float c0 = exp2f(m0 - mx0), c1 = HI ? exp2f(m1 - mx1) : 0.0f;
        m0 = mx0;
        l0 *= c0;
        if (HI) {
            m1 = mx1;
            l1 *= c1;
        }
#pragma unroll
        for (int d = 0; d < HEAD_DIM / 8; d++) {
            o[d][0] *= c0;
            o[d][1] *= c0;
            if (HI) {
                o[d][2] *= c1;
                o[d][3] *= c1;
            }
        }
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
            s[nt][0] = exp2f(s[nt][0] - m0);
            s[nt][1] = exp2f(s[nt][1] - m0);
            l0 += s[nt][0] + s[nt][1];
            if (HI) {
                s[nt][2] = exp2f(s[nt][2] - m1);
                s[nt][3] = exp2f(s[nt][3] - m1);
                l1 += s[nt][2] + s[nt][3];
            }
        }
        u32 pa[4];
        pa[0] = pack_bf16(s[0][0], s[0][1]);
        pa[1] = HI ? pack_bf16(s[0][2], s[0][3]) : 0u;
        pa[2] = pack_bf16(s[1][0], s[1][1]);
        pa[3] = HI ? pack_bf16(s[1][2], s[1][3]) : 0u;
#pragma unroll
        for (int nd = 0; nd < HEAD_DIM / 8; nd += 2) {
            u32 vb[4];
            ldmatrix_x4_trans(vb, &Vs[(lane & 7) + ((lane >> 3) & 1) * 8][(nd + (lane >> 4)) * 8]);
            mma_bf16_16816(o[nd], pa, vb[0], vb[1]);
            mma_bf16_16816(o[nd + 1], pa, vb[2], vb[3]);
        }
        __syncwarp();  // every lane is done with this stage before it is refilled
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);

    // Warps merge in shared memory (the stages are free once every warp is here).
    __syncthreads();
    float* sm_o = reinterpret_cast<float*>(dm_smem);                // [WARPS][GQA_GROUP][HEAD_DIM]
    float* sm_ml = sm_o + WARPS * GQA_GROUP * HEAD_DIM;             // [WARPS][GQA_GROUP][2]
    if (g < GQA_GROUP) {
#pragma unroll
        for (int d = 0; d < HEAD_DIM / 8; d++) {
            sm_o[(warp * GQA_GROUP + g) * HEAD_DIM + d * 8 + tig * 2] = o[d][0];
            sm_o[(warp * GQA_GROUP + g) * HEAD_DIM + d * 8 + tig * 2 + 1] = o[d][1];
        }
        if (tig == 0) {
            sm_ml[(warp * GQA_GROUP + g) * 2] = m0;
            sm_ml[(warp * GQA_GROUP + g) * 2 + 1] = l0;
        }
    }
    if (g + 8 < GQA_GROUP) {
#pragma unroll
        for (int d = 0; d < HEAD_DIM / 8; d++) {
            sm_o[(warp * GQA_GROUP + g + 8) * HEAD_DIM + d * 8 + tig * 2] = o[d][2];
            sm_o[(warp * GQA_GROUP + g + 8) * HEAD_DIM + d * 8 + tig * 2 + 1] = o[d][3];
        }
        if (tig == 0) {
            sm_ml[(warp * GQA_GROUP + g + 8) * 2] = m1;
            sm_ml[(warp * GQA_GROUP + g + 8) * 2 + 1] = l1;
        }
    }
    __syncthreads();
    db_merge_write(sm_o, sm_ml, WARPS, kvh, i, row, z, nsplit, out, part_o, part_ml);
}

template <int WARPS, int STAGES, bool ROPE>
__device__ __forceinline__ void attn_decode_mma_body(
    DECODE_UNIT_PARAMS, const RopeIn& rope) {
    if constexpr (DM_SUPPORTED && (!ROPE || HEAD_DIM == 8 * DB_LPK) && STAGES >= 2) {
        attn_decode_mma_impl<WARPS, STAGES, ROPE>(DECODE_UNIT_ARGS, rope);
    } else {
        __trap();
    }
}

// Grid: one block of WARPS warps per unit (split fastest), DM_SMEM_BYTES(WARPS, STAGES) of
// dynamic shared memory; parameters as attn_decode_block's (DECODE_ENTRIES there).
DECODE_ENTRIES(attn_decode_mma_w4s3, 4 * 32, attn_decode_mma_body, 4, 3)
