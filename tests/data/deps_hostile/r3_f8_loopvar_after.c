/* scales the first n elements and zeroes the one after them (a[n]) */
void f(int n, double *restrict a)
{
    int i;
    for (i = 0; i < n; i++)
        a[i] = 2.0 * a[i];
    a[i] = 0.0;
}
