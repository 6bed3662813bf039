/* driver.c — kernopt's trusted main() for C-family tasks.
 *
 * Linked with the task's harness.c and the kernel under test. It decides the inputs (size, seed),
 * poisons outputs before every call, checksums inputs around every call, times only ko_call(),
 * and writes outputs and a line-per-call result file that the orchestrator reads. The kernel
 * object is checked before linking so it cannot define or reference any of these symbols.
 *
 * Built with -DKO_CUDA for cuda-c tasks: it also uploads inputs to the harness's device buffers,
 * poisons the device outputs before every call, synchronizes the device inside the timed region,
 * and downloads every buffer (inputs too, for the checksum) after the timer stops.
 *
 * usage: driver --result FILE --nonce STR --out-dir DIR --sizes N[,N..] --seeds S[,S..]
 *               [--timing --warmup W --reps R]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernopt.h"
#ifdef KO_MPI
#include <mpi.h>
#endif
#ifdef KO_CUDA
#include <cuda_runtime_api.h>
#endif

static int ko_rank = 0;

static double ko_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t ko_elem_size(ko_dtype t) {
    switch (t) {
    case KO_F64: case KO_I64: return 8;
    case KO_F32: case KO_I32: return 4;
    default: return 1;
    }
}

/* Input checksum: 64-bit words at a time (byte-wise FNV cost ~1 s per 300 MB of input). */
static uint64_t ko_fnv(const void *p, size_t bytes) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ULL, w;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001B3ULL;
        h ^= h >> 29;
    }
    for (; i < bytes; i++) { h ^= b[i]; h *= 1099511628211ULL; }
    return h;
}

static void ko_poison(ko_buf *b, int call_index) {
    size_t n = b->count;
    if (b->dtype == KO_F64) { double *d = (double *)b->data; for (size_t i = 0; i < n; i++) d[i] = NAN; }
    else if (b->dtype == KO_F32) { float *f = (float *)b->data; for (size_t i = 0; i < n; i++) f[i] = NAN; }
    else memset(b->data, (call_index & 1) ? 0x5A : 0xA5, n * ko_elem_size(b->dtype));
}

static int ko_parse_list(const char *s, long *out, int max) {
    int k = 0;
    while (*s && k < max) {
        char *end;
        out[k++] = strtol(s, &end, 10);
        if (end == s) return -1;
        s = (*end == ',') ? end + 1 : end;
    }
    return k;
}

static void ko_fail(const char *msg) {
    fprintf(stderr, "kernopt driver: %s\n", msg);
#ifdef KO_MPI
    MPI_Abort(MPI_COMM_WORLD, 3);
#endif
    exit(3);
}

#ifdef KO_CUDA
static void ko_cuda(cudaError_t e, const char *what, const char *buf) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "kernopt driver: CUDA error %s%s%s: %s\n", what, buf ? " " : "", buf ? buf : "", cudaGetErrorString(e));
    exit(3);
}

/* Before the call: IN/INOUT buffers to the device, device OUT buffers poisoned (0xFF bytes: NaN). */
static void ko_to_device(ko_buf *bufs, int nb) {
    for (int i = 0; i < nb; i++) {
        size_t bytes = bufs[i].count * ko_elem_size(bufs[i].dtype);
        if (!bufs[i].device) ko_fail("cuda-c harness: a buffer has no device copy (ko_buf.device)");
        if (bufs[i].role == KO_OUT) ko_cuda(cudaMemset(bufs[i].device, 0xFF, bytes), "poisoning", bufs[i].name);
        else ko_cuda(cudaMemcpy(bufs[i].device, bufs[i].data, bytes, cudaMemcpyHostToDevice), "uploading", bufs[i].name);
    }
    ko_cuda(cudaDeviceSynchronize(), "before the call", NULL);
}

/* After the call (untimed): every buffer back to the host, inputs included. */
static void ko_from_device(ko_buf *bufs, int nb) {
    for (int i = 0; i < nb; i++)
        ko_cuda(cudaMemcpy(bufs[i].data, bufs[i].device, bufs[i].count * ko_elem_size(bufs[i].dtype), cudaMemcpyDeviceToHost),
                "downloading", bufs[i].name);
}
#endif

/* One call of the kernel: fill, poison, checksum, time, re-checksum. Returns the kernel's time
 * (max over ranks under MPI); *mutated is the name of a changed input buffer or NULL. */
static double ko_one_call(long n, uint64_t seed, ko_buf *bufs, int nb, int call_index,
                          const char **mutated) {
    uint64_t sums[KO_MAX_BUFS];
    ko_fill(n, seed);
    for (int i = 0; i < nb; i++) {
        if (bufs[i].role == KO_OUT) ko_poison(&bufs[i], call_index);
        sums[i] = bufs[i].role == KO_IN ? ko_fnv(bufs[i].data, bufs[i].count * ko_elem_size(bufs[i].dtype)) : 0;
    }
#ifdef KO_MPI
    MPI_Barrier(MPI_COMM_WORLD);
#endif
#ifdef KO_CUDA
    ko_to_device(bufs, nb);
#endif
    double t0 = ko_now();
    ko_call(n);
#ifdef KO_CUDA
    ko_cuda(cudaGetLastError(), "launching the kernel", NULL);
    ko_cuda(cudaDeviceSynchronize(), "in the kernel", NULL);
#endif
    double dt = ko_now() - t0;
#ifdef KO_CUDA
    ko_from_device(bufs, nb);
#endif
#ifdef KO_MPI
    double local = dt;
    MPI_Allreduce(&local, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
    int bad = -1;
    for (int i = 0; i < nb; i++)
        if (bufs[i].role == KO_IN && ko_fnv(bufs[i].data, bufs[i].count * ko_elem_size(bufs[i].dtype)) != sums[i]) { bad = i; break; }
#ifdef KO_MPI
    int lbad = bad, gbad;
    MPI_Allreduce(&lbad, &gbad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    bad = gbad;
#endif
    *mutated = bad >= 0 ? bufs[bad].name : NULL;
    return dt;
}

static void ko_write_outputs(const char *dir, long n, uint64_t seed, int call, ko_buf *bufs, int nb,
                             char *fname, size_t fname_len) {
    snprintf(fname, fname_len, "o_%ld_%llu_%d.bin", n, (unsigned long long)seed, call);
    if (ko_rank != 0) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, fname);
    FILE *f = fopen(path, "wb");
    if (!f) ko_fail("cannot write output file");
    for (int i = 0; i < nb; i++)
        if (bufs[i].role != KO_IN) fwrite(bufs[i].data, ko_elem_size(bufs[i].dtype), bufs[i].count, f);
    fclose(f);
}

int main(int argc, char **argv) {
    const char *result = NULL, *nonce = "", *out_dir = ".", *sizes_s = NULL, *seeds_s = NULL;
    int timing = 0, warmup = 1, reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--timing")) { timing = 1; continue; }
        if (!v) ko_fail("missing value for an option");
        if (!strcmp(a, "--result")) result = v;
        else if (!strcmp(a, "--nonce")) nonce = v;
        else if (!strcmp(a, "--out-dir")) out_dir = v;
        else if (!strcmp(a, "--sizes")) sizes_s = v;
        else if (!strcmp(a, "--seeds")) seeds_s = v;
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else ko_fail("unknown option");
        i++;
    }
#ifdef KO_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &ko_rank);
#endif
    long sizes[64], seeds[64];
    int ns = sizes_s ? ko_parse_list(sizes_s, sizes, 64) : -1;
    int nseed = seeds_s ? ko_parse_list(seeds_s, seeds, 64) : -1;
    if (!result || ns <= 0 || nseed <= 0) ko_fail("need --result, --sizes and --seeds");
    FILE *rf = NULL;
    if (ko_rank == 0 && !(rf = fopen(result, "w"))) ko_fail("cannot open result file");
    ko_buf bufs[KO_MAX_BUFS];
    char fname[256];
    int call_index = 0;
    for (int s = 0; s < ns; s++) {
        long n = sizes[s];
        memset(bufs, 0, sizeof bufs);
        int nb = ko_setup(n, bufs);
        if (nb <= 0 || nb > KO_MAX_BUFS) ko_fail("ko_setup returned a bad buffer count");
        if (rf) {
            fprintf(rf, "{\"setup\": %ld, \"bufs\": [", n);
            for (int i = 0; i < nb; i++)
                fprintf(rf, "%s{\"name\": \"%s\", \"dtype\": %d, \"role\": %d, \"count\": %zu}", i ? ", " : "",
                        bufs[i].name, (int)bufs[i].dtype, (int)bufs[i].role, bufs[i].count);
            fprintf(rf, "]}\n");
            fflush(rf);
        }
        int calls = timing ? warmup + reps : nseed;
        for (int c = 0; c < calls; c++) {
            uint64_t seed = (uint64_t)seeds[c % nseed];
            const char *mutated = NULL;
            double dt = ko_one_call(n, seed, bufs, nb, call_index++, &mutated);
            /* every call after warm-up is checked, timed ones included */
            fname[0] = 0;
            if (!timing || c >= warmup) ko_write_outputs(out_dir, n, seed, c, bufs, nb, fname, sizeof fname);
            if (rf) {
                fprintf(rf, "{\"n\": %ld, \"seed\": %llu, \"call\": %d, \"warmup\": %s, \"time\": %.9f, \"mutated\": %s%s%s, \"file\": \"%s\"}\n",
                        n, (unsigned long long)seed, c, (timing && c < warmup) ? "true" : "false", dt,
                        mutated ? "\"" : "", mutated ? mutated : "null", mutated ? "\"" : "", fname);
                fflush(rf);
            }
        }
    }
    if (rf) { fprintf(rf, "{\"done\": \"%s\"}\n", nonce); fclose(rf); }
#ifdef KO_MPI
    MPI_Finalize();
#endif
    return 0;
}
