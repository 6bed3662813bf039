/* the last positive element's square root goes to *last_out; out[i] gets it where in[i] > 0 */
#include <math.h>
void f(int n, const double *restrict in, double *restrict out, double *restrict last_out)
{
    double t = 0.0;
    for (int i = 0; i < n; i++) {
        if (in[i] > 0.0) {
            t = sqrt(in[i]);
            out[i] = t;
        }
    }
    *last_out = t;
}
