// control_flow.cu - switches, breaks, thread-dependent loops, uniform-only code (gpudiv sample corpus)
#include <cuda_runtime.h>

// Applies an operation selected per element by an opcode array (switch on data).
// expect: bounds divergent; switch on ops[i] divergent
extern "C" __global__ void switch_per_element(const int *ops, const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float r;
    switch (ops[i]) {
    case 0: r = a[i] + b[i]; break;
    case 1: r = a[i] - b[i]; break;
    case 2: r = a[i] * b[i]; break;
    case 3: r = (b[i] != 0.0f) ? a[i] / b[i] : 0.0f; break;
    default: r = 0.0f; break;
    }
    c[i] = r;
}

// Applies an operation selected by a kernel parameter (switch on a uniform value).
// expect: switch on mode uniform; bounds divergent
extern "C" __global__ void switch_uniform_mode(int mode, const float *a, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i];
        switch (mode) {
        case 0: c[i] = x; break;
        case 1: c[i] = -x; break;
        case 2: c[i] = x * x; break;
        case 3: c[i] = fabsf(x); break;
        default: c[i] = 0.0f; break;
        }
    }
}

// Linear search in each row for the first negative value (data-dependent break).
// expect: row guard divergent; column loop exit divergent because of data-dependent break
extern "C" __global__ void find_first_negative(const float *m, int rows, int cols, int *first)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    int found = -1;
    for (int c = 0; c < cols; ++c) {
        if (m[r * cols + c] < 0.0f) {
            found = c;
            break;
        }
    }
    first[r] = found;
}

// Thread t sums its first (t+1) elements of a row: trip count depends on threadIdx.
// expect: loop (k <= threadIdx.x) divergent
extern "C" __global__ void triangular_prefix(const float *in, float *out, int width)
{
    int t = threadIdx.x;
    const float *row = in + blockIdx.x * width;
    float s = 0.0f;
    for (int k = 0; k <= t && k < width; ++k) s += row[k];
    out[blockIdx.x * blockDim.x + t] = s;
}

// Collatz step counts: while loop with data-dependent trip count.
// expect: bounds divergent; while (x != 1) divergent; parity branch divergent
extern "C" __global__ void collatz_steps(const unsigned int *start, unsigned int *steps, int n, unsigned int cap)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int x = start[i];
        unsigned int k = 0;
        while (x > 1u && k < cap) {
            if (x & 1u) x = 3u * x + 1u;
            else x >>= 1;
            ++k;
        }
        steps[i] = k;
    }
}

// Uniform-only control flow: every thread of the grid takes the same path. Computes
// a polynomial of degree `deg` at point x and stores it (all threads write the same cell).
// expect: all branches/loops uniform (depend only on kernel parameters)
extern "C" __global__ void uniform_poly_eval(const float *coef, int deg, float x, float *out, int do_store)
{
    float acc = 0.0f;
    for (int k = deg; k >= 0; --k) {
        acc = acc * x + coef[k];
    }
    if (deg > 8) acc *= 0.5f;
    if (do_store) out[0] = acc;
}

// Block-uniform branching: behaviour selected by blockIdx (uniform per block),
// then a per-thread guard.
// expect: (blockIdx.x & 1) uniform; loop over blockIdx.y-derived count uniform; bounds divergent
extern "C" __global__ void block_uniform_dispatch(float *data, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = (i < n) ? data[i] : 0.0f;
    if (blockIdx.x & 1) {
        for (int r = 0; r < reps + (int)blockIdx.y; ++r) v = v * 0.5f + 1.0f;
    } else {
        v = -v;
    }
    if (i < n) data[i] = v;
}
