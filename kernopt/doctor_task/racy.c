/* The doctor's known race: a racy OpenMP reduction: every thread adds into the shared `s` without a reduction
 * clause or atomics. Right at one thread; loses updates (or is caught by the race check) at more. */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    double s = 0.0;
#pragma omp parallel for
    for (long i = 0; i < n; i++) s += x[i] * y[i];
    *result = s;
}
