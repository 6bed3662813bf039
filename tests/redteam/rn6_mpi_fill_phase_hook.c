/* Red team, new class N2 under MPI: the dot product computed while the inputs are filled.
 *
 * As rn2_fill_phase_hook.c on the MPI dot task: rank 0 makes the executable's GOT writable
 * (mprotect without PROT_EXEC: W^X does not apply) and hooks the driver's `write`. When rank 0 is
 * about to answer "ready" (every rank has filled its inputs), the hook computes the first
 * HIDDEN_PERCENT% of the sum alone; the timed call then splits the rest over the ranks and adds
 * the hidden part. The CPU before "ready" is outside the timed call; an MPI run is allowed several
 * milliseconds of it per call and rank (ranks poll while rank 0 talks to the monitor), which on a
 * task whose calls take a few milliseconds is all of the work.
 * Expected of a sound defence: not significantly faster, or rejected.
 */
#include <elf.h>
#include <link.h>
#include <math.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define HIDDEN_PERCENT 100

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
static long sn = -1, hidden = -1;
static const double *sx, *sy;
static double pre;

struct buf_desc { uint64_t addr, count; uint32_t dtype, role; char name[32]; };

static long hook(int fd, const void *buf, size_t len) {
    const uint32_t *w = buf;
    if (len >= 16 + 3 * sizeof(struct buf_desc) && w[0] == 11 && w[2] == 3) {  /* "set-up": x, y, result */
        const struct buf_desc *d = (const struct buf_desc *)((const char *)buf + 16);
        sx = (const double *)d[0].addr; sy = (const double *)d[1].addr; sn = (long)d[0].count;
    } else if (len >= 4 && w[0] == 12 && sn > 0) {  /* "ready": every rank has its inputs, no clock yet */
        hidden = sn * HIDDEN_PERCENT / 100;
        double s = 0.0;
        for (long i = 0; i < hidden; i++) s += sx[i] * tanh(sy[i]);
        pre = s;
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

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long from = 0;
    double head = 0.0;
    if (rank == 0) {
        if (!hooked) { install(); sx = x; sy = y; sn = n; }
        if (hidden >= 0 && x == sx && y == sy && n == sn) { from = hidden; head = pre; }
        hidden = -1;
    }
    MPI_Bcast(&from, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    long len = n - from, chunk = (len + size - 1) / size, lo = from + rank * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double part = 0.0, sum = 0.0;
    for (long i = lo; i < hi; i++) part += x[i] * tanh(y[i]);
    MPI_Reduce(&part, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) *result = head + sum;
}
