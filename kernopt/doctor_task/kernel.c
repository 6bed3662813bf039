/* The doctor task's baseline: a serial dot product. */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    double s = 0.0;
    for (long i = 0; i < n; i++) s += x[i] * y[i];
    *result = s;
}
