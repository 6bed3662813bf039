/* Weighted covariance of m = n/2 + 1 features over n samples: X is n x m row-major (sample s,
 * feature a), w[s] > 0 the sample weights, W = sum w.
 *   mean[a]    = sum_s w[s] X[s][a] / W
 *   cov[a][b]  = sum_s w[s] (X[s][a] - mean[a]) (X[s][b] - mean[b]) / W   (symmetric, full matrix)
 * xc is an n x m work buffer for the centred data. */
void wcovar(long n, long m, const double *restrict X, const double *restrict w,
            double *restrict mean, double *restrict cov, double *restrict xc)
{
    double W = 0.0;
    for (long s = 0; s < n; s++)
        W += w[s];

    for (long a = 0; a < m; a++)
        mean[a] = 0.0;
    for (long s = 0; s < n; s++)
        for (long a = 0; a < m; a++)
            mean[a] += w[s] * X[s * m + a];
    for (long a = 0; a < m; a++)
        mean[a] /= W;

    for (long s = 0; s < n; s++)
        for (long a = 0; a < m; a++)
            xc[s * m + a] = X[s * m + a] - mean[a];

    for (long a = 0; a < m; a++)
        for (long b = a; b < m; b++) {
            cov[a * m + b] = 0.0;
            for (long s = 0; s < n; s++)
                cov[a * m + b] += w[s] * xc[s * m + a] * xc[s * m + b];
            cov[a * m + b] /= W;
            cov[b * m + a] = cov[a * m + b];
        }
}
