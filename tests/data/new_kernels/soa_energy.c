/* A reduction over a struct of arrays (not a built-in task): the moment of inertia of point masses
 * about the vertical axis through (cx, cy). For tests of `kernopt task new`. */
struct particles {
    const double *x;
    const double *y;
    const double *m;
    long count;
};

double inertia(const struct particles *p, double cx, double cy) {
    double s = 0.0;
    for (long i = 0; i < p->count; i++) {
        double dx = p->x[i] - cx, dy = p->y[i] - cy;
        s += p->m[i] * (dx * dx + dy * dy);
    }
    return s;
}
