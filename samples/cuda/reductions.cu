// reductions.cu - shared-memory tree reductions (gpudiv sample corpus)
#include <cuda_runtime.h>
#include <climits>

#define RED_BLOCK 256

// Block-wise sum in shared memory; block result written by thread 0.
// expect: load guard divergent; tree loop (s halves, uniform) uniform; (tid < s) divergent; (tid == 0) divergent
extern "C" __global__ void reduce_sum_tree(const float *in, float *block_sums, int n)
{
    __shared__ float sdata[RED_BLOCK];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) block_sums[blockIdx.x] = sdata[0];
}

// Block-wise max with interleaved addressing (modulo test is divergent).
// expect: stride loop uniform; (tid % (2*s) == 0) divergent
extern "C" __global__ void reduce_max_interleaved(const int *in, int *block_max, int n)
{
    __shared__ int smax[RED_BLOCK];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    smax[tid] = (i < n) ? in[i] : INT_MIN;
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) {
            smax[tid] = max(smax[tid], smax[tid + s]);
        }
        __syncthreads();
    }
    if (tid == 0) block_max[blockIdx.x] = smax[0];
}

// Dot product: per-thread grid-stride partials, shared tree reduce, one atomicAdd per block.
// expect: grid-stride loop divergent; tree loop uniform; (tid < s) divergent; (tid == 0) divergent
extern "C" __global__ void dot_product(const float *a, const float *b, float *result, int n)
{
    __shared__ float cache[RED_BLOCK];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        acc += a[i] * b[i];
    }
    cache[threadIdx.x] = acc;
    __syncthreads();
    for (int s = RED_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) cache[threadIdx.x] += cache[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(result, cache[0]);
}

// Block-wide votes: __syncthreads_count/_and/_or (bar.red) give every thread of the block
// the same value, so a test of that value is uniform.
// expect: (any_negative) uniform; (threadIdx.x == 0) divergent
extern "C" __global__ void block_vote_counts(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = (i < n) ? in[i] : 0;
    int positives = __syncthreads_count(v > 0);
    int all_nonzero = __syncthreads_and(v != 0);
    int any_negative = __syncthreads_or(v < 0);
    if (any_negative) {
        positives = -positives;
    }
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = positives;
        out[3 * blockIdx.x + 1] = all_nonzero;
        out[3 * blockIdx.x + 2] = any_negative;
    }
}
