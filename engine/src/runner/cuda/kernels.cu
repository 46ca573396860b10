// servetwin CUDA kernels for Qwen3, compiled by NVRTC at runner start.
// The host prepends #defines for the model shape:
//   HEAD_DIM, NUM_Q_HEADS, NUM_KV_HEADS (GQA_GROUP = NUM_Q_HEADS / NUM_KV_HEADS), and
//   NORM_CHUNKS (float4 chunks of a row each add_rmsnorm thread keeps: 4 up to hidden 4096).
// Conventions: row-major activations, one row per token; the QKV buffer holds
// [q heads | k heads | v heads] per token; the KV cache of a layer is
// [num_blocks * block_size slots][NUM_KV_HEADS][HEAD_DIM], slot = block * block_size + offset.
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;
typedef __nv_bfloat162 bf162;
typedef unsigned int u32;

// Programmatic dependent launch (sm_90 and later): a kernel launched with the PDL attribute
// may be scheduled while the previous kernel on the stream drains. Every kernel here waits for
// it (PDL_WAIT: the previous grid has finished and its writes are visible) before touching
// global memory, then lets the next kernel be scheduled (PDL_LAUNCH_NEXT). Without the
// attribute both are no-ops.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PDL_WAIT() asm volatile("griddepcontrol.wait;\n" ::: "memory")
#define PDL_LAUNCH_NEXT() asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory")
#else
#define PDL_WAIT()
#define PDL_LAUNCH_NEXT()
#endif
#define PDL_ENTER() \
    PDL_WAIT();     \
    PDL_LAUNCH_NEXT()

#define GQA_GROUP (NUM_Q_HEADS / NUM_KV_HEADS)
#define QKV_DIM ((NUM_Q_HEADS + 2 * NUM_KV_HEADS) * HEAD_DIM)
#define Q_DIM (NUM_Q_HEADS * HEAD_DIM)
#define NEG_BIG (-1.0e30f)
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over a block of blockDim.x (a multiple of 32, at most 1024) threads; every thread gets it.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < nw ? scratch[lane] : 0.0f;
    return warp_sum(t);
}

// Output row t reads residual row r = rows ? rows[t] : t. v = resid[r] + d, where d is delta[r]
// (bf16, may be null) or, when parts is not null, the sum of the nparts fp32 split-K partials
// parts[j * part_stride + r * hidden] (a GEMM split over K whose reduction is done here);
// when write_resid and there is a d, resid[r] = v. With tokens (the first layer), v is instead
// the embedding row embed[tokens[r]], and resid[r] = v starts the residual stream (this saves
// the step a kernel of its own). out[t] = bf16(v * rsqrt(mean(v^2) + eps) * w).
// hidden % 4 == 0, part_stride % 4 == 0, nparts <= NORM_MAX_PARTS and
// hidden <= 4 * NORM_CHUNKS * blockDim.x: each thread keeps up to NORM_CHUNKS float4 chunks
// (the runner launches 256 threads, so NORM_CHUNKS is 4 up to hidden 4096 and more beyond).
//
// Latency, not bandwidth, is what this kernel costs (64 rows of 1,024 at batch 64), so every
// load is issued before the first use of any, and the sums keep their order: the norm weight
// before the PDL wait, since it does not depend on the previous kernel (on the H200 batch 1
// went from 1.017-1.032 to 1.008-1.012 ms a step, docs/performance.md), and all partials
// at once rather than each as the loop reached it (no change measured at batch 64).
#define NORM_MAX_PARTS 8
extern "C" __global__ void add_rmsnorm(float* __restrict__ resid, const bf16* __restrict__ delta,
                                       const float* __restrict__ parts, int nparts, long long part_stride,
                                       const bf16* __restrict__ w, bf16* __restrict__ out,
                                       const int* __restrict__ rows, int hidden, float eps, int write_resid,
                                       const bf16* __restrict__ embed, const int* __restrict__ tokens) {
    __shared__ float scratch[32];
    const int chunks = hidden / 4;
    const uint2* w2 = reinterpret_cast<const uint2*>(w);
    uint2 wr[NORM_CHUNKS];
#pragma unroll
    for (int c = 0; c < NORM_CHUNKS; c++) {
        const int ci = threadIdx.x + c * blockDim.x;
        if (ci < chunks) wr[c] = w2[ci];
    }
    PDL_ENTER();
    const int t = blockIdx.x;
    const long long r = rows ? rows[t] : t;
    float4* res = reinterpret_cast<float4*>(resid + r * hidden);
    const uint2* del = delta ? reinterpret_cast<const uint2*>(delta + r * hidden) : nullptr;
    float4 v[NORM_CHUNKS];
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < NORM_CHUNKS; c++) {
        const int ci = threadIdx.x + c * blockDim.x;
        if (ci < chunks) {
            float4 x;
            if (tokens) {
                const uint2 e = reinterpret_cast<const uint2*>(embed + (long long)tokens[r] * hidden)[ci];
                const float2 a = __bfloat1622float2(*reinterpret_cast<const bf162*>(&e.x));
                const float2 b = __bfloat1622float2(*reinterpret_cast<const bf162*>(&e.y));
                x = make_float4(a.x, a.y, b.x, b.y);
            } else {
                x = res[ci];
                if (parts) {
                    // The partials are summed first, as one GEMM's output would be, then added.
                    const float4* p = reinterpret_cast<const float4*>(parts + r * hidden) + ci;
                    float4 e[NORM_MAX_PARTS];
#pragma unroll
                    for (int j = 0; j < NORM_MAX_PARTS; j++)
                        if (j < nparts) e[j] = p[j * (part_stride / 4)];
                    float4 d = e[0];
#pragma unroll
                    for (int j = 1; j < NORM_MAX_PARTS; j++) {
                        if (j < nparts) {
                            d.x += e[j].x; d.y += e[j].y; d.z += e[j].z; d.w += e[j].w;
                        }
                    }
                    x.x += d.x; x.y += d.y; x.z += d.z; x.w += d.w;
                } else if (del) {
                    uint2 d = del[ci];
                    float2 a = __bfloat1622float2(*reinterpret_cast<bf162*>(&d.x));
                    float2 b = __bfloat1622float2(*reinterpret_cast<bf162*>(&d.y));
                    x.x += a.x; x.y += a.y; x.z += b.x; x.w += b.y;
                }
            }
            if (write_resid && (tokens || parts || del)) res[ci] = x;
            v[c] = x;
            ss += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
        }
    }
    const float inv = rsqrtf(block_sum(ss, scratch) / (float)hidden + eps);
    uint2* o = reinterpret_cast<uint2*>(out + (long long)t * hidden);
#pragma unroll
    for (int c = 0; c < NORM_CHUNKS; c++) {
        const int ci = threadIdx.x + c * blockDim.x;
        if (ci < chunks) {
            float2 wa = __bfloat1622float2(*reinterpret_cast<bf162*>(&wr[c].x));
            float2 wb = __bfloat1622float2(*reinterpret_cast<bf162*>(&wr[c].y));
            bf162 lo = __floats2bfloat162_rn(v[c].x * inv * wa.x, v[c].y * inv * wa.y);
            bf162 hi = __floats2bfloat162_rn(v[c].z * inv * wb.x, v[c].w * inv * wb.y);
            uint2 packed;
            packed.x = *reinterpret_cast<u32*>(&lo);
            packed.y = *reinterpret_cast<u32*>(&hi);
            o[ci] = packed;
        }
    }
}

// One warp per (token, head) over the q and k heads: per-head RMSNorm (q_norm / k_norm), then
// rotate-half RoPE with cos/sin from a [max_pos][HEAD_DIM/2] table. q is written back in place;
// k and v go to the cache slot (skipped when slot < 0: padding rows of a graph bucket).
extern "C" __global__ void qk_norm_rope_cache(bf16* __restrict__ qkv, const bf16* __restrict__ q_norm,
                                              const bf16* __restrict__ k_norm, const float* __restrict__ cos_t,
                                              const float* __restrict__ sin_t, const int* __restrict__ positions,
                                              const int* __restrict__ slots, bf16* __restrict__ k_cache,
                                              bf16* __restrict__ v_cache, int num_tokens, int max_pos, float eps) {
    PDL_ENTER();
    const int heads = NUM_Q_HEADS + NUM_KV_HEADS;
    int item = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (item >= num_tokens * heads) return;
    int t = item / heads, h = item % heads;
    bf16* x = qkv + (long long)t * QKV_DIM + h * HEAD_DIM;  // k heads follow q heads directly
    bool is_q = h < NUM_Q_HEADS;
    const bf16* w = is_q ? q_norm : k_norm;
    const int half = HEAD_DIM / 2;
    const int PAIRS = (half + 31) / 32;
    float a[PAIRS], b[PAIRS];
    float ss = 0.0f;
#pragma unroll
    for (int p = 0; p < PAIRS; p++) {
        int j = lane + 32 * p;
        a[p] = 0.0f;
        b[p] = 0.0f;
        if (j < half) {
            a[p] = __bfloat162float(x[j]);
            b[p] = __bfloat162float(x[j + half]);
        }
        ss += a[p] * a[p] + b[p] * b[p];
    }
    ss = warp_sum(ss);
    float inv = rsqrtf(ss / (float)HEAD_DIM + eps);
    int pos = positions[t];
    pos = pos < 0 ? 0 : (pos >= max_pos ? max_pos - 1 : pos);
    int slot = slots[t];
    bf16* kdst = nullptr;
    if (!is_q && slot >= 0) kdst = k_cache + ((long long)slot * NUM_KV_HEADS + (h - NUM_Q_HEADS)) * HEAD_DIM;
#pragma unroll
    for (int p = 0; p < PAIRS; p++) {
        int j = lane + 32 * p;
        if (j < half) {
            // Round the normed value to bf16 before RoPE, as the reference model does.
            float xa = __bfloat162float(__float2bfloat16(a[p] * inv * __bfloat162float(w[j])));
            float xb = __bfloat162float(__float2bfloat16(b[p] * inv * __bfloat162float(w[j + half])));
            float c = cos_t[(long long)pos * half + j], s = sin_t[(long long)pos * half + j];
            bf16 ra = __float2bfloat16(xa * c - xb * s);
            bf16 rb = __float2bfloat16(xb * c + xa * s);
            if (is_q) {
                x[j] = ra;
                x[j + half] = rb;
            } else if (kdst) {
                kdst[j] = ra;
                kdst[j + half] = rb;
            }
        }
    }
    if (!is_q && slot >= 0) {
        const bf16* v = qkv + (long long)t * QKV_DIM + (NUM_Q_HEADS + NUM_KV_HEADS) * HEAD_DIM +
                        (h - NUM_Q_HEADS) * HEAD_DIM;
        bf16* vdst = v_cache + ((long long)slot * NUM_KV_HEADS + (h - NUM_Q_HEADS)) * HEAD_DIM;
        for (int j = lane; j < HEAD_DIM; j += 32) vdst[j] = v[j];
    }
}

// gu row t = [gate (inter) | up (inter)]; act[t] = silu(gate) * up. 8 elements per thread
// (inter % 8 == 0); `total` counts groups of 8.
extern "C" __global__ void silu_mul(const bf16* __restrict__ gu, bf16* __restrict__ act, int inter, long long total) {
    PDL_ENTER();
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int groups = inter / 8;
    long long t = i / groups, j = (i % groups) * 8;
    uint4 g = *reinterpret_cast<const uint4*>(gu + t * 2 * inter + j);
    uint4 u = *reinterpret_cast<const uint4*>(gu + t * 2 * inter + inter + j);
    u32 gs[4] = {g.x, g.y, g.z, g.w}, us[4] = {u.x, u.y, u.z, u.w}, os[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        float2 gf = __bfloat1622float2(*reinterpret_cast<bf162*>(&gs[e]));
        float2 uf = __bfloat1622float2(*reinterpret_cast<bf162*>(&us[e]));
        bf162 r = __floats2bfloat162_rn(gf.x / (1.0f + __expf(-gf.x)) * uf.x, gf.y / (1.0f + __expf(-gf.y)) * uf.y);
        os[e] = *reinterpret_cast<u32*>(&r);
    }
    *reinterpret_cast<uint4*>(act + t * inter + j) = make_uint4(os[0], os[1], os[2], os[3]);
}

// Greedy sampling: best[r] = a key for the argmax of logits row r (lowest index on ties).
// Block (c, r) scans chunk c of row r, ARGMAX_PER_THREAD independent loads per thread, and
// folds its best into best[r] with one 64-bit atomicMax of a key that orders by value, then by
// lower index: (order-preserving bits of the value) << 32 | (0xffffffff - index). best[] must
// be zero before the kernel (the host zeroes it in the step metadata, which decodes it).
// The last block to finish with row r (counted in done[r], zero before the kernel) copies
// best[r] to out_host[r], page-locked host memory the host reads after the step: the results
// need no copy operation of their own. One count per row, not one for the grid, so that only
// a row's blocks (38 for Qwen3's vocabulary) contend for an address.
#define ARGMAX_THREADS 256
#define ARGMAX_PER_THREAD 16
__device__ __forceinline__ bool argmax_better(float v, int i, float bv, int bi) {
    return v > bv || (v == bv && i < bi);
}
// The key folded into best[]: order-preserving bits of the value, then the lowest index.
__device__ __forceinline__ unsigned long long argmax_key(float v, int i) {
    unsigned int bits = __float_as_uint(v);
    bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    return ((unsigned long long)bits << 32) | (unsigned long long)(0xffffffffu - (unsigned int)i);
}
extern "C" __global__ void __launch_bounds__(ARGMAX_THREADS)
    argmax_rows(const float* __restrict__ logits, unsigned long long* __restrict__ best, int vocab,
                int* __restrict__ done, unsigned long long* __restrict__ out_host) {
    PDL_ENTER();
    __shared__ float sv[ARGMAX_THREADS / 32];
    __shared__ int si[ARGMAX_THREADS / 32];
    const float* row = logits + (long long)blockIdx.y * vocab;
    const int base = blockIdx.x * ARGMAX_THREADS * ARGMAX_PER_THREAD + threadIdx.x;
    float v[ARGMAX_PER_THREAD];
#pragma unroll
    for (int j = 0; j < ARGMAX_PER_THREAD; j++) {
        const int i = base + j * ARGMAX_THREADS;
        v[j] = i < vocab ? row[i] : -INFINITY;
    }
    float bv = -INFINITY;
    int bi = 0x7fffffff;
#pragma unroll
    for (int j = 0; j < ARGMAX_PER_THREAD; j++) {
        const int i = base + j * ARGMAX_THREADS;
        if (i < vocab && argmax_better(v[j], i, bv, bi)) {
            bv = v[j];
            bi = i;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (argmax_better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = bv;
        si[warp] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < ARGMAX_THREADS / 32; w++)
            if (argmax_better(sv[w], si[w], bv, bi)) {
                bv = sv[w];
                bi = si[w];
            }
        if (bi != 0x7fffffff) atomicMax(best + blockIdx.y, argmax_key(bv, bi));
        // Every block's atomicMax lands before its count; the last block sees them all.
        __threadfence();
        if (atomicAdd(done + blockIdx.y, 1) == (int)gridDim.x - 1) {
            __threadfence();
            out_host[blockIdx.y] = *(const volatile unsigned long long*)(best + blockIdx.y);
        }
    }
}

// Grid-stride copy of n 16-byte words, DEPTH loads in flight per thread before their stores: the
// runner times it at start for the copy bandwidth its SMs get (copy_bw.rs; a copy-engine memcpy
// would not depend on the SMs). The depths are there to show that the figure is not the kernel's
// latency: on a few SMs they all move the same.
template <int DEPTH>
__device__ __forceinline__ void copy_words_body(const uint4* __restrict__ src, uint4* __restrict__ dst, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (DEPTH - 1) * stride < n; i += DEPTH * stride) {
        uint4 w[DEPTH];
#pragma unroll
        for (int d = 0; d < DEPTH; d++) w[d] = src[i + d * stride];
#pragma unroll
        for (int d = 0; d < DEPTH; d++) dst[i + d * stride] = w[d];
    }
    for (; i < n; i += stride) dst[i] = src[i];
}
#define COPY_WORDS_ENTRY(D)                                                                                   \
    extern "C" __global__ void __launch_bounds__(256) copy_words_##D(const uint4* __restrict__ src,          \
                                                                     uint4* __restrict__ dst, long long n) { \
        copy_words_body<D>(src, dst, n);                                                                    \
    }
COPY_WORDS_ENTRY(1)
COPY_WORDS_ENTRY(4)
COPY_WORDS_ENTRY(8)
