/* Red team, issue 26 attack 2d: blind the sanitizer with its own annotations.
 *
 * The sanitizer build exports the dynamic-annotation entry points (AnnotateIgnoreWritesBegin,
 * AnnotateIgnoreReadsBegin): a thread that calls them is not watched. The kernel finds them by walking
 * the dynamic symbol tables and calls them in every thread before its unsynchronized update of the shared
 * `total`; in production they do not exist. Nothing is silenced: the race is never seen.
 * Against main (e2530a1): race check "clean", verdict ok.
 * Expected defence: a static race check; (a sanitizer build that does not export its interface).
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

typedef void (*annotate_fn)(const char *, int);

void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    annotate_fn ign_w = (annotate_fn)find_symbol("AnnotateIgnoreWritesBegin", 0, 0);
    annotate_fn ign_r = (annotate_fn)find_symbol("AnnotateIgnoreReadsBegin", 0, 0);
    annotate_fn end_w = (annotate_fn)find_symbol("AnnotateIgnoreWritesEnd", 0, 0);
    annotate_fn end_r = (annotate_fn)find_symbol("AnnotateIgnoreReadsEnd", 0, 0);
    double total = 0.0;
#pragma omp parallel
    {
        double s = 0.0;
#pragma omp for schedule(static)
        for (long i = 0; i < n; i++) s += x[i] * y[i];
        if (ign_w && ign_r) { ign_w("k", 1); ign_r("k", 1); }
        total += s;
        if (end_w && end_r) { end_w("k", 1); end_r("k", 1); }
    }
    *result = total;
}
