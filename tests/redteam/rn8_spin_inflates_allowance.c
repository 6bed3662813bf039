/* Red team, new class N6: inflate the CPU inside the timed call to widen the allowance outside it.
 *
 * The monitor allows CPU outside the timed calls up to a per-call amount plus a tenth of the
 * candidate's own CPU inside them. CPU inside is cheap to make on idle cores: this kernel is the
 * naive one with 35% of each answer computed before "ready" (as rn2_fill_phase_hook.c: a GOT hook
 * on the driver's `write`, mprotect without PROT_EXEC), and during the timed call a second thread
 * (pthread_create reached through the dynamic linker's tables) spins on the idle core. That doubles
 * the CPU inside the call at no cost in time, and 35% hidden passes where without the spinner it is
 * refused (rn7 at 35%: rejected, "outside the timed call"). Measured on this 2-core machine: 1.36x
 * and 1.51x. The lever grows with the cores: with 16 idle cores a serial kernel can hide ~60%.
 * Expected of a sound defence (the allowance tied to the window's wall time or the baseline's CPU,
 * or time outside charged to the call): not significantly faster.
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define INSIDE_PERCENT 65
#include <pthread.h>

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

/* the executable's GOT slot for an imported function */
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
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; rel[t] && i < sz[t] / sizeof(ElfW(Rela)); i++) {
            unsigned type = (unsigned)ELF64_R_TYPE(rel[t][i].r_info), s = (unsigned)ELF64_R_SYM(rel[t][i].r_info);
            if ((type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) && s && streq_(str + sym[s].st_name, name))
                return (void **)(bias + rel[t][i].r_offset);
        }
    return 0;
}

typedef long (*write_fn)(int, const void *, size_t);
typedef int (*protect_fn)(void *, size_t, int);
static write_fn real_write;
static int hooked;
static long sn = -1, done_rows;
static const double *sa, *sb;
static double *sc;

static void rows(long n, const double *a, const double *b, double *c, long from, long to) {
    for (long i = from; i < to; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}

/* protocol.h's answer: op, call, value, nranks, then 16 buffer entries {addr, count, dtype, role, name[32]} */
struct buf_desc { uint64_t addr, count; uint32_t dtype, role; char name[32]; };

static long hook(int fd, const void *buf, size_t len) {
    const uint32_t *w = buf;
    if (len >= 16 + 3 * sizeof(struct buf_desc) && w[0] == 11 && w[2] == 3) {  /* "set-up": a, b, c */
        const struct buf_desc *d = (const struct buf_desc *)((const char *)buf + 16);
        long n = 0;
        while ((uint64_t)(n + 1) * (uint64_t)(n + 1) <= d[2].count) n++;
        sa = (const double *)d[0].addr; sb = (const double *)d[1].addr; sc = (double *)d[2].addr; sn = n;
    } else if (len >= 4 && w[0] == 12 && sn > 0) {  /* "ready": the inputs are there, the clock not yet */
        done_rows = sn - sn * INSIDE_PERCENT / 100;
        rows(sn, sa, sb, sc, sn - done_rows, sn);
    }
    return real_write(fd, buf, len);
}

static void install(void) {
    hooked = -1;
    void **slot = got_slot("write");
    protect_fn prot = (protect_fn)find_function("mprotect");
    if (!slot || !prot) return;
    uintptr_t page = (uintptr_t)slot & ~(uintptr_t)4095;
    if (prot((void *)page, 4096, PROT_READ | PROT_WRITE) != 0) return;
    real_write = (write_fn)*slot;
    *slot = (void *)hook;
    hooked = 1;
}

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*join_fn)(pthread_t, void **);
static volatile int spinning;
static void *spin(void *arg) { (void)arg; while (__atomic_load_n(&spinning, __ATOMIC_RELAXED)) {} return 0; }
static void gemm_inner(long n, const double *restrict a, const double *restrict b, double *restrict c);

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    static create_fn mk; static join_fn jn; static int looked;
    if (!looked) { looked = 1; mk = (create_fn)find_function("pthread_create"); jn = (join_fn)find_function("pthread_join"); }
    pthread_t t;
    int ok = 0;
    if (mk && jn) { __atomic_store_n(&spinning, 1, __ATOMIC_RELAXED); ok = mk(&t, 0, spin, 0) == 0; }
    gemm_inner(n, a, b, c);
    if (ok) { __atomic_store_n(&spinning, 0, __ATOMIC_RELAXED); jn(t, 0); }
}

static void gemm_inner(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    if (!hooked) {
        install();
        sa = a; sb = b; sc = c; sn = n;  /* the harness's buffers: the same for every call at this size */
    }
    if (done_rows > 0 && n == sn && a == sa && b == sb && c == sc) {
        rows(n, a, b, c, 0, n - done_rows);
        done_rows = 0;
        return;
    }
    rows(n, a, b, c, 0, n);
}
