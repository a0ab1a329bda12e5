// vector_ops.cu - elementwise vector kernels (gpudiv sample corpus)
#include <cuda_runtime.h>

// Computes c[i] = a[i] + b[i] for i < n, one element per thread.
// expect: bounds check (i < n) divergent
extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

// Computes y[i] = alpha * x[i] + y[i] (single-precision axpy).
// expect: early-return bounds check divergent
extern "C" __global__ void saxpy(int n, float alpha, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = alpha * x[i] + y[i];
}

// Clamps each unmasked element into [lo, hi]; uses && in the guard.
// expect: combined guard (i < n && mask[i]) divergent; clamp branches divergent (data)
extern "C" __global__ void vec_clamp_masked(float *v, const int *mask, float lo, float hi, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && mask[i] != 0) {
        float x = v[i];
        if (x < lo) x = lo;
        else if (x > hi) x = hi;
        v[i] = x;
    }
}

// Scales a vector by a factor only when the (uniform) flag is set.
// expect: flag test uniform (kernel parameter); bounds check divergent
extern "C" __global__ void vec_scale_if(float *v, float s, int apply, int n)
{
    if (apply == 0) return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] *= s;
}
