/* red team 4 (constant steps, remainders, conditional bounds): cond_u_literal, once answered parallel; see tests/test_deps.py */
void k(int n, double *restrict a) {
    for (int j = 0; j < (4u < n ? 4 : n); j++)
        if (n < 0)
            a[j + 1] = a[j];
}
