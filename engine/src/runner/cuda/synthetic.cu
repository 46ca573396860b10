// Synthetic weights generated on the device: the same function as
// engine/src/model/synthetic.rs (TensorStream::value), bit for bit. Integer
// arithmetic, then three f32 operations with explicit round-to-nearest
// intrinsics, so NVRTC cannot contract them into a fused multiply-add (which
// would round once where the host rounds twice), then bf16 rounding
// (nearest, ties to even) in integer arithmetic. No headers needed: bf16
// values are written as their 16-bit patterns.

typedef unsigned long long u64;

#define SYNTH_GAMMA 0x9e3779b97f4a7c15ULL

// SplitMix64's finaliser after adding its increment.
__device__ __forceinline__ u64 synth_mix(u64 z) {
    z += SYNTH_GAMMA;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// out[i] = value(key, start + i) for i < n, as bf16 bits; grid-stride.
// `unit` is the Irwin-Hall sum's inverse std (IRWIN_HALL_UNIT on the host).
extern "C" __global__ void synthetic_fill(unsigned short* out, u64 n, u64 start, u64 key,
                                          float unit, float mean, float stdv) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 b = synth_mix(key + (start + i) * SYNTH_GAMMA);
        int sum = (int)(b & 0xffff) + (int)((b >> 16) & 0xffff) + (int)((b >> 32) & 0xffff)
                + (int)(b >> 48);
        // Exact: |sum - 131070| < 2^18.
        float centred = __int2float_rn(sum - 131070);
        float z = __fmul_rn(centred, unit);
        float v = __fadd_rn(__fmul_rn(z, stdv), mean);
        unsigned int bits = __float_as_uint(v);
        out[i] = (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
}
