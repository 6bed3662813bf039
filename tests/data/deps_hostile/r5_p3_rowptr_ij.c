void k(long n, double *restrict g) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double *row = g + i * (i + j);
            row[j] += 1.0;
        }
}
