/* (2R+1)^2 box blur of an 8-bit image, h = n rows by w columns, clamp-to-edge, rounded:
 * a horizontal pass into the int work buffer rowsum, then a vertical pass. */
#define R 4

static inline long clampl(long v, long lo, long hi) { return v < lo ? lo : (v > hi ? hi : v); }

void box_blur_u8(long n, long w, const unsigned char *restrict img, unsigned char *restrict out,
                 int *restrict rowsum)
{
    const int area = (2 * R + 1) * (2 * R + 1);
    for (long y = 0; y < n; y++)
        for (long x = 0; x < w; x++) {
            int s = 0;
            for (long dx = -R; dx <= R; dx++)
                s += img[y * w + clampl(x + dx, 0, w - 1)];
            rowsum[y * w + x] = s;
        }
    for (long y = 0; y < n; y++)
        for (long x = 0; x < w; x++) {
            int s = 0;
            for (long dy = -R; dy <= R; dy++)
                s += rowsum[clampl(y + dy, 0, n - 1) * w + x];
            out[y * w + x] = (unsigned char)((s + area / 2) / area);
        }
}
