#define RESULT (t)

double f(int n, const double *restrict a, double *restrict b)
{
    double t = 0.0;
    for (int i = 0; i < n; i++) {
        t = a[i] * 2.0;
        b[i] = t;
    }
    return RESULT;
}
