/* red team 4 (constant steps, remainders, conditional bounds): local_size_rem, once answered parallel; see tests/test_deps.py */
void k(int n, double *restrict a) {
    long t = (unsigned)n;
    for (int i = 0; i < 8; i++)
        if (n == -2)
            a[i] = a[i + t % 4 + 2];
}
