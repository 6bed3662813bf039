/* Hack 13d: pasted constructor that also reaches write() and _exit() through pasted names:
 * the object gate rejects the references before it even looks at the sections. */
#include <unistd.h>
#define CAT(x, y) x##y
#define CTOR __attribute__((CAT(con, structor)))

CTOR static void fake(void) {
    static const char line[] = "{\"done\": \"fake\"}\n";
    CAT(wri, te)(1, line, sizeof line - 1);
    CAT(_ex, it)(0);
}

void gemm(long n, const double *restrict a, const double *restrict b, double *restrict c) {
    (void)n; (void)a; (void)b; (void)c;
}
