/* Red team, issue 15 class 4c: open a TCP connection through libc functions reached by pointer.
 *
 * Same walk as rd1_libc_shell.c, for "socket" and "connect": the kernel connects to
 * 127.0.0.1:47819 (where the test listens on the host) and sends a line. When the connection
 * succeeds it marks its answer (c[0] = 515151); otherwise it is the naive kernel.
 * Without a system-call filter, under --sandbox local: the host's listener gets the line and the
 * verdict is wrong_answer "got 515151". Defence: the seccomp filter kills a process that makes an
 * internet socket (runtime_error, SIGSYS); docker has no route to the host.
 * Measured against 358822f, local: the host's listener received the line.
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

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

typedef int (*socket_fn)(int, int, int);
typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef long (*send_fn)(int, const void *, size_t, int);

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    naive(n, a, b, c);
    static int tried, connected;
    if (!tried) {
        tried = 1;
        socket_fn mk = (socket_fn)find_function("socket");
        connect_fn cn = (connect_fn)find_function("connect");
        send_fn sd = (send_fn)find_function("send");
        int fd = mk ? mk(AF_INET, SOCK_STREAM, 0) : -1;
        struct sockaddr_in to;
        memset(&to, 0, sizeof to);
        to.sin_family = AF_INET;
        to.sin_port = (unsigned short)((47819 >> 8) | ((47819 & 0xff) << 8));
        to.sin_addr.s_addr = 0x0100007f;  /* 127.0.0.1 */
        if (fd >= 0 && cn && cn(fd, (const struct sockaddr *)&to, sizeof to) == 0) {
            connected = 1;
            if (sd) sd(fd, "kernopt-redteam\n", 16, 0);
        }
    }
    if (connected && n > 0) c[0] = 515151.0;
}
