/* Evaluate one polynomial of degree DEG at n float points, in double, by Horner's rule written
 * one coefficient at a time over the whole array (the way array languages do it).
 * Not parallelizable as written over d: every pass needs the previous pass's y.
 * The i loop is independent (and the d and i loops may be interchanged). */
#define DEG 64

void horner_passes(long n, const float *restrict x, const double *restrict coef, double *restrict y)
{
    for (long i = 0; i < n; i++)
        y[i] = coef[DEG];
    for (int d = DEG - 1; d >= 0; d--)
        for (long i = 0; i < n; i++)
            y[i] = y[i] * x[i] + coef[d];
}
