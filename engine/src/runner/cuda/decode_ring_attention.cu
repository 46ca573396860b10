// Decode attention on tensor cores fed by rings of bulk copies (appended after
// decode_mma_attention.cu: uses decode_block_attention.cu's RopeIn, db_norm_rope, db_new_key,
// db_merge_write, DB_* lane layout and DECODE_ENTRIES, attention.cu's MMA and ldmatrix helpers,
// decode_attention.cu's decode_unit and partial-output layout for attn_combine).
//
// Why it exists: at batch 64 the register block kernel reads the cache at about 3.1 TB/s, and a
// ring of bulk copies streams the same bytes at 3.8 TB/s (results/h200/kv_layout_bulk.csv); the
// kernels that did their math on such a ring lost because the math was too long between waits
// (15.7 M warp instructions a layer on CUDA cores) or too few blocks fitted an SM (MmaW4S3's
// 107 KB of shared memory). Here the math is short and the block small:
//   - keys are the MMA rows and the group's query heads its 8 columns, so 16 keys cost
//     8 MMAs for Sᵀ = K·Qᵀ and 8 for Oᵀ += Vᵀ·Pᵀ, with Pᵀ moved into place by two movmatrix;
//   - a block of WARPS warps per unit, each warp with its own ring of STAGES 16-key stages
//     (8.5 KB each at head_dim 128), so batch 64's 512 blocks are resident at once;
//   - a warp moves a stage into registers (ldmatrix) as soon as it lands and refills it with the
//     tile STAGES ahead before its math, so the stage is held only for the ldmatrix.
//
// Layout: warp w takes the split's 16-key tiles w, w + WARPS, ...; lane r < 16 copies K row r
// of a tile and lane 16 + r V row r (one 2·HEAD_DIM-byte bulk copy each, into rows padded to
// DR_PAD so ldmatrix is conflict-free), completing on the stage's mbarrier. Warps merge in
// shared memory. Needs sm_90 (bulk copies; the kernels trap below it and DecodeKernel keeps the
// runner off them there), HEAD_DIM % 16 == 0, HEAD_DIM <= 256 and GQA_GROUP <= 8.
// ROPE as in attn_decode_block: the block whose split holds the new key (position L - 1)
// writes it to the cache, and the warp whose tile holds it patches its row in from shared
// memory, since its own cache write is not visible to the copies.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DR_ARCH_OK 1
#else
#define DR_ARCH_OK 0
#endif
#define DR_KEYS 16
#define DR_BOXES (HEAD_DIM / 64)  // 64-dim boxes per K (or V) tile row
#define DR_BOX_BYTES (DR_KEYS * 128)
#define DR_STAGE_BYTES (2 * DR_BOXES * DR_BOX_BYTES)
#define DR_PAD (HEAD_DIM + 8)
#define DR_ROW_BYTES (DR_PAD * 2)
// Dynamic shared memory of a block: 1 KB of slack to align the ring (the 128-byte swizzle repeats
// every 1024 bytes), WARPS x STAGES stages (K boxes, then V boxes), then the query tile (8
// padded rows) and the new key's K and V rows. Mirrored by decode::ring_smem_bytes.
#define DR_SMEM_BYTES(WARPS, STAGES) (1024 + (WARPS) * (STAGES) * DR_STAGE_BYTES + 10 * DR_ROW_BYTES)
#define DR_SUPPORTED (HEAD_DIM % 64 == 0 && HEAD_DIM <= 256 && GQA_GROUP <= 8)

// A CUtensorMap (cuda.h), passed by value as a __grid_constant__ kernel parameter.
struct __align__(64) DrTmap {
    unsigned long long opaque[16];
};

// Byte offset of (row r, dims d..d+7) in a stage's K (or V, plus DR_BOXES boxes) boxes as the
// tensor copy lays them out with the 128-byte swizzle: 16-byte chunk c of a 128-byte row r
// lands at chunk c ^ (r % 8).
__device__ __forceinline__ u32 dr_swz(int r, int d) {
    return (u32)((d / 64) * DR_BOX_BYTES + r * 128 + ((((d % 64) / 8) ^ (r & 7)) << 4));
}

__device__ __forceinline__ u32 dr_smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void dr_ldmatrix_x4(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void dr_ldmatrix_x4_trans(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// The transpose of an 8x8 bf16 matrix held one row pair per lane (MMA fragment order).
__device__ __forceinline__ u32 dr_movmatrix_trans(u32 x) {
    u32 y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

__device__ __forceinline__ void dr_wait(u32 bar, u32 parity) {
#if DR_ARCH_OK
    asm volatile(
        "{\n.reg .pred P;\nDR_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n@!P bra DR_WAIT;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
#endif
}

// The block-table entries of a warp's tiles, read 32 tiles ahead of their copies: under the
// cache stream a block-table read takes microseconds, and a copy that waits on one leaves its
// stage empty. A tile lies in one KV block (block_size is a multiple of DR_KEYS, which the
// runner checks), and lane l holds the entry of tile 32·batch + l (`cur`) and of the next batch
// (`next`).
struct DrPages {
    const int* bt;
    int block_size, first, stride, end;
    int cur, next, batch;

    __device__ __forceinline__ int entry(int tile) const {
        const int b = first + tile * stride;
        return b < end ? bt[b / block_size] : 0;
    }
    __device__ __forceinline__ void init(int lane) {
        batch = 0;
        cur = entry(lane);
        next = entry(32 + lane);
    }
    // The slot of the first key of the warp's tile `tile`; warp-uniform calls, in increasing
    // tile order.
    __device__ __forceinline__ int first_slot(int tile, int lane) {
        if (tile / 32 != batch) {
            batch++;
            cur = next;
            next = entry((batch + 1) * 32 + lane);
        }
        const int page = __shfl_sync(0xffffffffu, cur, tile % 32);
        return page * block_size + (first + tile * stride) % block_size;
    }
};

// Lane 0 starts the tensor copies of the 16 cache slots from slot0 of KV head kvh (K and V,
// DR_BOXES boxes of 64 dims each) into the stage at shared address `stage`, completing on
// mbarrier `bar`. Rows past the keys come too (slots of the same KV block); callers mask them.
__device__ __forceinline__ void dr_fill(u32 stage, u32 bar, const DrTmap& kmap, const DrTmap& vmap, int slot0,
                                        int kvh, int lane) {
#if DR_ARCH_OK
    if (lane == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "n"(DR_STAGE_BYTES)
                     : "memory");
#pragma unroll
        for (int b = 0; b < 2 * DR_BOXES; b++) {
            const DrTmap* map = b < DR_BOXES ? &kmap : &vmap;
            asm volatile(
                "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, "
                "%4}], [%5];\n" ::"r"(stage + b * DR_BOX_BYTES),
                "l"(reinterpret_cast<unsigned long long>(map)), "r"((b % DR_BOXES) * 64), "r"(kvh), "r"(slot0),
                "r"(bar)
                : "memory");
        }
    }
#endif
}

template <int WARPS, int STAGES, bool ROPE>
__device__ __forceinline__ void attn_decode_ring_impl(DECODE_UNIT_PARAMS, const RopeIn& rope, const DrTmap& kmap,
                                                      const DrTmap& vmap) {
    PDL_ENTER();
    extern __shared__ __align__(128) unsigned char dr_smem[];
    __shared__ __align__(8) unsigned long long dr_bars[WARPS][STAGES];
    typedef bf16 Row[DR_PAD];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    const u32 align = (1024 - (dr_smem_addr(dr_smem) & 1023)) & 1023;
    unsigned char* const ring_ptr = dr_smem + align + warp * STAGES * DR_STAGE_BYTES;
    const u32 ring = dr_smem_addr(ring_ptr);
    const u32 bars = dr_smem_addr(&dr_bars[warp][0]);
    Row* const q_tile = reinterpret_cast<Row*>(dr_smem + 1024 + WARPS * STAGES * DR_STAGE_BYTES);
    Row* const new_kv = q_tile + 8;  // the new key's rotated K and its V

    const int unit = blockIdx.x;
    const int z = unit % nsplit;
    const int kvh = (unit / nsplit) % NUM_KV_HEADS;
    const int i = unit / (nsplit * NUM_KV_HEADS);
    const DecodeUnit du = decode_unit<ROPE>(decodes, block_tables, hdr, i, nsplit, z, DR_KEYS, rope.max_pos);
    const int row = du.row, L = du.L, ke = du.ke, pos = du.pos;
    const int* bt = du.bt;
    const bool owns_new = du.owns_new;
    // The new key is not read from the cache (this kernel writes it there): its row is patched in.
    const int load_end = owns_new ? L - 1 : ke;

    if (lane == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; s++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bars + 8 * s), "n"(1));
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncwarp();
    const int first = du.kb + warp * DR_KEYS, stride = WARPS * DR_KEYS;
    DrPages pages = {bt, block_size, first, stride, ke, 0, 0, 0};
    pages.init(lane);
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
        const int b = first + s * stride;
        if (b < ke) {
dr_fill(ring + s * DR_STAGE_BYTES, bars + 8 * s, kmap, vmap, pages.first_slot(s, lane), kvh, lane);
        }
    }

    // Query rows: head kvh * GQA_GROUP + j in row j, rows 8 > j >= GQA_GROUP zero (the MMA's
    // unused columns). Lane groups of DB_LPK lanes take a row, 8 elements per lane.
    {
        const int part = lane / DB_LPK, dim0 = (lane % DB_LPK) * 8;
        for (int j0 = warp * DB_KPW; j0 < 8; j0 += WARPS * DB_KPW) {
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
            if (j < 8 && dim0 < HEAD_DIM) *reinterpret_cast<uint4*>(&q_tile[j][dim0]) = u;
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
    __syncthreads();  // the query tile and the new key's rows are complete

    // Qᵀ as the B operand (16 dims x 8 heads per step): dims 2·tig.. of head g.
    u32 qb[HEAD_DIM / 16][2];
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
        qb[kk][0] = *reinterpret_cast<const u32*>(&q_tile[g][kk * 16 + tig * 2]);
        qb[kk][1] = *reinterpret_cast<const u32*>(&q_tile[g][kk * 16 + 8 + tig * 2]);
    }
    // Oᵀ: o[mt] holds dims mt·16 + g (+8) of heads 2·tig, 2·tig + 1. m and l are those two heads'
    // running max and this lane's part of their sums (keys g and g + 8 of each tile).
    float o[HEAD_DIM / 16][4];
#pragma unroll
    for (int mt = 0; mt < HEAD_DIM / 16; mt++) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
    float m0 = NEG_BIG, m1 = NEG_BIG, l0 = 0.0f, l1 = 0.0f;
    // ldmatrix row addresses within a stage: K as the A operand (keys x dims, row-major), V as
    // the transposed A operand (dims x keys).
    const int mi = lane >> 3, r8 = lane & 7;
    const int k_row = (mi & 1) * 8 + r8, k_dim = (mi >> 1) * 8;
    const int v_row = (mi >> 1) * 8 + r8, v_dim = (mi & 1) * 8;

    int t = 0;
    for (int base = first; base < ke; base += stride, t++) {
        const int s = t % STAGES;
        const u32 st = ring + s * DR_STAGE_BYTES;
        const int nb = base + STAGES * stride;  // the tile that refills this stage
const int nslot = nb < ke ? pages.first_slot(t + STAGES, lane) : 0;
        dr_wait(bars + 8 * s, (t / STAGES) & 1);
        if (base + DR_KEYS > load_end) {
            // Rows the copies left out: V past the keys is zeroed (0 * stale bits could be NaN;
            // K there is masked below); the new key's row is patched in.
            unsigned char* const ks = ring_ptr + s * DR_STAGE_BYTES;
            unsigned char* const vs = ks + DR_BOXES * DR_BOX_BYTES;
            for (int c = lane; c < DR_KEYS * (HEAD_DIM / 8); c += 32) {
                const int r = c / (HEAD_DIM / 8), col = (c % (HEAD_DIM / 8)) * 8;
                const int key = base + r;
                if (key >= ke) {
                    *reinterpret_cast<uint4*>(vs + dr_swz(r, col)) = make_uint4(0, 0, 0, 0);
                } else if (key >= load_end) {
                    *reinterpret_cast<uint4*>(ks + dr_swz(r, col)) = *reinterpret_cast<const uint4*>(&new_kv[0][col]);
                    *reinterpret_cast<uint4*>(vs + dr_swz(r, col)) = *reinterpret_cast<const uint4*>(&new_kv[1][col]);
                }
            }
            __syncwarp();
        }
        u32 ka[HEAD_DIM / 16][4], va[HEAD_DIM / 16][4];
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; kk++) dr_ldmatrix_x4(ka[kk], st + dr_swz(k_row, kk * 16 + k_dim));
#pragma unroll
        for (int mt = 0; mt < HEAD_DIM / 16; mt++)
            dr_ldmatrix_x4_trans(va[mt], st + DR_BOXES * DR_BOX_BYTES + dr_swz(v_row, mt * 16 + v_dim));
        {  // refill the stage with this warp's tile STAGES ahead once every lane's reads are done
if (nb < ke) {
                // The tensor copy writes through the async proxy: order this warp's reads first.
                __syncwarp();
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                dr_fill(st, bars + 8 * s, kmap, vmap, nslot, kvh, lane);
            }
        }

        // Sᵀ = K·Qᵀ: two accumulators halve the chain of dependent MMAs.
        float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
            if (kk % 2 == 0) mma_bf16_16816(sa, ka[kk], qb[kk][0], qb[kk][1]);
            else mma_bf16_16816(sb, ka[kk], qb[kk][0], qb[kk][1]);
        }
        // sc[0], sc[1]: key g, heads 2·tig, 2·tig + 1; sc[2], sc[3]: key g + 8.
        float sc[4];
        const bool lo_in = base + g < ke, hi_in = base + g + 8 < ke;
#pragma unroll
        for (int e = 0; e < 4; e++) sc[e] = (e < 2 ? lo_in : hi_in) ? (sa[e] + sb[e]) * scale_log2 : -INFINITY;
        float mx0 = fmaxf(m0, fmaxf(sc[0], sc[2])), mx1 = fmaxf(m1, fmaxf(sc[1], sc[3]));
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) {
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
        }
        const float c0 = exp2f(m0 - mx0), c1 = exp2f(m1 - mx1);
        m0 = mx0;
        m1 = mx1;
        const float p0 = exp2f(sc[0] - mx0), p1 = exp2f(sc[1] - mx1);
        const float p2 = exp2f(sc[2] - mx0), p3 = exp2f(sc[3] - mx1);
        l0 = l0 * c0 + p0 + p2;
        l1 = l1 * c1 + p1 + p3;
        // Pᵀ as the B operand (16 keys x 8 heads): the transposes of the two 8-key halves.
        const u32 pb0 = dr_movmatrix_trans(pack_bf16(p0, p1));
        const u32 pb1 = dr_movmatrix_trans(pack_bf16(p2, p3));
#pragma unroll
        for (int mt = 0; mt < HEAD_DIM / 16; mt++) {
            o[mt][0] *= c0;
            o[mt][1] *= c1;
            o[mt][2] *= c0;
            o[mt][3] *= c1;
            mma_bf16_16816(o[mt], va[mt], pb0, pb1);
        }
    }
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, off);
        l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }

    // Warps merge in shared memory: every copy has landed and every warp is past its ring.
    __syncthreads();
    float* sm_o = reinterpret_cast<float*>(dr_smem);     // [WARPS][GQA_GROUP][HEAD_DIM]
    float* sm_ml = sm_o + WARPS * GQA_GROUP * HEAD_DIM;  // [WARPS][GQA_GROUP][2]
    const int h0 = 2 * tig, h1 = 2 * tig + 1;
#pragma unroll
    for (int mt = 0; mt < HEAD_DIM / 16; mt++) {
        const int d = mt * 16 + g;
        if (h0 < GQA_GROUP) {
            sm_o[(warp * GQA_GROUP + h0) * HEAD_DIM + d] = o[mt][0];
            sm_o[(warp * GQA_GROUP + h0) * HEAD_DIM + d + 8] = o[mt][2];
        }
        if (h1 < GQA_GROUP) {
            sm_o[(warp * GQA_GROUP + h1) * HEAD_DIM + d] = o[mt][1];
            sm_o[(warp * GQA_GROUP + h1) * HEAD_DIM + d + 8] = o[mt][3];
        }
    }
    if (g == 0) {
        if (h0 < GQA_GROUP) {
            sm_ml[(warp * GQA_GROUP + h0) * 2] = m0;
            sm_ml[(warp * GQA_GROUP + h0) * 2 + 1] = l0;
        }
        if (h1 < GQA_GROUP) {
            sm_ml[(warp * GQA_GROUP + h1) * 2] = m1;
            sm_ml[(warp * GQA_GROUP + h1) * 2 + 1] = l1;
        }
    }
    __syncthreads();
    db_merge_write(sm_o, sm_ml, WARPS, kvh, i, row, z, nsplit, out, part_o, part_ml);
}

template <int WARPS, int STAGES, bool ROPE>
__device__ __forceinline__ void attn_decode_ring_body(DECODE_UNIT_PARAMS, const RopeIn& rope, const DrTmap& kmap,
                                                      const DrTmap& vmap) {
    if constexpr (DR_ARCH_OK && DR_SUPPORTED && (!ROPE || HEAD_DIM == 8 * DB_LPK)) {
        attn_decode_ring_impl<WARPS, STAGES, ROPE>(DECODE_UNIT_ARGS, rope, kmap, vmap);
    } else {
        __trap();
    }
}

// Grid: one block of WARPS warps per unit (split fastest), DR_SMEM_BYTES(WARPS, STAGES) of
// dynamic shared memory; parameters as attn_decode_block's (DECODE_ENTRIES there), then the
// tensor maps of this layer's K and V caches ([slot][KV head][dim], boxes of 16 slots x 64
// dims, 128-byte swizzle; decode::ring_tensor_maps).
#define RING_ENTRIES(NAME, WARPS, STAGES)                                                                    \
    extern "C" __global__ void __launch_bounds__(WARPS * 32)                                                \
        NAME(DECODE_UNIT_PARAMS, int n_units, const __grid_constant__ DrTmap kmap,                          \
             const __grid_constant__ DrTmap vmap) {                                                         \
        if ((int)blockIdx.x >= n_units) return;                                                             \
        const RopeIn none = {nullptr, nullptr, nullptr, nullptr, nullptr, 1, 0.0f};                          \
        attn_decode_ring_body<WARPS, STAGES, false>(DECODE_UNIT_ARGS, none, kmap, vmap);                    \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(WARPS * 32) NAME##_rope(                                   \
        DECODE_UNIT_PARAMS, int n_units, const bf16* __restrict__ q_norm, const bf16* __restrict__ k_norm,  \
        const float* __restrict__ cos_t, const float* __restrict__ sin_t, const int* __restrict__ slots,    \
        int max_pos, float eps, const __grid_constant__ DrTmap kmap, const __grid_constant__ DrTmap vmap) { \
        if ((int)blockIdx.x >= n_units) return;                                                             \
        const RopeIn rope = {q_norm, k_norm, cos_t, sin_t, slots, max_pos, eps};                            \
        attn_decode_ring_body<WARPS, STAGES, true>(DECODE_UNIT_ARGS, rope, kmap, vmap);                     \
    }
RING_ENTRIES(attn_decode_ring_w1s4, 1, 4)
RING_ENTRIES(attn_decode_ring_w2s2, 2, 2)
RING_ENTRIES(attn_decode_ring_w2s3, 2, 3)
RING_ENTRIES(attn_decode_ring_w4s1, 4, 1)
