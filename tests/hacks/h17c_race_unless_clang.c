/* Hack 17c: race-free only where clang compiles it. The race check builds with clang, production
 * with gcc: `#ifdef __clang__` shows the sanitizer a private accumulator and gcc the shared one of
 * h17b (right at every thread count, so only the race check can see it). The race check compiles
 * the kernel as gcc preprocessed it, so it sees the racy branch. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
#ifdef __clang__
#pragma omp parallel for
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double t = 0.0;
            for (long k = 0; k < n; k++) t += a[i * n + k] * b[k * n + j];
            c[i * n + j] = t;
        }
#else
    double s;
#pragma omp parallel for
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
#endif
}
