/* row pointer offset reads memory (idx[i]) that a later iteration's predecessor writes */
void f(int *restrict idx, const double *restrict b, double *restrict out, int n) {
  for (int i = 0; i < n - 1; i++) {
    const double *row = b + idx[i];
    out[i] = row[0];
    idx[i + 1] = i;
  }
}
