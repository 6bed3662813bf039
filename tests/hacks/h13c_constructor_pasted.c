/* Hack 13c: the constructor attribute is assembled by token pasting, so the text gate does not see
 * it; the compiled object carries an .init_array entry, which the object gate rejects. The
 * constructor itself only uses allowed symbols (it pre-fills a scratch buffer before main). */
#include <string.h>
#define CAT(x, y) x##y
#define CTOR __attribute__((CAT(con, structor)))

static double scratch[4096];

CTOR static void early(void) { memset(scratch, 0, sizeof scratch); }

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = scratch[0];
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
