// Calls through function pointers: a table of device functions in global memory, and a
// pointer chosen per element. Inlining cannot follow them (the analysis takes their
// results as divergent); the interpreter runs these kernels with calls as calls, each
// lane calling the function its pointer names (issue 16, item 1).

typedef int (*unary_op)(int);

__device__ __noinline__ int square(int x) { return x * x; }
__device__ __noinline__ int negate(int x) { return -x; }
__device__ __noinline__ int twice(int x) {
    if (x > 100)
        return x;
    return 2 * x;
}

__device__ unary_op ops[3] = {square, negate, twice};

// expect: the bounds check is divergent; each lane may call another function
extern "C" __global__ void apply_per_lane(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = ops[i % 3](in[i]);
}

// expect: a kernel parameter picks one function for the whole launch (uniform test)
extern "C" __global__ void apply_uniform(const int *in, int *out, int n, int which) {
    if (which < 0)
        return;
    unary_op op = ops[which % 3];
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[i] = op(in[i]);
}

// expect: the pointer depends on the data: divergent
extern "C" __global__ void pick_by_sign(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unary_op op = in[i] < 0 ? negate : square;
    out[i] = op(in[i]);
}
