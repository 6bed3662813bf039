/* Hack 17b: an OpenMP race that gives the right answer by luck: the accumulator `s` is shared
 * by all threads (declared outside the parallel loop). Optimized builds keep it in a register,
 * so outputs are right at every thread count; only the race check can see it. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    double s;
#pragma omp parallel for
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
