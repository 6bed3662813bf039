/* Implicit 1-D diffusion on n independent rods of L = 128 cells: STEPS backward-Euler steps,
 * each a tridiagonal solve (Thomas algorithm) with the rod's own coefficients.
 * The systems are stored interleaved: cell i of rod s is element i*n + s of every array.
 * sys->lo/di/up are the sub-, main and super-diagonal (lo of cell 0 and up of cell L-1 unused),
 * sys->u0 the initial state; x receives the state after STEPS steps, cp is a work array.
 * Not parallelizable as written over i: the forward sweep of cell i needs cell i-1's result and
 * the back substitution cell i+1's. The rods (the s loops) are independent. */
#define L 128
#define STEPS 16

struct tridiag {
    const double *lo;
    const double *di;
    const double *up;
    const double *u0;
};

void tridiag_soa(long n, const struct tridiag *sys, double *restrict x, double *restrict cp)
{
    for (long p = 0; p < L * n; p++)
        x[p] = sys->u0[p];
    for (int t = 0; t < STEPS; t++) {
        for (long s = 0; s < n; s++) {
            cp[s] = sys->up[s] / sys->di[s];
            x[s] = x[s] / sys->di[s];
        }
        for (long i = 1; i < L; i++)
            for (long s = 0; s < n; s++) {
                long p = i * n + s;
                double denom = sys->di[p] - sys->lo[p] * cp[p - n];
                cp[p] = sys->up[p] / denom;
                x[p] = (x[p] - sys->lo[p] * x[p - n]) / denom;
            }
        for (long i = L - 2; i >= 0; i--)
            for (long s = 0; s < n; s++) {
                long p = i * n + s;
                x[p] -= cp[p] * x[p + n];
            }
    }
}
