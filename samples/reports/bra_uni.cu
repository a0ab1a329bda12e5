// bra_uni.cu: source of the hand-written bra_uni.ptx (a report test, never compiled).
extern "C" __global__ void flagged(int *out, int n)
{
    int t = threadIdx.x;
    if (t < n)          // the PTX marks this branch bra.uni, yet it depends on the thread
        out[t] = 1;
    if (n > 4)          // bra.uni on a parameter: truly uniform
        out[0] = 2;
    if (t & 1)          // an ordinary divergent branch
        out[t] = 3;
}
