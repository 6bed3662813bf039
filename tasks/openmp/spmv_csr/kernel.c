/* Serial baseline: NITER steps of the fixed-point iteration y <- A y + x with a CSR matrix A,
 * starting from y = x. Row i holds entries val[k], col[k] for rowptr[i] <= k < rowptr[i+1].
 * work: n-element scratch (garbage on entry). */
#include <stdint.h>

#define NITER 20

/* out = A * v + b */
static void spmv(long n, const int64_t *restrict rowptr, const int32_t *restrict col,
                 const double *restrict val, const double *restrict v, const double *restrict b,
                 double *restrict out) {
    for (long i = 0; i < n; i++) {
        double s = 0.0;
        for (int64_t k = rowptr[i]; k < rowptr[i + 1]; k++) {
            s += val[k] * v[col[k]];
        }
        out[i] = s + b[i];
    }
}

void spmv_csr(long n, const int64_t *restrict rowptr, const int32_t *restrict col,
              const double *restrict val, const double *restrict x, double *restrict y,
              double *restrict work) {
    for (long i = 0; i < n; i++) {
        y[i] = x[i];
    }
    for (int it = 0; it < NITER; it++) {
        spmv(n, rowptr, col, val, y, x, work);
        for (long i = 0; i < n; i++) {
            y[i] = work[i];
        }
    }
}
