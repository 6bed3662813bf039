/* red team 4 (constant steps, remainders, conditional bounds): pre_u_literal, once answered parallel; see tests/test_deps.py */
void k(int n, double *restrict a) {
    for (int j = 0; j < 4; j++)
        if (4u < n && n < 0)
            a[j + 1] = a[j];
}
void k2(int n, double *restrict a) {
    for (int j = 0; j < 4; j++)
        if (j < n + 0u && n < 0)
            a[j + 1] = a[j];
}
