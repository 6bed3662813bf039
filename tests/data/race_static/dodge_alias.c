/* Dodge (c): the shared total updated through a pointer alias. */
void reduce(long n, const double *restrict x, double *restrict out) {
    double total = 0.0;
    double *p = &total;
#pragma omp parallel for
    for (long i = 0; i < n; i++) *p += x[i];
    *out = total;
}
