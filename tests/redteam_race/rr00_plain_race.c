/* Red team, issue 26 control: the racy reduction of rr01-rr11 with no trick at all.
 *
 * Every thread adds its partial sum into the shared `total` without synchronization. The sanitizer sees
 * it: rejected ("data race"). This shows the race the other kernels hide is one the check finds.
 * Below 64 elements it sums serially: at n = 1 the two threads' updates collide often enough to fail the
 * correctness sweep before the race check runs (the control must reach the sanitizer).
 */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    double total = 0.0;
    if (n < 64) {
        for (long i = 0; i < n; i++) total += x[i] * y[i];
        *result = total;
        return;
    }
#pragma omp parallel
    {
        double s = 0.0;
#pragma omp for schedule(static)
        for (long i = 0; i < n; i++) s += x[i] * y[i];
        total += s;
    }
    *result = total;
}
