// How fast one SM streams from DRAM, measured on the whole GPU (built there with nvcc). A green
// context of N SMs measures N SMs' copy bandwidth, but on the whole GPU every product the engine
// runs has enough blocks (cuBLAS splits K when its tiles are fewer than the SMs) that DRAM, not
// the SMs, bounds its stream. This probe runs work that occupies a few SMs of the whole GPU:
//
// - `copy`: the runner's copy (`copy_words_D` of kernels.cu, grid-stride, D loads in flight per
//   thread) on B blocks of 1,024 threads, each with enough shared memory that an SM holds one:
//   B SMs with half an SM's threads each. Bytes read plus written, as the runner counts.
// - `gemm`: cuBLASLt products of m rows by an n × k weight (bf16, as the engine's Linear), every
//   algorithm its heuristic offers that runs without splitting K (reduction scheme none, split-K
//   1; each offer is also tried with its split forced to 1). Bytes of the weight read.
//
// Each figure is the median of 20 launches of a CUDA graph of calls on distinct buffers (512 MB
// and more in all, past L2), per call. Rows: kind, blocks_or_m, n, k, variant, us, gb_s.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I engine/src/runner/cuda scripts/sm_stream.cu \
//        -lcublas -lcublasLt -o sm_stream && ./sm_stream > sm_stream.csv
#define HEAD_DIM 128
#define NUM_Q_HEADS 16
#define NUM_KV_HEADS 8
#define NORM_CHUNKS 4
#include "kernels.cu"
#include "bench_graph.cuh"
#include <cuda_runtime.h>
#include <cstdint>

static const size_t POOL_BYTES = (size_t)2 << 30;
static const size_t TOUCH_BYTES = (size_t)512 << 20;
static const size_t WS_BYTES = 32 << 20;
static const size_t DST_BYTES = (size_t)512 << 20;

// The runner's copy (`copy_words_body` of kernels.cu) in blocks of 1,024 threads.
template <int DEPTH>
__global__ void __launch_bounds__(1024) copy_words(const uint4* __restrict__ src, uint4* __restrict__ dst, long long n) {
    extern __shared__ char hold_the_sm[];
    if (n < 0) hold_the_sm[threadIdx.x] = 0;  // never: keeps the shared memory allocated
    copy_words_body<DEPTH>(src, dst, n);
}

// Calls per graph and the pool offset of call `l`: enough calls to touch TOUCH_BYTES, each on its
// own slice of the pool while it lasts.
static int calls_for(size_t bytes) { return (int)std::min<size_t>(512, std::max<size_t>(4, TOUCH_BYTES / bytes)); }
static size_t offset_for(int l, size_t bytes) {
    const size_t per = (bytes + 255) / 256 * 256;
    return (size_t)l * per % (POOL_BYTES / per * per);
}

template <int DEPTH>
static void copy_rows(cudaStream_t st, char* pool, char* dst, int smem) {
    CK(cudaFuncSetAttribute(copy_words<DEPTH>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    for (int blocks : {1, 2, 4, 8, 16, 32, 64, 132}) {
        // Each block copies 2 MB (read), so that a block's time is its stream, not its start.
        const size_t bytes = (size_t)blocks << 21;
        const int calls = calls_for(bytes);
        const double us = time_graph(
            st,
            [&](int l) {
                // Destinations rotate too, so that the written bytes leave L2 as the read ones come.
                copy_words<DEPTH><<<blocks, 1024, smem, st>>>((const uint4*)(pool + offset_for(l, bytes)),
                                                               (uint4*)(dst + offset_for(l, bytes) % DST_BYTES),
                                                               (long long)(bytes / 16));
            },
            calls, 20, 3);
        printf("copy,%d,0,0,depth%d,%.2f,%.1f\n", blocks, DEPTH, us, 2.0 * bytes / (us * 1e-6) / 1e9);
        fflush(stdout);
    }
}

static uint32_t cfg_get(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
    uint32_t v = 0;
    size_t sz;
    cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof v, &sz);
    return v;
}

int main() {
    const Blas b = blas_setup(WS_BYTES);
    cudaStream_t st = b.st;
    char *pool, *dst;
    bf16 *x, *y;
    CK(cudaMalloc(&pool, POOL_BYTES));
    CK(cudaMalloc(&dst, DST_BYTES + ((size_t)264 << 20)));
    CK(cudaMalloc(&x, (size_t)64 * 16384 * 2));
    CK(cudaMalloc(&y, (size_t)64 * 16384 * 2));
    fill<<<4096, 256>>>((bf16*)pool, POOL_BYTES / 2, 1);
    fill<<<1024, 256>>>(x, (size_t)64 * 16384, 7);
    CK(cudaDeviceSynchronize());
    int smem_max = 0;
    CK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    // More than half an SM's shared memory: one block an SM.
    const int smem = smem_max * 3 / 4;
    printf("kind,blocks_or_m,n,k,variant,us,gb_s\n");
    copy_rows<1>(st, pool, dst, smem);
    copy_rows<4>(st, pool, dst, smem);
    copy_rows<8>(st, pool, dst, smem);

    const float alpha = 1.f, beta = 0.f;
    for (int m : {1, 16, 64})
        for (int k : {4096, 12288})
            for (int n : {128, 256, 512, 1024, 2048, 4096, 8192, 16384}) {
                const size_t wbytes = (size_t)n * k * 2;
                const int calls = calls_for(wbytes);
                cublasLtMatmulDesc_t op;
                cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
                cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
                cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
                cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
                cublasLtMatrixLayout_t la, lb, lc;
                cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, n, k);
                cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, k);
                cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n);
                cublasLtMatmulPreference_t pref;
                cublasLtMatmulPreferenceCreate(&pref);
                size_t wsz = WS_BYTES;
                cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz,
                                                     sizeof(wsz));
                uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
                cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                                     sizeof(mask));
                cublasLtMatmulHeuristicResult_t res[16];
                int nres = 0;
                cublasLtMatmulAlgoGetHeuristic(b.lt, op, la, lb, lc, lc, pref, 16, res, &nres);
                for (int a = 0; a < nres; a++)
                    for (int force = 0; force < 2; force++) {
                        cublasLtMatmulAlgo_t algo = res[a].algo;
                        if (force) {
                            if (cfg_get(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) <= 1) continue;
                            uint32_t one = 1;
                            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one,
                                                                 sizeof one);
                            cublasLtMatmulHeuristicResult_t chk;
                            if (cublasLtMatmulAlgoCheck(b.lt, op, la, lb, lc, lc, &algo, &chk) !=
                                CUBLAS_STATUS_SUCCESS)
                                continue;
                        }
                        const uint32_t split = cfg_get(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
                        const double us = time_graph(
                            st,
                            [&](int l) {
                                return cublasLtMatmul(b.lt, op, &alpha, pool + offset_for(l, wbytes), la, x, lb,
                                                      &beta, y, lc, y, lc, &algo, b.ws, WS_BYTES,
                                                      st) == CUBLAS_STATUS_SUCCESS;
                            },
                            calls, 20, 3);
                        printf("gemm,%d,%d,%d,id%u tile%u stages%u split%u red%u cluster%u%s,%.2f,%.1f\n", m, n, k,
                               cfg_get(algo, CUBLASLT_ALGO_CONFIG_ID), cfg_get(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                               cfg_get(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID), split,
                               cfg_get(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                               cfg_get(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), force ? " forced" : "", us,
                               wbytes / (us * 1e-6) / 1e9);
                        fflush(stdout);
                    }
                cublasLtMatmulPreferenceDestroy(pref);
                cublasLtMatrixLayoutDestroy(la);
                cublasLtMatrixLayoutDestroy(lb);
                cublasLtMatrixLayoutDestroy(lc);
                cublasLtMatmulDescDestroy(op);
            }
    return 0;
}
