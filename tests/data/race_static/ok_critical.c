/* Control: per-thread maxima merged under a critical section. */
void maximum(long n, const double *restrict x, double *restrict out) {
    double best = -1e300;
#pragma omp parallel
    {
        double m = -1e300;
#pragma omp for nowait
        for (long i = 0; i < n; i++)
            if (x[i] > m) m = x[i];
#pragma omp critical(merge)
        {
            if (m > best) best = m;
        }
    }
    *out = best;
}
