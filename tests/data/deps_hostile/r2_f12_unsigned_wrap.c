#include <stddef.h>
void kernel(size_t n, double *restrict a, double *restrict b) {
  for (size_t i = 0; i < n; i++) {
    if (i - 1 >= n)          /* unsigned: true only at i == 0 (i - 1 wraps to SIZE_MAX) */
      b[0] = a[0] * 2.0;
    a[i] = a[i] + b[0];
  }
}
