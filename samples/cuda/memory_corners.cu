// memory_corners.cu - kernels real programs have that are awkward to run (gpudiv sample corpus)
#include <cuda_runtime.h>

__device__ int g_table[1024];
__device__ unsigned int g_hits;

// No parameters at all: the kernel works on a __device__ array.
// expect: tid parity test divergent
extern "C" __global__ void no_params_fill()
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 1024) {
        if (threadIdx.x & 1)
            g_table[i] = i * 3;
        else
            g_table[i] = -i;
    }
}

// No parameters, a uniform loop and an atomic on a __device__ counter.
// expect: loop uniform; lane test divergent
extern "C" __global__ void no_params_count()
{
    for (int k = 0; k < 4; k++) {
        if (threadIdx.x % 4 == k)
            atomicAdd(&g_hits, 1u);
    }
}

// A generic pointer to one of two shared arrays (cvta.shared of the symbols' addresses).
// expect: selection of the array divergent; loads through the pointer divergent
extern "C" __global__ void shared_pointer_select(const int *in, int *out)
{
    __shared__ int evens[128];
    __shared__ int odds[128];
    int t = threadIdx.x;
    evens[t % 128] = in[t] * 2;
    odds[t % 128] = in[t] * 2 + 1;
    __syncthreads();
    volatile int *p = (t & 1) ? odds : evens;
    out[blockIdx.x * blockDim.x + t] = p[(t + 1) % 128];
}

// A shared array addressed through a 32-bit shared-window pointer kept in a register.
// expect: neighbour index divergent
extern "C" __global__ void shared_symbol_offset(const float *in, float *out, int shift)
{
    __shared__ float buf[256];
    int t = threadIdx.x;
    buf[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    float *base = buf + shift % 32;
    out[blockIdx.x * blockDim.x + t] = base[(t + 1) % blockDim.x % 200];
}

// Integer division and remainder by values read from memory (zero included).
// expect: quotient divergent
extern "C" __global__ void divide_by_data(const int *a, const int *b, int *q, unsigned *r, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        q[i] = a[i] / b[i];
        r[i] = (unsigned)a[i] % (unsigned)b[i];
    }
}

// Each block owns a 16384-element slice of the output: buffers must grow with blockIdx.
// expect: loop uniform
extern "C" __global__ void block_slices(float *out, int per_thread)
{
    size_t base = (size_t)blockIdx.x * 16384 + (size_t)blockIdx.y * 65536;
    for (int k = 0; k < per_thread; k++)
        out[base + (size_t)k * blockDim.x + threadIdx.x] = (float)k;
}
