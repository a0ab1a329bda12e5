// Cycles whose lanes meet again inside the cycle (gpudiv issue 19).
//
// switch_cycle: an irreducible cycle with two entries (A and B, chosen by a kernel
// parameter), a common block C, and a three-way choice at its bottom on a value that
// depends on the thread (back to A, back to B, or out). Lanes that go round once more
// meet the others again inside the cycle, where r holds a different iteration's value.
// two_latch: a reducible loop with two latches; lanes that take the inner back edge
// more often meet the others at the second latch block with a different k.
// carried: a value that is only ever the kernel parameter, carried through the loop.

__global__ void switch_cycle(int *out, int sel, int bound)
{
    int t = threadIdx.x % 4;
    int k = 0;
    int v, r = 0;
    if (sel & 1) goto B;
A:
    v = k * 3 + 1;
    goto C;
B:
    v = k * 5 + 2;
C:
    r = v + k;
    k = k + 1;
    switch ((k < t + bound) ? (k & 1) + 1 : 0) {
    case 1: goto A;
    case 2: out[threadIdx.x + blockDim.x] = r; goto B;
    default: break;
    }
    out[threadIdx.x] = r * 7 + k;
}

__global__ void two_latch(int *out, int n)
{
    int t = threadIdx.x % 4;
    int k = 0, r;
    do {
        do {
            r = k * 3;
            k = k + 1;
        } while (k < t);
        out[threadIdx.x + blockDim.x] = r + k;
    } while (k < n);
    out[threadIdx.x] = r;
}

__global__ void carried(int *out, int n, int m)
{
    int x = n;
    int t = threadIdx.x % 4;
    for (int i = 0; i < t; i++) {
        if (threadIdx.x & 1)
            continue;
        x = n;
        if (i > m)
            break;
    }
    out[threadIdx.x] = x;
}
