/* Length of the longest common subsequence of n pairs of DNA-like strings (symbols 0..3) of
 * length LEN each, pair q at a[q*LEN], b[q*LEN]. Each pair is a dynamic programme over a
 * (LEN+1)^2 table kept as two rows; within a pair every cell depends on its left, upper and
 * upper-left neighbours. The pairs are independent. */
#define LEN 160

void lcs_batch(long n, const unsigned char *restrict a, const unsigned char *restrict b, int *restrict len)
{
    for (long q = 0; q < n; q++) {
        int prev[LEN + 1], cur[LEN + 1];
        const unsigned char *s = a + q * LEN, *t = b + q * LEN;
        for (int j = 0; j <= LEN; j++)
            prev[j] = 0;
        for (int i = 1; i <= LEN; i++) {
            cur[0] = 0;
            for (int j = 1; j <= LEN; j++) {
                if (s[i - 1] == t[j - 1])
                    cur[j] = prev[j - 1] + 1;
                else
                    cur[j] = prev[j] > cur[j - 1] ? prev[j] : cur[j - 1];
            }
            for (int j = 0; j <= LEN; j++)
                prev[j] = cur[j];
        }
        len[q] = prev[LEN];
    }
}
