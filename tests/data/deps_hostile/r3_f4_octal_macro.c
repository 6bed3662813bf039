#define SHIFT 010   /* octal: 8 */

void f(double *restrict a)
{
    for (int i = 0; i < 10; i++)
        a[i + SHIFT] = a[i] + 1.0;   /* a[8], a[9] are read after iterations 0, 1 wrote them: a recurrence */
}
