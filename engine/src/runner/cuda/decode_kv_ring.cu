// A warp's ring of cache chunks for the block decode kernels (appended before
// decode_block_attention.cu): STAGES stages in dynamic shared memory, each the K rows then the V
// rows of one chunk of CHUNK keys of one KV head, filled by bulk copies (the tensor memory
// accelerator, sm_90) that complete on the stage's mbarrier. Bulk copies cost the warp one
// instruction per row and no registers, so a warp can keep STAGES chunks in flight where its
// registers hold one.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KV_RING_SUPPORTED 1
#else
#define KV_RING_SUPPORTED 0
#endif

template <int STAGES, int CHUNK>
struct KvRing {
    static constexpr u32 ROW = HEAD_DIM * 2;
    static constexpr u32 STAGE_BYTES = 2 * CHUNK * ROW;
    u32 data;  // shared address of this warp's stage 0
    u32 bars;  // shared address of this warp's STAGES mbarriers, 8 bytes each

    __device__ __forceinline__ void init(int lane) {
#if KV_RING_SUPPORTED
        if (lane == 0) {
#pragma unroll
            for (int s = 0; s < STAGES; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bars + 8 * s));
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        }
        __syncwarp();
#endif
    }

    // Requests keys base .. min(base + CHUNK, end) of KV head kvh into stage s (base < end).
    // `page` >= 0: the block-table entry of all of them (the chunk lies in one KV block), read
    // by the caller ahead of time so that the copies do not wait for it; otherwise each key's
    // entry is read here.
    __device__ __forceinline__ void fill(int s, int lane, const bf16* __restrict__ k_cache,
                                         const bf16* __restrict__ v_cache, const int* __restrict__ bt,
                                         int block_size, int kvh, int base, int end, int page) {
#if KV_RING_SUPPORTED
        const int n = end - base < CHUNK ? end - base : CHUNK;
        const u32 bar = bars + 8 * s;
        // The stage's last readers are this warp's lanes, whose reads were generic-proxy ones.
        __syncwarp();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        if (lane == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(2u * n * ROW)
                         : "memory");
        for (int idx = lane; idx < 2 * CHUNK; idx += 32) {
            const int key = idx % CHUNK;
            if (key < n) {
                const int pos = base + key;
                const long long slot =
                    (long long)(page >= 0 ? page : bt[pos / block_size]) * block_size + pos % block_size;
                const bf16* src = (idx < CHUNK ? k_cache : v_cache) + (slot * NUM_KV_HEADS + kvh) * HEAD_DIM;
                const u32 dst = data + s * STAGE_BYTES + (idx < CHUNK ? 0 : CHUNK * ROW) + key * ROW;
                asm volatile(
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                    "l"(src), "r"(ROW), "r"(bar)
                    : "memory");
            }
        }
#endif
    }

    // Waits for stage s's use number `use` (0, 1, ...) to arrive.
    __device__ __forceinline__ void wait(int s, int use) const {
#if KV_RING_SUPPORTED
        asm volatile(
            "{\n.reg .pred P;\nRING_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n@!P bra RING_WAIT;\n}\n" ::"r"(
                bars + 8 * s),
            "r"(use & 1)
            : "memory");
#endif
    }

    // The 16 bytes at dims dim0.. of chunk row `key` (K, or V with `v`) of stage s (after wait:
    // its memory clobber orders this read).
    __device__ __forceinline__ uint4 row(int s, bool v, int key, int dim0) const {
        uint4 r;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                     : "r"(data + s * STAGE_BYTES + (v ? CHUNK * ROW : 0) + key * ROW + dim0 * 2));
        return r;
    }
};
