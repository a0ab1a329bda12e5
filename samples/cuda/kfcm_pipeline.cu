// Kernels of a multi-kernel host program (samples/host/cuda_pipeline.host): a producer
// and a consumer of one intermediate buffer, each thread handling element i.
// expect: the bounds check `i < n` is divergent; nothing else branches.

extern "C" __global__ void kf_scale(int *out, const int *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * 3 - 1;
}

extern "C" __global__ void kf_offset(int *out, const int *in, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] + k;
}
