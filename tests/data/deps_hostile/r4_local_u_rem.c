/* red team 4 (constant steps, remainders, conditional bounds): local_u_rem, once answered parallel; see tests/test_deps.py */
void k(int n, double *restrict a) {
    long t = n - 2u;
    for (int i = 0; i < 8; i++)
        if (n == 0)
            a[i] = a[i + t % 4 + 2];
}
