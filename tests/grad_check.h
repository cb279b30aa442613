/* grad_check.h - the finite-difference gradient check shared by the
 * trainer's gradient tests (test_train_grad.c, test_train_grad_v3.c).
 *
 * For a scalar L = sum(w * op(x)) with fixed random w, the analytic
 * directional derivative g.v is compared with the central difference
 * (L(x + eps v) - L(x - eps v)) / (2 eps) along v = g/|g| (which catches a
 * gradient wrong in any heavily weighted component) and three random unit
 * directions.  Losses are summed in double to keep float32 noise below the
 * tolerance.  Include after check.h, in one test file only (static state).
 */
#ifndef ND_TEST_GRAD_CHECK_H
#define ND_TEST_GRAD_CHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

static nd_rng rng;

static inline float *randn(size_t n, float std)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    nd_rng_fill_normal(&rng, p, n, 0.0f, std);
    return p;
}
static inline float *zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* One op under test: loss() recomputes the forward and returns sum(w*y). */
typedef double (*loss_fn)(void *ctx);

/* abs_floor: the float32 noise floor of the finite difference itself */
static double abs_floor = 0.0;

/* Check the gradient g of loss with respect to x (n floats): the error is
 * measured relative to max(|g.v|, 0.1 |g|), plus abs_floor. */
static inline void check_grad(const char *what, loss_fn loss, void *ctx, float *x, const float *g, size_t n,
                              float eps, double tol)
{
    double gn = 0.0;
    for (size_t i = 0; i < n; i++) gn += (double)g[i] * g[i];
    gn = sqrt(gn);
    float *v = malloc(sizeof(float) * n), *x0 = malloc(sizeof(float) * n);
    memcpy(x0, x, sizeof(float) * n);
    for (int trial = 0; trial < 4; trial++) {
        if (trial == 0 && gn > 0) {
            for (size_t i = 0; i < n; i++) v[i] = (float)(g[i] / gn);
        } else {
            double vn = 0.0;
            nd_rng_fill_normal(&rng, v, n, 0.0f, 1.0f);
            for (size_t i = 0; i < n; i++) vn += (double)v[i] * v[i];
            for (size_t i = 0; i < n; i++) v[i] = (float)(v[i] / sqrt(vn));
        }
        double an = 0.0;
        for (size_t i = 0; i < n; i++) an += (double)g[i] * v[i];
        for (size_t i = 0; i < n; i++) x[i] = x0[i] + eps * v[i];
        double lp = loss(ctx);
        for (size_t i = 0; i < n; i++) x[i] = x0[i] - eps * v[i];
        double lm = loss(ctx);
        memcpy(x, x0, sizeof(float) * n);
        double fd = (lp - lm) / (2.0 * eps);
        double scale = fabs(an) > gn * 0.1 ? fabs(an) : gn * 0.1;
        if (scale < 1e-6) scale = 1e-6;
        CHECKF(fabs(fd - an) <= tol * scale + abs_floor, "%s trial %d: analytic %.7g vs finite difference %.7g (|g|=%.4g)",
               what, trial, an, fd, gn);
    }
    free(v);
    free(x0);
}

/* sum(w * y) in double: the scalar the checks differentiate */
static inline double wsum(const float *w, const float *y, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * y[i];
    return s;
}

#endif
