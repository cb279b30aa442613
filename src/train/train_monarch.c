/* train_monarch.c - Needle 3's Monarch Hadamard MLP, forward and backward (see train_monarch.h). */
#include "train/train_monarch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/formulas.h"
#include "train/train_par.h"

/* y = z K, K = Wa (x) Wb: with Z the a x b view of z, Y = Wa^T (Z Wb).
 * m: a*b scratch (left holding Z Wb). */
static void kron_fwd(const float *z, const float *wa, const float *wb, int a, int b, float *m, float *y)
{
    for (int i = 0; i < a; i++) {
        float *mi = m + (size_t)i * b;
        memset(mi, 0, sizeof(float) * (size_t)b);
        for (int j = 0; j < b; j++) {
            float zij = z[(size_t)i * b + j];
            const float *wj = wb + (size_t)j * b;
            for (int l = 0; l < b; l++) mi[l] += zij * wj[l];
        }
    }
    for (int k = 0; k < a; k++) {
        float *yk = y + (size_t)k * b;
        memset(yk, 0, sizeof(float) * (size_t)b);
        for (int i = 0; i < a; i++) {
            float w = wa[(size_t)i * a + k];
            const float *mi = m + (size_t)i * b;
            for (int l = 0; l < b; l++) yk[l] += w * mi[l];
        }
    }
}

/* Backward of Y = Wa^T Z Wb: dz = Wa dY Wb^T (written), dWa += (Z Wb) dY^T,
 * dWb += Z^T (Wa dY) (when not NULL).  m, gm: a*b scratch each. */
static void kron_bwd(const float *dy, const float *z, const float *wa, const float *wb, int a, int b, float *dz,
                     float *dwa, float *dwb, float *m, float *gm)
{
    if (dwa) {
        for (int i = 0; i < a; i++) { /* m = Z Wb */
            float *mi = m + (size_t)i * b;
            memset(mi, 0, sizeof(float) * (size_t)b);
            for (int j = 0; j < b; j++) {
                float zij = z[(size_t)i * b + j];
                const float *wj = wb + (size_t)j * b;
                for (int l = 0; l < b; l++) mi[l] += zij * wj[l];
            }
        }
        for (int i = 0; i < a; i++)
            for (int k = 0; k < a; k++) {
                const float *mi = m + (size_t)i * b, *dk = dy + (size_t)k * b;
                float s = 0.0f;
                for (int l = 0; l < b; l++) s += mi[l] * dk[l];
                dwa[(size_t)i * a + k] += s;
            }
    }
    for (int i = 0; i < a; i++) { /* gm = Wa dY */
        float *gi = gm + (size_t)i * b;
        memset(gi, 0, sizeof(float) * (size_t)b);
        for (int k = 0; k < a; k++) {
            float w = wa[(size_t)i * a + k];
            const float *dk = dy + (size_t)k * b;
            for (int l = 0; l < b; l++) gi[l] += w * dk[l];
        }
    }
    if (dwb)
        for (int i = 0; i < a; i++) {
            const float *gi = gm + (size_t)i * b;
            for (int j = 0; j < b; j++) {
                float zij = z[(size_t)i * b + j];
                float *wj = dwb + (size_t)j * b;
                for (int l = 0; l < b; l++) wj[l] += zij * gi[l];
            }
        }
    for (int i = 0; i < a; i++) /* dz = gm Wb^T */
        for (int j = 0; j < b; j++) {
            const float *gi = gm + (size_t)i * b, *wj = wb + (size_t)j * b;
            float s = 0.0f;
            for (int l = 0; l < b; l++) s += gi[l] * wj[l];
            dz[(size_t)i * b + j] = s;
        }
}

/* sm = softmax(h cond_v) over the rank entries */
static void gate_softmax(const nd_monarch_params *p, const float *h, float *sm)
{
    int R = p->rank;
    float mx = -INFINITY;
    for (int r = 0; r < R; r++) {
        float s = 0.0f;
        for (int i = 0; i < p->d; i++) s += h[i] * p->cond_v[(size_t)i * R + r];
        sm[r] = s;
        if (s > mx) mx = s;
    }
    float sum = 0.0f;
    for (int r = 0; r < R; r++) sum += sm[r] = expf(sm[r] - mx);
    for (int r = 0; r < R; r++) sm[r] /= sum;
}

/* c = 1 + sm cond_u */
static void gate_c(const nd_monarch_params *p, const float *sm, float *c)
{
    for (int i = 0; i < p->Nh; i++) c[i] = 1.0f;
    for (int r = 0; r < p->rank; r++) {
        const float *u = p->cond_u + (size_t)r * p->Nh;
        for (int i = 0; i < p->Nh; i++) c[i] += sm[r] * u[i];
    }
}

typedef struct {
    const nd_monarch_params *p;
    const nd_monarch_grads *g;
    float *out, *sm, *x1, *x2, *y3, *dh;
    const float *h, *dout, *csm, *cx1, *cx2, *cy3;
} mon_ctx;

static void fwd_rows(void *ctx, int r0, int r1, float *partial)
{
    (void)partial;
    mon_ctx *c = ctx;
    const nd_monarch_params *p = c->p;
    int d = p->d, Nh = p->Nh, R = p->rank;
    float *buf = malloc(sizeof(float) * (size_t)Nh * 4);
    if (!buf) return; /* out of memory: the rows keep what they held */
    float *z = buf, *y = buf + Nh, *m = buf + 2 * Nh, *cc = buf + 3 * Nh;
    for (int r = r0; r < r1; r++) {
        const float *h = c->h + (size_t)r * d;
        float *sm = c->sm + (size_t)r * R, *x1 = c->x1 + (size_t)r * Nh, *x2 = c->x2 + (size_t)r * Nh;
        gate_softmax(p, h, sm);
        gate_c(p, sm, cc);
        for (int i = 0; i < Nh; i++) z[i] = i < d ? p->d1[i] * h[i] : 0.0f;
        kron_fwd(z, p->w1a, p->w1b, p->a, p->b, m, y);
        for (int i = 0; i < Nh; i++) x1[i] = y[(int)p->p1[i]];
        for (int i = 0; i < Nh; i++) z[i] = nd_silu(p->d2[i] * cc[i] * x1[i] + p->b2[i]);
        kron_fwd(z, p->w2a, p->w2b, p->a, p->b, m, y);
        for (int i = 0; i < Nh; i++) x2[i] = y[(int)p->p2[i]];
        for (int i = 0; i < Nh; i++) z[i] = p->d3[i] * x2[i];
        kron_fwd(z, p->w3a, p->w3b, p->a, p->b, m, y);
        for (int i = 0; i < d; i++) {
            c->y3[(size_t)r * d + i] = y[i];
            c->out[(size_t)r * d + i] = p->d4[i] * y[i];
        }
    }
    free(buf);
}

void nd_monarch_fwd(nd_threadpool *pool, const nd_monarch_params *p, float *out, float *sm, float *x1, float *x2,
                    float *y3, const float *h, int N)
{
    mon_ctx c = {.p = p, .out = out, .sm = sm, .x1 = x1, .x2 = x2, .y3 = y3, .h = h};
    nd_par_rows(pool, N, fwd_rows, &c, NULL, 0);
}

/* the partial gradient layout: d1 d2 b2 d3 d4 | w1a w2a w3a | w1b w2b w3b | cond_v | cond_u */
typedef struct { float *d1, *d2, *b2, *d3, *d4, *wa[3], *wb[3], *cv, *cu; } mon_grad_ptrs;

static size_t grads_layout(const nd_monarch_params *p, float *base, mon_grad_ptrs *g)
{
    size_t Nh = (size_t)p->Nh, aa = (size_t)p->a * p->a, bb = (size_t)p->b * p->b, off = 0;
#define AT(f, n) do { if (base) g->f = base + off; off += (n); } while (0)
    AT(d1, Nh); AT(d2, Nh); AT(b2, Nh); AT(d3, Nh); AT(d4, Nh);
    AT(wa[0], aa); AT(wa[1], aa); AT(wa[2], aa); AT(wb[0], bb); AT(wb[1], bb); AT(wb[2], bb);
    AT(cv, (size_t)p->d * p->rank); AT(cu, (size_t)p->rank * Nh);
#undef AT
    return off;
}

static void bwd_rows(void *ctx, int r0, int r1, float *partial)
{
    mon_ctx *c = ctx;
    const nd_monarch_params *p = c->p;
    int d = p->d, Nh = p->Nh, R = p->rank, A = p->a, B = p->b;
    mon_grad_ptrs g = {0};
    if (partial) grads_layout(p, partial, &g);
    float *buf = malloc(sizeof(float) * ((size_t)Nh * 7 + 2 * (size_t)R));
    if (!buf) return; /* out of memory: gradients left untouched */
    float *t = buf, *u = buf + Nh, *m = buf + 2 * Nh, *gm = buf + 3 * Nh, *cc = buf + 4 * Nh, *pre = buf + 5 * Nh;
    float *z = buf + 6 * Nh, *dsm = buf + 7 * Nh, *dl = dsm + R;
    for (int r = r0; r < r1; r++) {
        const float *h = c->h + (size_t)r * d, *go = c->dout + (size_t)r * d, *sm = c->csm + (size_t)r * R;
        const float *x1 = c->cx1 + (size_t)r * Nh, *x2 = c->cx2 + (size_t)r * Nh, *y3 = c->cy3 + (size_t)r * d;
        /* out = (d4 y3)[0:d] */
        for (int i = 0; i < Nh; i++) t[i] = i < d ? go[i] * p->d4[i] : 0.0f;
        if (partial)
            for (int i = 0; i < d; i++) g.d4[i] += go[i] * y3[i];
        /* y3 = (d3 x2) K3 */
        for (int i = 0; i < Nh; i++) z[i] = p->d3[i] * x2[i];
        kron_bwd(t, z, p->w3a, p->w3b, A, B, u, g.wa[2], g.wb[2], m, gm);
        /* x2 = y2[p2]: dy2[p2[i]] = dx2[i], dx2 = du * d3 */
        for (int i = 0; i < Nh; i++) {
            if (partial) g.d3[i] += u[i] * x2[i];
            t[(int)p->p2[i]] = u[i] * p->d3[i];
        }
        /* y2 = silu(pre) K2, pre = d2 c x1 + b2 */
        gate_c(p, sm, cc);
        for (int i = 0; i < Nh; i++) {
            pre[i] = p->d2[i] * cc[i] * x1[i] + p->b2[i];
            z[i] = nd_silu(pre[i]);
        }
        kron_bwd(t, z, p->w2a, p->w2b, A, B, u, g.wa[1], g.wb[1], m, gm);
        for (int r2 = 0; r2 < R; r2++) dsm[r2] = 0.0f;
        for (int i = 0; i < Nh; i++) {
            float s = nd_sigmoid(pre[i]);
            float dp = u[i] * s * (1.0f + pre[i] * (1.0f - s));
            float dc = dp * p->d2[i] * x1[i];
            if (partial) {
                g.b2[i] += dp;
                g.d2[i] += dp * cc[i] * x1[i];
                for (int r2 = 0; r2 < R; r2++) g.cu[(size_t)r2 * Nh + i] += dc * sm[r2];
            }
            for (int r2 = 0; r2 < R; r2++) dsm[r2] += dc * p->cond_u[(size_t)r2 * Nh + i];
            t[(int)p->p1[i]] = dp * p->d2[i] * cc[i]; /* x1 = y1[p1] */
        }
        /* sm = softmax(h cond_v) */
        float sd = 0.0f;
        for (int r2 = 0; r2 < R; r2++) sd += sm[r2] * dsm[r2];
        for (int r2 = 0; r2 < R; r2++) dl[r2] = sm[r2] * (dsm[r2] - sd);
        /* y1 = (d1 pad(h)) K1 */
        for (int i = 0; i < Nh; i++) z[i] = i < d ? p->d1[i] * h[i] : 0.0f;
        kron_bwd(t, z, p->w1a, p->w1b, A, B, u, g.wa[0], g.wb[0], m, gm);
        for (int i = 0; i < d; i++) {
            const float *cv = p->cond_v + (size_t)i * R;
            float s = u[i] * p->d1[i];
            for (int r2 = 0; r2 < R; r2++) s += cv[r2] * dl[r2];
            if (c->dh) c->dh[(size_t)r * d + i] += s;
            if (partial) {
                g.d1[i] += u[i] * h[i];
                for (int r2 = 0; r2 < R; r2++) g.cv[(size_t)i * R + r2] += h[i] * dl[r2];
            }
        }
    }
    free(buf);
}

void nd_monarch_bwd(nd_threadpool *pool, const nd_monarch_params *p, const nd_monarch_grads *g, float *dh,
                    const float *dout, const float *h, const float *sm, const float *x1, const float *x2,
                    const float *y3, int N)
{
    mon_ctx c = {.p = p, .g = g, .dh = dh, .dout = dout, .h = h, .csm = sm, .cx1 = x1, .cx2 = x2, .cy3 = y3};
    if (!g) {
        nd_par_rows(pool, N, bwd_rows, &c, NULL, 0);
        return;
    }
    size_t n = grads_layout(p, NULL, &(mon_grad_ptrs){0});
    float *acc = calloc(n, sizeof(float));
    if (!acc) return; /* out of memory: gradients left untouched */
    nd_par_rows(pool, N, bwd_rows, &c, acc, n);
    mon_grad_ptrs s;
    grads_layout(p, acc, &s);
    size_t Nh = (size_t)p->Nh, aa = (size_t)p->a * p->a, bb = (size_t)p->b * p->b;
    struct { float *dst; const float *src; size_t n; } add[] = {
        {g->d1, s.d1, Nh},       {g->d2, s.d2, Nh},       {g->b2, s.b2, Nh},       {g->d3, s.d3, Nh},
        {g->d4, s.d4, Nh},       {g->w1a, s.wa[0], aa},   {g->w2a, s.wa[1], aa},   {g->w3a, s.wa[2], aa},
        {g->w1b, s.wb[0], bb},   {g->w2b, s.wb[1], bb},   {g->w3b, s.wb[2], bb},
        {g->cond_v, s.cv, (size_t)p->d * p->rank}, {g->cond_u, s.cu, (size_t)p->rank * Nh},
    };
    for (size_t k = 0; k < sizeof add / sizeof add[0]; k++)
        for (size_t i = 0; i < add[k].n; i++) add[k].dst[i] += add[k].src[i];
    free(acc);
}
