/* red team 4 (constant steps, remainders, conditional bounds): shadow_unsigned_rem, once answered parallel; see tests/test_deps.py */
void k(unsigned n, double *restrict a) {
    for (int i = 0; i < 8; i++)
        if (n == 0)
            a[i] = a[i + (n - 2) % 4 + 2];
    {
        int n = 1;
        a[0] += n;
    }
}
