// half_precision.cu - packed half-precision arithmetic (gpudiv sample corpus)
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// y = (a*x + y) * (0.5, 2) - 2x on __half2 pairs, then each pair in ascending order.
// expect: bounds check divergent; (low > high) divergent
extern "C" __global__ void half2_axpy(const __half2 *x, __half2 *y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __half2 alpha = __float2half2_rn(a);
        __half2 v = __hfma2(alpha, x[i], y[i]);
        v = __hmul2(v, __floats2half2_rn(0.5f, 2.0f));
        v = __hsub2(v, __hadd2(x[i], x[i]));
        if (__low2float(v) > __high2float(v)) {
            v = __lowhigh2highlow(v);
        }
        y[i] = v;
    }
}

// Counts the half values above a threshold (grid-stride, one atomicAdd per thread).
// expect: grid-stride loop divergent; (value > threshold) divergent; (scale > 0) uniform
extern "C" __global__ void half_count_above(const __half *x, int n, float threshold,
                                            float scale, unsigned int *count)
{
    __half limit = __float2half(threshold);
    unsigned int mine = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        __half value = x[i];
        if (scale > 0.0f) {
            value = __hmul(value, __float2half(scale));
        }
        if (__hgt(value, limit)) {
            mine += 1;
        }
    }
    atomicAdd(count, mine);
}

// bfloat16 pairs: z = relu(x * w + b) with __nv_bfloat162, then a per-thread max.
// expect: bounds check divergent; (m > limit) divergent
extern "C" __global__ void bf162_relu_affine(const __nv_bfloat162 *x, __nv_bfloat162 w,
                                             __nv_bfloat162 b, __nv_bfloat162 *z,
                                             float limit, int *over, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __nv_bfloat162 v = __hfma2_relu(x[i], w, b);
        v = __hmul2(v, __floats2bfloat162_rn(1.0f, 0.5f));
        z[i] = v;
        float m = fmaxf(__low2float(v), __high2float(v));
        if (m > limit) {
            atomicAdd(over, 1);
        }
    }
}
