// Redundant loads under divergent branches, for scalar replacement (SRQP, ESRQP,
// SSRQP_S, SSRQP; Fukuhara 2023 §4.3): tree traversal, a boundary stencil, a
// histogram-like lookup, a loop with divergent branches inside and a graph traversal
// with loads in a loop. Each kernel reads its inputs and writes one output per thread
// after its loads, so the loads are not killed by stores in between.

// Implicit binary search tree in an array: each thread walks down by its key.
__global__ void tree_walk(const int *keys, int depth, const int *queries, int *out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int q = queries[t];
    int node = 0;
    int hits = 0;
    for (int d = 0; d < depth; d++) {
        if (q < keys[node]) {            // divergent: the key decides
            hits += keys[node] & 1;
            node = 2 * node + 1;
        } else {
            hits += keys[node] >> 1;
            node = 2 * node + 2;
        }
    }
    out[t] = hits;
}

// 1-D stencil whose boundary threads take other branches; every branch reads in[i].
__global__ void stencil_boundary(const int *in, int n, int *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v;
    if (i == 0) {
        v = in[i] + in[i + 1];
    } else if (i >= n - 1) {
        v = in[i - 1] + in[i];
    } else {
        v = in[i - 1] + in[i] + in[i + 1];
    }
    out[i] = v;
}

// Saturating histogram-like lookup: the bin comes from a table, read on both sides.
__global__ void histo_lookup(const int *data, const int *table, int limit, int *out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int v = data[t] & 15;
    int bin;
    if (v > limit) {
        bin = table[v] < 255 ? table[v] + 1 : 255;
    } else {
        bin = table[v];
    }
    out[t] = bin;
}

// A loop with a divergent branch inside reading a[k+1], then a[k] on every path
// (the shape of Fig 4.11): inter-iteration redundancy.
__global__ void loop_divergent(const int *a, int n, int *out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int s = 0;
    for (int k = 0; k < n; k++) {
        if (t & 1) {
            s += a[k + 1];
        } else {
            s -= 1;
        }
        s += a[k];
    }
    out[t] = s;
}

// Graph traversal: visit the edges of a thread's vertex and sum the weights of the
// neighbours whose level is the thread's; the row bounds are read in the loop.
__global__ void graph_levels(const int *row, const int *col, const int *level, int nv,
                             int *out)
{
    int v = (blockIdx.x * blockDim.x + threadIdx.x) % nv;
    int sum = 0;
    for (int e = row[v]; e < row[v + 1]; e++) {
        int w = col[e] % nv;
        if (level[w] == level[v]) {
            sum += level[w];
        } else if (level[w] < level[v]) {
            sum += 1;
        }
    }
    out[v] = sum;
}
