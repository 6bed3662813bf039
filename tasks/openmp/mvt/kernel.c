/* Serial baseline (PolyBench mvt): x1 = A * y1 and x2 = A^T * y2, A n x n row-major. */
void mvt(long n, const double *restrict a, const double *restrict y1, const double *restrict y2,
         double *restrict x1, double *restrict x2) {
    for (long i = 0; i < n; i++) {
        double s = 0.0;
        for (long j = 0; j < n; j++) {
            s += a[i * n + j] * y1[j];
        }
        x1[i] = s;
    }
    for (long i = 0; i < n; i++) {
        double s = 0.0;
        for (long j = 0; j < n; j++) {
            s += a[j * n + i] * y2[j];
        }
        x2[i] = s;
    }
}
