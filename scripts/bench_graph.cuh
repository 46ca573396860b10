// Shared by the nvcc microbenchmarks (gemm_bench.cu, gemm_lt_search.cu): error checks, a
// deterministic bf16 fill, the cuBLAS handles on one stream with a fixed workspace, the largest
// difference between two device results, and the median time of a CUDA graph of `layers` calls.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e = (x);                                                           \
        if (e != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

// Values in [-0.05, 0.05) from a hash of the index and the seed.
__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 13;
        h *= 0x5bd1e995u;
        h ^= h >> 15;
        p[i] = __float2bfloat16(((h & 0xffff) / 65536.0f - 0.5f) * 0.1f);
    }
}

// A cuBLAS and a cuBLASLt handle, their stream (non-blocking) and a workspace of `ws_bytes`
// that cuBLAS is given (cuBLASLt takes it per call), so that their calls can be captured.
struct Blas {
    cublasHandle_t h;
    cublasLtHandle_t lt;
    cudaStream_t st;
    void* ws;
};
static Blas blas_setup(size_t ws_bytes) {
    Blas b;
    cublasCreate(&b.h);
    cublasLtCreate(&b.lt);
    CK(cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking));
    cublasSetStream(b.h, b.st);
    CK(cudaMalloc(&b.ws, ws_bytes));
    cublasSetWorkspace(b.h, b.ws, ws_bytes);
    return b;
}

// `n` values at device address `d` (bf16 or, with `f32`, fp32 there) copied to the host as floats.
static std::vector<float> download_floats(const void* d, size_t n, bool f32) {
    std::vector<float> out(n);
    if (f32) {
        CK(cudaMemcpy(out.data(), d, n * 4, cudaMemcpyDeviceToHost));
    } else {
        std::vector<__nv_bfloat16> h(n);
        CK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) out[i] = __bfloat162float(h[i]);
    }
    return out;
}

// max |got - ref| / max |ref| over `n` device values (bf16, or fp32 with `f32`).
static double max_rel_diff(const void* got_d, const void* ref_d, size_t n, bool f32 = false) {
    const std::vector<float> got = download_floats(got_d, n, f32), ref = download_floats(ref_d, n, f32);
    double err = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        err = std::max(err, (double)fabsf(got[i] - ref[i]));
        mx = std::max(mx, (double)fabsf(ref[i]));
    }
    return err / (mx + 1e-30);
}

// Median microseconds per call of `call(layer)`, layer = 0 .. layers - 1 captured in one graph,
// over `reps` launches after `warm` untimed ones; -1 if a call (returning false) or the capture
// failed. `call` returns void or bool.
template <typename F>
static double time_graph(cudaStream_t st, F&& call, int layers, int reps, int warm) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    bool ok = true;
    for (int l = 0; l < layers; l++) {
        if constexpr (std::is_same_v<decltype(call(0)), void>) {
            call(l);
        } else {
            ok = ok && call(l);
        }
    }
    if (cudaStreamEndCapture(st, &g) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    if (!ok || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        cudaGraphDestroy(g);
        cudaGetLastError();
        return -1;
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> ts;
    for (int r = 0; r < reps + warm; r++) {
        cudaEventRecord(e0, st);
        cudaGraphLaunch(ge, st);
        cudaEventRecord(e1, st);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r >= warm) ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return ts[ts.size() / 2] * 1000.0 / layers;
}
