/* 2-D wave equation, leapfrog in time, STEPS steps on an n x n float grid with a spatially
 * varying c2 = (c dt/h)^2 (<= 0.2, stable): u_next = 2u - u_prev + c2 * lap(u). The boundary is
 * held at zero. u0/u1 are the two starting time levels, out the level after STEPS steps;
 * work holds three time levels (3*n*n floats) that rotate. */
#define STEPS 24

void wave2d_f32(long n, const float *restrict c2p, const float *restrict u0, const float *restrict u1,
                float *restrict out, float *restrict work)
{
    const float (*c2)[n] = (const float (*)[n])c2p;
    float (*lev[3])[n];
    for (int q = 0; q < 3; q++)
        lev[q] = (float (*)[n])(work + q * n * n);

    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            int edge = i == 0 || j == 0 || i == n - 1 || j == n - 1;
            lev[0][i][j] = edge ? 0.0f : u0[i * n + j];
            lev[1][i][j] = edge ? 0.0f : u1[i * n + j];
            lev[2][i][j] = 0.0f;
        }
    for (int t = 0; t < STEPS; t++) {
        float (*prev)[n] = lev[t % 3], (*cur)[n] = lev[(t + 1) % 3], (*next)[n] = lev[(t + 2) % 3];
        for (long i = 1; i < n - 1; i++)
            for (long j = 1; j < n - 1; j++) {
                float lap = cur[i - 1][j] + cur[i + 1][j] + cur[i][j - 1] + cur[i][j + 1] - 4.0f * cur[i][j];
                next[i][j] = 2.0f * cur[i][j] - prev[i][j] + c2[i][j] * lap;
            }
    }
    float (*last)[n] = lev[(STEPS + 1) % 3];
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            out[i * n + j] = last[i][j];
}
