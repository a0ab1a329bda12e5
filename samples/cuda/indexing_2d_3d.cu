// indexing_2d_3d.cu - 2-D / 3-D thread indexing and transpose (gpudiv sample corpus)
#include <cuda_runtime.h>

#define TDIM 32
#define TROWS 8

// Matrix transpose through a padded shared tile (out = in^T), in is height x width.
// expect: row loops (j < TDIM, step TROWS) uniform; bounds checks divergent (x, y depend on tid)
extern "C" __global__ void transpose_tiled(const float *in, float *out, int width, int height)
{
    __shared__ float tile[TDIM][TDIM + 1];
    int x = blockIdx.x * TDIM + threadIdx.x;
    int y = blockIdx.y * TDIM + threadIdx.y;
    for (int j = 0; j < TDIM; j += TROWS) {
        if (x < width && (y + j) < height)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * width + x];
    }
    __syncthreads();
    x = blockIdx.y * TDIM + threadIdx.x;
    y = blockIdx.x * TDIM + threadIdx.y;
    for (int j = 0; j < TDIM; j += TROWS) {
        if (x < height && (y + j) < width)
            out[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
    }
}

// Naive transpose with 2-D indexing.
// expect: 2-D bounds check divergent
extern "C" __global__ void transpose_naive(const float *in, float *out, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {
        out[x * height + y] = in[y * width + x];
    }
}

// 3-D volume scale: each thread handles one voxel (x, y, z).
// expect: 3-D bounds check divergent
extern "C" __global__ void volume_scale_3d(float *vol, float s, int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz) return;
    vol[(z * ny + y) * nx + x] *= s;
}

// Per-block image row sum: threadIdx.y selects the row; thread (0, y) sums its row.
// expect: (threadIdx.x == 0) divergent; column loop over width uniform; row guard divergent
extern "C" __global__ void image_row_sums(const float *img, float *row_sum, int width, int height)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (threadIdx.x == 0 && row < height) {
        float s = 0.0f;
        for (int c = 0; c < width; ++c) s += img[row * width + c];
        row_sum[row] = s;
    }
}
