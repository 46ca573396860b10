// cuBLASLt configuration search for Qwen3-0.6B's decode GEMMs on the H200 (built there with nvcc).
// gemm_bench.cu times the algorithms cuBLASLt's heuristic offers; this one also walks every
// algorithm id with each tile, stage count, custom option, split-K and reduction scheme that
// cublasLtMatmulAlgoCheck accepts (the ids the heuristic offered with the whole budget, the others
// with 40 candidates each), to see how far the best configuration is from what the engine
// runs (cublasGemmEx, and for O and down the engine's strided-batched split-K with fp32 partials).
// Every candidate is timed over 28 calls with their own weights in one CUDA graph (as in
// gemm_bench), first briefly, then the best few again; the best are checked against cublasGemmEx.
// The runner's GEMM tuning times only the heuristic's offers (gemm_lt.rs) because nothing this
// search found outside them was faster.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/gemm_lt_search.cu -lcublas -lcublasLt -o gemm_lt_search
//   ./gemm_lt_search [ROWS] > gemm_lt_search.csv
#include <cublasLt.h>
#include <cublas_v2.h>
#include "bench_graph.cuh"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

typedef __nv_bfloat16 bf16;
static const int LAYERS = 28;
static const size_t WS_BYTES = 32 << 20;

// One product as the engine runs it: `splits` > 1 is the strided-batched split-K with fp32
// partials; `f32` an fp32 output.
struct Shape {
    const char* name;
    int n, k, splits;
    bool f32;
};
static const Shape SHAPES[] = {{"qkv", 4096, 1024, 1, false},    {"gate_up", 6144, 1024, 1, false},
                               {"o_split4", 1024, 2048, 4, true}, {"down_split4", 1024, 3072, 4, true},
                               {"o", 1024, 2048, 1, false},       {"down", 1024, 3072, 1, false},
                               {"lm_head", 151936, 1024, 1, true}};

// Median microseconds per call of `call(layer)` over 28 layers in one graph (`reps` launches
// after 2); -1 if it failed.
template <typename F>
static double time_graph(cudaStream_t st, F&& call, int reps) {
    return time_graph(st, call, LAYERS, reps, 2);
}

template <typename T>
static std::vector<T> cap_list(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr) {
    size_t sz = 0;
    cublasLtMatmulAlgoCapGetAttribute(&a, attr, nullptr, 0, &sz);
    std::vector<T> v(sz / sizeof(T));
    if (sz) cublasLtMatmulAlgoCapGetAttribute(&a, attr, v.data(), sz, &sz);
    return v;
}
static uint32_t cap_u32(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr) {
    uint32_t v = 0;
    size_t sz;
    cublasLtMatmulAlgoCapGetAttribute(&a, attr, &v, sizeof v, &sz);
    return v;
}
static uint32_t cfg_get(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
    uint32_t v = 0;
    size_t sz;
    cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof v, &sz);
    return v;
}
static void cfg_set(cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr, uint32_t v) {
    cublasLtMatmulAlgoConfigSetAttribute(&a, attr, &v, sizeof v);
}

struct Cand {
    cublasLtMatmulAlgo_t algo;
    double us;
    char desc[128];
};

static void describe(const cublasLtMatmulAlgo_t& a, char* out, size_t n) {
    snprintf(out, n, "id%u tile%u stages%u split%u red%u swz%u opt%u inner%u cluster%u",
             cfg_get(a, CUBLASLT_ALGO_CONFIG_ID), cfg_get(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
             cfg_get(a, CUBLASLT_ALGO_CONFIG_STAGES_ID), cfg_get(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
             cfg_get(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME), cfg_get(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
             cfg_get(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), cfg_get(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID),
             cfg_get(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

int main(int argc, char** argv) {
    const int m = argc > 1 ? atoi(argv[1]) : 64;
    // Candidates timed per shape at most (the LM head a third: each of its candidates takes 28 x 0.09 ms).
    const int budget_arg = argc > 2 ? atoi(argv[2]) : 3000;
    const Blas b = blas_setup(WS_BYTES);
    cublasHandle_t h = b.h;
    cublasLtHandle_t lt = b.lt;
    cudaStream_t st = b.st;
    void* ws = b.ws;
    bf16 *x, *y;
    float* yf;
    CK(cudaMalloc(&x, (size_t)m * 3072 * 2));
    CK(cudaMalloc(&y, (size_t)m * 151936 * 4));
    CK(cudaMalloc(&yf, (size_t)m * 151936 * 4));
    fill<<<1024, 256>>>(x, (size_t)m * 3072, 7);
    const float alpha = 1.f, beta = 0.f;
    printf("m,shape,impl,config,us_per_gemm,max_rel_diff\n");
    for (const Shape& sh : SHAPES) {
        const bool lm = sh.n > 100000;
        const int budget = lm ? budget_arg / 3 : budget_arg;
        std::vector<bf16*> w(LAYERS);
        for (int l = 0; l < LAYERS; l++) {
            if (lm && l > 0) {
                w[l] = w[0];
                continue;
            }
            CK(cudaMalloc(&w[l], (size_t)sh.n * sh.k * 2));
            fill<<<1024, 256>>>(w[l], (size_t)sh.n * sh.k, l + 1);
        }
        const int ks = sh.k / sh.splits;
        const cudaDataType_t ct = sh.f32 ? CUDA_R_32F : CUDA_R_16BF;
        const size_t out_elems = (size_t)m * sh.n * sh.splits;
        auto reference = [&](int l, void* out) {
            if (sh.splits > 1)
                return cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, m, ks, &alpha, w[l], CUDA_R_16BF,
                                                  sh.k, ks, x, CUDA_R_16BF, sh.k, ks, &beta, out, ct, sh.n,
                                                  (long long)m * sh.n, sh.splits, CUBLAS_COMPUTE_32F,
                                                  CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
            return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, m, sh.k, &alpha, w[l], CUDA_R_16BF, sh.k, x,
                                CUDA_R_16BF, sh.k, &beta, out, ct, sh.n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
        };
        reference(0, yf);
        CK(cudaStreamSynchronize(st));
        const double ref_us = time_graph(st, [&](int l) { return reference(l, y); }, 25);
        printf("%d,%s,engine,%s,%.2f,0\n", m, sh.name, sh.splits > 1 ? "gemm_strided_batched_ex" : "gemm_ex", ref_us);

        cublasLtMatmulDesc_t op;
        cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
        cublasLtMatrixLayout_t la, lb, lc;
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, ks, sh.n, sh.k);
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, ks, m, sh.k);
        cublasLtMatrixLayoutCreate(&lc, ct, sh.n, m, sh.n);
        if (sh.splits > 1) {
            int32_t bc = sh.splits;
            int64_t sa = ks, sc = (int64_t)m * sh.n;
            for (auto l : {la, lb, lc}) cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, 4);
            cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, 8);
            cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, 8);
            cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, 8);
        }
        auto lt_call = [&](const cublasLtMatmulAlgo_t* a, int l, void* out) {
            return cublasLtMatmul(lt, op, &alpha, w[l], la, x, lb, &beta, out, lc, out, lc, a, ws, WS_BYTES, st) ==
                   CUBLAS_STATUS_SUCCESS;
        };
        std::vector<Cand> cands;
        auto consider = [&](const cublasLtMatmulAlgo_t& a) {
            if ((int)cands.size() >= budget) return;
            cublasLtMatmulHeuristicResult_t r;
            if (cublasLtMatmulAlgoCheck(lt, op, la, lb, lc, lc, &a, &r) != CUBLAS_STATUS_SUCCESS ||
                r.workspaceSize > WS_BYTES)
                return;
            Cand c;
            c.algo = a;
            c.us = time_graph(st, [&](int l) { return lt_call(&c.algo, l, y); }, 5);
            if (c.us < 0) return;
            describe(a, c.desc, sizeof c.desc);
            cands.push_back(c);
        };
        // The heuristic's own offers first.
        cublasLtMatmulPreference_t pref;
        cublasLtMatmulPreferenceCreate(&pref);
        size_t wsz = WS_BYTES;
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz);
        cublasLtMatmulHeuristicResult_t res[32];
        int nres = 0;
        cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 32, res, &nres);
        for (int i = 0; i < nres; i++) {
            consider(res[i].algo);
            char d[128];
            describe(res[i].algo, d, sizeof d);
            fprintf(stderr, "%s heuristic %d: %s\n", sh.name, i, d);
        }
        const size_t heur = cands.size();
        // Then every algorithm id with every configuration its capabilities allow: the ids the
        // heuristic offered first, with the whole budget (each tile with each custom option),
        // the others with a few candidates each (none of them came near in the first runs).
        int ids[512], nids = 0;
        cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, ct, ct, 512, ids,
                                 &nids);
        std::vector<int> offered;
        for (int i = 0; i < nres; i++) offered.push_back(cfg_get(res[i].algo, CUBLASLT_ALGO_CONFIG_ID));
        std::stable_partition(ids, ids + nids, [&](int id) {
            return std::find(offered.begin(), offered.end(), id) != offered.end();
        });
        fprintf(stderr, "%s: %d heuristic offers, %d algorithm ids\n", sh.name, nres, nids);
        for (int i = 0; i < nids; i++) {
            const bool heuristic_id = std::find(offered.begin(), offered.end(), ids[i]) != offered.end();
            const size_t before = cands.size();
            const int per_id = heuristic_id ? budget : 40;
            cublasLtMatmulAlgo_t a;
            if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, ct, ct, ids[i],
                                       &a) != CUBLAS_STATUS_SUCCESS)
                continue;
            auto tiles = cap_list<uint32_t>(a, CUBLASLT_ALGO_CAP_TILE_IDS);
            auto stages = cap_list<uint32_t>(a, CUBLASLT_ALGO_CAP_STAGES_IDS);
            if (tiles.empty()) tiles.push_back(CUBLASLT_MATMUL_TILE_UNDEFINED);
            if (stages.empty()) stages.push_back(CUBLASLT_MATMUL_STAGES_UNDEFINED);
            const uint32_t opts = std::min(cap_u32(a, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX), 7u);
            const uint32_t red_mask = cap_u32(a, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
            std::vector<uint32_t> splits = {1};
            if (cap_u32(a, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) && sh.splits == 1) splits = {1, 2, 4};
            fprintf(stderr, "  id %d: %zu tiles, %zu stages, %u custom options, reductions 0x%x\n", ids[i],
                    tiles.size(), stages.size(), opts + 1, red_mask);
            for (uint32_t t : tiles)
                for (uint32_t s : stages)
                    for (uint32_t o = 0; o <= opts; o++)
                        for (uint32_t sk : splits)
                            for (uint32_t red : {0u, 1u, 2u, 4u}) {
                                if ((sk == 1) != (red == 0) || (red && !(red & red_mask))) continue;
                                if ((int)(cands.size() - before) >= per_id) continue;
                                cfg_set(a, CUBLASLT_ALGO_CONFIG_TILE_ID, t);
                                cfg_set(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, s);
                                cfg_set(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, o);
                                cfg_set(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, sk);
                                cfg_set(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, red);
                                consider(a);
                            }
        }
        fprintf(stderr, "%s: %zu candidates timed (%zu from the heuristic)\n", sh.name, cands.size(), heur);
        // The best few, timed again properly and checked.
        std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.us < b.us; });
        reference(0, yf);
        CK(cudaStreamSynchronize(st));
        for (size_t i = 0; i < std::min<size_t>(cands.size(), 8); i++) {
            Cand& c = cands[i];
            double us = time_graph(st, [&](int l) { return lt_call(&c.algo, l, y); }, 25);
            lt_call(&c.algo, 0, y);
            CK(cudaStreamSynchronize(st));
            const double diff = max_rel_diff(y, yf, out_elems, sh.f32);
            printf("%d,%s,cublaslt,%s,%.2f,%.2e\n", m, sh.name, c.desc, us, diff);
        }
        fflush(stdout);
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(op);
        for (int l = 0; l < (lm ? 1 : LAYERS); l++) cudaFree(w[l]);
    }
    return 0;
}
