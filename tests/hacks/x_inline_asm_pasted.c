/* Extra: inline assembly whose keyword is built by token pasting (the text gate sees neither
 * `asm` nor the instruction, which sits in a string); the object gate finds the instruction. */
#define CAT(x, y) x##y
#define ASM CAT(__as, m__)

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    long ret;
    ASM volatile("syscall" : "=a"(ret) : "a"(39L) : "rcx", "r11", "memory");
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    (void)ret;
}
