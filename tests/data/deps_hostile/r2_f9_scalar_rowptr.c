void kernel(long n, double *restrict c, const double *restrict a) {
  double *r = c + n * n;            /* a scratch row after the matrix */
  r[0] = 0.0;
  for (long i = 0; i < n; i++)
    for (long k = 0; k < n; k++) {
      double *r = c + i * n;
      r[0] += a[i * n + k];
    }
}
