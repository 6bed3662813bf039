/* red team 4 (constant steps, remainders, conditional bounds): uchar_step, once answered parallel; see tests/test_deps.py */
void k(double *restrict a) {
    for (unsigned char i = 0; i <= 250; i += 10)
        a[i] = a[i + 4] + 1.0;
}
