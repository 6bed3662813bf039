/* Extra: crashes with a segmentation fault: a volatile store through a null pointer read from a
 * volatile variable (so the compiler can neither drop the store nor turn it into a trap). */
static double *volatile bad_pointer;

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)a; (void)b;
    for (long i = 0; i < n * n; i++) c[i] = 0.0;
    *(volatile double *)bad_pointer = 1.0;
}
