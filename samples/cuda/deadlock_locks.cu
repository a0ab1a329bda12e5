// deadlock_locks.cu - MIMD-style synchronisation that can hang under SIMT reconvergence
// (gpudiv sample corpus; ElTantawy & Aamodt, MICRO 2016). `gpudiv deadlock` reports the
// loops marked "may deadlock" below; see the README, "SIMT deadlocks".
// Locks and flags live in shared memory, set by thread 0 before a barrier, so every
// launch starts with free locks: the kernels that hang do so because of the warp's
// reconvergence, not because of what memory held.
#include <cuda_runtime.h>

// Fig. 1: the MIMD spin lock. The lane whose atomicCAS wins leaves the loop and waits at
// the loop's reconvergence point for the others, which spin: the release is never run.
// expect: spin loop may deadlock; safe reconvergence point after atomicExch
extern "C" __global__ void spin_lock_fig1(int *out)
{
    __shared__ int mutex, count;
    if (threadIdx.x == 0) {
        mutex = 0;
        count = 0;
    }
    __syncthreads();
    while (atomicCAS(&mutex, 0, 1) != 0) {
    }
    count = count + 1;
    __threadfence_block();
    atomicExch(&mutex, 0);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = count;
}

// Fig. 3: the SIMT-safe lock: acquire and release in the same iteration. The paper warns
// that an optimising compiler may turn it back into Fig. 1 (jump threading); nvcc 13 -O3
// keeps its shape here.
// expect: done loop safe (the release is inside the loop body)
extern "C" __global__ void safe_lock_fig3(int *out)
{
    __shared__ int mutex, count;
    if (threadIdx.x == 0) {
        mutex = 0;
        count = 0;
    }
    __syncthreads();
    bool done = false;
    while (!done) {
        if (atomicCAS(&mutex, 0, 1) == 0) {
            count = count + 1;
            __threadfence_block();
            atomicExch(&mutex, 0);
            done = true;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = count;
}

// Ready flags in a chain (the BarnesHut sort kernel's shape): the thread of cell k waits
// until cell k is ready, then makes cell k + 1 ready. A lane waits for a lane of its own
// warp that left the wait loop before it: a hang under stack reconvergence.
// expect: wait loop may deadlock; safe reconvergence point after the outer loop
extern "C" __global__ void ready_flags(int *out)
{
    __shared__ volatile int ready[129];
    for (int i = threadIdx.x; i <= 128; i += blockDim.x) ready[i] = (i == 0);
    __syncthreads();
    for (int k = threadIdx.x; k < 128; k += blockDim.x) {
        while (ready[k] == 0) {
        }
        out[k] = k;
        ready[k + 1] = 1;
    }
}

// Two locks taken in order (ATM, CP-DS): both spin loops may hang.
// expect: both spin loops may deadlock; safe reconvergence point after the last release
extern "C" __global__ void two_locks(int *out)
{
    __shared__ int lock1, lock2, count;
    if (threadIdx.x == 0) {
        lock1 = 0;
        lock2 = 0;
        count = 0;
    }
    __syncthreads();
    while (atomicCAS(&lock1, 0, 1) != 0) {
    }
    while (atomicCAS(&lock2, 0, 1) != 0) {
    }
    count = count + 1;
    __threadfence_block();
    atomicExch(&lock2, 0);
    atomicExch(&lock1, 0);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = count;
}

// A loop that the whole warp leaves together (__all_sync; the BarnesHut force kernel's
// false positive in the paper): no lane waits for another at its exit.
// expect: loop safe (uniform exit)
extern "C" __global__ void all_controlled(int *out)
{
    __shared__ volatile int flag;
    if (threadIdx.x == 0) flag = 3;
    __syncthreads();
    int i = 0;
    do {
        i++;
    } while (!__all_sync(__activemask(), flag < i));
    out[blockIdx.x * blockDim.x + threadIdx.x] = i;
}
