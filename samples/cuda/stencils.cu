// stencils.cu - 1-D / 2-D stencils (gpudiv sample corpus)
#include <cuda_runtime.h>

#define RADIUS 3
#define SBLOCK 256

// 1-D stencil of radius RADIUS with shared-memory halo.
// expect: halo load (threadIdx.x < RADIUS) divergent; stencil offset loop uniform (constant); bounds divergent
extern "C" __global__ void stencil_1d(const float *in, float *out, int n)
{
    __shared__ float buf[SBLOCK + 2 * RADIUS];
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    int l = threadIdx.x + RADIUS;
    buf[l] = (g < n) ? in[g] : 0.0f;
    if (threadIdx.x < RADIUS) {
        int left = g - RADIUS;
        int right = g + SBLOCK;
        buf[l - RADIUS] = (left >= 0 && left < n) ? in[left] : 0.0f;
        buf[l + SBLOCK] = (right < n) ? in[right] : 0.0f;
    }
    __syncthreads();
    if (g < n) {
        float s = 0.0f;
        for (int o = -RADIUS; o <= RADIUS; ++o) s += buf[l + o];
        out[g] = s;
    }
}

// 5-point Jacobi step on a 2-D grid; boundary cells are copied unchanged.
// expect: interior/boundary test divergent; outer bounds divergent
extern "C" __global__ void jacobi_2d(const float *u, float *unew, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    int idx = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        unew[idx] = u[idx];
    } else {
        unew[idx] = 0.25f * (u[idx - 1] + u[idx + 1] + u[idx - nx] + u[idx + nx]);
    }
}

// Repeated 3-point smoothing in shared memory for `iters` iterations (uniform trip count).
// expect: iteration loop uniform (kernel parameter); interior test divergent
extern "C" __global__ void smooth_iterated(float *data, int iters)
{
    __shared__ float a[SBLOCK];
    __shared__ float b[SBLOCK];
    int t = threadIdx.x;
    int base = blockIdx.x * SBLOCK;
    a[t] = data[base + t];
    __syncthreads();
    for (int it = 0; it < iters; ++it) {
        if (t > 0 && t < SBLOCK - 1) b[t] = (a[t - 1] + a[t] + a[t + 1]) * (1.0f / 3.0f);
        else b[t] = a[t];
        __syncthreads();
        a[t] = b[t];
        __syncthreads();
    }
    data[base + t] = a[t];
}
