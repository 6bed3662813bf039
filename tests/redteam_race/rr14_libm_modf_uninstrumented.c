/* Red team, issue 26 attack 4b: a race through libm's own modf, past the sanitizer's interceptor.
 *
 * As rr13_libm_modf_race.c, but modf is libm's own, found by walking the dynamic linker's list past the
 * program (which, in the sanitizer build, exports an interceptor of that name): an uninstrumented library
 * storing into shared memory, invisible to ThreadSanitizer. In production the walk finds libm's modf too.
 * Against main (e2530a1): race check "clean", verdict ok.
 * Expected defence: a static race check (the shared address handed to a function that stores through it
 * from every thread; a call through a pointer the kernel computed).
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

#include <math.h>
#include <omp.h>

typedef double (*modf_fn)(double, double *);
static modf_fn libm_modf;

/* The first definition of `name` in a loaded object other than the program itself. */
static void *find_in_libraries(const char *name) {
    uintptr_t bias;
    ElfW(Dyn) *dyn = image_of((const void *)&find_in_libraries, &bias);
    struct r_debug *r = 0;
    for (ElfW(Dyn) *d = dyn; d && d->d_tag != DT_NULL; d++) if (d->d_tag == DT_DEBUG) r = (struct r_debug *)d->d_un.d_ptr;
    for (struct link_map *lm = r && r->r_map ? r->r_map->l_next : 0; lm; lm = lm->l_next) {
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

static double mf(double v, double *ip) { return libm_modf(v, ip); }

/* Each thread adds its partial sum into the shared accumulator (hi, lo) by read-modify-write with no
 * synchronization the sanitizer can see: the stores go through modf's output pointer (hi gets the
 * integral part of the new total, lo its fraction scaled to an integer, so ~52 fractional bits are kept),
 * and the threads take turns by spinning on `turn`, which modf writes too. The kernel's own instructions
 * only read the shared variables; it is always right on x86, and a data race all the same. */
void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    if (!libm_modf) libm_modf = (modf_fn)find_in_libraries("modf");
    if (!libm_modf) libm_modf = modf;
    double hi = 0.0, lo = 0.0, turn = 0.0;
#pragma omp parallel shared(hi, lo, turn)
    {
        const int me = omp_get_thread_num();
        double s = 0.0;
#pragma omp for schedule(static) nowait
        for (long i = 0; i < n; i++) s += x[i] * y[i];
        while (*(volatile double *)&turn != (double)me) {
        }
        double t = *(volatile double *)&hi + *(volatile double *)&lo * 0x1p-52 + s;
        double f = mf(t, &hi);
        mf(f * 0x1p52, &lo);
        mf((double)(me + 1), &turn);
    }
    *result = hi + lo * 0x1p-52;
}
