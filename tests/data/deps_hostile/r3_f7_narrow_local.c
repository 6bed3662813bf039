void f(double *restrict a)
{
    unsigned char d = 257;   /* 1 */
    for (int i = 0; i < 100; i++)
        a[i + 2] = a[i + d] * 0.5;   /* reads a[i + 1], written by iteration i - 1 */
}
