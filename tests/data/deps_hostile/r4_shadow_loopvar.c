/* red team 4: shadow_loopvar, once answered parallel (the later int i hid the unsigned i) */
void k(int n, double *restrict a) {
    for (unsigned i = 0; i < 2; i++)
        for (int j = (n - i) % 4; j < (n - i) % 4 + 1; j++)
            if (n == 0)
                a[j - 3 * i + 8] += 1.0;
    for (int i = 1; i < n; i++)
        a[i] = a[i - 1];
}
