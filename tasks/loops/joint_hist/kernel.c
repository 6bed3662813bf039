/* Joint and marginal histograms of two 8-bit images of n pixels: joint[(a>>2)*64 + (b>>2)]
 * (64 x 64 bins) and the full 256-bin histograms of each image. The pixel loop scatters into
 * the bins: parallel only as an array reduction (or with private histograms merged). */
#define JB 64

void joint_hist(long n, const unsigned char *restrict a, const unsigned char *restrict b,
                int *restrict joint, int *restrict ha, int *restrict hb)
{
    for (int q = 0; q < JB * JB; q++)
        joint[q] = 0;
    for (int q = 0; q < 256; q++) {
        ha[q] = 0;
        hb[q] = 0;
    }
    for (long p = 0; p < n; p++) {
        unsigned va = a[p], vb = b[p];
        joint[(va >> 2) * JB + (vb >> 2)]++;
        ha[va]++;
        hb[vb]++;
    }
}
