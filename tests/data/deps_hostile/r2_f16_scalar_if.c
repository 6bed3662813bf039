/* row sums of the upper triangle */
void kernel(long n, double *restrict c, const double *restrict a) {
  for (long i = 0; i < n; i++)
    for (long k = 0; k < n; k++)
      if (k >= i)
        c[i] += a[i * n + k];
}
