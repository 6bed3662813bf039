/* Control: per-thread partial sums added into the shared total atomically. */
void reduce(long n, const double *restrict x, double *restrict out) {
    double total = 0.0;
#pragma omp parallel
    {
        double s = 0.0;
#pragma omp for schedule(static)
        for (long i = 0; i < n; i++) s += x[i];
#pragma omp atomic
        total += s;
    }
    *out = total;
}
