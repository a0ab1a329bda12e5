// particle_library.cu - a large program: a library of __device__ functions called from
// many places by several kernels (gpudiv sample corpus, issue 16 items 1 and 2).
// A -G build keeps every call as a `call` to a `.func` and spills every value to the
// local stack, so the PTX is tens of thousands of lines; gpudiv inlines each call site,
// which makes this file the worst case of the corpus for analysis time. The kernels step
// a particle system: hashing into grid cells, integrating positions, resolving contacts
// with neighbours, shading and statistics. Helpers are called with uniform arguments
// (kernel parameters, blockIdx, loop counters) and divergent ones (threadIdx, loaded
// data), from loops, from divergent branches and from other helpers.
#include <cuda_runtime.h>

#define NOINLINE __device__ __noinline__

// ---- integer helpers ------------------------------------------------------------------

NOINLINE int clamp_int(int v, int lo, int hi)
{
    if (v < lo) return lo;
    if (v > hi) return hi;
    return v;
}

NOINLINE int wrap_int(int v, int n)
{
    int r = v % n;
    return r < 0 ? r + n : r;
}

NOINLINE unsigned hash_u32(unsigned x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

NOINLINE unsigned hash_pair(unsigned a, unsigned b)
{
    return hash_u32(a * 0x9e3779b9U + hash_u32(b));
}

NOINLINE unsigned xorshift(unsigned s)
{
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
}

NOINLINE int popcount_loop(unsigned x)
{
    int c = 0;
    while (x != 0) {
        x &= x - 1;
        ++c;
    }
    return c;
}

NOINLINE int ilog2_floor(unsigned x)
{
    int r = -1;
    while (x != 0 && r < 31) {
        x >>= 1;
        ++r;
    }
    return r;
}

NOINLINE int min3_int(int a, int b, int c)
{
    int m = a < b ? a : b;
    return m < c ? m : c;
}

NOINLINE int max3_int(int a, int b, int c)
{
    int m = a > b ? a : b;
    return m > c ? m : c;
}

NOINLINE int median3_int(int a, int b, int c)
{
    return a + b + c - min3_int(a, b, c) - max3_int(a, b, c);
}

NOINLINE int lane_id()
{
    return threadIdx.x & 31;
}

NOINLINE int global_index()
{
    return blockIdx.x * blockDim.x + threadIdx.x;
}

// ---- grid cells -----------------------------------------------------------------------

NOINLINE int cell_coord(float p, float cell, int dim)
{
    return clamp_int((int)(p / cell), 0, dim - 1);
}

NOINLINE int cell_index(int cx, int cy, int dim)
{
    return wrap_int(cy, dim) * dim + wrap_int(cx, dim);
}

NOINLINE unsigned cell_key(int cx, int cy, int dim, unsigned seed)
{
    return hash_pair((unsigned)cell_index(cx, cy, dim), seed) % (unsigned)(dim * dim);
}

NOINLINE int neighbour_cell(int cell, int k, int dim)
{
    int cx = cell % dim;
    int cy = cell / dim;
    int dx = (k % 3) - 1;
    int dy = (k / 3) - 1;
    return cell_index(cx + dx, cy + dy, dim);
}

// ---- float helpers --------------------------------------------------------------------

NOINLINE float clampf(float v, float lo, float hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

NOINLINE float lerpf(float a, float b, float t)
{
    return a + (b - a) * t;
}

NOINLINE float smoothstep(float e0, float e1, float x)
{
    float t = clampf((x - e0) / (e1 - e0), 0.0f, 1.0f);
    return t * t * (3.0f - 2.0f * t);
}

NOINLINE float dot2(float ax, float ay, float bx, float by)
{
    return ax * bx + ay * by;
}

NOINLINE float length2(float x, float y)
{
    return sqrtf(dot2(x, y, x, y));
}

NOINLINE float unit_random(unsigned s)
{
    return (float)(hash_u32(s) & 0xffffffU) / 16777216.0f;
}

NOINLINE float reflect_velocity(float v, float p, float lo, float hi, float damping)
{
    if (p < lo || p > hi) return -v * damping;
    return v;
}

NOINLINE float spring_force(float dist, float rest, float stiffness)
{
    if (dist <= 0.0f) return 0.0f;
    float stretch = dist - rest;
    return stretch < 0.0f ? stiffness * stretch : 0.5f * stiffness * stretch;
}

NOINLINE float poly_eval(float x, int degree)
{
    float r = 1.0f;
    float term = 1.0f;
    for (int k = 1; k <= degree; ++k) {
        term *= x / (float)k;
        r += term;
    }
    return r;
}

NOINLINE float soft_limit(float v, float limit)
{
    float a = v < 0.0f ? -v : v;
    if (a <= limit) return v;
    float excess = a - limit;
    float squashed = limit + excess / (1.0f + excess);
    return v < 0.0f ? -squashed : squashed;
}

// ---- composite helpers ----------------------------------------------------------------

NOINLINE float gravity_at(float y, float strength, int layers)
{
    float g = strength;
    for (int l = 0; l < (layers & 7); ++l) {
        if (y > (float)l) g *= 0.9f;
    }
    return g;
}

NOINLINE float contact_impulse(float ax, float ay, float bx, float by, float radius,
                               float stiffness)
{
    float dx = bx - ax;
    float dy = by - ay;
    float d = length2(dx, dy);
    if (d >= 2.0f * radius) return 0.0f;
    return spring_force(d, 2.0f * radius, stiffness);
}

NOINLINE float jitter(unsigned seed, int step, float amount)
{
    unsigned s = xorshift(seed + (unsigned)step);
    return (unit_random(s) - 0.5f) * amount;
}

NOINLINE int classify_speed(float vx, float vy, float slow, float fast)
{
    float s = length2(vx, vy);
    if (s < slow) return 0;
    if (s < fast) return 1;
    return 2;
}

NOINLINE unsigned shade_colour(float speed, float heat, int palette)
{
    float t = smoothstep(0.0f, 4.0f, speed);
    float h = clampf(heat, 0.0f, 1.0f);
    int r = clamp_int((int)(255.0f * lerpf(t, 1.0f, h)), 0, 255);
    int g = clamp_int((int)(255.0f * (1.0f - t)), 0, 255);
    int b = clamp_int((int)(255.0f * poly_eval(h, palette & 3) / 3.0f), 0, 255);
    return ((unsigned)r << 16) | ((unsigned)g << 8) | (unsigned)b;
}

NOINLINE int bucket_of(float value, float lo, float hi, int buckets)
{
    float t = clampf((value - lo) / (hi - lo), 0.0f, 0.999f);
    return clamp_int((int)(t * (float)buckets), 0, buckets - 1);
}

NOINLINE float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// ---- kernels --------------------------------------------------------------------------

// Assign each particle to a grid cell and count particles per cell.
// expect: cell coordinates divergent (positions are loaded per lane); dim checks uniform
extern "C" __global__ void hash_grid(const float *px, const float *py, int *cell_of,
                                     int *counts, int n, float cell, int dim, unsigned seed)
{
    int i = global_index();
    int udim = clamp_int(dim, 1, 64);
    unsigned useed = hash_u32(seed);
    int ucells = clamp_int(udim * udim, 1, 4096);
    if (i >= n) return;
    int cx = cell_coord(px[i], cell, udim);
    int cy = cell_coord(py[i], cell, udim);
    int c = cell_index(cx, cy, udim);
    unsigned key = cell_key(cx, cy, udim, useed);
    int spread = popcount_loop(key) + ilog2_floor(key + 1u);
    cell_of[i] = c;
    atomicAdd(&counts[wrap_int(c + spread, ucells)], 1);
    atomicAdd(&counts[wrap_int((int)(useed % (unsigned)ucells), ucells)], 0);
}

// Integrate velocities and positions for `steps` uniform steps.
// expect: step loop uniform; wall tests divergent
extern "C" __global__ void integrate(float *px, float *py, float *vx, float *vy, int n,
                                     int steps, float dt, float gravity, int layers,
                                     unsigned seed)
{
    int i = global_index();
    float g0 = gravity_at(0.0f, gravity, layers);
    float limit = soft_limit(10.0f * dt, 8.0f);
    float jitter_amount = clampf(dt * 0.1f, 0.0f, 0.01f);
    if (i >= n) return;
    float x = px[i];
    float y = py[i];
    float u = vx[i];
    float v = vy[i];
    for (int s = 0; s < (steps & 15); ++s) {
        float g = gravity_at(y, g0, layers);
        v -= g * dt;
        u += jitter(seed + (unsigned)i, s, jitter_amount);
        v += jitter(hash_u32(seed) + (unsigned)i, s, jitter_amount);
        u = soft_limit(u, limit);
        v = soft_limit(v, limit);
        x += u * dt;
        y += v * dt;
        u = reflect_velocity(u, x, 0.0f, 1.0f, 0.8f);
        v = reflect_velocity(v, y, 0.0f, 1.0f, 0.8f);
        x = clampf(x, 0.0f, 1.0f);
        y = clampf(y, 0.0f, 1.0f);
    }
    px[i] = x;
    py[i] = y;
    vx[i] = u;
    vy[i] = v;
}

// Resolve contacts with the particles of the nine neighbouring cells.
// expect: neighbour loop uniform in trip count; contact tests divergent
extern "C" __global__ void collide(const float *px, const float *py, float *vx, float *vy,
                                   const int *cell_of, const int *cell_start, int n, int dim,
                                   float radius, float stiffness, int max_per_cell)
{
    int i = global_index();
    int udim = clamp_int(dim, 1, 64);
    int cap = clamp_int(max_per_cell, 0, 8);
    float r = clampf(radius, 0.001f, 0.1f);
    float k = clampf(stiffness, 0.0f, 100.0f);
    if (i >= n) return;
    float x = px[i];
    float y = py[i];
    float fx = 0.0f;
    float fy = 0.0f;
    int c = cell_of[i];
    for (int nb = 0; nb < 9; ++nb) {
        int other_cell = neighbour_cell(c, nb, udim);
        int first = cell_start[other_cell];
        for (int j = 0; j < cap; ++j) {
            int o = wrap_int(first + j, n);
            if (o == i) continue;
            float ox = px[o];
            float oy = py[o];
            float f = contact_impulse(x, y, ox, oy, r, k);
            if (f != 0.0f) {
                float d = length2(ox - x, oy - y);
                if (d > 0.0f) {
                    fx += f * (ox - x) / d;
                    fy += f * (oy - y) / d;
                }
            }
        }
    }
    vx[i] += soft_limit(fx, 4.0f);
    vy[i] += soft_limit(fy, 4.0f);
}

// Shade each particle by its speed class and heat.
// expect: palette selection uniform; speed classes divergent
extern "C" __global__ void shade(const float *vx, const float *vy, const float *heat,
                                 unsigned *colour, int n, int palette, float slow, float fast)
{
    int i = global_index();
    int upal = clamp_int(palette, 0, 3);
    float lo = clampf(slow, 0.0f, fast);
    float hi = clampf(fast, lo + 0.001f, 100.0f);
    unsigned base = shade_colour(lo, 0.0f, upal);
    if (i >= n) return;
    float u = vx[i];
    float v = vy[i];
    int cls = classify_speed(u, v, lo, hi);
    float speed = length2(u, v);
    unsigned c;
    if (cls == 0) c = base;
    else if (cls == 1) c = shade_colour(speed, heat[i], upal);
    else c = shade_colour(speed, 1.0f, (upal + 1) & 3) ^ hash_u32((unsigned)i);
    colour[i] = c;
}

// Statistics: a histogram of speeds and a per-warp sum, by every lane of the warp.
// expect: histogram buckets divergent; warp sums combine all lanes
extern "C" __global__ void statistics(const float *vx, const float *vy, int *histogram,
                                      float *warp_sums, int n, int buckets, float top)
{
    int i = global_index();
    int ub = clamp_int(buckets, 1, 64);
    float ut = clampf(top, 0.1f, 100.0f);
    float speed = 0.0f;
    if (i < n) speed = length2(vx[i], vy[i]);
    float total = warp_sum(speed);
    if (lane_id() == 0 && i < n) warp_sums[i / 32] = total;
    if (i < n) {
        int b = bucket_of(speed, 0.0f, ut, ub);
        int m = median3_int(b, ub / 2, ub - 1);
        atomicAdd(&histogram[b], 1);
        atomicAdd(&histogram[wrap_int(m, ub)], 0);
    }
}

// Every helper once more from one kernel with uniform arguments only: a self-test whose
// results are written by one lane.
// expect: every call result uniform; only the lane test divergent
extern "C" __global__ void library_selftest(int *out, float *fout, int a, int b, float x,
                                            float y, unsigned seed)
{
    int r0 = clamp_int(a, -b, b) + wrap_int(a, b + 1) + median3_int(a, b, a + b);
    unsigned r1 = hash_pair((unsigned)a, seed) ^ xorshift(seed) ^ cell_key(a, b, 8, seed);
    int r2 = popcount_loop(r1) + ilog2_floor(r1) + neighbour_cell(a & 63, b & 7, 8);
    float f0 = lerpf(x, y, 0.25f) + smoothstep(0.0f, 1.0f, x) + length2(x, y);
    float f1 = reflect_velocity(x, y, 0.0f, 1.0f, 0.5f) + spring_force(x, y, 2.0f);
    float f2 = poly_eval(x, b & 7) + soft_limit(y, 1.0f) + gravity_at(y, x, a);
    float f3 = contact_impulse(x, y, y, x, 0.1f, 10.0f) + jitter(seed, a, 0.1f);
    int c0 = classify_speed(x, y, 0.5f, 2.0f) + bucket_of(x, 0.0f, 10.0f, b & 31);
    unsigned c1 = shade_colour(x, y, a);
    int g = cell_coord(x, 0.125f, 8) + cell_index(a, b, 8);
    if (threadIdx.x == 0) {
        out[blockIdx.x] = r0 + (int)r2 + c0 + g + (int)(c1 & 0xff);
        fout[blockIdx.x] = f0 + f1 + f2 + f3 + unit_random(seed);
    }
}

// One long pipeline: 24 stages written out (as a code generator or a macro-heavy library
// would), each calling several helpers, with the lane's own data and uniform stage numbers.
// expect: stage numbers uniform; accumulated values and speed tests divergent
#define STAGE(k)                                                                         \
    acc = soft_limit(acc + jitter(useed, (k), 0.1f), 4.0f);                             \
    h = hash_pair(h, (unsigned)(k));                                                    \
    if (classify_speed(acc, (float)(k), 0.5f, 2.0f) == 2) acc = lerpf(acc, 0.0f, 0.5f); \
    cells += neighbour_cell(wrap_int((int)(h & 63u), 64), (k) % 9, 8);                  \
    uniform_sum += clamp_int((k) * ustride, 0, 1000);

extern "C" __global__ void pipeline_unrolled(const float *in, float *out, int *cells_out,
                                             int n, int stride, unsigned seed)
{
    int i = global_index();
    int ustride = clamp_int(stride, 1, 16);
    unsigned useed = hash_u32(seed);
    int uniform_sum = 0;
    float acc = i < n ? in[i] : 0.0f;
    unsigned h = (unsigned)i;
    int cells = 0;
    STAGE(0) STAGE(1) STAGE(2) STAGE(3) STAGE(4) STAGE(5)
    STAGE(6) STAGE(7) STAGE(8) STAGE(9) STAGE(10) STAGE(11)
    STAGE(12) STAGE(13) STAGE(14) STAGE(15) STAGE(16) STAGE(17)
    STAGE(18) STAGE(19) STAGE(20) STAGE(21) STAGE(22) STAGE(23)
    if (i < n) {
        out[i] = acc + (float)uniform_sum;
        cells_out[i] = cells;
    }
}
