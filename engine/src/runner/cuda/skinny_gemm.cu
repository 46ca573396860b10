// Skinny GEMM for decode-sized batches (appended to kernels.cu; uses mma_bf16_16816 from
// attention.cu): Y[m][n] = sum_k X[m][k] * W[n][k] for M <= 16 * MT, N % 8 == 0, K % 256 == 0.
// Memory-bound on W, so each W byte is read once with 16-byte loads: a block of 8 warps owns 8
// output columns, the warps split K, and lane (g, tig) loads W[n0 + g][k .. k + 8] for each
// 32-wide k chunk. The MMA's k order inside a chunk is permuted the same way for X and W (a
// bijection, so the dot product is unchanged), which lets those 16-byte loads feed the fragments
// directly. Rows m >= M read as zero; partial sums meet in shared memory.

#define SK_WARPS 8

template <int MT>
__device__ __forceinline__ void skinny_gemm_body(const bf16* __restrict__ X, const bf16* __restrict__ W,
                                                 void* __restrict__ Y, int M, int N, int K, int out_f32) {
    __shared__ float red[SK_WARPS][MT * 16 * 8];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    const int n0 = blockIdx.x * 8;
    const int kw = K / SK_WARPS;
    const int kbeg = warp * kw;
    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.0f;
    const bf16* wrow = W + (long long)(n0 + g) * K + kbeg + tig * 8;
    // The weights do not depend on the previous kernel: start pulling this lane's share into L2
    // before waiting for it (programmatic dependent launch, kernels.cu).
    for (int c = 0; c < kw; c += 32) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(wrow + c));
    PDL_ENTER();
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int c = 0; c < kw; c += 4 * 32) {
        uint4 wv[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            wv[u] = (c + u * 32 < kw) ? __ldg(reinterpret_cast<const uint4*>(wrow + c + u * 32)) : zero;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (c + u * 32 < kw) {
                const int kx = kbeg + c + u * 32 + tig * 8;
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const int r0 = mt * 16 + g, r1 = r0 + 8;
                    uint4 x0 = r0 < M ? *reinterpret_cast<const uint4*>(X + (long long)r0 * K + kx) : zero;
                    uint4 x1 = r1 < M ? *reinterpret_cast<const uint4*>(X + (long long)r1 * K + kx) : zero;
                    u32 a[4] = {x0.x, x1.x, x0.y, x1.y};
                    mma_bf16_16816(acc[mt], a, wv[u].x, wv[u].y);
                    u32 a2[4] = {x0.z, x1.z, x0.w, x1.w};
                    mma_bf16_16816(acc[mt], a2, wv[u].z, wv[u].w);
                }
            }
        }
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        red[warp][(mt * 16 + g) * 8 + tig * 2] = acc[mt][0];
        red[warp][(mt * 16 + g) * 8 + tig * 2 + 1] = acc[mt][1];
        red[warp][(mt * 16 + g + 8) * 8 + tig * 2] = acc[mt][2];
        red[warp][(mt * 16 + g + 8) * 8 + tig * 2 + 1] = acc[mt][3];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < MT * 16 * 8; idx += blockDim.x) {
        const int row = idx / 8, col = idx % 8;
        if (row >= M) continue;
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < SK_WARPS; w++) s += red[w][idx];
        const long long o = (long long)row * N + n0 + col;
        if (out_f32) reinterpret_cast<float*>(Y)[o] = s;
        else reinterpret_cast<bf16*>(Y)[o] = __float2bfloat16(s);
    }
}

#define SKINNY_ENTRY(MT)                                                                                   \
    extern "C" __global__ void __launch_bounds__(256) skinny_gemm_##MT(                                   \
        const bf16* __restrict__ X, const bf16* __restrict__ W, void* __restrict__ Y, int M, int N, int K, \
        int out_f32) {                                                                                     \
        skinny_gemm_body<MT>(X, W, Y, M, N, K, out_f32);                                                   \
    }
SKINNY_ENTRY(1)
SKINNY_ENTRY(2)
SKINNY_ENTRY(3)
SKINNY_ENTRY(4)
