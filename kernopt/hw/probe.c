/* kernopt hardware probe: the sustainable memory bandwidth and the peak FP64 rate of the machine
 * candidates run on, measured inside the sandbox they run in (kernopt/hw/probe.py compiles this with
 * gcc -O3 -march=native -fopenmp and runs it once per host fingerprint).
 *
 *   probe THREADS REPS FLOOR_MB CAP_MB      e.g.  probe 1,2,4,8 5 64 1024
 *
 * Bandwidth: a STREAM triad a[i] = b[i] + s * c[i] over three arrays of 4x the last-level cache each
 * (at least FLOOR_MB, at most CAP_MB), OpenMP `parallel for schedule(static)` with each thread count
 * in THREADS; every count gets one untimed pass, then REPS timed passes, and the best is reported.
 * Bytes counted per element: 3 x 8 (b and c read, a written), as STREAM counts them: the extra read a
 * write-allocate cache does for `a` is NOT counted (kernopt's [roofline] byte counts do not count it
 * either, so the two agree).
 * Peak: every thread runs FMA chains acc = acc * x + y on NACC independent vector accumulators (enough
 * to hide the FMA latency on current cores), counted as 2 flops per lane; best of TRIALS short trials per
 * count (many short trials find a quiet moment on a shared machine more often than a few long ones).
 *
 * Output: one "key value..." line per figure, "done" last. Nothing here reads input but argv and sysfs.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__AVX512F__)
#define VBYTES 64
#define NACC 16 /* 32 zmm registers */
#elif defined(__AVX__)
#define VBYTES 32
#define NACC 12 /* 16 ymm registers: 12 accumulators, x, y */
#else
#define VBYTES 16
#define NACC 12
#endif
#define LANES (VBYTES / 8)
#define TRIALS 7
#define TRIAL_S 0.05
typedef double vd __attribute__((vector_size(VBYTES)));

static long read_long_file(const char *path, int kib_suffix) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = {0};
    long v = -1;
    if (fgets(buf, sizeof buf, f)) {
        char *end = NULL;
        v = strtol(buf, &end, 10);
        if (kib_suffix && end && (*end == 'K' || *end == 'k')) v *= 1024;
        else if (kib_suffix && end && (*end == 'M' || *end == 'm')) v *= 1024 * 1024;
    }
    fclose(f);
    return v;
}

/* How many CPUs a sysfs cpu list ("0-3,8-11") names. */
static long count_cpu_list(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[4096] = {0};
    long count = 0;
    if (fgets(buf, sizeof buf, f)) {
        for (char *tok = strtok(buf, ",\n"); tok; tok = strtok(NULL, ",\n")) {
            long lo = 0, hi = 0;
            int got = sscanf(tok, "%ld-%ld", &lo, &hi);
            if (got == 2 && hi >= lo) count += hi - lo + 1;
            else if (got >= 1) count += 1;
        }
    }
    fclose(f);
    return count;
}

/* Total last-level cache in bytes: the size of cpu0's highest data/unified cache level times the
 * number of its instances (CPUs configured / CPUs sharing one); 0 when sysfs does not say. */
static long llc_bytes(void) {
    long best_level = -1, best_size = 0, best_share = 1;
    for (int idx = 0; idx < 16; idx++) {
        char path[256], type[32] = {0};
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", idx);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(type, sizeof type, f)) type[0] = 0;
        fclose(f);
        if (strncmp(type, "Instruction", 11) == 0) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        long level = read_long_file(path, 0);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        long size = read_long_file(path, 1);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/shared_cpu_list", idx);
        long share = count_cpu_list(path);
        if (level > best_level && size > 0) {
            best_level = level, best_size = size, best_share = share > 0 ? share : 1;
        }
    }
    if (best_size <= 0) return 0;
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    long instances = cpus > 0 ? (cpus + best_share - 1) / best_share : 1;
    return best_size * (instances > 0 ? instances : 1);
}

static void triad(double *restrict a, const double *restrict b, const double *restrict c, double s, long n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

/* FMA chains on NACC independent accumulators; returns a value that depends on all of them. */
static double fma_chains(long iters, double x, double y) {
    vd acc[NACC];
    vd vx = (vd){0} + x, vy = (vd){0} + y;
    for (int k = 0; k < NACC; k++) acc[k] = (vd){0} + 1e-3 * (k + 1);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 32
        for (int k = 0; k < NACC; k++) acc[k] = acc[k] * vx + vy;
    }
    double sum = 0.0;
    for (int k = 0; k < NACC; k++)
        for (int l = 0; l < LANES; l++) sum += acc[k][l];
    return sum;
}

/* Seconds for `threads` threads each running fma_chains(iters); *sink keeps the results alive. */
static double time_fma(int threads, long iters, double x, double y, double *sink) {
    double total = 0.0;
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += fma_chains(iters, x, y);
    double t = omp_get_wtime() - t0;
    *sink += total;
    return t;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s THREADS REPS FLOOR_MB CAP_MB\n", argv[0]);
        return 2;
    }
    int counts[64], ncounts = 0;
    for (char *tok = strtok(argv[1], ","); tok && ncounts < 64; tok = strtok(NULL, ",")) {
        int t = atoi(tok);
        if (t > 0) counts[ncounts++] = t;
    }
    int reps = atoi(argv[2]);
    long floor_bytes = atol(argv[3]) << 20, cap_bytes = atol(argv[4]) << 20;
    if (ncounts == 0 || reps < 1 || floor_bytes <= 0 || cap_bytes < floor_bytes) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    int max_threads = 1;
    for (int i = 0; i < ncounts; i++) max_threads = counts[i] > max_threads ? counts[i] : max_threads;

    long llc = llc_bytes();
    long array_bytes = 4 * llc;
    if (array_bytes < floor_bytes) array_bytes = floor_bytes;
    if (array_bytes > cap_bytes) array_bytes = cap_bytes;
    long n = array_bytes / (long)sizeof(double);
    printf("llc_bytes %ld\narray_bytes %ld\nvector_bits %d\naccumulators %d\ncompiler %s\n",
           llc, n * (long)sizeof(double), VBYTES * 8, NACC, __VERSION__);
    fflush(stdout);

    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b), *c = malloc((size_t)n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "cannot allocate 3 x %ld bytes\n", n * (long)sizeof(double));
        return 3;
    }
    /* First touch by the widest team, as the triad's static schedule will read them. */
#pragma omp parallel for num_threads(max_threads) schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = 1.0 + (double)(i & 7);
        c[i] = 0.5;
    }
    for (int ti = 0; ti < ncounts; ti++) {
        int t = counts[ti];
        double best = 1e30;
        for (int r = 0; r <= reps; r++) {
            double t0 = omp_get_wtime();
            triad(a, b, c, 0.5 + 1e-3 * r, n, t);
            double dt = omp_get_wtime() - t0;
            if (r > 0 && dt < best) best = dt; /* pass 0 is the untimed warm-up */
        }
        printf("bandwidth %d %.6f\n", t, 3.0 * 8.0 * (double)n / best / 1e9);
        fflush(stdout);
    }
    double check = a[n / 2] + a[n - 1];
    free(a), free(b), free(c);

    /* Peak: calibrate the iteration count on one thread to ~TRIAL_S per trial. */
    volatile double vx = 0.9999999, vy = 1e-7; /* opaque to the compiler; acc converges to y / (1 - x) = 1 */
    double x = vx, y = vy, sink = 0.0;
    long iters = 1 << 14;
    for (;;) {
        double dt = time_fma(1, iters, x, y, &sink);
        if (dt > 0.02 || iters > (1L << 40)) {
            iters = (long)((double)iters * TRIAL_S / (dt > 1e-9 ? dt : 1e-9)) + 1;
            break;
        }
        iters *= 4;
    }
    for (int ti = 0; ti < ncounts; ti++) {
        int t = counts[ti];
        double best = 1e30;
        for (int r = 0; r < TRIALS; r++) {
            double dt = time_fma(t, iters, x, y, &sink);
            if (dt < best) best = dt;
        }
        printf("peak %d %.6f\n", t, 2.0 * NACC * LANES * (double)iters * t / best / 1e9);
        fflush(stdout);
    }
    printf("checksum %.6g\ndone\n", check + sink);
    return 0;
}
