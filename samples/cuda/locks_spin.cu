// locks_spin.cu - spin locks and flag waits (gpudiv sample corpus)
#include <cuda_runtime.h>

// One thread per block acquires a global spin lock (atomicCAS), updates a shared
// counter pair, and releases it (atomicExch).
// expect: (threadIdx.x == 0) divergent; spin loop (while atomicCAS != 0) divergent
extern "C" __global__ void lock_block_counter(int *lock, int *counter, int *last_block)
{
    if (threadIdx.x == 0) {
        while (atomicCAS(lock, 0, 1) != 0) {
        }
        __threadfence();
        *counter = *counter + 1;
        *last_block = blockIdx.x;
        __threadfence();
        atomicExch(lock, 0);
    }
}

// Per-bucket fine-grained locks: each thread locks bucket (key % nbuckets),
// using the warp-safe pattern (loop until done, lock attempt inside).
// expect: bounds divergent; done-loop divergent; CAS-success test divergent
extern "C" __global__ void bucket_lock_accumulate(const int *keys, const float *vals, int n,
                                                  int *locks, float *sums, int *counts, int nbuckets)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int b = keys[i] % nbuckets;
    bool done = false;
    while (!done) {
        if (atomicCAS(&locks[b], 0, 1) == 0) {
            sums[b] += vals[i];
            counts[b] += 1;
            __threadfence();
            atomicExch(&locks[b], 0);
            done = true;
        }
    }
}

// Last-block-done pattern: each block writes a partial, the last block to arrive
// (detected via atomicInc on a ticket) sums all partials.
// expect: (threadIdx.x == 0) divergent; (is_last) block-uniform at run time (shared broadcast), but a
// conservative analysis will call a shared-memory load divergent; sum loop divergent (starts at tid)
extern "C" __global__ void last_block_sum(const float *partials_in, float *partials, unsigned int *ticket, float *total)
{
    __shared__ bool is_last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = partials_in[blockIdx.x];
        __threadfence();
        unsigned int t = atomicInc(ticket, gridDim.x);
        is_last = (t == gridDim.x - 1);
    }
    __syncthreads();
    if (is_last) {
        float s = 0.0f;
        for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x) s += partials[b];
        atomicAdd(total, s);
    }
}

// Consumer waits on a volatile flag set by a producer block (spin with data-dependent exit).
// expect: (blockIdx.x == 0) uniform (block-uniform); (threadIdx.x == 0) divergent; spin loop on flag divergent
extern "C" __global__ void flag_handoff(volatile int *flag, int *payload, int *out)
{
    if (blockIdx.x == 0) {
        if (threadIdx.x == 0) {
            payload[0] = 42;
            __threadfence();
            *flag = 1;
        }
    } else {
        if (threadIdx.x == 0) {
            while (*flag == 0) {
            }
            out[blockIdx.x] = payload[0];
        }
    }
}
