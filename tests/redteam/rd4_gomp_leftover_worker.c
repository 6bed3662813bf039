/* Red team, issue 15 class 4e: an OpenMP team left running after the kernel returns.
 *
 * GOMP_parallel_start (libgomp's split form of a parallel region) starts a team; the caller is
 * meant to run its share and then call GOMP_parallel_end, which joins the team. This kernel starts
 * a one-worker team on its first call and never joins it: the worker keeps running after the call
 * returns (here it only spins, a stand-in for work done outside the timed call). The kernel's
 * answer is the naive one.
 * Against a name-pattern allow-list: accepted, the worker runs outside every timed call.
 * Defence: the object gate refuses GOMP_parallel_start ("kernel references GOMP_parallel_start");
 * the monitor counts CPU outside the timed calls.
 * Measured against 358822f, local: accepted (ok), the worker spinning outside every call.
 */
void GOMP_parallel_start(void (*fn)(void *), void *data, unsigned num_threads);
int omp_get_thread_num(void);

static volatile long spins;

static void leftover(void *data) {
    (void)data;
    if (omp_get_thread_num() == 0) return;
    for (;;) spins++;
}

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    static int started;
    if (!started) {
        started = 1;
        GOMP_parallel_start(leftover, 0, 2);
        leftover(0);  /* the caller's share: nothing; no GOMP_parallel_end */
    }
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
