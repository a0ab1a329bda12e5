// stack_slots.cu - variables nvcc -G keeps in the local stack frame (gpudiv sample corpus,
// issue 17 item 4): addresses passed to device functions, structs returned by value,
// small arrays. In -G builds these are ld/st at constant offsets from %SP; gpudiv treats
// the slots of a frame whose addresses do not escape as variables.
#include <cuda_runtime.h>

struct Range { int lo; int hi; };

__device__ __noinline__ void chunk_bounds(int n, int part, int parts, int *lo, int *hi)
{
    *lo = n * part / parts;
    *hi = n * (part + 1) / parts;
}

__device__ __noinline__ Range make_range(int lo, int hi)
{
    Range r;
    r.lo = lo;
    r.hi = hi;
    return r;
}

__device__ __noinline__ void set_if(bool flag, int value, int *out)
{
    if (flag)
        *out = value;
}

// Each block sums its chunk of the input; the chunk bounds come back through pointers.
// expect: the chunk-size test on hi - lo is uniform (lo, hi depend on blockIdx.x only);
// the strided loop over the chunk is divergent (it starts at lo + threadIdx.x).
extern "C" __global__ void chunk_sum(const int *in, int *out, int n, int parts)
{
    int lo, hi;
    chunk_bounds(n, blockIdx.x, parts, &lo, &hi);
    int s = 0;
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x)
        s += in[i];
    if (hi - lo > 64)
        out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// A struct returned by value and a small array read at a constant index.
// expect: the loop over the range and the test on c[2] are uniform; c[k & 3] is a read
// at a variable offset (it stays divergent, which is sound but not precise).
extern "C" __global__ void range_loop(int *out, int n)
{
    Range r = make_range(0, n);
    int c[4] = {n, n + 1, n + 2, n + 3};
    int s = 0;
    for (int k = r.lo; k < r.hi; ++k)
        s += c[k & 3];
    if (c[2] > 5)
        out[threadIdx.x] = s;
}

// A slot written only by some lanes: after the call it differs between lanes.
// expect: the test on v is divergent (set_if writes v only where threadIdx.x < 5).
extern "C" __global__ void partial_write(int *out, int k)
{
    int v = 0;
    set_if(threadIdx.x < 5, k, &v);
    if (v > 0)
        out[threadIdx.x] = v;
}

// A slot written at a thread-dependent offset: every slot of that array may differ.
// expect: the test on a[0] is divergent (lane 0 of each group of 4 wrote it).
extern "C" __global__ void scattered_write(int *out, int k)
{
    int a[4] = {k, k, k, k};
    a[threadIdx.x & 3] = (int)threadIdx.x;
    if (a[0] > 2)
        out[threadIdx.x] = a[1];
}

// A counter updated through a pointer in a loop whose trip count depends on the thread.
// expect: the loop exit is divergent, and so is the test on the counter after it.
__device__ __noinline__ void bump(int *count) { *count += 1; }

extern "C" __global__ void counted_loop(int *out, int n)
{
    int count = 0;
    for (int i = 0; i < (int)threadIdx.x % 7 + n; ++i)
        bump(&count);
    if (count > 3)
        out[threadIdx.x] = count;
}
