/* monitor.c — kernopt's trusted monitor: the clock, the seeds and every measured fact live here,
 * in a process the candidate's kernel cannot touch.
 *
 * It starts the measured program (driver.c + harness + kernel, directly or under mpirun) and hands
 * it one command at a time over named pipes (protocol.h). For every call of the kernel it
 *   1. sends the call's seed only when the call starts (the plan with every seed is read from a
 *      file that is deleted before the measured program exists; nothing secret is on any argv),
 *   2. stops the measured process(es) (SIGSTOP) once the inputs are filled, reads the inputs from
 *      their memory and hashes them with a key the kernel never sees, reads their CPU clocks,
 *   3. takes the start time, resumes them and says go; takes the end time when rank 0 says done,
 *   4. stops them again, reads their CPU clocks (the CPU used outside the timed windows is the
 *      work a kernel does in fills, warm-ups or leftover threads), re-hashes the inputs, copies
 *      the outputs out of their memory into a file it names itself, and resumes them.
 * Only this process writes its stdout: one JSON line per set-up and per call, then a closing line
 * with the host's nonce. The measured program's stdout and stderr go to this process's stderr.
 * It makes itself non-dumpable, so a process of the same user cannot ptrace it or read its memory.
 *
 * usage: monitor PLAN [--report FILE] -- COMMAND [ARGS...]
 * --report (the race check's ThreadSanitizer runs): FILE is created (it must not exist) and handed to the
 * measured program as descriptor KO_REPORT_FD, where the sanitizer writes its reports; nothing else of
 * the program's output reaches it, though the kernel can write to it too (the host validates it).
 * PLAN lines: "kernopt-plan NONCE POST" (POST 1: MPI and CUDA programs, which finish each call after
 * "done" with a "post" step: checks on every rank, downloads from the device), then "size N" (set up size N) and "call SEED RECORD" (one call;
 * RECORD 1: write its outputs to o_<index>.bin, 0: a warm-up whose outputs are not kept).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "protocol.h"

#define MAX_PLAN 100000
#define MAX_TOTAL_BYTES (64ULL << 30)  /* task.toml's limits.memory_mb is at most 64 GiB (kernopt/task.py) */
#define CHUNK (4u << 20)

typedef struct { int is_size; int64_t n; uint64_t seed; int record; } step;

static step plan[MAX_PLAN];
static int nplan;
static char nonce[64];
static int post_phase;  /* MPI and CUDA programs finish a call after "done" (checks, downloads) */
static pid_t child = -1;
static int cmd_fd = -1, ack_fd = -1;
static ko_ack table;          /* the current size's buffer table and rank pids */
static clockid_t cpu_clocks[KO_MAX_RANKS];
static unsigned char *chunk;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c > 0x7e) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* Ends the run: the reason goes on stdout (for the host) and stderr (for a person); the measured
 * processes are killed (the sandbox reaps whatever is left). */
static void fail(const char *why) {
    printf("{\"error\": ");
    json_str(why);
    printf("}\n");
    fflush(stdout);
    fprintf(stderr, "kernopt monitor: %s\n", why);
    for (int i = 0; i < table.nranks; i++) if (table.pids[i] > 0) kill(table.pids[i], SIGKILL);
    if (child > 0) kill(child, SIGKILL);
    exit(3);
}

static void read_plan(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) fail("cannot read the plan");
    char line[256];
    if (!fgets(line, sizeof line, f) || sscanf(line, "kernopt-plan %63s %d", nonce, &post_phase) != 2) fail("bad plan header");
    while (fgets(line, sizeof line, f)) {
        if (nplan >= MAX_PLAN) fail("plan too long");
        step *s = &plan[nplan];
        long long n;
        unsigned long long seed;
        int rec;
        if (sscanf(line, "size %lld", &n) == 1 && n >= 0) { s->is_size = 1; s->n = n; }
        else if (sscanf(line, "call %llu %d", &seed, &rec) == 2) { s->seed = seed; s->record = rec != 0; }
        else fail("bad plan line");
        nplan++;
    }
    fclose(f);
    if (unlink(path)) fail("cannot delete the plan");  /* before the measured program exists */
}

/* The measured program ended: say how, and stop. */
static void child_ended(int status, const char *phase) {
    char why[200];
    if (WIFSIGNALED(status))
        snprintf(why, sizeof why, "the measured program was killed by SIG%s (%s) during %s",
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?", strsignal(WTERMSIG(status)), phase);
    else
        snprintf(why, sizeof why, "the measured program exited with code %d during %s", WEXITSTATUS(status), phase);
    printf("{\"exit\": {\"signal\": %d, \"code\": %d}}\n", WIFSIGNALED(status) ? WTERMSIG(status) : 0,
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    child = -1;
    fail(why);
}

static void send_cmd(uint32_t op, uint32_t call, int64_t n, uint64_t seed, const char *phase) {
    ko_cmd c = {op, call, n, seed};
    ssize_t w;
    do w = write(cmd_fd, &c, sizeof c); while (w < 0 && errno == EINTR);
    if (w != (ssize_t)sizeof c) {
        char why[120];
        snprintf(why, sizeof why, "cannot send the command for %s", phase);
        fail(why);
    }
}

/* One answer of the expected kind, or the run ends (the measured program died or lied). */
static void recv_ack(ko_ack *a, uint32_t op, uint32_t call, const char *phase) {
    size_t got = 0;
    while (got < sizeof *a) {
        struct pollfd p = {ack_fd, POLLIN, 0};
        int r = poll(&p, 1, 20);
        if (r > 0) {
            ssize_t k = read(ack_fd, (char *)a + got, sizeof *a - got);
            if (k > 0) got += (size_t)k;
            else if (k < 0 && errno != EINTR && errno != EAGAIN) fail("cannot read the measured program's answer");
            continue;
        }
        int status;
        if (waitpid(child, &status, WNOHANG) == child) child_ended(status, phase);
    }
    if (a->op != op || a->call != call) {
        char why[160];
        snprintf(why, sizeof why, "protocol violation during %s: expected answer %u for call %u, got %u for call %u",
                 phase, op, call, a->op, a->call);
        fail(why);
    }
}

static int stat_field(pid_t pid, const char *sub, char *state, long *ppid) {
    char path[400], buf[512];
    snprintf(path, sizeof path, "/proc/%d/%sstat", (int)pid, sub);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) return -1;
    buf[k] = 0;
    char *rp = strrchr(buf, ')');
    if (!rp || sscanf(rp + 1, " %c %ld", state, ppid) != 2) return -1;
    return 0;
}

/* Is pid a descendant of this process (the measured program, or a rank under mpirun)? */
static int descendant(pid_t pid) {
    pid_t me = getpid();
    for (int depth = 0; depth < 32 && pid > 1; depth++) {
        char st;
        long ppid;
        if (stat_field(pid, "", &st, &ppid)) return 0;
        if (ppid == me) return 1;
        pid = (pid_t)ppid;
    }
    return 0;
}

/* Wait until every thread of pid is stopped (or gone). */
static void wait_stopped(pid_t pid) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    double deadline = now() + 10.0;
    for (;;) {
        DIR *d = opendir(dir);
        if (!d) return;  /* gone: the next answer says how */
        int running = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!isdigit((unsigned char)e->d_name[0])) continue;
            char sub[300], st = 'X';
            long ppid;
            snprintf(sub, sizeof sub, "task/%s/", e->d_name);
            if (stat_field(pid, sub, &st, &ppid) == 0 && !strchr("TtZXx", st)) running = 1;
        }
        closedir(d);
        if (!running) return;
        if (now() > deadline) fail("the measured program could not be stopped");
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

static void stop_all(void) {
    for (int i = 0; i < table.nranks; i++) kill(table.pids[i], SIGSTOP);
    for (int i = 0; i < table.nranks; i++) wait_stopped(table.pids[i]);
}

static void cont_all(void) {
    for (int i = 0; i < table.nranks; i++) kill(table.pids[i], SIGCONT);
}

static double cpu_all(void) {
    double total = 0;
    for (int i = 0; i < table.nranks; i++) {
        struct timespec ts;
        if (clock_gettime(cpu_clocks[i], &ts) == 0) total += (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    return total;
}

/* CPU-seconds the whole machine has been busy (every CPU, /proc/stat: user, nice, system, irq, softirq and
 * steal, in clock ticks), or -1 when it cannot be read. Its change across a call's window, less the measured
 * processes' own CPU there, is what everything else ran meanwhile (other programs, a neighbour VM's steal). */
static double host_busy(void) {
    char buf[256];
    int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) return -1;
    buf[k] = 0;
    unsigned long long v[8];
    if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) != 8)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz : -1;
}

/* Read `len` bytes at rank 0's address `addr` into chunk. */
static void read_mem(uint64_t addr, size_t len) {
    struct iovec local = {chunk, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t k = process_vm_readv(table.pids[0], &local, 1, &remote, 1, 0);
    if (k == (ssize_t)len) return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)table.pids[0]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        k = pread(fd, chunk, len, (off_t)addr);
        close(fd);
        if (k == (ssize_t)len) return;
    }
    fail("cannot read the measured program's buffers");
}

static uint64_t mix(uint64_t z) {  /* splitmix64's finalizer: the key of word i is mix(key + i * GAMMA) */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A keyed hash (NH: sum over 64-bit words of (lo + k_lo) * (hi + k_hi), mod 2^64, the last word
 * zero-padded). With a key the kernel never sees, no change it makes to a buffer keeps the hash but
 * by a 2^-32 chance. `*word` carries the position across chunks. */
static uint64_t nh(uint64_t key, const unsigned char *p, size_t len, uint64_t *word, uint64_t h) {
    size_t i = 0;
    for (; i < len; i += 8, (*word)++) {
        uint64_t w = 0;
        memcpy(&w, p + i, len - i >= 8 ? 8 : len - i);
        uint64_t k = mix(key + *word * 0x9E3779B97F4A7C15ULL);
        h += ((w & 0xffffffffULL) + (k & 0xffffffffULL)) * ((w >> 32) + (k >> 32));
    }
    return h;
}

static size_t elem_size(uint32_t dtype) { return dtype == 0 || dtype == 3 ? 8 : dtype == 4 ? 1 : 4; }

/* The keyed hash of buffer b, written to fd too when fd >= 0. `*word` carries the word position
 * from buffer to buffer (each buffer is zero-padded to whole words on its own). */
static uint64_t buf_hash(int b, uint64_t key, int fd, uint64_t *word, uint64_t h) {
    const ko_buf_desc *d = &table.bufs[b];
    uint64_t len = d->count * elem_size(d->dtype);
    for (uint64_t off = 0; off < len; off += CHUNK) {
        size_t part = len - off < CHUNK ? (size_t)(len - off) : CHUNK;
        read_mem(d->addr + off, part);
        h = nh(key, chunk, part, word, h);
        if (fd >= 0 && write(fd, chunk, part) != (ssize_t)part) fail("cannot write an output file");
    }
    return h;
}

/* The inputs' hashes (0 for the other buffers). */
static void input_hashes(uint64_t key, uint64_t *out) {
    for (int b = 0; b < table.value; b++) {
        uint64_t word = 0;
        out[b] = table.bufs[b].role == 0 ? buf_hash(b, key, -1, &word, 0) : 0;
    }
}

/* Copy the outputs (OUT and INOUT buffers, in order) to fd; returns their hash and byte count. */
static uint64_t copy_outputs(uint64_t key, int fd, uint64_t *bytes) {
    uint64_t h = 0, word = 0;
    *bytes = 0;
    for (int b = 0; b < table.value; b++) {
        if (table.bufs[b].role == 0) continue;
        h = buf_hash(b, key, fd, &word, h);
        *bytes += table.bufs[b].count * elem_size(table.bufs[b].dtype);
    }
    return h;
}

static void check_table(const ko_ack *a, int64_t n) {
    if (a->value <= 0 || a->value > 16) fail("bad buffer count in the set-up answer");
    if (a->nranks <= 0 || a->nranks > KO_MAX_RANKS) fail("bad rank count in the set-up answer");
    uint64_t total = 0;
    for (int b = 0; b < a->value; b++) {
        const ko_buf_desc *d = &a->bufs[b];
        if (d->dtype > 4 || d->role > 2) fail("bad buffer type in the set-up answer");
        if (d->count > MAX_TOTAL_BYTES) fail("buffer too large in the set-up answer");
        total += d->count * elem_size(d->dtype);
        if (total > MAX_TOTAL_BYTES) fail("buffers too large in the set-up answer");
        int len = 0;
        while (len < KO_NAME_LEN && d->name[len]) {
            char c = d->name[len++];
            if (!(isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-')) fail("bad buffer name in the set-up answer");
        }
        if (len == 0 || len == KO_NAME_LEN) fail("bad buffer name in the set-up answer");
    }
    for (int r = 0; r < a->nranks; r++) {
        if (a->pids[r] <= 1 || !descendant((pid_t)a->pids[r])) fail("a rank's pid in the set-up answer is not the measured program's");
        if (clock_getcpuclockid((pid_t)a->pids[r], &cpu_clocks[r])) fail("cannot read a rank's CPU clock");
    }
    printf("{\"setup\": %lld, \"ranks\": %d, \"bufs\": [", (long long)n, a->nranks);
    for (int b = 0; b < a->value; b++) {
        printf("%s{\"name\": ", b ? ", " : "");
        json_str(a->bufs[b].name);
        printf(", \"dtype\": %u, \"role\": %u, \"count\": %llu}", a->bufs[b].dtype, a->bufs[b].role,
               (unsigned long long)a->bufs[b].count);
    }
    printf("]}\n");
    fflush(stdout);
}

static uint64_t secret(void) {
    uint64_t k;
    if (getrandom(&k, sizeof k, 0) != (ssize_t)sizeof k) fail("no randomness");
    return k;
}

int main(int argc, char **argv) {
    const char *report = NULL;
    int cmd = 3;
    if (argc >= 6 && !strcmp(argv[2], "--report")) {
        report = argv[3];
        cmd = 5;
    }
    if (argc < cmd + 1 || strcmp(argv[cmd - 1], "--")) {
        fprintf(stderr, "usage: monitor PLAN [--report FILE] -- COMMAND [ARGS...]\n");
        return 2;
    }
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    read_plan(argv[1]);
    chunk = malloc(CHUNK);
    if (!chunk) fail("out of memory");
    unlink(KO_CMD_FIFO);
    unlink(KO_ACK_FIFO);
    if (mkfifo(KO_CMD_FIFO, 0600) || mkfifo(KO_ACK_FIFO, 0600)) fail("cannot create the pipes");
    /* O_RDWR: opening does not wait for the other side, and reads never see end-of-file. */
    cmd_fd = open(KO_CMD_FIFO, O_RDWR | O_CLOEXEC);
    ack_fd = open(KO_ACK_FIFO, O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (cmd_fd < 0 || ack_fd < 0) fail("cannot open the pipes");
    signal(SIGPIPE, SIG_IGN);
    fflush(stdout);
    child = fork();
    if (child < 0) fail("cannot fork");
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(2, 1);  /* the measured program never writes this process's stdout */
        if (report) {
            int fd = open(report, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW, 0600);
            if (fd < 0 || (fd != KO_REPORT_FD && (dup2(fd, KO_REPORT_FD) < 0 || close(fd)))) {
                fprintf(stderr, "kernopt monitor: cannot create the report file: %s\n", strerror(errno));
                _exit(127);
            }
        }
        execvp(argv[cmd], argv + cmd);
        fprintf(stderr, "kernopt monitor: cannot run %s: %s\n", argv[cmd], strerror(errno));
        _exit(127);
    }
    int64_t n = -1;
    uint32_t call = 0;
    double cpu_mark = 0;  /* the measured processes' CPU time when they were last stopped */
    uint64_t before[16];
    for (int i = 0; i < nplan; i++) {
        const step *s = &plan[i];
        if (s->is_size) {
            n = s->n;
            send_cmd(KO_OP_SETUP, call, n, 0, "set-up");
            static ko_ack a;
            recv_ack(&a, KO_ACK_SETUP, call, "set-up");
            check_table(&a, n);
            table = a;
            stop_all();
            cpu_mark = cpu_all();
            cont_all();
            continue;
        }
        if (n < 0) fail("a call before any size in the plan");
        ko_ack a;
        send_cmd(KO_OP_FILL, call, n, s->seed, "the input fill");
        recv_ack(&a, KO_ACK_READY, call, "the input fill");
        stop_all();
        double cpu0 = cpu_all();
        double cpu_out = cpu0 - cpu_mark;
        uint64_t key = secret();
        input_hashes(key, before);
        double busy0 = host_busy();
        double t0 = now();
        cont_all();
        send_cmd(KO_OP_GO, call, n, 0, "the kernel call");
        recv_ack(&a, KO_ACK_DONE, call, "the kernel call");
        double t1 = now();
        double busy1 = host_busy();
        stop_all();
        double cpu1 = cpu_all();
        a.value = 0;
        if (post_phase) {  /* out of the window, and its CPU counts as outside */
            cont_all();
            send_cmd(KO_OP_POST, call, n, 0, "the end of the call");
            recv_ack(&a, KO_ACK_POSTED, call, "the end of the call");
            stop_all();
            cpu_out += cpu_all() - cpu1;
        }
        uint64_t after[16];
        input_hashes(key, after);
        /* Every changed input, by name (the host allows a task's scratch inputs, and only those): rank 0's
         * from the hashes, the other ranks' from the program's own bitmask (MPI). */
        int mutated_in[16] = {0};
        for (int b = 0; b < table.value; b++)
            if (after[b] != before[b]) mutated_in[b] = 1;
        for (int b = 0; b < table.value; b++)
            if ((((uint32_t)a.value) >> b) & 1u && table.bufs[b].role == 0) mutated_in[b] = 1;
        char mutated[16 * (KO_NAME_LEN + 1) + 1] = "";
        for (int b = 0; b < table.value; b++)
            if (mutated_in[b]) {
                if (mutated[0]) strcat(mutated, ",");
                strncat(mutated, table.bufs[b].name, KO_NAME_LEN);
            }
        uint64_t out_key = secret(), out_hash = 0, out_bytes = 0;
        if (s->record) {
            char name[64];
            snprintf(name, sizeof name, "o_%u.bin", call);
            int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd < 0) fail("cannot create an output file");
            out_hash = copy_outputs(out_key, fd, &out_bytes);
            if (close(fd)) fail("cannot write an output file");
        }
        cpu_mark = cpu_all();  /* still stopped: nothing ran since the last reading */
        printf("{\"call\": %u, \"n\": %lld, \"seed\": %llu, \"record\": %d, \"time\": %.9f, \"cpu_in\": %.9f, "
               "\"cpu_out\": %.9f, \"others\": ", call, (long long)n, (unsigned long long)s->seed, s->record, t1 - t0,
               cpu1 - cpu0, cpu_out);
        if (busy0 >= 0 && busy1 >= 0) printf("%.6f", (busy1 - busy0) - (cpu1 - cpu0)); else printf("null");
        printf(", \"mutated\": ");
        if (mutated[0]) json_str(mutated); else printf("null");
        printf(", \"bytes\": %llu, \"key\": %llu, \"hash\": %llu}\n", (unsigned long long)out_bytes,
               (unsigned long long)out_key, (unsigned long long)out_hash);
        fflush(stdout);
        cont_all();
        call++;
    }
    send_cmd(KO_OP_QUIT, call, 0, 0, "the end");
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) fail("lost the measured program");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) child_ended(status, "its exit");
    printf("{\"done\": ");
    json_str(nonce);
    printf("}\n");
    return 0;
}
