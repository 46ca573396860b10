// Decode-GEMM microbenchmark for the H200 (built there with nvcc; the engine compiles the same
// kernel sources with NVRTC). Times Qwen3-0.6B's GEMMs for decode batch sizes, 28 calls with
// their own weights (the LM head's one is shared: 311 MB is far past L2) in one CUDA graph:
// cublasGemmEx as the engine calls it (also with one layer's weights for all calls, so that they
// come from L2), every algorithm cuBLASLt's heuristic offers (also when asked for algorithms
// without a separate split-K reduction kernel), and the skinny kernel with and without
// programmatic dependent launch, and split-K by hand as strided batches with fp32 partials
// (`split<S>_f32`, the partials' sum left to the next kernel). Custom results are checked
// against cublasGemmEx (max |difference| / max |reference|). The runner's choice between the
// skinny kernel and cuBLAS (SKINNY_MAX_PRODUCT, SKINNY_MAX_COLS in linear.rs) rests on it.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I engine/src/runner/cuda scripts/gemm_bench.cu \
//        -lcublas -lcublasLt -o gemm_bench && ./gemm_bench [ROWS] > gemm_bench.csv
#define HEAD_DIM 128
#define NUM_Q_HEADS 16
#define NUM_KV_HEADS 8
#define NORM_CHUNKS 4
#include "kernels.cu"
#include "attention.cu"
#include "skinny_gemm.cu"
#include "bench_graph.cuh"
#include <cublasLt.h>
#include <cublas_v2.h>
#include <algorithm>
#include <cstdio>
#include <vector>

struct Shape {
    const char* name;
    int n, k;
};
static const Shape SHAPES[] = {
    {"qkv", 4096, 1024}, {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072}, {"lm_head", 151936, 1024}};
static const int NSHAPES = 5, LAYERS = 28;
static const size_t WS_BYTES = 32 << 20;

static void skinny(cudaStream_t st, const bf16* x, const bf16* w, bf16* y, int m, int n, int k, bool pdl) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3(n / 8);
    cfg.blockDim = dim3(256);
    cfg.stream = st;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    void (*f[4])(const bf16*, const bf16*, void*, int, int, int, int) = {skinny_gemm_1, skinny_gemm_2, skinny_gemm_3,
                                                                         skinny_gemm_4};
    CK(cudaLaunchKernelEx(&cfg, f[(m + 15) / 16 - 1], x, w, (void*)y, m, n, k, 0));
}

// Median microseconds per call of `call(layer)` over 28 layers in one graph (20 launches after 5).
template <typename F>
static double time_graph(cudaStream_t st, F&& call) {
    return time_graph(st, call, LAYERS, 20, 5);
}

int main(int argc, char** argv) {
    // An optional row count: only that one (a quicker run).
    const int only_m = argc > 1 ? atoi(argv[1]) : 0;
    const Blas b = blas_setup(WS_BYTES);
    cublasHandle_t h = b.h;
    cublasLtHandle_t lt = b.lt;
    cudaStream_t st = b.st;
    void* ws = b.ws;
    std::vector<bf16*> wts(LAYERS * NSHAPES);
    for (int l = 0; l < LAYERS; l++)
        for (int s = 0; s < NSHAPES; s++) {
            size_t n = (size_t)SHAPES[s].n * SHAPES[s].k;
            if (s == 4 && l > 0) {
                wts[l * NSHAPES + s] = wts[s];
                continue;
            }
            CK(cudaMalloc(&wts[l * NSHAPES + s], n * 2));
            fill<<<1024, 256>>>(wts[l * NSHAPES + s], n, l * NSHAPES + s + 1);
        }
    bf16 *x, *y, *yref;
    float* part;
    CK(cudaMalloc(&part, (size_t)8 * 64 * 6144 * 4));
    CK(cudaMalloc(&x, 64 * 3072 * 2));
    CK(cudaMalloc(&y, 64 * 151936 * 2));
    CK(cudaMalloc(&yref, 64 * 151936 * 2));
    fill<<<1024, 256>>>(x, 64 * 3072, 7);
    CK(cudaDeviceSynchronize());
    const float alpha = 1.f, beta = 0.f;
    printf("m,shape,impl,variant,us_per_gemm,gb_s,max_rel_diff\n");
    for (int m : {1, 8, 16, 24, 32, 48, 64}) {
        if (only_m && m != only_m) continue;
        for (int s = 0; s < NSHAPES; s++) {
            const Shape& sh = SHAPES[s];
            const double bytes = (double)sh.n * sh.k * 2;
            auto row = [&](const char* impl, const char* variant, double us, double diff) {
                printf("%d,%s,%s,%s,%.2f,%.0f,%.2e\n", m, sh.name, impl, variant, us, bytes / (us * 1e-6) / 1e9, diff);
            };
            auto gemm_ex = [&](int l, bf16* out) {
                cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, m, sh.k, &alpha, wts[l * NSHAPES + s], CUDA_R_16BF, sh.k,
                             x, CUDA_R_16BF, sh.k, &beta, out, CUDA_R_16BF, sh.n, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT);
            };
            gemm_ex(0, yref);
            row("cublas", "gemm_ex", time_graph(st, [&](int l) { gemm_ex(l, y); }), 0.0);
            // The same weights in all 28 calls: from the second on, W comes from L2 (not the LM
            // head's, which is larger than L2). The difference is what the DRAM stream costs.
            row("cublas", "gemm_ex_l2_hot", time_graph(st, [&](int) { gemm_ex(0, y); }), 0.0);

            // cuBLASLt: Y^T (n x m) = W (n x k, stored k x n column-major, transposed) * X^T (k x m).
            cublasLtMatmulDesc_t op;
            cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
            cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
            cublasLtMatrixLayout_t la, lb, lc;
            cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, sh.k, sh.n, sh.k);
            cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, sh.k, m, sh.k);
            cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, sh.n, m, sh.n);
            cublasLtMatmulPreference_t pref;
            cublasLtMatmulPreferenceCreate(&pref);
            size_t wsz = WS_BYTES;
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof(wsz));
            // Pass 0: every algorithm the heuristic offers; pass 1: only those that need no
            // separate split-K reduction (reduction scheme "none" or in place).
            for (int pass = 0; pass < 2; pass++) {
                if (pass == 1) {
                    uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_INPLACE;
                    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                                         sizeof(mask));
                }
                cublasLtMatmulHeuristicResult_t res[16];
                int nres = 0;
                cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, res, &nres);
                for (int a = 0; a < nres; a++) {
                    auto lt_call = [&](int l, bf16* out) {
                        cublasLtMatmul(lt, op, &alpha, wts[l * NSHAPES + s], la, x, lb, &beta, out, lc, out, lc,
                                       &res[a].algo, ws, WS_BYTES, st);
                    };
                    lt_call(0, y);
                    CK(cudaStreamSynchronize(st));
                    double diff = max_rel_diff(y, yref, (size_t)m * sh.n);
                    char v[24];
                    snprintf(v, sizeof v, pass ? "no_reduction_algo%d" : "algo%d", a);
                    row("cublaslt", v, time_graph(st, [&](int l) { lt_call(l, y); }), diff);
                }
            }
            cublasLtMatmulPreferenceDestroy(pref);
            cublasLtMatrixLayoutDestroy(la);
            cublasLtMatrixLayoutDestroy(lb);
            cublasLtMatrixLayoutDestroy(lc);
            cublasLtMatmulDescDestroy(op);

            // Split-K by hand: S strided batches over slices of K, each writing its own fp32
            // partial (m x n); the sum is left to the kernel that reads the output next (the
            // engine's norm or SiLU kernel), so no reduction kernel is timed here.
            for (int S : {1, 2, 3, 4, 6, 8}) {
                if (sh.k % (S * 64) != 0 || s == 4) continue;
                const int ks = sh.k / S;
                auto batched = [&](int l) {
                    cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, m, ks, &alpha, wts[l * NSHAPES + s],
                                               CUDA_R_16BF, sh.k, ks, x, CUDA_R_16BF, sh.k, ks, &beta, part,
                                               CUDA_R_32F, sh.n, (long long)m * sh.n, S, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT);
                };
                batched(0);
                CK(cudaStreamSynchronize(st));
                std::vector<float> hp((size_t)S * m * sh.n);
                std::vector<bf16> hr((size_t)m * sh.n);
                CK(cudaMemcpy(hp.data(), part, hp.size() * 4, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(hr.data(), yref, hr.size() * 2, cudaMemcpyDeviceToHost));
                double err = 0, mx = 0;
                for (size_t i = 0; i < hr.size(); i++) {
                    float acc = 0;
                    for (int j = 0; j < S; j++) acc += hp[(size_t)j * m * sh.n + i];
                    err = std::max(err, (double)fabsf(acc - __bfloat162float(hr[i])));
                    mx = std::max(mx, (double)fabsf(__bfloat162float(hr[i])));
                }
                char v[24];
                snprintf(v, sizeof v, "split%d_f32", S);
                row("cublas_batched", v, time_graph(st, batched), err / (mx + 1e-30));
            }

            for (int pdl = 0; pdl < 2; pdl++) {
                skinny(st, x, wts[s], y, m, sh.n, sh.k, pdl);
                CK(cudaStreamSynchronize(st));
                double diff = max_rel_diff(y, yref, (size_t)m * sh.n);
                double us = time_graph(st, [&](int l) { skinny(st, x, wts[l * NSHAPES + s], y, m, sh.n, sh.k, pdl); });
                row("skinny", pdl ? "pdl" : "plain", us, diff);
            }
        }
    }
    return 0;
}
