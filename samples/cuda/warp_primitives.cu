// warp_primitives.cu - warp shuffles, ballots and active masks (gpudiv sample corpus)
#include <cuda_runtime.h>

#define FULL_MASK 0xffffffffu

// Sums a value across a warp with __shfl_down_sync; lane 0 adds it to *out.
// expect: bounds ternary divergent; shuffle loop (offset 16..1) uniform; (lane == 0) divergent
extern "C" __global__ void warp_sum_shfl_down(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = (i < n) ? in[i] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(FULL_MASK, v, offset);
    }
    int lane = threadIdx.x & 31;
    if (lane == 0) atomicAdd(out, v);
}

// Butterfly max across a warp with __shfl_xor_sync; every lane gets the max.
// expect: butterfly loop uniform; bounds check on store divergent
extern "C" __global__ void warp_max_xor(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = (i < n) ? in[i] : -2147483647;
    for (int mask = 16; mask >= 1; mask /= 2) {
        int other = __shfl_xor_sync(FULL_MASK, v, mask);
        v = max(v, other);
    }
    if (i < n) out[i] = v;
}

// Counts, per warp, how many elements are positive using __ballot_sync + __popc.
// expect: (lane == 0) divergent; everything else straight-line
extern "C" __global__ void warp_ballot_count(const float *in, int *warp_counts, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool pos = (i < n) && (in[i] > 0.0f);
    unsigned int bits = __ballot_sync(FULL_MASK, pos);
    int lane = threadIdx.x & 31;
    if (lane == 0) warp_counts[i >> 5] = __popc(bits);
}

// Warp-aggregated atomic increment: inside a divergent branch the active lanes
// elect a leader with __activemask, leader does one atomicAdd, result broadcast.
// expect: (pred) branch divergent (data); (lane == leader) divergent
extern "C" __global__ void warp_aggregated_append(const int *in, int *out, int *out_count, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = in[i];
    if (x > 0) {
        unsigned int active = __activemask();
        int lane = threadIdx.x & 31;
        int leader = __ffs(active) - 1;
        int rank = __popc(active & ((1u << lane) - 1u));
        int base = 0;
        if (lane == leader) base = atomicAdd(out_count, __popc(active));
        base = __shfl_sync(active, base, leader);
        out[base + rank] = x;
    }
}

// Block reduction: warp shuffles first, then the first warp reduces warp sums.
// expect: (lane == 0) divergent; (warp == 0) thread-id dependent (divergent for a tid-based analysis,
// though warp-uniform in practice for 1-D blocks); shuffle loops uniform
extern "C" __global__ void block_sum_two_level(const float *in, float *out, int n)
{
    __shared__ float warp_sums[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32;
    int warp = threadIdx.x / 32;
    float v = (i < n) ? in[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_MASK, v, o);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int nwarps = (blockDim.x + 31) / 32;
        v = (lane < nwarps) ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_MASK, v, o);
        if (lane == 0) out[blockIdx.x] = v;
    }
}
