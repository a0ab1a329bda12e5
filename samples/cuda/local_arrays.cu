// local_arrays.cu - per-thread arrays indexed dynamically (forces .local memory) (gpudiv sample corpus)
#include <cuda_runtime.h>

#define LBINS 16
#define WIN 9

// Per-thread private histogram of 16 bins in a local array, then merged with atomics.
// expect: element loop (k < per_thread) uniform; merge loop uniform (constant); (cnt[b] != 0) divergent
extern "C" __global__ void local_histogram(const unsigned int *data, int per_thread, unsigned int *bins)
{
    unsigned int cnt[LBINS];
    for (int b = 0; b < LBINS; ++b) cnt[b] = 0;
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * per_thread;
    for (int k = 0; k < per_thread; ++k) {
        unsigned int v = data[base + k];
        cnt[v & (LBINS - 1)]++;
    }
    for (int b = 0; b < LBINS; ++b) {
        if (cnt[b] != 0) atomicAdd(&bins[b], cnt[b]);
    }
}

// Median of a 9-wide window via insertion sort in a local array.
// expect: bounds divergent; insertion-sort inner while loop divergent (data-dependent)
extern "C" __global__ void median9(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < WIN / 2 || i >= n - WIN / 2) return;
    float w[WIN];
    for (int k = 0; k < WIN; ++k) w[k] = in[i - WIN / 2 + k];
    for (int a = 1; a < WIN; ++a) {
        float key = w[a];
        int j = a - 1;
        while (j >= 0 && w[j] > key) {
            w[j + 1] = w[j];
            --j;
        }
        w[j + 1] = key;
    }
    out[i] = w[WIN / 2];
}

// Per-thread lookup table built in a local array and indexed by data.
// expect: bounds divergent; table-fill loop uniform
extern "C" __global__ void local_lut(const int *idx, const int *seed, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int lut[32];
    int s = seed[i];
    for (int k = 0; k < 32; ++k) {
        s = s * 1103515245 + 12345;
        lut[k] = s;
    }
    out[i] = lut[idx[i] & 31];
}
