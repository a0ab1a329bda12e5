// deadlock_cases.cu - more golden cases of ElTantawy & Aamodt (MICRO 2016) as CUDA
// (gpudiv sample corpus; README "SIMT deadlocks"): per-thread locks (T6), warp-synchronous
// tag-and-retry (T8) and a barrier in divergent code (T9). None of them hangs under SIMT
// reconvergence; the first two are conservative (false) detections of Algorithm 1, the
// third is outside its assumptions and reported as a divergent barrier.
#include <cuda_runtime.h>

// T6: every thread takes its own lock (locks[thread % 256], the thread's index in the
// block): no two lanes of a warp contend, so nothing hangs, but the lock's address
// depends on the lane and the release may alias another lane's lock.
// expect: lock loop may deadlock (conservative); finishes under ipdom
extern "C" __global__ void per_thread_locks(int *out)
{
    __shared__ int locks[256];
    __shared__ int value[256];
    __shared__ int total;
    int k = ((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) % 256;
    locks[k] = 0;
    value[k] = 0;
    if (k == 0) total = 0;
    __syncthreads();
    while (atomicCAS(&locks[k], 0, 1) != 0) {
    }
    value[k] = value[k] + 1;
    __threadfence_block();
    atomicExch(&locks[k], 0);
    __syncthreads();
    atomicAdd(&total, value[k]);
    __syncthreads();
    if (k == 0) out[blockIdx.x] = total;
}

// T8: the histogram256 idiom of old CUDA SDKs: a lane tags the count it writes with its
// lane id and retries until its own write survived (lanes of a warp that hit the same bin
// in lockstep: one wins per round). The retry loop sits in a grid-stride loop, so the
// store of a later iteration is reachable from its exit: detected (the paper's false
// detection); it relies on lockstep execution, which `--assume-safe tag_retry` vouches for.
// expect: retry loop may deadlock (false); finishes under ipdom
extern "C" __global__ void tag_retry(const int *data, int *out, int n)
{
    __shared__ volatile unsigned hist[64];
    if (threadIdx.x < 64) hist[threadIdx.x] = 0;
    __syncthreads();
    unsigned lane = ((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) & 31u;
    unsigned tag = lane << 27;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        unsigned bin = (unsigned)data[i] & 63u;
        unsigned count;
        do {
            count = hist[bin] & 0x07FFFFFFu;
            count = tag | (count + 1);
            hist[bin] = count;
        } while (hist[bin] != count);
    }
    __syncthreads();
    if (threadIdx.x < 64) atomicAdd(&out[threadIdx.x], (int)(hist[threadIdx.x] & 0x07FFFFFFu));
}

// T9: a barrier on each side of a divergent branch. Outside Algorithm 1's assumptions
// (barrier-divergence freedom); reported as gpudiv-divergent-barrier. The SIMT stack
// stops at the first barrier; AWARE (`--reconvergence aware`) counts arrivals per lane.
// expect: divergent barriers; stops under ipdom
extern "C" __global__ void divergent_barrier(int *out)
{
    __shared__ int a[64];
    int t = threadIdx.x;
    if (t & 1) {
        a[t & 63] = t;
        __syncthreads();
        out[blockIdx.x * blockDim.x + t] = a[(t + 1) & 63];
    } else {
        a[t & 63] = -t;
        __syncthreads();
        out[blockIdx.x * blockDim.x + t] = 2 * a[(t + 3) & 63];
    }
}
