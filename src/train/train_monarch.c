/* train_monarch.c - Needle 3's Monarch Hadamard MLP, forward and backward (see train_monarch.h).
 *
 * Rows go in blocks of ND_PAR_ROWS (one thread-pool task each), and every
 * product of a block is a GEMM (train/gemm.h) over all its rows at once:
 *
 *   - z K = Wa^T Z Wb on the a x b view Z of a row.  Stacked, the rows' Z
 *     are one [rows*a, b] matrix, so M = Z Wb is a single product; the other
 *     side, Wa^T M_n, is done as its transpose M_n^T Wa for each row (M_n read
 *     transposed in place, Wa packed once): the result is Y^T, [b, a] per row.
 *     The permutation that follows reads Y^T through a composed index (the
 *     y_i = y[p_i] of the spec becomes yt[q_i]), so the transpose costs nothing.
 *   - The backward runs the same way round: dY is scattered straight into the
 *     transposed layout, G^T = dY^T Wa^T is one product, dz_n = (G_n^T)^T Wb^T
 *     one batched product with a shared, once-packed Wb^T.
 *   - The gate's h cond_v, sm cond_u, and their backward products are GEMMs
 *     over the block's rows too.
 *
 * Every output entry is an in-order sum fixed by the block (never by the
 * thread count), and parameter gradients are summed per block and added in
 * block order (train_par.h), so results are the same for any thread count. */
#include "train/train_monarch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/formulas.h"
#include "train/gemm.h"
#include "train/train_par.h"

/* Composed gather indices: row layout Y^T (b x a), element i of y = Y[i/b][i%b]
 * sits at (i%b)*a + i/b.  q[i] locates y[perm[i]] (perm NULL: y[i]). */
static int *transposed_index(const float *perm, int Nh, int a, int b)
{
    int *q = malloc(sizeof(int) * (size_t)Nh);
    if (!q) return NULL;
    for (int i = 0; i < Nh; i++) {
        int j = perm ? (int)perm[i] : i;
        q[i] = (j % b) * a + j / b;
    }
    return q;
}

typedef struct {
    const nd_monarch_params *p;
    float *out, *sm, *x1, *x2, *y3, *dh;
    const float *h, *dout, *csm, *cx1, *cx2, *cy3;
    const int *q1, *q2, *q3; /* composed indices of p1, p2 and the identity */
    size_t scratch;          /* GEMM scratch floats for one block */
} mon_ctx;

/* The largest GEMM scratch any product of a block of `rows` needs. */
static size_t scratch_for(const nd_monarch_params *p, int rows)
{
    int dims[][2] = {{p->rank, p->d}, {p->Nh, p->rank}, {p->b, p->b}, {p->a, p->a}, {p->rank, p->Nh},
                     {p->d, p->rank}, {p->rank, rows}, {p->Nh, rows}, {p->a, p->b}, {p->b, p->a}};
    size_t m = 0;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        size_t s = nd_gemm_scratch_floats(dims[i][0], dims[i][1]);
        if (s > m) m = s;
    }
    return m;
}

/* Yt_n = (Wa^T Z_n Wb)^T for the n rows of Z (n x Nh); m: n x Nh scratch. */
static void kron_fwd_rows(const float *Z, const float *wa, const float *wb, int n, int a, int b, float *m, float *Yt,
                          float *scratch)
{
    size_t ab = (size_t)a * b;
    nd_gemm_serial(m, b, nd_gemm_rowmajor(Z, b), nd_gemm_rowmajor(wb, b), n * a, b, b, 0, scratch);
    nd_gemm_serial_batch(Yt, a, (ptrdiff_t)ab, nd_gemm_transposed(m, b), (ptrdiff_t)ab, nd_gemm_rowmajor(wa, a), 0,
                         b, a, a, n, 0, scratch);
}

/* Backward of the rows' Y = Wa^T Z Wb given dY^T (n x [b, a]):
 * dz_n = Wa dY_n Wb^T (written to dz, canonical layout), and when dwa/dwb are
 * set dWa += sum_n (Z_n Wb) dY_n^T, dWb += sum_n Z_n^T (Wa dY_n).
 * gt, m: n x Nh scratch (m only with gradients; Z is only read for them). */
static void kron_bwd_rows(const float *dYt, const float *Z, const float *wa, const float *wb, int n, int a, int b,
                          float *dz, float *dwa, float *dwb, float *gt, float *m, float *scratch)
{
    size_t ab = (size_t)a * b;
    /* G_n^T = dY_n^T Wa^T, all rows at once */
    nd_gemm_serial(gt, a, nd_gemm_rowmajor(dYt, a), nd_gemm_transposed(wa, a), n * b, a, a, 0, scratch);
    /* dz_n = G_n Wb^T, G_n read through G_n^T */
    nd_gemm_serial_batch(dz, b, (ptrdiff_t)ab, nd_gemm_transposed(gt, a), (ptrdiff_t)ab, nd_gemm_transposed(wb, b), 0,
                         a, b, b, n, 0, scratch);
    if (dwa) { /* dWa += sum_n M_n dY_n^T, M = Z Wb */
        nd_gemm_serial(m, b, nd_gemm_rowmajor(Z, b), nd_gemm_rowmajor(wb, b), n * a, b, b, 0, scratch);
        nd_gemm_serial_batch(dwa, a, 0, nd_gemm_rowmajor(m, b), (ptrdiff_t)ab, nd_gemm_rowmajor(dYt, a),
                             (ptrdiff_t)ab, a, a, b, n, 1, scratch);
    }
    if (dwb) /* dWb += sum_n Z_n^T G_n, G_n read through G_n^T */
        nd_gemm_serial_batch(dwb, b, 0, nd_gemm_transposed(Z, b), (ptrdiff_t)ab, nd_gemm_transposed(gt, a),
                             (ptrdiff_t)ab, b, b, a, n, 1, scratch);
}

/* sm = softmax(h cond_v) for n rows: logits by one product, then each row */
static void gate_softmax_rows(const nd_monarch_params *p, const float *h, float *sm, int n, float *scratch)
{
    int R = p->rank;
    nd_gemm_serial(sm, R, nd_gemm_rowmajor(h, p->d), nd_gemm_rowmajor(p->cond_v, R), n, R, p->d, 0, scratch);
    for (int r = 0; r < n; r++) {
        float *s = sm + (size_t)r * R, mx = -INFINITY, sum = 0.0f;
        for (int k = 0; k < R; k++) mx = s[k] > mx ? s[k] : mx;
        for (int k = 0; k < R; k++) sum += s[k] = expf(s[k] - mx);
        for (int k = 0; k < R; k++) s[k] /= sum;
    }
}

/* c = 1 + sm cond_u for n rows */
static void gate_c_rows(const nd_monarch_params *p, const float *sm, float *c, int n, float *scratch)
{
    for (size_t i = 0; i < (size_t)n * p->Nh; i++) c[i] = 1.0f;
    nd_gemm_serial(c, p->Nh, nd_gemm_rowmajor(sm, p->rank), nd_gemm_rowmajor(p->cond_u, p->Nh), n, p->Nh, p->rank,
                   1, scratch);
}

/* z = d1 * pad(h) for n rows */
static void input_rows(const nd_monarch_params *p, const float *h, float *z, int n)
{
    int d = p->d, Nh = p->Nh;
    for (int r = 0; r < n; r++) {
        float *zr = z + (size_t)r * Nh;
        const float *hr = h + (size_t)r * d;
        for (int i = 0; i < d; i++) zr[i] = p->d1[i] * hr[i];
        for (int i = d; i < Nh; i++) zr[i] = 0.0f;
    }
}

static void fwd_rows(void *ctx, int r0, int r1, float *partial)
{
    (void)partial;
    mon_ctx *c = ctx;
    const nd_monarch_params *p = c->p;
    int d = p->d, Nh = p->Nh, R = p->rank, n = r1 - r0;
    size_t slab = (size_t)n * Nh;
    float *buf = malloc(sizeof(float) * (4 * slab + c->scratch + 16));
    if (!buf) return; /* out of memory: the rows keep what they held */
    float *z = buf, *m = z + slab, *yt = m + slab, *cc = yt + slab, *scratch = cc + slab;
    const float *h = c->h + (size_t)r0 * d;
    float *sm = c->sm + (size_t)r0 * R, *x1 = c->x1 + (size_t)r0 * Nh, *x2 = c->x2 + (size_t)r0 * Nh;
    gate_softmax_rows(p, h, sm, n, scratch);
    gate_c_rows(p, sm, cc, n, scratch);
    input_rows(p, h, z, n);
    kron_fwd_rows(z, p->w1a, p->w1b, n, p->a, p->b, m, yt, scratch);
    for (size_t r = 0; r < (size_t)n; r++) {
        const float *y = yt + r * Nh, *cr = cc + r * Nh;
        float *xr = x1 + r * Nh, *zr = z + r * Nh;
        for (int i = 0; i < Nh; i++) xr[i] = y[c->q1[i]];
        for (int i = 0; i < Nh; i++) zr[i] = nd_silu(p->d2[i] * cr[i] * xr[i] + p->b2[i]);
    }
    kron_fwd_rows(z, p->w2a, p->w2b, n, p->a, p->b, m, yt, scratch);
    for (size_t r = 0; r < (size_t)n; r++) {
        const float *y = yt + r * Nh;
        float *xr = x2 + r * Nh, *zr = z + r * Nh;
        for (int i = 0; i < Nh; i++) xr[i] = y[c->q2[i]];
        for (int i = 0; i < Nh; i++) zr[i] = p->d3[i] * xr[i];
    }
    kron_fwd_rows(z, p->w3a, p->w3b, n, p->a, p->b, m, yt, scratch);
    for (size_t r = 0; r < (size_t)n; r++) {
        const float *y = yt + r * Nh;
        float *y3 = c->y3 + (r0 + r) * d, *out = c->out + (r0 + r) * d;
        for (int i = 0; i < d; i++) y3[i] = y[c->q3[i]];
        for (int i = 0; i < d; i++) out[i] = p->d4[i] * y3[i];
    }
    free(buf);
}

/* The three composed indices, one allocation; NULL when out of memory. */
static int set_indices(mon_ctx *c)
{
    const nd_monarch_params *p = c->p;
    int *q1 = transposed_index(p->p1, p->Nh, p->a, p->b), *q2 = transposed_index(p->p2, p->Nh, p->a, p->b),
        *q3 = transposed_index(NULL, p->Nh, p->a, p->b);
    c->q1 = q1, c->q2 = q2, c->q3 = q3;
    c->scratch = scratch_for(p, ND_PAR_ROWS);
    return q1 && q2 && q3 ? 0 : -1;
}

static void free_indices(mon_ctx *c)
{
    free((void *)c->q1);
    free((void *)c->q2);
    free((void *)c->q3);
}

void nd_monarch_fwd(nd_threadpool *pool, const nd_monarch_params *p, float *out, float *sm, float *x1, float *x2,
                    float *y3, const float *h, int N)
{
    mon_ctx c = {.p = p, .out = out, .sm = sm, .x1 = x1, .x2 = x2, .y3 = y3, .h = h};
    if (set_indices(&c) == 0) nd_par_rows(pool, N, fwd_rows, &c, NULL, 0);
    free_indices(&c); /* out of memory: outputs left as they were */
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
    int d = p->d, Nh = p->Nh, R = p->rank, A = p->a, B = p->b, n = r1 - r0;
    size_t slab = (size_t)n * Nh;
    if (n <= 0) return;
    mon_grad_ptrs g = {0};
    if (partial) grads_layout(p, partial, &g);
    float *buf = malloc(sizeof(float) * (6 * slab + 2 * (size_t)n * R + c->scratch + 16));
    if (!buf) return; /* out of memory: gradients left untouched */
    float *t = buf, *u = t + slab, *gt = u + slab, *cc = gt + slab, *z = cc + slab, *m = z + slab;
    float *dsm = m + slab, *dl = dsm + (size_t)n * R, *scratch = dl + (size_t)n * R;
    const float *h = c->h + (size_t)r0 * d, *go = c->dout + (size_t)r0 * d, *sm = c->csm + (size_t)r0 * R;
    const float *x1 = c->cx1 + (size_t)r0 * Nh, *x2 = c->cx2 + (size_t)r0 * Nh, *y3 = c->cy3 + (size_t)r0 * d;
    /* out = (d4 y3)[0:d]: dY3, transposed, in t */
    for (size_t r = 0; r < (size_t)n; r++) {
        const float *gr = go + r * d, *yr = y3 + r * d;
        float *tr = t + r * Nh;
        for (int i = 0; i < Nh; i++) tr[c->q3[i]] = i < d ? gr[i] * p->d4[i] : 0.0f;
        if (partial)
            for (int i = 0; i < d; i++) g.d4[i] += gr[i] * yr[i];
    }
    /* y3 = (d3 x2) K3 */
    if (partial)
        for (size_t i = 0; i < slab; i++) z[i] = p->d3[i % Nh] * x2[i];
    kron_bwd_rows(t, partial ? z : NULL, p->w3a, p->w3b, n, A, B, u, g.wa[2], g.wb[2], gt, m, scratch);
    /* x2 = y2[p2]: dy2[p2[i]] = dx2[i], dx2 = du * d3 */
    for (size_t r = 0; r < (size_t)n; r++) {
        const float *ur = u + r * Nh, *xr = x2 + r * Nh;
        float *tr = t + r * Nh;
        if (partial)
            for (int i = 0; i < Nh; i++) g.d3[i] += ur[i] * xr[i];
        for (int i = 0; i < Nh; i++) tr[c->q2[i]] = ur[i] * p->d3[i];
    }
    /* y2 = silu(pre) K2, pre = d2 c x1 + b2 (z = silu(pre) for the weight gradients) */
    gate_c_rows(p, sm, cc, n, scratch);
    if (partial)
        for (size_t i = 0; i < slab; i++) z[i] = nd_silu(p->d2[i % Nh] * cc[i] * x1[i] + p->b2[i % Nh]);
    kron_bwd_rows(t, partial ? z : NULL, p->w2a, p->w2b, n, A, B, u, g.wa[1], g.wb[1], gt, m, scratch);
    /* through silu and the gate: dp into u, then dc (for cond_u and sm) into z */
    for (size_t r = 0; r < (size_t)n; r++) {
        float *ur = u + r * Nh, *zr = z + r * Nh, *tr = t + r * Nh;
        const float *cr = cc + r * Nh, *xr = x1 + r * Nh;
        for (int i = 0; i < Nh; i++) {
            float pre = p->d2[i] * cr[i] * xr[i] + p->b2[i];
            float s = nd_sigmoid(pre);
            float dp = ur[i] * s * (1.0f + pre * (1.0f - s));
            zr[i] = dp * p->d2[i] * xr[i];
            tr[c->q1[i]] = dp * p->d2[i] * cr[i]; /* x1 = y1[p1] */
            ur[i] = dp;
        }
        if (partial)
            for (int i = 0; i < Nh; i++) {
                g.b2[i] += ur[i];
                g.d2[i] += ur[i] * cr[i] * xr[i];
            }
    }
    /* c = 1 + sm cond_u: dsm = dc cond_u^T, dcond_u += sm^T dc */
    nd_gemm_serial(dsm, R, nd_gemm_rowmajor(z, Nh), nd_gemm_transposed(p->cond_u, Nh), n, R, Nh, 0, scratch);
    if (partial)
        nd_gemm_serial(g.cu, Nh, nd_gemm_transposed(sm, R), nd_gemm_rowmajor(z, Nh), R, Nh, n, 1, scratch);
    /* sm = softmax(h cond_v) */
    for (size_t r = 0; r < (size_t)n; r++) {
        const float *s = sm + r * R, *ds = dsm + r * R;
        float *l = dl + r * R, sd = 0.0f;
        for (int k = 0; k < R; k++) sd += s[k] * ds[k];
        for (int k = 0; k < R; k++) l[k] = s[k] * (ds[k] - sd);
    }
    /* y1 = (d1 pad(h)) K1 */
    if (partial) input_rows(p, h, z, n);
    kron_bwd_rows(t, partial ? z : NULL, p->w1a, p->w1b, n, A, B, u, g.wa[0], g.wb[0], gt, m, scratch);
    if (c->dh) { /* dh += u d1 + dl cond_v^T */
        float *dh = c->dh + (size_t)r0 * d;
        for (size_t r = 0; r < (size_t)n; r++)
            for (int i = 0; i < d; i++) dh[r * d + i] += u[r * Nh + i] * p->d1[i];
        nd_gemm_serial(dh, d, nd_gemm_rowmajor(dl, R), nd_gemm_transposed(p->cond_v, R), n, d, R, 1, scratch);
    }
    if (partial) {
        for (size_t r = 0; r < (size_t)n; r++)
            for (int i = 0; i < d; i++) g.d1[i] += u[r * Nh + i] * h[r * d + i];
        nd_gemm_serial(g.cv, R, nd_gemm_transposed(h, d), nd_gemm_rowmajor(dl, R), d, R, n, 1, scratch);
    }
    free(buf);
}

void nd_monarch_bwd(nd_threadpool *pool, const nd_monarch_params *p, const nd_monarch_grads *g, float *dh,
                    const float *dout, const float *h, const float *sm, const float *x1, const float *x2,
                    const float *y3, int N)
{
    mon_ctx c = {.p = p, .dh = dh, .dout = dout, .h = h, .csm = sm, .cx1 = x1, .cx2 = x2, .cy3 = y3};
    if (set_indices(&c) != 0) { /* out of memory: gradients left untouched */
        free_indices(&c);
        return;
    }
    if (!g) {
        nd_par_rows(pool, N, bwd_rows, &c, NULL, 0);
        free_indices(&c);
        return;
    }
    size_t n = grads_layout(p, NULL, &(mon_grad_ptrs){0});
    float *acc = calloc(n, sizeof(float));
    if (!acc) { /* out of memory: gradients left untouched */
        free_indices(&c);
        return;
    }
    nd_par_rows(pool, N, bwd_rows, &c, acc, n);
    free_indices(&c);
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
