/* seccomp.h — the measured program's system-call filter, installed by driver.c after set-up.
 *
 * The object gate allows a kernel only math, memory, OpenMP and MPI symbols, but a pointer to any
 * allowed libc function leads to every other one. This filter makes that worthless: whatever the
 * kernel reaches, the process cannot start programs or processes, open files, use the network,
 * trace, signal or write into other processes, or set up io_uring (which would bypass the filter).
 *
 * Everywhere but under CUDA: no executable memory is mapped after set-up (W^X).
 * KO_CONFINE_STRICT (serial and OpenMP programs): an allow-list. Threads, memory, futexes, clocks, sleeps
 *   and I/O on descriptors already open pass; opening files fails with EACCES; the system calls
 *   that only an attack makes kill the process (SIGSYS: the evaluator reports it); anything else
 *   fails with EPERM.
 * KO_CONFINE_SANITIZER (the race check's ThreadSanitizer build of an OpenMP program): the strict
 *   allow-list plus the few calls the sanitizer's runtime makes while it runs (measured: docs/verification.md,
 *   "Every run of candidate code"); its report descriptor (KO_REPORT_FD) cannot be closed or replaced.
 * KO_CONFINE_RUNTIME (MPI, CUDA: their runtimes use system calls of their own, shared-memory copies
 *   between ranks, device files, their daemons' sockets): a deny-list of the same attack system calls;
 *   sockets only AF_UNIX; under MPI opening files fails too (the shared-memory segments of every
 *   peer are attached before the filter: driver.c's warm-up exchange), and the single-copy transport's
 *   process_vm_readv/writev reach only the job's ranks (`peers`), never mpirun. CUDA may open device files.
 */
#ifndef KERNOPT_SECCOMP_H
#define KERNOPT_SECCOMP_H
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define KO_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define KO_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define KO_NR offsetof(struct seccomp_data, nr)
#define KO_ARG0 offsetof(struct seccomp_data, args[0])
#define KO_RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
/* if nr == NR: return V, else fall through */
#define KO_IS(NR, V) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (NR), 0, 1), KO_RET(V)
#define KO_KILL SECCOMP_RET_KILL_PROCESS
#define KO_ALLOW SECCOMP_RET_ALLOW
#define KO_ERRNO(e) (SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))

#define KO_CONFINE_RUNTIME 0
#define KO_CONFINE_STRICT 1
#define KO_CONFINE_SANITIZER 2

static void ko_confine(int mode, const int32_t *peers, int npeers) {
    const int strict = mode != KO_CONFINE_RUNTIME;
#ifdef KO_AUDIT_ARCH
    const unsigned pid = (unsigned)getpid();
    struct sock_filter f[512];
    unsigned k = 0;
#define ADD(...) do { struct sock_filter ins_[] = {__VA_ARGS__}; if (k + sizeof ins_ / sizeof ins_[0] > 512) _exit(3); for (unsigned i_ = 0; i_ < sizeof ins_ / sizeof ins_[0]; i_++) f[k++] = ins_[i_]; } while (0)
    ADD(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, KO_AUDIT_ARCH, 1, 0), KO_RET(KO_KILL),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_NR));
#ifdef __X32_SYSCALL_BIT
    ADD(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1), KO_RET(KO_KILL));
#endif
    /* Threads only: clone must carry CLONE_THREAD; clone3 says ENOSYS so glibc falls back to clone. */
    ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_ARG0),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1), KO_RET(KO_ALLOW), KO_RET(KO_KILL));
#ifdef SYS_clone3
    ADD(KO_IS(SYS_clone3, KO_ERRNO(ENOSYS)));
#endif
    /* Signals only to itself (abort(), a failed assertion). */
    ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_kill, 1, 0), BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_tgkill, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_ARG0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, pid, 0, 1), KO_RET(KO_ALLOW), KO_RET(KO_KILL));
    /* Resource limits: its own only (another process of the same user is the monitor). */
    ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prlimit64, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_ARG0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0), BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, pid, 0, 1), KO_RET(KO_ALLOW),
        KO_RET(KO_ERRNO(EPERM)));
    /* Sockets: none (strict), or only AF_UNIX ones. */
    ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_ARG0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1), KO_RET(strict ? KO_KILL : KO_ALLOW), KO_RET(KO_KILL));
    /* Open MPI's shared-memory transport copies between ranks with process_vm_readv/writev: to the
     * job's ranks only (mpirun is a process of the same user, unfiltered and never measured). */
    if (peers) {
        ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 1, 0),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 0, (unsigned char)(npeers + 3)),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_ARG0));
        for (int i = 0; i < npeers; i++) ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)peers[i], (unsigned char)(npeers - i), 0));
        ADD(KO_RET(KO_ERRNO(EPERM)), KO_RET(KO_ALLOW), BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_NR));
    }
    if (mode == KO_CONFINE_SANITIZER) {
        /* The sanitizer's report descriptor stays open and stays what the monitor made it. */
        ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close, 0, 4),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_ARG0),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, KO_REPORT_FD, 0, 1), KO_RET(KO_ERRNO(EPERM)),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_NR));
        static const long dups[] = {SYS_dup2, SYS_dup3};
        for (unsigned i = 0; i < sizeof dups / sizeof dups[0]; i++)
            ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)dups[i], 0, 4),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, KO_REPORT_FD, 0, 1), KO_RET(KO_ERRNO(EPERM)),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_NR));
#ifdef SYS_close_range
        ADD(KO_IS(SYS_close_range, KO_ERRNO(EPERM)));
#endif
    }
    /* W^X after set-up: no new executable memory, so a kernel cannot patch the driver's or the
     * harness's code (say, to compute in the untimed fill). CUDA's runtime may map code; MPI's is loaded. */
#ifndef KO_CUDA
    static const long maps[] = {SYS_mmap, SYS_mprotect, SYS_pkey_mprotect};
    for (unsigned i = 0; i < sizeof maps / sizeof maps[0]; i++)
        ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)maps[i], 0, 4),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
            BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1), KO_RET(KO_ERRNO(EACCES)),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KO_NR));
#endif
    static const long attacks[] = {
        SYS_execve, SYS_execveat, SYS_tkill, SYS_ptrace, SYS_process_vm_writev, SYS_process_vm_readv,
        SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo, SYS_pidfd_open, SYS_pidfd_send_signal, SYS_pidfd_getfd,
        SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register, SYS_unshare, SYS_setns, SYS_mount, SYS_umount2,
        SYS_pivot_root, SYS_chroot, SYS_bpf, SYS_perf_event_open, SYS_userfaultfd, SYS_keyctl, SYS_add_key,
        SYS_request_key, SYS_kcmp, SYS_personality, SYS_seccomp, SYS_setsid, SYS_setpgid,
#ifdef SYS_fork
        SYS_fork, SYS_vfork,
#endif
    };
    for (unsigned i = 0; i < sizeof attacks / sizeof attacks[0]; i++) ADD(KO_IS((unsigned)attacks[i], KO_KILL));
    if (!strict) {
#ifndef KO_CUDA
        /* MPI: its shared-memory segments are attached by now (driver.c's warm-up exchange). */
        ADD(KO_IS(SYS_openat, KO_ERRNO(EACCES)));
#ifdef SYS_open
        ADD(KO_IS(SYS_open, KO_ERRNO(EACCES)), KO_IS(SYS_creat, KO_ERRNO(EACCES)));
#endif
#ifdef SYS_openat2
        ADD(KO_IS(SYS_openat2, KO_ERRNO(EACCES)));
#endif
#endif
        ADD(KO_RET(KO_ALLOW));
    } else {
        static const long allowed[] = {
            SYS_read, SYS_write, SYS_readv, SYS_writev, SYS_pread64, SYS_pwrite64, SYS_close, SYS_fstat, SYS_newfstatat,
            SYS_lseek, SYS_mmap, SYS_munmap, SYS_mprotect, SYS_mremap, SYS_brk, SYS_madvise, SYS_futex,
            SYS_set_robust_list, SYS_get_robust_list, SYS_exit, SYS_exit_group, SYS_rt_sigprocmask, SYS_rt_sigreturn,
            SYS_rt_sigaction, SYS_sigaltstack, SYS_sched_yield, SYS_sched_getaffinity, SYS_sched_setaffinity,
            SYS_sched_getparam, SYS_sched_getscheduler, SYS_getpid, SYS_gettid, SYS_getppid, SYS_getcpu,
            SYS_clock_gettime, SYS_clock_getres, SYS_clock_nanosleep, SYS_nanosleep, SYS_gettimeofday, SYS_getrandom,
            SYS_sysinfo, SYS_uname, SYS_getrlimit, SYS_membarrier, SYS_get_mempolicy, SYS_set_mempolicy,
            SYS_mbind, SYS_getuid, SYS_geteuid, SYS_getgid, SYS_getegid, SYS_restart_syscall,
#ifdef SYS_rseq
            SYS_rseq,
#endif
#ifdef SYS_time
            SYS_time,
#endif
        };
        for (unsigned i = 0; i < sizeof allowed / sizeof allowed[0]; i++) ADD(KO_IS((unsigned)allowed[i], KO_ALLOW));
#ifdef SYS_open
        ADD(KO_IS(SYS_open, KO_ERRNO(EACCES)), KO_IS(SYS_creat, KO_ERRNO(EACCES)));
#endif
        ADD(KO_IS(SYS_openat, KO_ERRNO(EACCES)));
#ifdef SYS_openat2
        ADD(KO_IS(SYS_openat2, KO_ERRNO(EACCES)));
#endif
        ADD(KO_RET(KO_ERRNO(EPERM)));
    }
#undef ADD
    struct sock_fprog prog = {(unsigned short)k, f};
    /* TSYNC: every thread of the process, not only this one (MPI and CUDA runtimes start threads of
     * their own before the filter is installed; a kernel must not borrow one). */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) {
        perror("kernopt driver: seccomp");
        _exit(3);
    }
#else
    (void)strict;
#endif
}
#endif
