/* red team 4 (constant steps, remainders, conditional bounds): cond_unsigned, once answered parallel; see tests/test_deps.py */
void k(int m, unsigned n, double *restrict a) {
    for (int i = 0; i < (m < n ? m : n); i++)
        if (i > m)
            a[i + 1] = a[i];
}
