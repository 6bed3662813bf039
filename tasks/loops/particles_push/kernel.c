#include <math.h>
/* Charged particles in a static periodic field, structure of arrays: STEPS symplectic-Euler steps
 * of v += dt*q*E(x, y) - dt*drag*v, x += dt*v with E = (sin(y) cos(x/2), cos(x) sin(y/2)).
 * sys->x/y/vx/vy are updated in place; q is each particle's charge. Particles never interact, so
 * the particle loop is parallel, and the time and particle loops may be interchanged. */
#define STEPS 40
#define DT 0.01
#define DRAG 0.1

struct particles {
    double *x;
    double *y;
    double *vx;
    double *vy;
};

void particles_push(long n, const double *restrict q, struct particles *sys)
{
    for (int t = 0; t < STEPS; t++)
        for (long p = 0; p < n; p++) {
            double ex = sin(sys->y[p]) * cos(0.5 * sys->x[p]);
            double ey = cos(sys->x[p]) * sin(0.5 * sys->y[p]);
            sys->vx[p] += DT * (q[p] * ex - DRAG * sys->vx[p]);
            sys->vy[p] += DT * (q[p] * ey - DRAG * sys->vy[p]);
            sys->x[p] += DT * sys->vx[p];
            sys->y[p] += DT * sys->vy[p];
        }
}
