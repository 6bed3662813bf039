/* each sweep s records the last element the previous sweep computed */
void f(int steps, int n, const double *restrict a, double *restrict b, double *restrict hist)
{
    double t = 0.0;
    for (int s = 0; s < steps; s++) {
        hist[s] = t;
        for (int i = 0; i < n; i++) {
            t = a[i] * (s + 1);
            b[s * n + i] = t;
        }
    }
}
