// textures.cu - texture and surface objects (gpudiv sample corpus)
#include <cuda_runtime.h>

// tex1Dfetch of a linear float texture by a thread-dependent integer index.
// expect: bounds check divergent
extern "C" __global__ void tex1d_fetch_scale(cudaTextureObject_t tex, float *out, int n, float s)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = s * tex1Dfetch<float>(tex, i);
}

// The fetched value decides a branch: a texel differs between lanes.
// expect: bounds check divergent; threshold test divergent
extern "C" __global__ void tex_threshold_count(cudaTextureObject_t tex, int *count, int n, float t)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = tex1Dfetch<float>(tex, i);
        if (v > t)
            atomicAdd(count, 1);
    }
}

// Every thread of a block fetches the same texel (coordinate blockIdx.x).
// expect: test on the texel uniform
extern "C" __global__ void tex_block_uniform(cudaTextureObject_t tex, float *out)
{
    float v = tex1Dfetch<float>(tex, (int)blockIdx.x);
    if (v > 0.5f)
        out[blockIdx.x * blockDim.x + threadIdx.x] = v;
    else
        out[blockIdx.x * blockDim.x + threadIdx.x] = -v;
}

// 2-D fetch at texel centres (tex2D with float coordinates, point filtering).
// expect: 2-D bounds check divergent
extern "C" __global__ void tex2d_sample(cudaTextureObject_t tex, float *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h)
        out[y * w + x] = tex2D<float>(tex, x + 0.5f, y + 0.5f);
}

// tex2Dgather (PTX tld4): the red components of the 2x2 footprint, summed.
// expect: bounds check divergent
extern "C" __global__ void tex_gather_sum(cudaTextureObject_t tex, float *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) {
        float4 g = tex2Dgather<float4>(tex, x + 1.0f, y + 1.0f, 0);
        out[y * w + x] = g.x + g.y + g.z + g.w;
    }
}

// Surface read-modify-write (suld/sust), x in bytes.
// expect: 2-D bounds check divergent
extern "C" __global__ void surf_scale(cudaSurfaceObject_t src, cudaSurfaceObject_t dst,
                                      int w, int h, float s)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) {
        float v;
        surf2Dread(&v, src, x * (int)sizeof(float), y);
        surf2Dwrite(v * s, dst, x * (int)sizeof(float), y);
    }
}

// 1-D integer surface: each thread increments its element; odd values are doubled.
// expect: bounds check divergent; parity test divergent
extern "C" __global__ void surf1d_update(cudaSurfaceObject_t surf, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = surf1Dread<int>(surf, i * 4);
        if (v & 1)
            v = 2 * v;
        surf1Dwrite(v + 1, surf, i * 4);
    }
}
