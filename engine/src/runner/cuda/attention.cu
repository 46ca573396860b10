// Paged attention over the KV cache (appended to kernels.cu; same #defines).
//
// Step metadata (all int32): q_start[S+1] (first token row of each sequence in the batch),
// ctx_len[S] (tokens in the cache after this step: start_pos + new tokens), block_tables
// [S][bt_stride] with bt_stride read from hdr[0] on the device so a captured graph stays valid
// as contexts grow.
//
// attn_prefill: tensor-core flash attention (mma.sync m16n8k16 bf16, fp32 accumulate, online
// softmax). One block = 4 warps = 64 rows, a row being a (query token, query head of this KV
// head's group) pair, so the GQA group shares every K/V tile loaded to shared memory: row r is
// token r / GQA_GROUP of the tile, head r % GQA_GROUP of the group. A tile takes TOK_PER_TILE =
// 64 / GQA_GROUP whole tokens (the runner's attention_tile_tokens), TILE_ROWS rows; when the
// group does not divide 64 (3, 5, 6, 7, ...) the last 64 - TILE_ROWS rows are masked: they
// compute, but neither extend the tile's keys nor write. Causal within the chunk, full over
// the cached context before it.
//
// attn_decode: one query token per sequence; block = (sequence, KV head, split); each warp walks
// a contiguous run of keys, lanes split the head dimension. With nsplit > 1 it writes partial
// (max, sum, unnormalised output) rows that attn_combine merges (flash-decoding).

#define ATT_BM 64
#define ATT_BN 64
#define ATT_PAD (HEAD_DIM + 8)
#define TOK_PER_TILE (ATT_BM / GQA_GROUP)
#define TILE_ROWS (TOK_PER_TILE * GQA_GROUP)
#define ATTN_PREFILL_SMEM (2 * 2 * ATT_BN * ATT_PAD * 2)

__device__ __forceinline__ void mma_bf16_16816(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const void* smem_row) {
    u32 addr = (u32)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    u32 addr = (u32)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(addr), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_one() { asm volatile("cp.async.wait_group 1;\n" ::); }

typedef bf16 TileRow[ATT_PAD];

// Starts the copy of keys [kt, kt + ATT_BN) of one KV head into a shared-memory stage;
// keys at or past kv_end are zero-filled (zero V keeps masked columns from producing NaN).
__device__ __forceinline__ void load_kv_tile(TileRow* Kd, TileRow* Vd, const bf16* __restrict__ k_cache,
                                             const bf16* __restrict__ v_cache, const int* __restrict__ bt,
                                             int block_size, int kvh, int kt, int kv_end) {
    for (int c = threadIdx.x; c < ATT_BN * (HEAD_DIM / 8); c += blockDim.x) {
        int r = c / (HEAD_DIM / 8), col = (c % (HEAD_DIM / 8)) * 8;
        int key = kt + r;
        if (key < kv_end) {
            long long slot = (long long)bt[key / block_size] * block_size + key % block_size;
            long long off = (slot * NUM_KV_HEADS + kvh) * HEAD_DIM + col;
            cp_async16(&Kd[r][col], k_cache + off);
            cp_async16(&Vd[r][col], v_cache + off);
        } else {
            *reinterpret_cast<uint4*>(&Kd[r][col]) = make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4*>(&Vd[r][col]) = make_uint4(0, 0, 0, 0);
        }
    }
}

__device__ __forceinline__ u32 pack_bf16(float lo, float hi) {
    bf162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<u32*>(&v);
}

// tiles[2*i] = sequence, tiles[2*i+1] = index of the tile's first new token within the sequence.
extern "C" __global__ void __launch_bounds__(128, 3) attn_prefill(
    const bf16* __restrict__ qkv, const bf16* __restrict__ k_cache, const bf16* __restrict__ v_cache,
    bf16* __restrict__ out, const int* __restrict__ tiles, const int* __restrict__ q_start,
    const int* __restrict__ ctx_len, const int* __restrict__ block_tables, const int* __restrict__ hdr,
    int block_size, float scale_log2) {
    PDL_ENTER();
    // Two stages of K and V tiles (dynamic shared memory: ATTN_PREFILL_SMEM bytes), so the
    // next tile's copy overlaps this tile's math.
    extern __shared__ __align__(16) unsigned char att_smem[];
    TileRow* const k_stage = reinterpret_cast<TileRow*>(att_smem);
    TileRow* const v_stage = k_stage + 2 * ATT_BN;
    const int tile = blockIdx.x, kvh = blockIdx.y;
    const int seq = tiles[2 * tile], t0 = tiles[2 * tile + 1];
    const int qs = q_start[seq], n_new = q_start[seq + 1] - qs;
    const int L = ctx_len[seq], start = L - n_new;
    const int* bt = block_tables + (long long)seq * hdr[0];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;

    const int r0 = warp * 16 + g, r1 = r0 + 8;
    const int tok0 = t0 + r0 / GQA_GROUP, tok1 = t0 + r1 / GQA_GROUP;
    const int h0 = kvh * GQA_GROUP + r0 % GQA_GROUP, h1 = kvh * GQA_GROUP + r1 % GQA_GROUP;
#if TILE_ROWS == ATT_BM
    const bool ok0 = tok0 < n_new, ok1 = tok1 < n_new;
#else
    // Rows past TILE_ROWS would be the next tile's first token: masked. (Only here, so that a
    // group dividing 64 compiles to the unmasked kernel, PTX for PTX.)
    const bool ok0 = r0 < TILE_ROWS && tok0 < n_new, ok1 = r1 < TILE_ROWS && tok1 < n_new;
#endif
    const int qpos0 = start + tok0, qpos1 = start + tok1;
    int last_tok = t0 + TOK_PER_TILE - 1;
    if (last_tok > n_new - 1) last_tok = n_new - 1;
    const int kv_end = start + last_tok + 1;

    u32 qa[HEAD_DIM / 16][4];
    {
        const bf16* q0 = qkv + (long long)(qs + (ok0 ? tok0 : 0)) * QKV_DIM + h0 * HEAD_DIM;
        const bf16* q1 = qkv + (long long)(qs + (ok1 ? tok1 : 0)) * QKV_DIM + h1 * HEAD_DIM;
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
            qa[kk][0] = *reinterpret_cast<const u32*>(q0 + kk * 16 + tig * 2);
            qa[kk][1] = *reinterpret_cast<const u32*>(q1 + kk * 16 + tig * 2);
            qa[kk][2] = *reinterpret_cast<const u32*>(q0 + kk * 16 + 8 + tig * 2);
            qa[kk][3] = *reinterpret_cast<const u32*>(q1 + kk * 16 + 8 + tig * 2);
        }
    }
    float o[HEAD_DIM / 8][4];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m0 = NEG_BIG, m1 = NEG_BIG, l0 = 0.0f, l1 = 0.0f;

    int st = 0;
    load_kv_tile(k_stage, v_stage, k_cache, v_cache, bt, block_size, kvh, 0, kv_end);
    cp_async_commit();
    for (int kt = 0; kt < kv_end; kt += ATT_BN, st ^= 1) {
        if (kt + ATT_BN < kv_end)
            load_kv_tile(k_stage + (st ^ 1) * ATT_BN, v_stage + (st ^ 1) * ATT_BN, k_cache, v_cache, bt,
                         block_size, kvh, kt + ATT_BN, kv_end);
        cp_async_commit();
        cp_async_wait_one();  // this tile's group has landed; the next one may still be in flight
        __syncthreads();
        TileRow* const Ks = k_stage + st * ATT_BN;
        TileRow* const Vs = v_stage + st * ATT_BN;

        float s[ATT_BN / 8][4];
#pragma unroll
        for (int nt = 0; nt < ATT_BN / 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
                u32 b0 = *reinterpret_cast<const u32*>(&Ks[nt * 8 + g][kk * 16 + tig * 2]);
                u32 b1 = *reinterpret_cast<const u32*>(&Ks[nt * 8 + g][kk * 16 + 8 + tig * 2]);
                mma_bf16_16816(s[nt], qa[kk], b0, b1);
            }
        }
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int nt = 0; nt < ATT_BN / 8; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = kt + nt * 8 + tig * 2 + (e & 1);
                int qp = e < 2 ? qpos0 : qpos1;
                float x = s[nt][e] * scale_log2;
                if (key > qp || key >= kv_end) x = -INFINITY;
                s[nt][e] = x;
                if (e < 2) mx0 = fmaxf(mx0, x); else mx1 = fmaxf(mx1, x);
            }
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        float c0 = exp2f(m0 - mx0), c1 = exp2f(m1 - mx1);
        m0 = mx0;
        m1 = mx1;
        l0 *= c0;
        l1 *= c1;
#pragma unroll
        for (int i = 0; i < HEAD_DIM / 8; i++) {
            o[i][0] *= c0; o[i][1] *= c0;
            o[i][2] *= c1; o[i][3] *= c1;
        }
#pragma unroll
        for (int nt = 0; nt < ATT_BN / 8; nt++) {
            s[nt][0] = exp2f(s[nt][0] - m0);
            s[nt][1] = exp2f(s[nt][1] - m0);
            s[nt][2] = exp2f(s[nt][2] - m1);
            s[nt][3] = exp2f(s[nt][3] - m1);
            l0 += s[nt][0] + s[nt][1];
            l1 += s[nt][2] + s[nt][3];
        }
#pragma unroll
        for (int kc = 0; kc < ATT_BN / 16; kc++) {
            u32 pa[4];
            pa[0] = pack_bf16(s[2 * kc][0], s[2 * kc][1]);
            pa[1] = pack_bf16(s[2 * kc][2], s[2 * kc][3]);
            pa[2] = pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]);
            pa[3] = pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3]);
#pragma unroll
            for (int nd = 0; nd < HEAD_DIM / 8; nd += 2) {
                u32 vb[4];
                const bf16* row = &Vs[kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8][(nd + (lane >> 4)) * 8];
                ldmatrix_x4_trans(vb, row);
                mma_bf16_16816(o[nd], pa, vb[0], vb[1]);
                mma_bf16_16816(o[nd + 1], pa, vb[2], vb[3]);
            }
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    bf16* out0 = out + (long long)(qs + tok0) * Q_DIM + h0 * HEAD_DIM;
    bf16* out1 = out + (long long)(qs + tok1) * Q_DIM + h1 * HEAD_DIM;
#pragma unroll
    for (int nd = 0; nd < HEAD_DIM / 8; nd++) {
        int col = nd * 8 + tig * 2;
        if (ok0) *reinterpret_cast<u32*>(out0 + col) = pack_bf16(o[nd][0] * inv0, o[nd][1] * inv0);
        if (ok1) *reinterpret_cast<u32*>(out1 + col) = pack_bf16(o[nd][2] * inv1, o[nd][3] * inv1);
    }
}
