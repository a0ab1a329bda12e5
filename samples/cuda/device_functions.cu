// device_functions.cu - __device__ helpers, inlined and __noinline__ (gpudiv sample corpus)
#include <cuda_runtime.h>

// Non-inlined helper: clamp an index into [0, n-1]. Branches depend on the argument.
__device__ __noinline__ int clamp_index(int i, int n)
{
    if (i < 0) return 0;
    if (i >= n) return n - 1;
    return i;
}

// Non-inlined helper: integer power by repeated squaring; loop depends on exponent.
__device__ __noinline__ float ipow(float base, int e)
{
    float r = 1.0f;
    while (e > 0) {
        if (e & 1) r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}

// Inlined helper: lane id within the warp.
__device__ __forceinline__ int lane_id()
{
    return threadIdx.x & 31;
}

// Non-inlined helper that itself calls another non-inlined helper.
__device__ __noinline__ float gather_clamped(const float *src, int i, int n)
{
    return src[clamp_index(i, n)];
}

// Shift a signal by `shift` positions with clamped borders (calls .func helpers).
// expect: bounds divergent; branches inside clamp_index divergent (argument depends on tid)
extern "C" __global__ void shift_clamped(const float *in, float *out, int n, int shift)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = gather_clamped(in, i + shift, n);
}

// Raises every element to a uniform integer power via a non-inlined helper.
// expect: bounds divergent; ipow loop uniform here (exponent is a kernel parameter) but helper is shared
extern "C" __global__ void pow_uniform_exponent(float *v, int e, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = ipow(v[i], e);
}

// Raises every element to a per-element integer power via the same helper.
// expect: bounds divergent; ipow loop divergent (exponent from data)
extern "C" __global__ void pow_per_element(float *v, const int *e, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = ipow(v[i], e[i]);
}

// Even lanes write their value, odd lanes write the negation (inlined lane_id helper).
// expect: (lane_id() % 2 == 0) divergent; bounds divergent
extern "C" __global__ void lane_parity(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (lane_id() % 2 == 0) out[i] = in[i];
    else out[i] = -in[i];
}
