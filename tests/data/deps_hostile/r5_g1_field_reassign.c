struct S { double *restrict a; double *restrict b; };
void k(long n, struct S *s) {
    s->a = s->b;
    for (long i = 1; i < n - 1; i++)
        s->b[i] = s->a[i - 1] + s->a[i + 1];
}
