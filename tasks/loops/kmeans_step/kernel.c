/* One Lloyd iteration of k-means: assign each of the n points (D coordinates, row-major) to
 * its nearest of K centroids (squared Euclidean distance, the lowest index wins ties), then
 * recompute the centroids as the means of their points (an empty cluster keeps its centroid).
 * The point loop scatters into sums/counts: parallel only as an array reduction. */
#define D 6
#define K 20

void kmeans_step(long n, const double *restrict pts, const double *restrict cent,
                 int *restrict label, double *restrict newcent, int *restrict count)
{
    double sums[K][D];
    for (int c = 0; c < K; c++) {
        count[c] = 0;
        for (int d = 0; d < D; d++)
            sums[c][d] = 0.0;
    }
    for (long i = 0; i < n; i++) {
        int best = 0;
        double bestd = 0.0;
        for (int c = 0; c < K; c++) {
            double dist = 0.0;
            for (int d = 0; d < D; d++) {
                double diff = pts[i * D + d] - cent[c * D + d];
                dist += diff * diff;
            }
            if (c == 0 || dist < bestd) {
                bestd = dist;
                best = c;
            }
        }
        label[i] = best;
        count[best]++;
        for (int d = 0; d < D; d++)
            sums[best][d] += pts[i * D + d];
    }
    for (int c = 0; c < K; c++)
        for (int d = 0; d < D; d++)
            newcent[c * D + d] = count[c] ? sums[c][d] / count[c] : cent[c * D + d];
}
