void kernel(long n, long m, double *restrict total, const double *restrict a) {
  #pragma omp parallel for
  for (long i = 0; i < n; i++)
    for (long k = 0; k < m; k++) {
      #pragma omp atomic
      total[0] += a[i * m + k];
    }
}
