static double sq(double x) { return x * x; }
void kernel(long n, double *restrict c) {
  double acc = 0.0;
  double sq(double x) { acc += x; return acc; }
  for (long i = 0; i < n; i++)
    c[i] = sq(c[i]);
}
