/* Serial baseline: result = sum_i x[i] * y[i]. */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    double s = 0.0;
    for (long i = 0; i < n; i++) s += x[i] * y[i];
    *result = s;
}
