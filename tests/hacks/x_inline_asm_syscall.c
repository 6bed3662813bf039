/* Extra: a raw system call through inline assembly. */
void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(39L) : "rcx", "r11", "memory");
    (void)ret; (void)n; (void)a; (void)b; (void)c;
}
