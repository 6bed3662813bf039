void k(long n, double *restrict g) {
    for (long j = 0; j < n; j++)
        for (long i = 0; i < n; i++)
            g[i * (i + j) + j] = g[i * (i + j) + j] * 2.0 + j;
}
