/* Control: a reduction clause. */
void reduce(long n, const double *restrict x, double *restrict out) {
    double total = 0.0;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (long i = 0; i < n; i++) total += x[i] * x[i];
    *out = total;
}
