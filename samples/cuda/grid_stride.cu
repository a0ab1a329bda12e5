// grid_stride.cu - grid-stride loop kernels (gpudiv sample corpus)
#include <cuda_runtime.h>

// Fills out[i] = value for all i < n using a grid-stride loop.
// expect: grid-stride loop exit test divergent (start index depends on tid)
extern "C" __global__ void gs_fill(float *out, float value, int n)
{
    int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = value;
    }
}

// Grid-stride saxpy over 64-bit sizes.
// expect: grid-stride loop exit test divergent
extern "C" __global__ void gs_saxpy(long long n, float a, const float *x, float *y)
{
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = a * x[i] + y[i];
    }
}

// Counts elements equal to key with a grid-stride loop and one atomic per thread.
// expect: grid-stride loop divergent; equality test divergent (data); final guard (local != 0) divergent
extern "C" __global__ void gs_count_equal(const int *data, int n, int key, unsigned int *count)
{
    unsigned int local = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        if (data[i] == key) local++;
    }
    if (local != 0) atomicAdd(count, local);
}
