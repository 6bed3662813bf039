#include <math.h>
/* Sobel edge detector on an 8-bit n x n image: gradient magnitude as float and a direction
 * code 0..3 (horizontal, diagonal up, vertical, diagonal down), both zero on the 1-pixel border.
 * The gradients are integers, so the magnitude sqrtf(gx^2 + gy^2) is exact to the float rounding. */
#define PX(r, c) img[(r) * n + (c)]

void sobel_u8(long n, const unsigned char *restrict img, float *restrict mag, unsigned char *restrict dir)
{
    for (long c = 0; c < n; c++) {
        mag[c] = 0.0f; dir[c] = 0;
        if (n > 1) { mag[(n - 1) * n + c] = 0.0f; dir[(n - 1) * n + c] = 0; }
    }
    for (long r = 1; r < n - 1; r++) {
        mag[r * n] = 0.0f; dir[r * n] = 0;
        mag[r * n + n - 1] = 0.0f; dir[r * n + n - 1] = 0;
        for (long c = 1; c < n - 1; c++) {
            int gx = (PX(r - 1, c + 1) + 2 * PX(r, c + 1) + PX(r + 1, c + 1))
                   - (PX(r - 1, c - 1) + 2 * PX(r, c - 1) + PX(r + 1, c - 1));
            int gy = (PX(r + 1, c - 1) + 2 * PX(r + 1, c) + PX(r + 1, c + 1))
                   - (PX(r - 1, c - 1) + 2 * PX(r - 1, c) + PX(r - 1, c + 1));
            mag[r * n + c] = sqrtf((float)(gx * gx + gy * gy));
            int ax = gx < 0 ? -gx : gx, ay = gy < 0 ? -gy : gy;
            unsigned char d;
            if (2 * ay <= ax) d = 0;
            else if (2 * ax <= ay) d = 2;
            else d = ((gx > 0) == (gy > 0)) ? 1 : 3;
            dir[r * n + c] = d;
        }
    }
}
