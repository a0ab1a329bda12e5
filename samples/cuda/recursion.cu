// Recursive device functions: inlining stops at a recursive call, so the interpreter runs
// these kernels with their calls run as calls (issue 16, item 1).

// Divergent recursion: each thread recurses to its own depth.
__device__ __noinline__ int fib(int n) {
    if (n < 2)
        return n;
    return fib(n - 1) + fib(n - 2);
}

// Each activation keeps a small array in its own stack frame and passes its address to
// the next: a frame must not be shared between activations.
__device__ __noinline__ int frames(int depth, const int *parent) {
    int mine[4];
    for (int i = 0; i < 4; ++i)
        mine[i] = (parent ? parent[(i + depth) & 3] : i) + depth;
    if (depth == 0)
        return mine[0] * 7 + mine[3];
    return frames(depth - 1, mine) + mine[1];
}

// Euclid's algorithm as a tail call: nvcc -O3 turns it into a loop, -G keeps the recursion.
// The step counter lives in the kernel's frame and is updated through a pointer.
__device__ __noinline__ unsigned gcd_steps(unsigned a, unsigned b, unsigned *steps) {
    if (b == 0)
        return a;
    *steps += 1;
    return gcd_steps(b, a % b, steps);
}

// expect: the recursion depth depends on threadIdx.x: divergent
extern "C" __global__ void fib_per_thread(int *out) {
    int t = threadIdx.x;
    out[t] = fib(t % 12);
}

// expect: the depth is a kernel parameter: uniform recursion
extern "C" __global__ void frames_uniform(int *out, int depth) {
    out[threadIdx.x] = frames(depth, nullptr) + threadIdx.x;
}

// expect: gcd of data-dependent operands: divergent
extern "C" __global__ void gcd_table(const unsigned *a, const unsigned *b, unsigned *g,
                                     unsigned *steps) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned s = 0;
    g[t] = gcd_steps(a[t], b[t], &s);
    steps[t] = s;
}
