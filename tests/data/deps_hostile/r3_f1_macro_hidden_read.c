#define SMOOTH(x) (0.5 * (x) + 0.5 * last)

void smooth(int n, const double *restrict in, double *restrict out)
{
    double last = 0.0;
    for (int i = 0; i < n; i++) {
        out[i] = SMOOTH(in[i]);
        last = in[i];
    }
}
