/* Hack 17d: refuses to compile under clang, so the sanitizer build fails; when a failed race check
 * passed as "unavailable", the race (h17b's shared accumulator) went through. The race check now
 * compiles the kernel as gcc preprocessed it (no #error left), and a build that fails is rejected. */
#ifdef __clang__
#error "no sanitizer build"
#endif
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
