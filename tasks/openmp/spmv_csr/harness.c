#include <math.h>
#include <stdlib.h>
#include "kernopt.h"

#define MAXROW 16 /* entries per row: uniform in 0..min(MAXROW, n) */

void spmv_csr(long n, const int64_t *restrict rowptr, const int32_t *restrict col,
              const double *restrict val, const double *restrict x, double *restrict y,
              double *restrict work);

static int64_t *rowptr;
static int32_t *col;
static double *val, *x, *y, *work; /* work: scratch, not compared */
static long cap;                   /* allocated entries in col/val */

int ko_setup(long n, ko_buf *bufs) {
    free(rowptr); free(col); free(val); free(x); free(y); free(work);
    cap = n * (MAXROW < n ? MAXROW : n);
    if (cap < 1) cap = 1;
    rowptr = malloc((size_t)(n + 1) * sizeof *rowptr);
    col = malloc((size_t)cap * sizeof *col);
    val = malloc((size_t)cap * sizeof *val);
    x = malloc((size_t)n * sizeof *x);
    y = malloc((size_t)n * sizeof *y);
    work = malloc((size_t)n * sizeof *work);
    /* the structure (and so nnz) changes with the seed; counts cover the largest possible case.
     * Unused tail entries are filled too, so the input checksum stays well defined. */
    bufs[0] = (ko_buf){"rowptr", KO_I64, KO_IN, (size_t)(n + 1), rowptr};
    bufs[1] = (ko_buf){"col", KO_I32, KO_IN, (size_t)cap, col};
    bufs[2] = (ko_buf){"val", KO_F64, KO_IN, (size_t)cap, val};
    bufs[3] = (ko_buf){"x", KO_F64, KO_IN, (size_t)n, x};
    bufs[4] = (ko_buf){"y", KO_F64, KO_OUT, (size_t)n, y};
    return 5;
}

void ko_fill(long n, uint64_t seed) {
    uint64_t s = seed;
    long maxrow = MAXROW < n ? MAXROW : n;
    int64_t k = 0;
    rowptr[0] = 0;
    for (long i = 0; i < n; i++) {
        long len = (long)(ko_rng_next(&s) % (uint64_t)(maxrow + 1));
        /* len distinct columns, kept sorted (insertion with rejection of duplicates) */
        long have = 0;
        while (have < len) {
            int32_t c = (int32_t)(ko_rng_next(&s) % (uint64_t)n);
            long p = have;
            int dup = 0;
            while (p > 0 && col[k + p - 1] >= c) {
                if (col[k + p - 1] == c) { dup = 1; break; }
                p--;
            }
            if (dup) continue;
            for (long q = have; q > p; q--) col[k + q] = col[k + q - 1];
            col[k + p] = c;
            have++;
        }
        /* scale so a row's product has about half the magnitude of its input vector */
        double scale = len ? 0.5 * sqrt(3.0 / (double)len) : 0.0;
        for (long q = 0; q < len; q++) val[k + q] = scale * ko_rng_uniform(&s, -1.0, 1.0);
        k += len;
        rowptr[i + 1] = k;
    }
    for (long q = k; q < cap; q++) { col[q] = 0; val[q] = 0.0; }
    for (long i = 0; i < n; i++) x[i] = ko_rng_uniform(&s, -1.0, 1.0);
    for (long i = 0; i < n; i++) work[i] = NAN; /* the kernel must not rely on old work contents */
}

void ko_call(long n) {
    spmv_csr(n, rowptr, col, val, x, y, work);
}
