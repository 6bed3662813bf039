#define RESTART s = 0.0

/* running sum that restarts at every negative element; the total since the last restart */
double f(int n, const double *restrict a)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        s += a[i];
        if (a[i] < 0.0)
            RESTART;
    }
    return s;
}
