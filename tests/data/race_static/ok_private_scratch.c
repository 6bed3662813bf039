/* Control: scratch declared in the loop body (private to the iteration). */
void smooth(long n, const double *restrict x, double *restrict y) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        double tmp[4];
        for (int k = 0; k < 4; k++) tmp[k] = x[(i + k) % n];
        double s = 0.0;
        for (int k = 0; k < 4; k++) s += tmp[k];
        y[i] = 0.25 * s;
    }
}
