/* Correlation matrix of m = (3n)/2 samples of nf = (5n)/8 + 1 features (data m x nf, row-major):
 * column means and standard deviations, the data centred and scaled in place (data is scratch),
 * then the upper triangle of corr = data^T data / (m - 1), mirrored into the lower one, unit
 * diagonal. A standard deviation below eps is taken as 1 (a constant column).
 * Parallel as written over the feature j in the statistics nests (the sample loop is a
 * reduction), over the samples in the scaling nest and over i in the triangular correlation
 * nest (unbalanced: row i has nf - i entries). */
#include <math.h>

void corr_derived(long n, double *restrict data, double *restrict mean, double *restrict stddev,
                  double *restrict corr)
{
    long m = (3 * n) / 2, nf = (5 * n) / 8 + 1;
    const double eps = 1e-9;

    for (long j = 0; j < nf; j++) {
        mean[j] = 0.0;
        for (long s = 0; s < m; s++)
            mean[j] += data[s * nf + j];
        mean[j] /= (double)m;
    }
    for (long j = 0; j < nf; j++) {
        stddev[j] = 0.0;
        for (long s = 0; s < m; s++)
            stddev[j] += (data[s * nf + j] - mean[j]) * (data[s * nf + j] - mean[j]);
        stddev[j] = sqrt(stddev[j] / (double)m);
        if (stddev[j] <= eps)
            stddev[j] = 1.0;
    }
    for (long s = 0; s < m; s++)
        for (long j = 0; j < nf; j++)
            data[s * nf + j] = (data[s * nf + j] - mean[j]) / (sqrt((double)m) * stddev[j]);
    for (long i = 0; i < nf; i++) {
        corr[i * nf + i] = 1.0;
        for (long j = i + 1; j < nf; j++) {
            corr[i * nf + j] = 0.0;
            for (long s = 0; s < m; s++)
                corr[i * nf + j] += data[s * nf + i] * data[s * nf + j];
            corr[j * nf + i] = corr[i * nf + j];
        }
    }
}
