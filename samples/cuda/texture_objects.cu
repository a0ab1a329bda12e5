// Texture-object fetches (cudaTextureObject_t): the handle is a kernel parameter, the
// same in every lane; whether a fetched texel is uniform depends on the coordinates.
#include <cuda_runtime.h>

// Fetch element threadIdx.x of a 1-D linear texture and branch on it.
// expect: the texel test is divergent (the coordinate comes from threadIdx.x).
extern "C" __global__ void tex1d_fetch_tid(cudaTextureObject_t tex, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = tex1Dfetch<float>(tex, i);
    if (v > 0.5f) {
        out[i] = v;
    }
}

// Sample a 2-D texture at (column, row) = (threadIdx.x, blockIdx.y).
// expect: the texel test is divergent (x depends on the thread).
extern "C" __global__ void tex2d_sample_tid(cudaTextureObject_t tex, float *out, int width)
{
    int x = threadIdx.x;
    int y = blockIdx.y;
    float v = tex2D<float>(tex, x + 0.5f, y + 0.5f);
    if (v < 0.0f) {
        out[y * width + x] = -v;
    }
}

// Every thread fetches the same element (a parameter) and branches on it.
// expect: the texel test is uniform (handle and coordinate are kernel parameters).
extern "C" __global__ void tex1d_fetch_uniform(cudaTextureObject_t tex, float *out, int k)
{
    float v = tex1Dfetch<float>(tex, k);
    if (v > 0.0f) {
        out[threadIdx.x] = v;
    }
}

// A 2-D fetch at a block-uniform point (blockIdx.x, blockIdx.y): uniform.
// expect: the texel test is uniform.
extern "C" __global__ void tex2d_sample_block(cudaTextureObject_t tex, float *out)
{
    float v = tex2D<float>(tex, blockIdx.x + 0.5f, blockIdx.y + 0.5f);
    if (v != 0.0f) {
        out[blockIdx.x * blockDim.x + threadIdx.x] = v;
    }
}
