/* red team 4 (constant steps, remainders, conditional bounds): typedef_rem, once answered parallel; see tests/test_deps.py */
typedef unsigned int int_u_t;
void k(int_u_t n, double *restrict a) {
    for (int i = 0; i < 8; i++)
        if (n == 0)
            a[i] = a[i + (n - 2) % 4 + 2];
}
