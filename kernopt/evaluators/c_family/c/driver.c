/* driver.c — kernopt's main() for C-family tasks: the measured program's side of the protocol.
 *
 * Linked with the task's harness.c and the kernel under test, so everything here is within the
 * kernel's reach: this file holds no clock, no seed it has not been handed, and no verdict. The
 * trusted monitor (monitor.c, a process of its own) hands it one command at a time over a named
 * pipe (protocol.h): set up a size, fill the inputs for one seed (sent only when that call starts),
 * call the kernel, finish the call. The monitor takes the timestamps, stops this process between
 * calls, and reads the inputs and outputs straight from its memory.
 *
 * After set-up the process confines itself with a seccomp filter (kernopt_seccomp.h): a kernel that
 * reaches a libc function by pointer still cannot open, exec, fork, connect or signal others.
 *
 * Built with -DKO_MPI: every rank runs this loop; rank 0 talks to the monitor and broadcasts each
 * command. Built with -DKO_CUDA: inputs are uploaded and device outputs poisoned before the call,
 * the device is synchronized before the call counts as done, and every buffer is downloaded after.
 * Built with -DKO_TSAN (the race check's ThreadSanitizer build): the OpenMP runtime is started before the
 * filter (it loads Archer and starts its threads at the first parallel region), the sanitizer's reports go
 * to descriptor KO_REPORT_FD, which the monitor opened, and the filter is the strict one plus what the
 * sanitizer's runtime needs, with that descriptor kept out of the kernel's reach (seccomp.h).
 *
 * usage: driver            (the commands come from ./ko.cmd; answers go to ./ko.ack)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kernopt.h"
#include "protocol.h"
#ifdef KO_MPI
#include <mpi.h>
#endif
#ifdef KO_CUDA
#include <cuda_runtime_api.h>
#endif
#include "seccomp.h"
#ifdef KO_TSAN
#include <sanitizer/common_interface_defs.h>
#endif

static int ko_rank = 0;
#ifdef KO_MPI
static int32_t ko_peers[KO_MAX_RANKS];
#endif

static size_t ko_elem_size(ko_dtype t) {
    switch (t) {
    case KO_F64: case KO_I64: return 8;
    case KO_F32: case KO_I32: return 4;
    default: return 1;
    }
}

static void ko_fail(const char *msg) {
    fprintf(stderr, "kernopt driver: %s\n", msg);
#ifdef KO_MPI
    MPI_Abort(MPI_COMM_WORLD, 3);
#endif
    exit(3);
}

static void ko_poison(ko_buf *b, uint32_t call_index) {
    size_t n = b->count;
    if (b->dtype == KO_F64) { double *d = (double *)b->data; for (size_t i = 0; i < n; i++) d[i] = NAN; }
    else if (b->dtype == KO_F32) { float *f = (float *)b->data; for (size_t i = 0; i < n; i++) f[i] = NAN; }
    else memset(b->data, (call_index & 1) ? 0x5A : 0xA5, n * ko_elem_size(b->dtype));
}

#ifdef KO_MPI
/* Input checksums on every rank (the monitor reads rank 0's inputs itself; this covers the others). */
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
#endif

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

/* After the call: every buffer back to the host, inputs included, for the monitor to read. */
static void ko_from_device(ko_buf *bufs, int nb) {
    for (int i = 0; i < nb; i++)
        ko_cuda(cudaMemcpy(bufs[i].data, bufs[i].device, bufs[i].count * ko_elem_size(bufs[i].dtype), cudaMemcpyDeviceToHost),
                "downloading", bufs[i].name);
}
#endif

static int ko_cmd_fd = -1, ko_ack_fd = -1;

static void ko_read_cmd(ko_cmd *c) {
    if (ko_rank == 0) {
        size_t got = 0;
        while (got < sizeof *c) {
            ssize_t r = read(ko_cmd_fd, (char *)c + got, sizeof *c - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) ko_fail("the monitor's command pipe closed");
            got += (size_t)r;
        }
    }
#ifdef KO_MPI
    MPI_Bcast(c, (int)sizeof *c, MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
}

static void ko_send(ko_ack *a) {
    if (ko_rank != 0) return;
    for (;;) {
        ssize_t w = write(ko_ack_fd, a, sizeof *a);
        if (w == (ssize_t)sizeof *a) return;
        if (w < 0 && errno == EINTR) continue;
        ko_fail("cannot answer the monitor");
    }
}

int main(int argc, char **argv) {
#ifdef KO_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &ko_rank);
    int nranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks > KO_MAX_RANKS) ko_fail("too many ranks");
#else
    (void)argc; (void)argv;
#endif
    if (ko_rank == 0) {
        ko_cmd_fd = open(KO_CMD_FIFO, O_RDONLY | O_CLOEXEC);
        ko_ack_fd = open(KO_ACK_FIFO, O_WRONLY | O_CLOEXEC);
        if (ko_cmd_fd < 0 || ko_ack_fd < 0) ko_fail("cannot open the monitor's pipes (run me under kernopt's monitor)");
    }
#ifdef KO_MPI
    {   /* Open MPI attaches a peer's shared memory on first contact: make every contact now, eager and
         * large (single-copy) messages both, so the filter can refuse opening files afterwards. */
        const int words = 1 << 14;
        int *out = calloc((size_t)nranks * words, sizeof *out), *in = calloc((size_t)nranks * words, sizeof *in);
        if (!out || !in) ko_fail("out of memory");
        MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD);
        MPI_Alltoall(out, words, MPI_INT, in, words, MPI_INT, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        free(out);
        free(in);
        /* The ranks' pids: the only processes Open MPI's single-copy transport may read or write (not
         * mpirun, which runs unfiltered: code written into it would work outside every measurement). */
        int32_t me = (int32_t)getpid();
        MPI_Allgather(&me, 1, MPI_INT, ko_peers, 1, MPI_INT, MPI_COMM_WORLD);
    }
#endif
#if defined(KO_TSAN)
    {   /* Start the OpenMP runtime now: at its first parallel region libomp opens files and maps Archer's
         * code, which the filter refuses afterwards. */
        volatile int ko_started = 0;
#pragma omp parallel
        {
#pragma omp atomic
            ko_started++;
        }
        (void)ko_started;
    }
    __sanitizer_set_report_fd((void *)(uintptr_t)KO_REPORT_FD);
    ko_confine(KO_CONFINE_SANITIZER, NULL, 0);
#elif defined(KO_MPI)
    ko_confine(KO_CONFINE_RUNTIME, ko_peers, nranks);
#elif defined(KO_CUDA)
    ko_confine(KO_CONFINE_RUNTIME, NULL, 0);
#else
    ko_confine(KO_CONFINE_STRICT, NULL, 0);
#endif
    static ko_buf bufs[KO_MAX_BUFS];
    static ko_ack ack;
    int nb = 0;
    long n = 0;
#ifdef KO_MPI
    uint64_t sums[KO_MAX_BUFS];
#endif
    for (;;) {
        ko_cmd c;
        ko_read_cmd(&c);
        memset(&ack, 0, sizeof ack);
        ack.call = c.call;
        if (c.op == KO_OP_QUIT) break;
        if (c.op == KO_OP_SETUP) {
            n = (long)c.n;
            memset(bufs, 0, sizeof bufs);
            nb = ko_setup(n, bufs);
            if (nb <= 0 || nb > KO_MAX_BUFS) ko_fail("ko_setup returned a bad buffer count");
            ack.op = KO_ACK_SETUP;
            ack.value = nb;
            for (int i = 0; i < nb; i++) {
                ack.bufs[i].addr = (uint64_t)(uintptr_t)bufs[i].data;
                ack.bufs[i].count = bufs[i].count;
                ack.bufs[i].dtype = (uint32_t)bufs[i].dtype;
                ack.bufs[i].role = (uint32_t)bufs[i].role;
                snprintf(ack.bufs[i].name, KO_NAME_LEN, "%s", bufs[i].name ? bufs[i].name : "");
            }
            int32_t pid = (int32_t)getpid();
#ifdef KO_MPI
            MPI_Gather(&pid, 1, MPI_INT, ack.pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
            ack.nranks = nranks;
#else
            ack.pids[0] = pid;
            ack.nranks = 1;
#endif
            ko_send(&ack);
        } else if (c.op == KO_OP_FILL) {
            if (!nb || c.n != n) ko_fail("fill before set-up");
            ko_fill(n, c.seed);
            for (int i = 0; i < nb; i++) {
                if (bufs[i].role == KO_OUT) ko_poison(&bufs[i], c.call);
#ifdef KO_MPI
                sums[i] = bufs[i].role == KO_IN ? ko_fnv(bufs[i].data, bufs[i].count * ko_elem_size(bufs[i].dtype)) : 0;
#endif
            }
#ifdef KO_CUDA
            ko_to_device(bufs, nb);
#endif
#ifdef KO_MPI
            MPI_Barrier(MPI_COMM_WORLD);
#endif
            ack.op = KO_ACK_READY;
            ko_send(&ack);
        } else if (c.op == KO_OP_GO) {
            ko_call(n);
#ifdef KO_CUDA
            ko_cuda(cudaGetLastError(), "launching the kernel", NULL);
            ko_cuda(cudaDeviceSynchronize(), "in the kernel", NULL);
#endif
#ifdef KO_MPI
            MPI_Barrier(MPI_COMM_WORLD);  /* the call is done when every rank is */
#endif
            ack.op = KO_ACK_DONE;
            ko_send(&ack);
        } else if (c.op == KO_OP_POST) {
#ifdef KO_CUDA
            ko_from_device(bufs, nb);
#endif
            int bad = 0;  /* bit i: input i changed on some rank */
#ifdef KO_MPI
            for (int i = 0; i < nb; i++)
                if (bufs[i].role == KO_IN && ko_fnv(bufs[i].data, bufs[i].count * ko_elem_size(bufs[i].dtype)) != sums[i]) bad |= 1 << i;
            int lbad = bad;
            MPI_Allreduce(&lbad, &bad, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);
#endif
            ack.op = KO_ACK_POSTED;
            ack.value = bad;
            ko_send(&ack);
        } else {
            ko_fail("unknown command");
        }
    }
#ifdef KO_MPI
    MPI_Finalize();
#endif
    return 0;
}
