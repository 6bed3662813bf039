/* The doctor's known clean kernel: a correct OpenMP reduction. */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    double s = 0.0;
#pragma omp parallel for reduction(+ : s) schedule(static)
    for (long i = 0; i < n; i++) s += x[i] * y[i];
    *result = s;
}
