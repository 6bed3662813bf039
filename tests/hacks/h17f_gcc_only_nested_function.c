/* Hack 17f: correct and race-free, but written in a gcc extension clang does not compile (a nested
 * function), so the sanitizer build fails: the race check cannot run, and the candidate is not
 * verified (rejected, "race check unavailable"), whatever its race-freedom. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    double dot(long i, long j) {
        double t = 0.0;
        for (long k = 0; k < n; k++) t += a[i * n + k] * b[k * n + j];
        return t;
    }
#pragma omp parallel for
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) c[i * n + j] = dot(i, j);
}
