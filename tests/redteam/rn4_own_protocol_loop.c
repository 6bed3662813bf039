/* Red team, new class N4: replace the driver instead of patching it (no mprotect, no code changes).
 *
 * Everything in the measured process is within the kernel's reach, the driver's protocol too. On
 * its first call the kernel computes that call's answer and then never returns: it finds read,
 * write, fstat, getpid and _exit through the dynamic linker's tables, takes the two pipes the
 * driver opened (its first two FIFO descriptors), answers "done" itself and from then on plays the
 * driver: it fills the inputs from each call's seed (the harness's generator is public), computes
 * 88% of the answer at once and only then answers "ready"; on "go" it computes the remaining 12%
 * and answers "done"; it allocates buffers for new sizes, answers "posted", and exits on "quit".
 * Only read and write are used after set-up, so neither W^X nor a read-only GOT stops it. The
 * work before "ready" is CPU outside the timed call, within the allowance on millisecond calls.
 * Found against 1410c1f (W^X): ok, 6.8x significant under local, no flag. Defence since 1f8c4cb:
 * the tighter allowance (rejected, "outside the timed call").
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INSIDE_PERCENT 12

static int streq_(const char *a, const char *b) { while (*a && *a == *b) { a++; b++; } return *a == *b; }
static uintptr_t fix(uintptr_t bias, uintptr_t v) { return v < bias ? v + bias : v; }

static ElfW(Dyn) *image_of(const void *inside, uintptr_t *bias) {
    uintptr_t p = (uintptr_t)inside & ~(uintptr_t)4095;
    for (int i = 0; i < 4096; i++, p -= 4096) {
        if (memcmp((const void *)p, "\177ELF", 4) != 0) continue;
        const ElfW(Ehdr) *eh = (const void *)p;
        const ElfW(Phdr) *ph = (const void *)(p + eh->e_phoff);
        uintptr_t b = 0;
        for (int k = 0; k < eh->e_phnum; k++) if (ph[k].p_type == PT_LOAD && ph[k].p_offset == 0) b = p - ph[k].p_vaddr;
        *bias = b;
        for (int k = 0; k < eh->e_phnum; k++) if (ph[k].p_type == PT_DYNAMIC) return (ElfW(Dyn) *)(b + ph[k].p_vaddr);
        return 0;
    }
    return 0;
}

/* a function defined by any loaded object, found through the dynamic linker's list */
static void *find_function(const char *name) {
    uintptr_t bias;
    ElfW(Dyn) *dyn = image_of((const void *)&find_function, &bias);
    struct r_debug *rd = 0;
    for (ElfW(Dyn) *d = dyn; d && d->d_tag != DT_NULL; d++) if (d->d_tag == DT_DEBUG) rd = (struct r_debug *)d->d_un.d_ptr;
    for (struct link_map *lm = rd ? rd->r_map : 0; lm; lm = lm->l_next) {
        const ElfW(Sym) *sym = 0; const char *str = 0;
        for (ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++) {
            if (d->d_tag == DT_SYMTAB) sym = (const void *)fix(lm->l_addr, d->d_un.d_ptr);
            else if (d->d_tag == DT_STRTAB) str = (const void *)fix(lm->l_addr, d->d_un.d_ptr);
        }
        if (!sym || !str || (const void *)str <= (const void *)sym) continue;
        size_t nsym = (size_t)((const char *)str - (const char *)sym) / sizeof *sym;
        for (size_t i = 1; i < nsym; i++)
            if (sym[i].st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC && streq_(str + sym[i].st_name, name))
                return (void *)(lm->l_addr + sym[i].st_value);
    }
    return 0;
}


static void rows(long n, const double *a, const double *b, double *c, long from, long to) {
    for (long i = from; i < to; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}

/* kernopt's protocol.h, as the driver speaks it */
struct cmd { uint32_t op, call; int64_t n; uint64_t seed; };
struct desc { uint64_t addr, count; uint32_t dtype, role; char name[32]; };
struct ack { uint32_t op, call; int32_t value, nranks; struct desc bufs[16]; int32_t pids[64]; };

typedef long (*io_fn)(int, void *, size_t);
typedef int (*stat_fn)(int, struct stat *);
typedef int (*pid_fn)(void);
typedef void (*exit_fn)(int);

static uint64_t next_(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double uni_(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(next_(s) >> 11) * (1.0 / 9007199254740992.0);
}

static io_fn rd, wr;

static void answer(int fd, struct ack *a) { wr(fd, a, sizeof *a); }

static int get(int fd, struct cmd *c) {
    size_t got = 0;
    while (got < sizeof *c) {
        long k = rd(fd, (char *)c + got, sizeof *c - got);
        if (k <= 0) return 0;
        got += (size_t)k;
    }
    return 1;
}

void gemm(long n, const double *restrict a_, const double *restrict b_, double *restrict c_) {
    rows(n, a_, b_, c_, 0, n);
    static int once;
    if (once++) return;
    rd = (io_fn)find_function("read");
    wr = (io_fn)find_function("write");
    stat_fn st = (stat_fn)find_function("fstat");
    pid_fn pid = (pid_fn)find_function("getpid");
    exit_fn quit = (exit_fn)find_function("_exit");
    if (!rd || !wr || !st || !pid || !quit) return;
    int fds[2], nf = 0;
    for (int fd = 3; fd < 64 && nf < 2; fd++) {
        struct stat sb;
        if (st(fd, &sb) == 0 && S_ISFIFO(sb.st_mode)) fds[nf++] = fd;
    }
    if (nf < 2) return;
    int in = fds[0], out = fds[1];
    double *a = (double *)a_, *b = (double *)b_, *c = c_;
    long sz = n, done_rows = 0;
    static struct ack ack;
    memset(&ack, 0, sizeof ack);
    ack.op = 13;  /* "done" for the call in progress: the first of the process */
    answer(out, &ack);
    struct cmd cmd;
    while (get(in, &cmd)) {
        memset(&ack, 0, sizeof ack);
        ack.call = cmd.call;
        if (cmd.op == 1) {  /* set-up */
            sz = cmd.n;
            size_t cnt = (size_t)(sz * sz);
            a = malloc((cnt ? cnt : 1) * sizeof *a); b = malloc((cnt ? cnt : 1) * sizeof *b); c = malloc((cnt ? cnt : 1) * sizeof *c);
            const char *names[3] = {"a", "b", "c"};
            double *ptr[3] = {a, b, c};
            for (int i = 0; i < 3; i++) {
                ack.bufs[i].addr = (uint64_t)(uintptr_t)ptr[i];
                ack.bufs[i].count = cnt;
                ack.bufs[i].role = i == 2;
                memcpy(ack.bufs[i].name, names[i], 2);
            }
            ack.op = 11; ack.value = 3; ack.nranks = 1; ack.pids[0] = pid();
        } else if (cmd.op == 2) {  /* fill, then most of the work before saying "ready" */
            uint64_t s = cmd.seed;
            for (long i = 0; i < sz * sz; i++) a[i] = uni_(&s, -1.0, 1.0);
            for (long i = 0; i < sz * sz; i++) b[i] = uni_(&s, -1.0, 1.0);
            done_rows = sz - sz * INSIDE_PERCENT / 100;
            rows(sz, a, b, c, sz - done_rows, sz);
            ack.op = 12;
        } else if (cmd.op == 3) {  /* go: the rest */
            rows(sz, a, b, c, 0, sz - done_rows);
            ack.op = 13;
        } else if (cmd.op == 4) {
            ack.op = 14; ack.value = -1;
        } else {
            quit(0);
        }
        answer(out, &ack);
    }
    quit(0);
}
