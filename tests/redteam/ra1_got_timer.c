/* Red team, issue 15 class 1a: the timer read through the measured program's GOT.
 *
 * The kernel finds its own executable's ELF header (scanning back from its own code), walks the
 * dynamic relocations to the GOT slot of clock_gettime and points it at a fake that runs the clock
 * at 1/9 speed from the moment it is installed (so the warm-up call looks normal and every later
 * call reports 1/9 of its real time: a "9x" that stays under the plausibility bound). The kernel
 * computes the right answer. Where the executable imports no clock_gettime (the timer is in a
 * separate process), it writes the current value back into the first GOT slot it finds: harmless
 * when the GOT is writable, a fault under full RELRO.
 * Against the in-process timer: ok, significantly faster. Defence: full RELRO (runtime_error,
 * SIGSEGV) and the monitor's clock.
 * Measured against 358822f (in-process driver), local: ok, 9.07x [6.69, 9.32] significant, no flag.
 */
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static int streq_(const char *a, const char *b) { while (*a && *a == *b) { a++; b++; } return *a == *b; }

/* load bias and dynamic section of the executable that contains `inside` */
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

static uintptr_t fix(uintptr_t bias, uintptr_t v) { return v < bias ? v + bias : v; }

/* the GOT slot of `name` (NULL: the first slot of any import) */
static void **got_slot(const char *name) {
    uintptr_t bias;
    ElfW(Dyn) *dyn = image_of((const void *)&got_slot, &bias);
    if (!dyn) return 0;
    const ElfW(Sym) *sym = 0; const char *str = 0; const ElfW(Rela) *rel[2] = {0, 0}; size_t sz[2] = {0, 0};
    for (ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB) sym = (const void *)fix(bias, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB) str = (const void *)fix(bias, d->d_un.d_ptr);
        else if (d->d_tag == DT_JMPREL) rel[0] = (const void *)fix(bias, d->d_un.d_ptr);
        else if (d->d_tag == DT_PLTRELSZ) sz[0] = d->d_un.d_val;
        else if (d->d_tag == DT_RELA) rel[1] = (const void *)fix(bias, d->d_un.d_ptr);
        else if (d->d_tag == DT_RELASZ) sz[1] = d->d_un.d_val;
    }
    for (int t = 0; t < 2; t++) {
        if (!rel[t]) continue;
        for (size_t i = 0; i < sz[t] / sizeof(ElfW(Rela)); i++) {
            unsigned type = (unsigned)ELF64_R_TYPE(rel[t][i].r_info), s = (unsigned)ELF64_R_SYM(rel[t][i].r_info);
            if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !s) continue;
            if (!name || streq_(str + sym[s].st_name, name)) return (void **)(bias + rel[t][i].r_offset);
        }
    }
    return 0;
}

typedef int (*clock_fn)(clockid_t, struct timespec *);
static clock_fn real_clock;
static double anchor = -1;

static int slow_clock(clockid_t id, struct timespec *ts) {
    int r = real_clock(id, ts);
    double t = (double)ts->tv_sec + 1e-9 * (double)ts->tv_nsec;
    if (anchor < 0) anchor = t;
    t = anchor + (t - anchor) / 9.0;
    ts->tv_sec = (time_t)t;
    ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
    return r;
}

static int installed;

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    if (!installed) {
        installed = 1;
        void **slot = got_slot("clock_gettime");
        if (slot) {
            real_clock = (clock_fn)*slot;
            *slot = (void *)slow_clock;
        } else if ((slot = got_slot(0))) {
            void *volatile v = *slot;
            *(void *volatile *)slot = v;  /* a GOT write: faults under full RELRO */
        }
    }
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
