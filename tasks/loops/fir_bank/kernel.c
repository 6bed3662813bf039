/* A bank of NF FIR filters of NT taps over one signal: out[f][t] = sum_k h[f][k] * x[t + k],
 * t < n; x has n + NT - 1 samples. Written tap by tap, accumulating into the output row. */
#define NF 8
#define NT 128

void fir_bank(long n, const double *restrict x, const double *restrict h, double *restrict out)
{
    for (int f = 0; f < NF; f++) {
        for (long t = 0; t < n; t++)
            out[f * n + t] = 0.0;
        for (int k = 0; k < NT; k++)
            for (long t = 0; t < n; t++)
                out[f * n + t] += h[f * NT + k] * x[t + k];
    }
}
