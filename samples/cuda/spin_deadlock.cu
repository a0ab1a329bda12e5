// spin_deadlock.cu - a spin lock that deadlocks under SIMT reconvergence (gpudiv sample corpus)
#include <cuda_runtime.h>

// A spin lock written as for CPU threads. Under stack-based reconvergence at the
// immediate post-dominator (GPUs before Volta) the thread that takes the lock leaves the
// loop and waits for the others to reconverge at its exit, so it never releases the lock:
// a SIMT deadlock. With independent thread scheduling (gpudiv --reconvergence mimd) it
// finishes.
// expect: spin loop divergent
extern "C" __global__ void naive_lock_sum(int *lock, volatile int *sum)
{
    while (atomicCAS(lock, 0, 1) != 0) {
    }
    *sum = *sum + (int)threadIdx.x;
    __threadfence();
    atomicExch(lock, 0);
}

// The same lock rewritten so that the holder's critical section and release come
// before the lanes reconverge: it finishes under every policy, with the same memory.
// expect: done loop divergent; acquire test divergent
extern "C" __global__ void safe_lock_sum(int *lock, volatile int *sum)
{
    bool done = false;
    while (!done) {
        if (atomicCAS(lock, 0, 1) == 0) {
            *sum = *sum + (int)threadIdx.x;
            __threadfence();
            atomicExch(lock, 0);
            done = true;
        }
    }
}
