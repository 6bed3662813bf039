/* An integer kernel (not a built-in task): a multiplicative hash of each key mixed with a salt, and a
 * 64-bin histogram of the keys' middle bits. For tests of `kernopt task new`. */
#include <stdint.h>

void int_mix(long n, const uint32_t *restrict keys, const int32_t *restrict salt, int64_t *restrict out,
             int32_t *restrict hist) {
    for (int b = 0; b < 64; b++) hist[b] = 0;
    for (long i = 0; i < n; i++) {
        uint32_t h = keys[i] * 2654435761u;
        out[i] = (int64_t)(h >> 7) ^ (int64_t)salt[i];
        hist[(keys[i] >> 3) & 63]++;
    }
}
