/* Hack 17e: a parallel kernel with no OpenMP in its text: it calls libgomp's GOMP_parallel itself and
 * hands out rows with an atomic counter. Every worker also writes the shared `busy` flag, a race
 * that never changes an output. A race check that looks for `omp` in the text skipped it; the
 * object calls GOMP_parallel, so it is checked. */
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);

struct job {
    long n, next;
    const double *a, *b;
    double *c;
    int busy;
};

static void rows(void *p) {
    struct job *job = p;
    long n = job->n;
    for (;;) {
        long i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
        if (i >= n) break;
        job->busy = 1;
        for (long j = 0; j < n; j++) {
            double t = 0.0;
            for (long k = 0; k < n; k++) t += job->a[i * n + k] * job->b[k * n + j];
            job->c[i * n + j] = t;
        }
    }
}

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    struct job job = {n, 0, a, b, c, 0};
    GOMP_parallel(rows, &job, 0, 0);
}
