// scan.cu - prefix sums (gpudiv sample corpus)
#include <cuda_runtime.h>

#define SCAN_BLOCK 512

// Inclusive Hillis-Steele scan of one block (double-buffered shared memory).
// expect: offset loop uniform; (tid >= offset) divergent; bounds divergent
extern "C" __global__ void scan_hillis_steele(const int *in, int *out, int n)
{
    __shared__ int buf[2][SCAN_BLOCK];
    int tid = threadIdx.x;
    int g = blockIdx.x * blockDim.x + tid;
    int pout = 0, pin = 1;
    buf[pout][tid] = (g < n) ? in[g] : 0;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset *= 2) {
        pout = 1 - pout;
        pin = 1 - pout;
        if (tid >= offset)
            buf[pout][tid] = buf[pin][tid] + buf[pin][tid - offset];
        else
            buf[pout][tid] = buf[pin][tid];
        __syncthreads();
    }
    if (g < n) out[g] = buf[pout][tid];
}

// Exclusive Blelloch (work-efficient) scan of 2*blockDim elements per block.
// expect: up-sweep / down-sweep loops uniform; (tid < d) divergent; (tid == 0) divergent
extern "C" __global__ void scan_blelloch(const float *in, float *out, float *block_totals, int n)
{
    __shared__ float temp[2 * SCAN_BLOCK];
    int tid = threadIdx.x;
    int m = 2 * blockDim.x;
    int base = blockIdx.x * m;
    temp[2 * tid] = (base + 2 * tid < n) ? in[base + 2 * tid] : 0.0f;
    temp[2 * tid + 1] = (base + 2 * tid + 1 < n) ? in[base + 2 * tid + 1] : 0.0f;
    int offset = 1;
    for (int d = m >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (tid < d) {
            int ai = offset * (2 * tid + 1) - 1;
            int bi = offset * (2 * tid + 2) - 1;
            temp[bi] += temp[ai];
        }
        offset *= 2;
    }
    if (tid == 0) {
        if (block_totals) block_totals[blockIdx.x] = temp[m - 1];
        temp[m - 1] = 0.0f;
    }
    for (int d = 1; d < m; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (tid < d) {
            int ai = offset * (2 * tid + 1) - 1;
            int bi = offset * (2 * tid + 2) - 1;
            float t = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += t;
        }
    }
    __syncthreads();
    if (base + 2 * tid < n) out[base + 2 * tid] = temp[2 * tid];
    if (base + 2 * tid + 1 < n) out[base + 2 * tid + 1] = temp[2 * tid + 1];
}

// Adds per-block offsets (scanned block totals) to each element.
// expect: (blockIdx.x == 0) uniform early return; bounds divergent
extern "C" __global__ void scan_add_offsets(float *data, const float *scanned_totals, int n)
{
    if (blockIdx.x == 0) return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float add = scanned_totals[blockIdx.x];
    if (i < n) data[i] += add;
}

// Warp-level inclusive scan with __shfl_up_sync.
// expect: shuffle loop uniform; (lane >= d) divergent; bounds divergent
extern "C" __global__ void scan_warp_shfl(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = (i < n) ? in[i] : 0;
    for (int d = 1; d < 32; d <<= 1) {
        int up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += up;
    }
    if (i < n) out[i] = v;
}
