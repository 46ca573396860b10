// Host-compiler stand-ins for CUDA built-ins, so `g++ -fsyntax-only` can check
// the NVRTC kernel sources here, where no CUDA toolkit is installed. Semantics are
// not modelled: this catches typos, undeclared names and type errors only.
#pragma once
#include <cmath>
#include <cstdint>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__
#define __restrict__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define asm(...) ((void)0)
#define volatile
struct dim3s { unsigned x, y, z; };
extern dim3s threadIdx, blockIdx, blockDim, gridDim;
struct __nv_bfloat16 { unsigned short v; };
struct __nv_bfloat162 { __nv_bfloat16 x, y; };
struct float2s { float x, y; };
typedef float2s float2;
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
float __bfloat162float(__nv_bfloat16);
__nv_bfloat16 __float2bfloat16(float);
__nv_bfloat162 __floats2bfloat162_rn(float, float);
float2 __bfloat1622float2(__nv_bfloat162);
float __shfl_xor_sync(unsigned, float, int);
int __shfl_xor_sync(unsigned, int, int);
float __expf(float);
float exp2f(float);
float rsqrtf(float);
float fmaxf(float, float);
void __syncthreads();
size_t __cvta_generic_to_shared(const void*);
float __int_as_float(int);
uint4 __ldg(const uint4*);
void __syncwarp();
