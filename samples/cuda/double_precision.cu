// double_precision.cu - a few f64 kernels (gpudiv sample corpus)
#include <cuda_runtime.h>

// Double-precision axpy with a grid-stride loop.
// expect: grid-stride loop divergent
extern "C" __global__ void daxpy_gs(int n, double a, const double *x, double *y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}

// Newton iteration for sqrt with a convergence break (data-dependent exit).
// expect: bounds divergent; iteration loop divergent because of the convergence break
extern "C" __global__ void newton_sqrt(const double *in, double *out, int n, int max_iter)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double v = in[i];
    double x = v > 1.0 ? v : 1.0;
    for (int it = 0; it < max_iter; ++it) {
        double nx = 0.5 * (x + v / x);
        if (fabs(nx - x) < 1e-12 * x) {
            x = nx;
            break;
        }
        x = nx;
    }
    out[i] = x;
}
