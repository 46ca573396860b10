// Prefetch-GEMM microbenchmark for the H200 (built there with nvcc; the engine compiles the same
// kernel sources with NVRTC). Times, per layer of a 28-layer CUDA graph with each layer's own
// weights (so they come from DRAM), the runner's add_rmsnorm over ROWS rows of 1,024 followed by
// the product that reads its output:
//   - gate-up (6144 x 1024) then silu_mul, or QKV (4096 x 1024), on cublasGemmEx;
//   - the prefetch GEMM (prefetch_gemm.cu) with and without programmatic dependent launch, and
//     its timing-only variants that leave out the X loads, the MMAs or the weight copies;
//   - the norm alone.
// The prefetch GEMM's output is checked against cuBLAS (max |difference| / max |reference|); it
// reads each layer's weights tiled by tile_for_wgmma, as the runner keeps them.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I engine/src/runner/cuda scripts/prefetch_gemm_bench.cu \
//        -lcublas -lcublasLt -o prefetch_gemm_bench && ./prefetch_gemm_bench [ROWS]
#define HEAD_DIM 128
#define NUM_Q_HEADS 16
#define NUM_KV_HEADS 8
#include "kernels.cu"
#include "attention.cu"
#include "prefetch_gemm.cu"
#include "bench_graph.cuh"
#include <cmath>

static const int LAYERS = 28, HID = 1024, INTER = 3072, QKV = 4096;

template <int NH, int SILU, int SKIP>
__global__ void __launch_bounds__(PG_THREADS, 1)
    pg_variant(const bf16* X, const bf16* W, bf16* Y, int M, int row_step, int seg1_off, int ldy) {
    prefetch_gemm_body<NH, SILU, SKIP>(X, W, Y, M, row_step, seg1_off, ldy);
}

typedef void (*PgFn)(const bf16*, const bf16*, bf16*, int, int, int, int);

struct Bufs {
    float* resid;
    bf16 *gain, *normed, *normed_t, *gu_out, *act, *qkv_out;
    bf16* w_gu[LAYERS];
    bf16* w_qkv[LAYERS];
    bf16* t_gu[LAYERS];  // tiled by tile_for_wgmma
    bf16* t_qkv[LAYERS];
};

// The norm's output row-major (for cuBLAS) or tiled (for the prefetch GEMM).
static void norm(cudaStream_t st, const Bufs& b, int rows, bool tiled = false) {
    add_rmsnorm<<<rows, 256, 0, st>>>(b.resid, nullptr, nullptr, 0, 0, b.gain, tiled ? b.normed_t : b.normed,
                                      nullptr, HID, 1e-6f, 0, nullptr, nullptr, tiled ? 1 : 0);
}

static void pg_launch(cudaStream_t st, PgFn f, const bf16* x, const bf16* w, bf16* y, int rows, bool silu, bool pdl) {
    const int nh = silu ? 24 : 16, nc = 2 * nh;
    const int smem = nc * HID * 2 + 64 * HID * 2;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = PG_CLUSTER;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3(silu ? INTER / nh : QKV / nc);
    cfg.blockDim = dim3(PG_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 2 : 1;
    const int row_step = silu ? nh : nc, seg1 = silu ? INTER : nh, ldy = silu ? INTER : QKV;
    CK(cudaLaunchKernelEx(&cfg, f, x, w, y, rows, row_step, seg1, ldy));
}

static void cublas_gemm(const Blas& bl, const bf16* x, const bf16* w, bf16* y, int m, int n) {
    const float one = 1.0f, zero = 0.0f;
    cublasGemmEx(bl.h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, HID, &one, w, CUDA_R_16BF, HID, x, CUDA_R_16BF, HID, &zero, y,
                 CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static float max_rel_diff(const bf16* a, const bf16* b, size_t n) {
    std::vector<bf16> ha(n), hb(n);
    CK(cudaMemcpy(ha.data(), a, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b, n * 2, cudaMemcpyDeviceToHost));
    float d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        float x = __bfloat162float(ha[i]), y = __bfloat162float(hb[i]);
        d = std::max(d, std::fabs(x - y));
        r = std::max(r, std::fabs(y));
    }
    return d / r;
}

static void run(const Blas& bl, Bufs& b, int rows) {
    cudaStream_t st = bl.st;
    const int smax = 232448 - 2048;
    PgFn fs[] = {pg_variant<24, 1, 0>, pg_variant<24, 1, PG_SKIP_X>, pg_variant<24, 1, PG_SKIP_MMA>,
                 pg_variant<24, 1, PG_SKIP_W>, pg_variant<24, 1, PG_SKIP_X | PG_SKIP_MMA>, pg_variant<16, 0, 0>,
                 pg_variant<24, 1, PG_SKIP_MMA | PG_SKIP_W>, pg_variant<24, 1, PG_SKIP_X | PG_SKIP_MMA>};
    for (PgFn f : fs) CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smax));
    // Correctness: the fused gate-up against cuBLAS + silu_mul, QKV against cuBLAS.
    norm(st, b, rows);
    cublas_gemm(bl, b.normed, b.w_gu[0], b.gu_out, rows, 2 * INTER);
    const long long total = (long long)rows * INTER / 8;
    silu_mul<<<(total + 255) / 256, 256, 0, st>>>(b.gu_out, b.act, INTER, total);
    bf16* act2 = b.gu_out + (size_t)64 * 2 * INTER;
    norm(st, b, rows, true);
    pg_launch(st, fs[0], b.normed_t, b.t_gu[0], act2, rows, true, false);
    CK(cudaStreamSynchronize(st));
    printf("check,silu,%d,%.2e\n", rows, max_rel_diff(act2, b.act, (size_t)rows * INTER));
    cublas_gemm(bl, b.normed, b.w_qkv[0], b.qkv_out, rows, QKV);
    bf16* q2 = b.qkv_out + (size_t)64 * QKV;
    pg_launch(st, fs[5], b.normed_t, b.t_qkv[0], q2, rows, false, false);
    CK(cudaStreamSynchronize(st));
    printf("check,qkv,%d,%.2e\n", rows, max_rel_diff(q2, b.qkv_out, (size_t)rows * QKV));

    auto t = [&](const char* name, auto&& call) {
        printf("%s,%d,%.2f\n", name, rows, time_graph(st, call, LAYERS, 20, 5));
    };
    t("norm", [&](int) { norm(st, b, rows); });
    t("norm+cublas_gate_up+silu", [&](int l) {
        norm(st, b, rows);
        cublas_gemm(bl, b.normed, b.w_gu[l], b.gu_out, rows, 2 * INTER);
        silu_mul<<<(total + 255) / 256, 256, 0, st>>>(b.gu_out, b.act, INTER, total);
    });
    t("norm+cublas_qkv", [&](int l) {
        norm(st, b, rows);
        cublas_gemm(bl, b.normed, b.w_qkv[l], b.qkv_out, rows, QKV);
    });
    const char* names[] = {"norm+pg_silu",           "norm+pg_silu_noX", "norm+pg_silu_noMMA",   "norm+pg_silu_noW",
                           "norm+pg_silu_noX_noMMA", "norm+pg_qkv",      "norm+pg_silu_copyX_only", "norm+pg_silu_copyW_only"};
    {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = PG_CLUSTER;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3(128);
        cfg.blockDim = dim3(PG_THREADS);
        cfg.dynamicSmemBytes = 224 * 1024;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        int clusters = -1;
        CK(cudaOccupancyMaxActiveClusters(&clusters, fs[0], &cfg));
        printf("max_active_clusters,%d,%d\n", rows, clusters);
    }
    for (int v = 0; v < 8; v++) {
        const bool silu = v != 5;
        t(names[v], [&](int l) {
            norm(st, b, rows, true);
            pg_launch(st, fs[v], b.normed_t, silu ? b.t_gu[l] : b.t_qkv[l], silu ? b.act : b.qkv_out, rows, silu, true);
        });
    }
    t("norm+pg_silu_nopdl", [&](int l) {
        norm(st, b, rows, true);
        pg_launch(st, fs[0], b.normed_t, b.t_gu[l], b.act, rows, true, false);
    });
    t("pg_silu_alone", [&](int l) { pg_launch(st, fs[0], b.normed_t, b.t_gu[l], b.act, rows, true, false); });
    t("cublas_gate_up_alone", [&](int l) { cublas_gemm(bl, b.normed, b.w_gu[l], b.gu_out, rows, 2 * INTER); });
}

int main(int argc, char** argv) {
    const int rows = argc > 1 ? atoi(argv[1]) : 64;
    if (rows < 1 || rows > 64) {
        fprintf(stderr, "ROWS must be 1-64\n");
        return 1;
    }
    Blas bl = blas_setup(32 << 20);
    Bufs b;
    CK(cudaMalloc(&b.resid, 64 * HID * 4));
    CK(cudaMalloc(&b.gain, HID * 2));
    CK(cudaMalloc(&b.normed, 64 * HID * 2));
    CK(cudaMalloc(&b.normed_t, 64 * HID * 2));
    CK(cudaMemset(b.normed_t, 0, 64 * HID * 2));
    CK(cudaMalloc(&b.gu_out, 2 * 64 * 2 * INTER * 2));
    CK(cudaMalloc(&b.act, 64 * INTER * 2));
    CK(cudaMalloc(&b.qkv_out, 2 * 64 * QKV * 2));
    fill<<<256, 256>>>(b.gain, HID, 7);
    fill<<<256, 256>>>((bf16*)b.normed, 64 * HID, 3);
    std::vector<float> res(64 * HID);
    for (size_t i = 0; i < res.size(); i++) res[i] = std::sin(0.37f * i) * 2.0f;
    CK(cudaMemcpy(b.resid, res.data(), res.size() * 4, cudaMemcpyHostToDevice));
    for (int l = 0; l < LAYERS; l++) {
        CK(cudaMalloc(&b.w_gu[l], (size_t)2 * INTER * HID * 2));
        CK(cudaMalloc(&b.w_qkv[l], (size_t)QKV * HID * 2));
        fill<<<1024, 256>>>(b.w_gu[l], (size_t)2 * INTER * HID, 100 + l);
        fill<<<1024, 256>>>(b.w_qkv[l], (size_t)QKV * HID, 200 + l);
        CK(cudaMalloc(&b.t_gu[l], (size_t)2 * INTER * HID * 2));
        CK(cudaMalloc(&b.t_qkv[l], (size_t)QKV * HID * 2));
        tile_for_wgmma<<<2 * INTER * HID / 8 / 256, 256>>>(b.w_gu[l], b.t_gu[l], 2 * INTER, HID);
        tile_for_wgmma<<<QKV * HID / 8 / 256, 256>>>(b.w_qkv[l], b.t_qkv[l], QKV, HID);
    }
    CK(cudaDeviceSynchronize());
    printf("what,rows,us_per_layer\n");
    run(bl, b, rows);
    return 0;
}
