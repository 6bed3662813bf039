/* Transpose-and-add in single precision: B := alpha * A^T + beta * B, both n x n row-major. */
void geam_t_f32(long n, float alpha, float beta, const float *restrict A, float *restrict B)
{
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            B[i * n + j] = alpha * A[j * n + i] + beta * B[i * n + j];
}
