/* row pointer offset names k: at the declaration k is the parameter, at the use k is an inner loop variable */
void f(double *restrict a, const double *restrict b, int n, int k) {
  for (int i = 0; i < n; i++) {
    double *row = a + k;
    for (int k = 0; k < n; k++)
      row[0] += b[k];
  }
}
