/* Red team, new class N1: do the work after the monitor's clock stops, before it copies the outputs.
 *
 * The monitor ends a call's window when rank 0 answers "done", stops the process, reads its CPU
 * clock, resumes it and sends "post"; only after the "posted" answer does it copy the outputs out
 * of memory. The kernel reaches mprotect through the dynamic linker's own tables (DT_DEBUG ->
 * r_debug -> every loaded object's symbols: nothing but allowed symbols is referenced), makes the
 * executable's GOT writable again (full RELRO is only a page protection; mprotect is on the
 * seccomp allow-list) and points the driver's `write` at a hook. Each call computes 12% of the
 * rows inside the window and returns; the hook computes the rest just before the driver's
 * "posted" answer goes out. That CPU is "outside the timed call", but on a task whose calls take a
 * few milliseconds it is within the allowance for idle OpenMP workers (3 ms per call and thread).
 * No OpenMP: the race check is skipped.
 * Found against a838585: ok, 7.4-7.8x significant under local, 8.9x under docker, no flag (with
 * INSIDE_PERCENT 0: 297x, flagged, re-checked, still significant). Defence since 1f8c4cb: serial
 * and OpenMP programs stay stopped from "done" until the copy; the rest of the rows is never
 * written (wrong_answer, "not written").
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

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
static int hooked, pending;
static long pn, prow;
static const double *pa, *pb;
static double *pc;

static void rows(long n, const double *a, const double *b, double *c, long from, long to) {
    for (long i = from; i < to; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}

static long hook(int fd, const void *buf, size_t len) {
    if (pending && len >= 4 && *(const uint32_t *)buf == 14) {  /* the driver's "posted" answer */
        rows(pn, pa, pb, pc, prow, pn);
        pending = 0;
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

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    if (!hooked) install();
    if (hooked < 0) { rows(n, a, b, c, 0, n); return; }
    long inside = n * INSIDE_PERCENT / 100;
    rows(n, a, b, c, 0, inside);
    pn = n; pa = a; pb = b; pc = c; prow = inside; pending = 1;
}
