#define COLLAPSE (dst = src)
void k(long n, const double *restrict a, double *restrict u, double *restrict w) {
    double *src = u, *dst = w;
    for (int t = 0; t < 8; t++) {
        for (long i = 1; i < n - 1; i++)
            dst[i] = a[i] * (src[i - 1] + src[i + 1]);
        double *sw = src; src = dst; dst = sw;
        COLLAPSE;
    }
}
