// sorting.cu - bitonic sort and odd-even transposition in shared memory (gpudiv sample corpus)
#include <cuda_runtime.h>

#define SORT_N 1024

// Sorts SORT_N keys per block with a bitonic network (blockDim.x == SORT_N assumed).
// expect: k / j loops uniform; partner test (ixj > tid) divergent; direction test divergent
extern "C" __global__ void bitonic_sort_block(int *keys)
{
    __shared__ int s[SORT_N];
    unsigned int tid = threadIdx.x;
    s[tid] = keys[blockIdx.x * SORT_N + tid];
    __syncthreads();
    for (unsigned int k = 2; k <= SORT_N; k <<= 1) {
        for (unsigned int j = k >> 1; j > 0; j >>= 1) {
            unsigned int ixj = tid ^ j;
            if (ixj > tid) {
                bool ascending = (tid & k) == 0;
                int a = s[tid], b = s[ixj];
                if ((a > b) == ascending) {
                    s[tid] = b;
                    s[ixj] = a;
                }
            }
            __syncthreads();
        }
    }
    keys[blockIdx.x * SORT_N + tid] = s[tid];
}

// Odd-even transposition sort of blockDim.x elements (uniform phase loop).
// expect: phase loop uniform (blockDim.x); pair-start test divergent; swap test divergent
extern "C" __global__ void odd_even_sort_block(float *vals)
{
    __shared__ float s[SORT_N];
    int t = threadIdx.x;
    int nloc = blockDim.x;
    s[t] = vals[blockIdx.x * nloc + t];
    __syncthreads();
    for (int phase = 0; phase < nloc; ++phase) {
        int first = phase & 1;
        if ((t & 1) == first && t + 1 < nloc) {
            float a = s[t], b = s[t + 1];
            if (a > b) {
                s[t] = b;
                s[t + 1] = a;
            }
        }
        __syncthreads();
    }
    vals[blockIdx.x * nloc + t] = s[t];
}
