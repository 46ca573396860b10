// KV-cache read bandwidth by cache layout and key order, as decode attention reads it at batch
// 64 (H200 microbenchmark, built there with nvcc). 64 sequences x 8 KV heads x 304 keys x 128
// dims, K and V in bf16 (78 MB per layer): one block of 4 warps per (sequence, KV head) streams
// its keys' rows, 16 lanes x 16 bytes per 256-byte row, U rows of K and of V in flight per lane
// group, and sums them (so the loads are not dropped). The warps take chunks of 2U keys in turn
// (as attn_decode_block does), or a contiguous quarter of the keys each ("-contiguous").
// "-runs-of-G": each warp takes G consecutive chunks before the next warp's turn.
// "-fragments": the loads of a kernel that reads the cache straight into MMA fragments
// (stream_frag below; u = 16 keys per tile).
//
//   slot-major: [slot][kv head][dim], the runner's layout: a head's row every 2 KB;
//   page-major: [page][kv head][16 slots][dim]: a head's 16 rows of a page contiguous (4 KB).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/kv_layout_bench.cu -o kv_layout_bench && ./kv_layout_bench [bulk]
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#define SEQS 64
#define HEADS 8
#define KEYS 304
#define DIM 128
#define PAGE 16

// Uses every byte of both loads, so that the compiler keeps them 16-byte loads (a sum of half
// the words let it narrow them to 4-byte loads, and the timings then moved between builds).
__device__ __forceinline__ float uses16(const uint4& a, const uint4& b) {
    return __uint_as_float((a.x ^ b.y) + (a.y ^ b.x)) + __uint_as_float((a.z ^ b.w) + (a.w ^ b.z));
}

// Row of (sequence, key, KV head) in the cache, in units of DIM bf16.
template <bool PAGE_MAJOR>
__device__ __forceinline__ long long cache_row(int seq, int key, int head) {
    const long long slot = (long long)seq * KEYS + key;
    return PAGE_MAJOR ? ((slot / PAGE) * HEADS + head) * PAGE + slot % PAGE : slot * HEADS + head;
}

// CONTIG: warp w takes keys [w * KEYS / 4, (w + 1) * KEYS / 4) instead of every fourth chunk.
// G: the warps take runs of G chunks in turn (a warp's G chunks are consecutive keys), still U
// loads per lane in flight at a time.
template <bool PAGE_MAJOR, int U, bool CONTIG = false, int G = 1>
__global__ void __launch_bounds__(128) stream(const uint4* __restrict__ k, const uint4* __restrict__ v, float* out) {
    const int seq = blockIdx.x / HEADS, head = blockIdx.x % HEADS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, part = lane >> 4, sub = lane & 15;
    float acc = 0.f;
    const int first = CONTIG ? warp * (KEYS / 4) : warp * 2 * U * G;
    const int last = CONTIG ? (warp + 1) * (KEYS / 4) : KEYS;
    const int step = CONTIG ? 2 * U : 4 * 2 * U * G;
    for (int run0 = first; run0 < last; run0 += step) {
        for (int gi = 0; gi < (CONTIG ? 1 : G); gi++) {
            const int base = run0 + gi * 2 * U;
            if (base >= last) break;
            uint4 kr[U], vr[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int key = base + u * 2 + part;
                const long long row = cache_row<PAGE_MAJOR>(seq, key, head);
                kr[u] = key < last ? __ldg(k + row * (DIM / 8) + sub) : make_uint4(0, 0, 0, 0);
                vr[u] = key < last ? __ldg(v + row * (DIM / 8) + sub) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < U; u++) acc += uses16(kr[u], vr[u]);
        }
    }
    if (acc == 1.2345f) out[0] = acc;
}

// MMA-fragment order (the register tensor-core kernel of commit 9707a43): a warp takes 16-key
// tiles; lane (g, tig) reads keys g and g + 8 of the tile, 16 bytes at dims 32c + 8 tig for each
// 32-dim chunk c, so one load instruction covers 8 rows x 64 bytes. Tiles go to the warps in
// turn, or in contiguous runs (CONTIG).
template <bool PAGE_MAJOR, bool CONTIG>
__global__ void __launch_bounds__(128) stream_frag(const uint4* __restrict__ k, const uint4* __restrict__ v,
                                                   float* out) {
    const int seq = blockIdx.x / HEADS, head = blockIdx.x % HEADS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    constexpr int TILES = (KEYS + 15) / 16, PER = (TILES + 3) / 4;
    const int t0 = CONTIG ? warp * PER : warp, t1 = CONTIG ? min(TILES, (warp + 1) * PER) : TILES;
    const int step = CONTIG ? 1 : 4;
    float acc = 0.f;
    for (int t = t0; t < t1; t += step) {
        uint4 kr[2][DIM / 32], vr[2][DIM / 32];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int key = t * 16 + h * 8 + g;
            const long long row = cache_row<PAGE_MAJOR>(seq, key, head);
#pragma unroll
            for (int c = 0; c < DIM / 32; c++) {
                kr[h][c] = key < KEYS ? __ldg(k + row * (DIM / 8) + 4 * c + tig) : make_uint4(0, 0, 0, 0);
                vr[h][c] = key < KEYS ? __ldg(v + row * (DIM / 8) + 4 * c + tig) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int c = 0; c < DIM / 32; c++) acc += uses16(kr[h][c], vr[h][c]);
    }
    if (acc == 1.2345f) out[0] = acc;
}

// Bulk copies (cp.async.bulk + mbarrier, sm_90): each warp takes chunks of CH keys in turn and
// keeps S of them in flight in a shared-memory ring, one copy per 256-byte row (slot-major) or
// one per K and per V run of CH rows (page-major, CH dividing PAGE: the rows are contiguous).
// Its lanes then read the chunk from shared memory as attn_decode_block's lanes read registers.
template <bool PAGE_MAJOR, int CH, int S, int W = 4>
__global__ void __launch_bounds__(W * 32) stream_bulk(const uint4* __restrict__ k, const uint4* __restrict__ v,
                                                      float* out) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ __align__(8) unsigned long long bars[W][S];
    constexpr unsigned ROW = DIM * 2, STAGE = 2 * CH * ROW;
    const int seq = blockIdx.x / HEADS, head = blockIdx.x % HEADS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, part = lane >> 4, sub = lane & 15;
    const unsigned data = (unsigned)__cvta_generic_to_shared(ring) + warp * S * STAGE;
    const unsigned bar0 = (unsigned)__cvta_generic_to_shared(&bars[warp][0]);
    if (lane == 0) {
        for (int s = 0; s < S; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8 * s));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncwarp();
    constexpr int CHUNKS = (KEYS + CH - 1) / CH;
    auto fill = [&](int s, int c) {
        const int base = c * CH, n = min(CH, KEYS - base);
        const unsigned bar = bar0 + 8 * s;
        __syncwarp();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        if (lane == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(2u * n * ROW) : "memory");
        const int copies = PAGE_MAJOR ? 2 : 2 * n;
        for (int idx = lane; idx < copies; idx += 32) {
            const bool isv = PAGE_MAJOR ? idx == 1 : idx >= n;
            const int key = PAGE_MAJOR ? 0 : idx % n;
            const unsigned bytes = PAGE_MAJOR ? n * ROW : ROW;
            const long long row = cache_row<PAGE_MAJOR>(seq, base + key, head);
            const uint4* src = (isv ? v : k) + row * (DIM / 8);
            const unsigned dst = data + s * STAGE + (isv ? CH * ROW : 0) + key * ROW;
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                         "l"(src), "r"(bytes), "r"(bar)
                         : "memory");
        }
    };
    for (int s = 0; s < S; s++)
        if (warp + W * s < CHUNKS) fill(s, warp + W * s);
    float acc = 0.f;
    int it = 0;
    for (int c = warp; c < CHUNKS; c += W, it++) {
        const int s = it % S;
        asm volatile("{\n.reg .pred P;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n@!P bra W;\n}" ::"r"(bar0 + 8 * s),
                     "r"((it / S) & 1)
                     : "memory");
        const int n = min(CH, KEYS - c * CH);
#pragma unroll
        for (int u = 0; u < CH / 2; u++) {
            const int key = 2 * u + part;
            uint4 a = make_uint4(0, 0, 0, 0), b = a;
            if (key < n) {
                const unsigned at = data + s * STAGE + key * ROW + sub * 16;
                asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w) : "r"(at));
                asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                             : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w)
                             : "r"(at + CH * ROW));
            }
            acc += uses16(a, b);
        }
        if (c + W * S < CHUNKS) fill(s, c + W * S);
    }
    if (acc == 1.2345f) out[0] = acc;
}

// Median microseconds per layer of `layers` launches of `kernel` (one layer's K and V each),
// over 25 timed rounds after 5; prints a CSV row with `u` in its second column.
template <typename Kernel>
static void time_layers(const char* name, int u, Kernel kernel, const uint4* k, const uint4* v, float* out,
                        int layers, int smem = 0, int threads = 128) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> ts;
    for (int r = 0; r < 30; r++) {
        cudaEventRecord(a);
        for (int l = 0; l < layers; l++) {
            const long long off = (long long)l * SEQS * KEYS * HEADS * DIM / 8;
            kernel<<<SEQS * HEADS, threads, smem>>>(k + off, v + off, out);
        }
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= 5) ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    const double ms = ts[ts.size() / 2] / layers;
    const double bytes = 2.0 * SEQS * KEYS * HEADS * DIM * 2;
    printf("%s,%d,%.2f,%.0f\n", name, u, ms * 1e3, bytes / (ms * 1e-3) / 1e9);
}
template <bool PM, int U, bool CONTIG = false, int G = 1>
static void run(const char* name, const uint4* k, const uint4* v, float* out, int layers) {
    time_layers(name, U, stream<PM, U, CONTIG, G>, k, v, out, layers);
}
template <bool PM, bool CONTIG>
static void run_frag(const char* name, const uint4* k, const uint4* v, float* out, int layers) {
    time_layers(name, 16, stream_frag<PM, CONTIG>, k, v, out, layers);
}

// u = 1000 x warps + 100 x keys per chunk + stages (W = 4: 100 x keys per chunk + stages).
template <bool PM, int CH, int S, int W = 4>
static void run_bulk(const char* name, const uint4* k, const uint4* v, float* out, int layers) {
    const int smem = W * S * 2 * CH * DIM * 2;
    cudaFuncSetAttribute(stream_bulk<PM, CH, S, W>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    time_layers(name, (W == 4 ? 0 : W * 1000) + CH * 100 + S, stream_bulk<PM, CH, S, W>, k, v, out, layers, smem,
                W * 32);
}

int main(int argc, char** argv) {
    printf("layout,u,us_per_layer,gb_s\n");
    const int layers = 28;
    const size_t n = (size_t)layers * SEQS * KEYS * HEADS * DIM;  // bf16 per cache
    uint4 *k, *v;
    float* out;
    cudaMalloc(&k, n * 2);
    cudaMalloc(&v, n * 2);
    cudaMalloc(&out, 4);
    cudaMemset(k, 1, n * 2);
    cudaMemset(v, 2, n * 2);
    // Warm-up: the first timed run otherwise pays for clocks ramping up (seen: 2.9 TB/s where
    // the same kernel later gave 3.8).
    for (int w = 0; w < 3; w++) {
        stream<false, 4><<<SEQS * HEADS, 128>>>(k, v, out);
        stream<true, 4><<<SEQS * HEADS, 128>>>(k, v, out);
    }
    cudaDeviceSynchronize();
    // `ring`: the shapes of the runner's ring decode kernels (results/h200/ring_attention.txt:
    // W warps per block, each a ring of S 16-key stages) against the bulk rings above.
    if (argc > 1 && std::string(argv[1]) == "ring") {
        run<false, 4>("slot-major", k, v, out, layers);
        run_bulk<false, 8, 3>("slot-major-bulk", k, v, out, layers);
        run_bulk<false, 16, 2, 2>("slot-major-bulk", k, v, out, layers);
        run_bulk<false, 16, 3, 2>("slot-major-bulk", k, v, out, layers);
        run_bulk<false, 16, 1, 4>("slot-major-bulk", k, v, out, layers);
        run_bulk<false, 8, 6, 2>("slot-major-bulk", k, v, out, layers);
        run_bulk<false, 8, 3, 2>("slot-major-bulk", k, v, out, layers);
        run_bulk<false, 16, 4, 1>("slot-major-bulk", k, v, out, layers);
        run_bulk<true, 16, 2, 2>("page-major-bulk", k, v, out, layers);
        run_bulk<false, 8, 3>("slot-major-bulk", k, v, out, layers);
        run<false, 4>("slot-major", k, v, out, layers);
        printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
        return 0;
    }
    // `bulk`: the bulk-copy variants only (u = 100 x keys per chunk + stages), between two
    // runs of the register kernels' two reference points.
    if (argc > 1 && std::string(argv[1]) == "bulk") {
        run<false, 4>("slot-major", k, v, out, layers);
        run<false, 8>("slot-major", k, v, out, layers);
        run_bulk<false, 8, 3>("slot-major-bulk", k, v, out, layers);
        run_bulk<true, 8, 3>("page-major-bulk", k, v, out, layers);
        run_bulk<true, 8, 4>("page-major-bulk", k, v, out, layers);
        run_bulk<true, 16, 2>("page-major-bulk", k, v, out, layers);
        run_bulk<true, 16, 3>("page-major-bulk", k, v, out, layers);
        run_bulk<false, 16, 2>("slot-major-bulk", k, v, out, layers);
        run_bulk<true, 8, 2>("page-major-bulk", k, v, out, layers);
        run<false, 4>("slot-major", k, v, out, layers);
        printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
        return 0;
    }
    run<false, 4>("slot-major", k, v, out, layers);
    run<true, 4>("page-major", k, v, out, layers);
    run<false, 8>("slot-major", k, v, out, layers);
    run<true, 8>("page-major", k, v, out, layers);
    run<false, 2>("slot-major", k, v, out, layers);
    run<true, 2>("page-major", k, v, out, layers);
    run<false, 4>("slot-major", k, v, out, layers);
    run<false, 4, true>("slot-major-contiguous", k, v, out, layers);
    run<false, 2, true>("slot-major-contiguous", k, v, out, layers);
    run<false, 8, true>("slot-major-contiguous", k, v, out, layers);
    run<false, 3>("slot-major", k, v, out, layers);
    run<false, 6>("slot-major", k, v, out, layers);
    run<false, 4, false, 2>("slot-major-runs-of-2", k, v, out, layers);
    run<false, 4, false, 4>("slot-major-runs-of-4", k, v, out, layers);
    run<false, 2, false, 2>("slot-major-runs-of-2", k, v, out, layers);
    run_frag<false, false>("slot-major-fragments", k, v, out, layers);
    run_frag<false, true>("slot-major-fragments-contiguous", k, v, out, layers);
    run_frag<true, false>("page-major-fragments", k, v, out, layers);
    run_frag<true, true>("page-major-fragments-contiguous", k, v, out, layers);
    run<false, 4>("slot-major", k, v, out, layers);
    return 0;
}
