// atomics_histogram.cu - histograms and assorted atomics (gpudiv sample corpus)
#include <cuda_runtime.h>

#define NBINS 64

// Histogram of bytes into NBINS bins with block-private shared bins.
// expect: bin-clear loop (stride blockDim) divergent; grid-stride loop divergent; merge loop divergent; (c != 0) divergent
extern "C" __global__ void histogram_shared(const unsigned char *data, int n, unsigned int *bins)
{
    __shared__ unsigned int local_bins[NBINS];
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) local_bins[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        atomicAdd(&local_bins[data[i] % NBINS], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) {
        unsigned int c = local_bins[b];
        if (c != 0) atomicAdd(&bins[b], c);
    }
}

// Global-memory histogram of ints into nbins bins; out-of-range values skipped.
// expect: bounds check divergent; range test (v >= 0 && v < nbins) divergent
extern "C" __global__ void histogram_global(const int *vals, int n, int nbins, int *bins)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = vals[i];
        if (v >= 0 && v < nbins) atomicAdd(&bins[v], 1);
    }
}

// Global min / max of an int array via atomicMin / atomicMax.
// expect: early return divergent
extern "C" __global__ void minmax_atomic(const int *vals, int n, int *out_min, int *out_max)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicMin(out_min, vals[i]);
    atomicMax(out_max, vals[i]);
}

// Ring-buffer slot allocation with atomicInc (wraps at cap-1) and atomicExch to publish.
// expect: bounds check divergent
extern "C" __global__ void ring_push(const int *items, int n, int *ring, unsigned int *head, unsigned int cap, int *last_item)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int slot = atomicInc(head, cap - 1);
        ring[slot] = items[i];
        atomicExch(last_item, items[i]);
    }
}

// Helper: float atomic max implemented with an atomicCAS retry loop (early break on data).
__device__ float atomic_max_float(float *addr, float val)
{
    int *iaddr = (int *)addr;
    int old = *iaddr;
    int assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= val) break;
        old = atomicCAS(iaddr, assumed, __float_as_int(val));
    } while (assumed != old);
    return __int_as_float(old);
}

// Global float maximum via the CAS-based helper above.
// expect: bounds check divergent; CAS retry loop and its data-dependent break divergent
extern "C" __global__ void max_float_cas(const float *vals, int n, float *result)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomic_max_float(result, vals[i]);
}
