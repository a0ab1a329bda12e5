// deadlock_locks.cu - MIMD-style synchronisation that can hang under SIMT reconvergence
// (gpudiv sample corpus; ElTantawy & Aamodt, MICRO 2016). `gpudiv deadlock` reports the
// loops marked "may deadlock" below; see the README, "SIMT deadlocks".
#include <cuda_runtime.h>

// Fig. 1: the MIMD spin lock. The lane whose atomicCAS wins leaves the loop and waits at
// the loop's reconvergence point for the others, which spin: the release is never run.
// expect: spin loop may deadlock; safe reconvergence point after atomicExch
extern "C" __global__ void spin_lock_fig1(int *mutex, int *a)
{
    while (atomicCAS(mutex, 0, 1) != 0) {
    }
    a[1] = a[1] + 1;
    __threadfence();
    atomicExch(mutex, 0);
}

// Fig. 3: the SIMT-safe lock: acquire and release in the same iteration. The paper warns
// that an optimising compiler may turn it back into Fig. 1 (jump threading).
// expect: done loop safe (the release is inside the loop body)
extern "C" __global__ void safe_lock_fig3(int *mutex, int *a)
{
    bool done = false;
    while (!done) {
        if (atomicCAS(mutex, 0, 1) == 0) {
            a[1] = a[1] + 1;
            __threadfence();
            atomicExch(mutex, 0);
            done = true;
        }
    }
}

// Ready flags in a chain (the BarnesHut sort kernel's shape): thread k waits until cell
// k is ready, then makes cell k + 1 ready. The flag a lane waits for is set by a lane of
// its own warp after that lane left the wait loop: a hang under stack reconvergence.
// expect: wait loop may deadlock; safe reconvergence point after the outer loop
extern "C" __global__ void ready_flags(volatile int *ready, int *out, int n)
{
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        while (ready[k] == 0) {
        }
        out[k] = k;
        __threadfence();
        ready[k + 1] = 1;
    }
}

// Two locks taken in order (ATM, CP-DS): both spin loops may hang.
// expect: both spin loops may deadlock; safe reconvergence point after the last release
extern "C" __global__ void two_locks(int *lock1, int *lock2, int *a)
{
    while (atomicCAS(lock1, 0, 1) != 0) {
    }
    while (atomicCAS(lock2, 0, 1) != 0) {
    }
    a[0] = a[0] + 1;
    __threadfence();
    atomicExch(lock2, 0);
    atomicExch(lock1, 0);
}

// A loop that the whole warp leaves together (__all_sync; the BarnesHut force kernel's
// false positive in the paper): no lane waits for another at its exit.
// expect: loop safe (uniform exit)
extern "C" __global__ void all_controlled(volatile int *flag, int *out)
{
    int i = 0;
    do {
        i++;
    } while (!__all_sync(0xffffffffu, *flag < i));
    out[threadIdx.x] = i;
    *flag = 0;
}
