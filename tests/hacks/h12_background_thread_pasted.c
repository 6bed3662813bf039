/* Hack 12 (obfuscated): pthread_create reached through a pasted name, past the text gate. */
#include <pthread.h>
#define CAT(x, y) x##y

struct job { long n; const double *a, *b; double *c; };
static struct job job;

static void *work(void *arg) {
    struct job *j = arg;
    long n = j->n;
    for (long i = 0; i < n; i++)
        for (long jj = 0; jj < n; jj++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += j->a[i * n + k] * j->b[k * n + jj];
            j->c[i * n + jj] = s;
        }
    return 0;
}

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    pthread_t t;
    job = (struct job){n, a, b, c};
    CAT(pthread_, create)(&t, 0, work, &job);
}
