/* Separable 2-D convolution of an n x n float image with a (2R+1)-tap kernel applied along
 * rows and then along columns, zero padding outside the image; tmp holds the row pass. */
#define R 6

void sepconv_f32(long n, const float *restrict inp, const float *restrict taps,
                 float *restrict outp, float *restrict tmpp)
{
    const float (*in)[n] = (const float (*)[n])inp;
    float (*tmp)[n] = (float (*)[n])tmpp;
    float (*out)[n] = (float (*)[n])outp;

    for (long y = 0; y < n; y++)
        for (long x = 0; x < n; x++) {
            float acc = 0.0f;
            for (long t = -R; t <= R; t++)
                if (x + t >= 0 && x + t < n)
                    acc += taps[t + R] * in[y][x + t];
            tmp[y][x] = acc;
        }
    for (long y = 0; y < n; y++)
        for (long x = 0; x < n; x++) {
            float acc = 0.0f;
            for (long t = -R; t <= R; t++)
                if (y + t >= 0 && y + t < n)
                    acc += taps[t + R] * tmp[y + t][x];
            out[y][x] = acc;
        }
}
