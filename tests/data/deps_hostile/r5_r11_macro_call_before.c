#define CAT(a, b) a##b
void k(long n, double *restrict u, double *restrict w) {
    double *src = u, *dst = w;
    CAT(d, st) = CAT(s, rc);
    for (int t = 0; t < 8; t++) {
        for (long i = 1; i < n - 1; i++)
            dst[i] = src[i - 1] + src[i + 1];
        double *sw = src; src = dst; dst = sw;
    }
}
