// launch_shapes.cu - 2-D and 3-D kernels whose warps share threadIdx.y / threadIdx.z when
// blockDim.x is a multiple of 32 (gpudiv sample corpus, issue 17 item 2).
// arch: sm_90
// __block_size__ needs sm_90; it becomes the PTX directive `.reqntid X, Y, Z` (a launch
// with any other block shape fails), which gpudiv reads. The other kernels say nothing
// about their shape: `gpudiv analyze --block 32x8` tells gpudiv how they are launched.
#include <cuda_runtime.h>

// Row sums of a lower-triangular matrix, one warp per row: blocks of exactly 32x8.
// expect: with .reqntid 32, 8, 1 the row test and the loop over the row (trip count
// threadIdx.y + 1) are uniform; the column test is divergent.
extern "C" __global__ void __block_size__((32, 8, 1))
triangle_rows_reqntid(const float *m, float *sums, int n)
{
    int row = blockIdx.x * 8 + threadIdx.y;
    if (row < n) {
        float s = 0.0f;
        for (int c = threadIdx.x; c <= row; c += 32)
            s += m[row * n + c];
        for (int k = 0; k <= (int)threadIdx.y; ++k)
            s *= 0.5f;
        if (threadIdx.x == 0)
            sums[row] = s;
    }
}

// The same without a declared shape.
// expect: without a block shape the row test and the per-row loop are divergent (they
// depend on threadIdx.y); with --block 32x8 they are uniform.
extern "C" __global__ void triangle_rows(const float *m, float *sums, int n)
{
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row < n) {
        float s = 0.0f;
        for (int c = threadIdx.x; c <= row; c += blockDim.x)
            s += m[row * n + c];
        for (int k = 0; k <= (int)threadIdx.y; ++k)
            s *= 0.5f;
        if (threadIdx.x == 0)
            sums[row] = s;
    }
}

// A 2-D stencil whose y boundary test is per row.
// expect: the y boundary tests are uniform with --block 32x8, the x ones divergent.
extern "C" __global__ void blur_rows(const float *in, float *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (y >= h)
        return;
    float acc = in[y * w + min(x, w - 1)];
    if (y > 0)
        acc += in[(y - 1) * w + min(x, w - 1)];
    if (y + 1 < h)
        acc += in[(y + 1) * w + min(x, w - 1)];
    if (x < w)
        out[y * w + x] = acc / 3.0f;
}

// A 3-D kernel: slices of blockDim.x * blockDim.y threads (a multiple of 32) share z.
// expect: the z test is uniform with --block 32x8 or 8x4x8, the x/y tests divergent.
extern "C" __global__ void slice_scale(float *v, int nx, int ny, int nz, const float *scale)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (z < nz) {
        float f = scale[z];
        if (x < nx && y < ny)
            v[(z * ny + y) * nx + x] *= f;
    }
}

// Warp index and lane from the special registers.
// expect: the warp-leader test is divergent; the per-warp loop (warp index from
// threadIdx.y when blockDim.x == 32) is uniform with --block 32x8.
extern "C" __global__ void per_warp_counts(const int *flags, int *counts, int n)
{
    int warp = threadIdx.y;
    int lane = threadIdx.x;
    int total = 0;
    for (int i = warp; i < n; i += blockDim.y)
        total += flags[i * 32 + lane];
    if (lane == 0)
        counts[blockIdx.x * blockDim.y + warp] = total;
}

// __launch_bounds__ gives `.maxntid 256, 1, 1`, which bounds only the number of threads
// (a 16x16 launch is valid), so gpudiv learns nothing from it.
// expect: the row test stays divergent unless --block says X % 32 == 0.
extern "C" __global__ void __launch_bounds__(256) bounded_rows(float *a, int n)
{
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row < n)
        a[row * blockDim.x + threadIdx.x] += 1.0f;
}
