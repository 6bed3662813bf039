/* red team 4 (constant steps, remainders, conditional bounds): uint_down_step, once answered parallel; see tests/test_deps.py */
void k(double *restrict a) {
    for (unsigned i = 4; i >= 1; i -= 3)
        a[0] += 1.0;
}
