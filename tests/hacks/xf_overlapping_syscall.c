/* Known weakness: a syscall instruction (0f 05) hidden in the immediate of a `mov` and reached by
 * a jump into the middle of it; objdump's linear sweep shows only the mov. (getpid: harmless.) */
#define CAT(x, y) x##y
#define ASM CAT(__as, m__)

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    long ret;
    ASM volatile("mov $39, %%eax\n\tjmp 1f+1\n1:\t.byte 0xb8, 0x0f, 0x05, 0x90, 0x90\n"
                 : "=a"(ret) : : "rcx", "r11", "memory");
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s + 0.0 * (double)(ret == 0);
        }
}
