// many_calls.cu - many __device__ functions called from many places (gpudiv sample corpus)
// A -G build keeps every call as a `call` to a `.func`; the front end inlines each call
// site, so the kernels here grow with the number of call sites (issue 16, item 1). The
// same helpers are called with uniform arguments (kernel parameters, blockIdx) and with
// divergent ones (threadIdx, loaded data), from loops, from divergent branches and from
// other helpers, so that a per-call-site analysis must tell the contexts apart.
#include <cuda_runtime.h>

// Clamp into [lo, hi]: two branches on the arguments.
__device__ __noinline__ int clampi(int v, int lo, int hi)
{
    if (v < lo) return lo;
    if (v > hi) return hi;
    return v;
}

// Integer power by squaring: the loop runs once per bit of the exponent.
__device__ __noinline__ int ipow(int base, int e)
{
    int r = 1;
    while (e > 0) {
        if (e & 1) r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}

// Mix two values (no branch): uniform when both arguments are.
__device__ __noinline__ int mix(int a, int b)
{
    return (a * 31) ^ (b + 7);
}

// Triangular number by a loop whose trip count is the argument (at most 64 trips).
__device__ __noinline__ int tri(int n)
{
    int s = 0;
    for (int k = 0; k < (n & 63); ++k) s += k;
    return s;
}

// The lane's own index: always divergent, whatever the caller passes.
__device__ __noinline__ int lane_offset(int base)
{
    return base + (threadIdx.x & 31);
}

// Select by a flag: divergent exactly when the flag or the chosen value is.
__device__ __noinline__ int pick(int flag, int a, int b)
{
    if (flag & 1) return a;
    return b;
}

// Calls other helpers: clamp then mix.
__device__ __noinline__ int clamp_mix(int v, int n)
{
    int c = clampi(v, 0, n - 1);
    return mix(c, n);
}

// Calls other helpers in a loop: a sum of powers.
__device__ __noinline__ int power_sum(int base, int terms)
{
    int s = 0;
    for (int k = 0; k < (terms & 7); ++k) s += ipow(base, k);
    return s;
}

// Reads memory at an index given by the caller.
__device__ __noinline__ int load_at(const int *p, int i, int n)
{
    return p[clampi(i, 0, n - 1)];
}

// Greatest common divisor: a data-dependent loop (bounded by 32 trips).
__device__ __noinline__ int gcd_bounded(int a, int b)
{
    a = a < 0 ? -a : a;
    b = b < 0 ? -b : b;
    for (int k = 0; k < 32 && b != 0; ++k) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

// Uniform arguments everywhere: every helper is called with kernel parameters and
// blockIdx only, then the results are stored by one lane.
// expect: every call result uniform; only the lane test divergent
extern "C" __global__ void calls_uniform(int *out, int n, int e, int s)
{
    int b = blockIdx.x;
    int a0 = clampi(s, 0, n);
    int a1 = ipow(e, 3);
    int a2 = mix(a0, a1);
    int a3 = tri(n);
    int a4 = pick(s, a2, a3);
    int a5 = clamp_mix(b, n);
    int a6 = power_sum(e, s);
    int a7 = gcd_bounded(n, e);
    int a8 = mix(a4, a5) + mix(a6, a7);
    int a9 = clampi(a8, 0, 1000) + ipow(a7, 2) + tri(a6);
    if (threadIdx.x == 0) out[b] = a9 + pick(e, a3, a1);
}

// Divergent arguments: the same helpers called with threadIdx and loaded data.
// expect: bounds divergent; results depending on i or loaded values divergent
extern "C" __global__ void calls_divergent(const int *in, int *out, int n, int e)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = load_at(in, i, n);
    int c0 = clampi(v, 0, 255);
    int c1 = ipow(v & 3, e);
    int c2 = mix(c0, c1);
    int c3 = tri(i);
    int c4 = pick(i, c2, c3);
    int c5 = clamp_mix(i, n);
    int c6 = power_sum(v, i);
    int c7 = gcd_bounded(v, i + 1);
    int c8 = lane_offset(e);
    out[i] = c4 + c5 + c6 + c7 + c8;
}

// Mixed contexts in one kernel: each helper is called from several places, some with
// uniform arguments, some with divergent ones, inside loops and divergent branches.
// expect: uniform-argument calls uniform; divergent-argument calls divergent
extern "C" __global__ void calls_mixed(const int *in, int *out, int n, int e, int rounds)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int u = clampi(e, 0, 15);
    int acc = 0;
    for (int r = 0; r < (rounds & 3); ++r) {
        int ur = mix(u, r);
        int up = ipow(u, r);
        int ut = tri(ur);
        acc += pick(r, up, ut);
        if (i < n) {
            int v = load_at(in, i + r, n);
            acc += clampi(v, ur, ur + 100);
            acc += ipow(v & 7, r);
            acc += mix(v, up);
            acc += gcd_bounded(v, ut + 1);
        }
        acc += clamp_mix(ur, n);
        acc += power_sum(u, r + 1);
    }
    int w = lane_offset(u);
    int q = pick(w, acc, u);
    int z = clamp_mix(u, n) + tri(u) + gcd_bounded(u, n) + power_sum(u, e);
    if (i < n) out[i] = q + z + clampi(acc, -1000, 1000) + mix(z, e);
}
