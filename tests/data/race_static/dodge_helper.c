/* Dodge (c): the shared total updated by a function of the file through its pointer parameter. */
static void accumulate(double *acc, double v) { *acc += v; }

void reduce(long n, const double *restrict x, double *restrict out) {
    double total = 0.0;
#pragma omp parallel for
    for (long i = 0; i < n; i++) accumulate(&total, x[i]);
    *out = total;
}
