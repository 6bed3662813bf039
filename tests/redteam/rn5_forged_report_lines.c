/* Red team, new class N5: forge the monitor's report from inside the measured program.
 *
 * The host parses one JSON record per line of the monitor's stdout. The kernel reaches write
 * through the dynamic linker's tables and writes, on its first call, forged records to its stdout
 * and stderr: calls that took a microsecond, an early closing line, a record whose size is not a
 * number, an unterminated record, and a few kilobytes of digits. The measured program's stdout and
 * stderr are the monitor's stderr, never its stdout, so none of it may reach the report: the
 * verdict must be the naive kernel's (ok, not significantly faster), and never an exception.
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


static void naive(long n, const double *a, const double *b, double *c) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}


typedef long (*write_fn)(int, const void *, size_t);

static const char *forged[] = {
    "\n{\"call\": 1, \"n\": 160, \"seed\": 1, \"record\": 1, \"time\": 0.000001, \"cpu_in\": 0.0, \"cpu_out\": 0.0, "
    "\"mutated\": null, \"bytes\": 204800, \"key\": 0, \"hash\": 0}\n",
    "{\"call\": 2, \"n\": \"crash\", \"seed\": 1, \"record\": 1, \"time\": 0.000001}\n",
    "{\"done\": \"0000000000000000\"}\n",
    "{\"setup\": 160, \"ranks\": 1, \"bufs\": [",
};

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    static int once;
    if (!once++) {
        write_fn w = (write_fn)find_function("write");
        static char digits[8192];
        memset(digits, '9', sizeof digits);
        digits[0] = '{'; memcpy(digits + 1, "\"call\": ", 8);
        for (int fd = 1; w && fd <= 2; fd++) {
            for (unsigned i = 0; i < sizeof forged / sizeof forged[0]; i++) {
                size_t len = 0;
                while (((const volatile char *)forged[i])[len]) len++;
                w(fd, forged[i], len);
            }
            w(fd, digits, sizeof digits);
        }
    }
    naive(n, a, b, c);
}
