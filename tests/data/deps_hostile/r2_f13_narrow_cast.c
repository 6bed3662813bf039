#include <stdint.h>
/* a 256-entry ring buffer indexed with uint8_t wrap-around */
void kernel(double *restrict ring) {
  for (int i = 0; i < 100; i++)
    ring[(uint8_t)(i + 200)] = ring[(uint8_t)i] * 0.5;
}
