/* Box mean of an 8-bit n x n image through a summed-area table: sat (unsigned, wraps mod 2^32,
 * which cancels in the window differences) is built by a prefix sum along each row and then
 * along each column; out[y][x] is the mean over the (2R+1)^2 window clipped to the image.
 * The row scan carries a dependence along x (rows independent), the column scan along y
 * (columns independent): the outer loop of the second nest is not parallel as written. */
#define R 5

void sat_boxmean(long n, const unsigned char *restrict img, float *restrict out, unsigned *restrict sat)
{
    for (long y = 0; y < n; y++) {
        unsigned run = 0;
        for (long x = 0; x < n; x++) {
            run += img[y * n + x];
            sat[y * n + x] = run;
        }
    }
    for (long y = 1; y < n; y++)
        for (long x = 0; x < n; x++)
            sat[y * n + x] += sat[(y - 1) * n + x];
    for (long y = 0; y < n; y++) {
        long y0 = y - R - 1, y1 = y + R < n ? y + R : n - 1;
        for (long x = 0; x < n; x++) {
            long x0 = x - R - 1, x1 = x + R < n ? x + R : n - 1;
            unsigned s = sat[y1 * n + x1];
            if (y0 >= 0) s -= sat[y0 * n + x1];
            if (x0 >= 0) s -= sat[y1 * n + x0];
            if (y0 >= 0 && x0 >= 0) s += sat[y0 * n + x0];
            long area = (y1 - (y0 < -1 ? -1 : y0)) * (x1 - (x0 < -1 ? -1 : x0));
            out[y * n + x] = (float)s / (float)area;
        }
    }
}
