void k(long n, double *a, double *b) {
    for (long i = 1; i < n - 1; i++)
        a[i] = b[i - 1] + b[i + 1];
    {
        double a[4] = {0};
        b[0] = a[0];
    }
}
