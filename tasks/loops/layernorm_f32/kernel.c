#include <math.h>
/* Layer normalisation of each row of a rows x COLS float matrix with per-column gain and bias;
 * statistics accumulated in double, results stored as float. Also returns each row's mean
 * and reciprocal standard deviation (what a backward pass would keep). */
#define COLS 512
#define EPS 1e-5

void layernorm_f32(long rows, const float *restrict x, const float *restrict gain, const float *restrict bias,
                   float *restrict y, float *restrict mean, float *restrict rstd)
{
    for (long r = 0; r < rows; r++) {
        const float *xr = &x[r * COLS];
        double s = 0.0;
        for (int c = 0; c < COLS; c++)
            s += xr[c];
        double mu = s / COLS;
        double ss = 0.0;
        for (int c = 0; c < COLS; c++) {
            double d = xr[c] - mu;
            ss += d * d;
        }
        double rs = 1.0 / sqrt(ss / COLS + EPS);
        for (int c = 0; c < COLS; c++)
            y[r * COLS + c] = (float)((xr[c] - mu) * rs) * gain[c] + bias[c];
        mean[r] = (float)mu;
        rstd[r] = (float)rs;
    }
}
