#include <math.h>
/* Numerically stable softmax of every row of a rows x COLS double matrix. */
#define COLS 768

void row_softmax(long rows, const double *restrict x, double *restrict y)
{
    for (long r = 0; r < rows; r++) {
        const double *xr = x + r * COLS;
        double *yr = y + r * COLS;
        double mx = xr[0];
        for (int c = 1; c < COLS; c++)
            if (xr[c] > mx) mx = xr[c];
        double sum = 0.0;
        for (int c = 0; c < COLS; c++) {
            yr[c] = exp(xr[c] - mx);
            sum += yr[c];
        }
        double inv = 1.0 / sum;
        for (int c = 0; c < COLS; c++)
            yr[c] *= inv;
    }
}
