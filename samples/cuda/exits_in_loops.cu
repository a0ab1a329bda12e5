// Loops whose lanes may leave the kernel early (gpudiv issue 17, item 3).
//
// A lane that executes trap or returns never meets its warp again, so a branch that sends
// some lanes out of the kernel creates no join and no divergent loop exit: the loop
// counters of the lanes that stay are still the same in every lane.
//
// decode_ops: a switch over an opcode read per thread (two bits), with an unreachable default, inside
//   a loop nest (the shape LLVM gives to a chain of ifs: the default becomes a trap).
// guarded_rows: a row loop whose body leaves the kernel on a thread-dependent error.
// early_return: a loop that returns from the kernel when a thread's element is found,
//   and a counter that is stored after the loop by the lanes that did not return.

extern "C" __global__ void decode_ops(const int *ops, int *acc, int rows, int cols)
{
    int sum = 0;
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            int op = ops[(r * cols + c) * blockDim.x + threadIdx.x];
            switch (op & 3) {
            case 0: sum += r; break;
            case 1: sum -= c; break;
            case 2: sum ^= r * c; break;
            case 3: sum += 7; break;
            default: __builtin_unreachable();
            }
        }
        acc[r * blockDim.x + threadIdx.x] = sum + r;
    }
}

extern "C" __global__ void guarded_rows(const float *in, float *out, int rows, int n)
{
    for (int r = 0; r < rows; ++r) {
        float x = in[r * n + threadIdx.x];
        if (x < 0.0f)
            __trap();
        out[r * n + threadIdx.x] = x * 2.0f + (float)r;
    }
}

extern "C" __global__ void early_return(const int *keys, int *where, int key, int n)
{
    int i = 0;
    for (; i < n; ++i) {
        if (keys[i * blockDim.x + threadIdx.x] == key) {
            where[threadIdx.x] = i;
            return;
        }
        where[threadIdx.x + blockDim.x] = i;
    }
    where[blockIdx.x] = i;
}

// interpret: a byte-code loop nest; an unknown opcode traps, opcode 3 leaves the inner loop.
// The row counter r stays uniform: lanes that trap never come back, and the inner loop's
// divergent break joins the others before the row ends.
extern "C" __global__ void interpret(const int *code, int *acc, int rows, int cols)
{
    for (int r = 0; r < rows; ++r) {
        int sum = r;
        for (int c = 0; c < cols; ++c) {
            int op = code[(r * cols + c) * blockDim.x + threadIdx.x];
            if (op == 0)
                sum += c;
            else if (op == 1)
                sum -= r;
            else if (op == 2)
                sum *= 3;
            else if (op == 3)
                break;
            else
                __trap();
        }
        acc[r * blockDim.x + threadIdx.x] = sum;
        if (r == rows - 1)
            acc[rows * blockDim.x] = r;
    }
}

// leave: threads leave the kernel with `exit` from inside a loop; the others go on
// counting uniformly and return normally.
extern "C" __global__ void leave(const int *flags, int *out, int n)
{
    int i = 0;
    for (; i < n; ++i) {
        if (flags[i * blockDim.x + threadIdx.x] < 0)
            asm volatile("exit;");
        out[i * blockDim.x + threadIdx.x] = i;
    }
    out[n * blockDim.x + threadIdx.x] = i * 2;
}
