/* cpu_backend.c - the CPU op table: thin adapters from the seam's signatures
 * (an instance first) to the kernels of cpu_ops.h, and the registry entry.
 * The CPU implements every op; its instance needs no state beyond the
 * thread pool the seam already carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_cq_int.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_ops.h"

static int cpu_supports(const nd_backend *be, nd_op op)
{
    (void)be;
    return op >= 0 && op < ND_OP_COUNT;
}

static void *cpu_alloc(const nd_backend *be, size_t bytes)
{
    (void)be;
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

static void cpu_free(const nd_backend *be, void *p)
{
    (void)be;
    free(p);
}

static void cpu_matmul(const nd_backend *be, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                       float *work)
{
    nd_cpu_matmul(be->pool, w, x, T, ldx, y, ldy, work);
}

static size_t cpu_matmul_work_floats(const nd_backend *be, const nd_matrix *w, int T)
{
    return nd_cpu_matmul_work_floats(w, T, nd_threadpool_threads(be->pool));
}

static void cpu_matmul_multi(const nd_backend *be, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                             float *const *y, const int *ldy, float *work)
{
    nd_cpu_matmul_multi(be->pool, n, w, x, T, ldx, y, ldy, work);
}

static void ahead_compute_fn(void *h);
static void *ahead_ptr(void);
static int ahead_take_noted(const nd_backend *be, int T);

static void cpu_matmul_a8(const nd_backend *be, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                          float *const *y, const int *ldy, float *work)
{
    /* decode: the layer's Sinkhorn, noted by mhc_pre, joins the first A8 job after it (attn.in) */
    if (ahead_take_noted(be, T)) {
        nd_cpu_matmul_a8_with(be->pool, n, w, x, T, ldx, y, ldy, work, ahead_compute_fn, ahead_ptr());
        return;
    }
    nd_cpu_matmul_a8(be->pool, n, w, x, T, ldx, y, ldy, work);
}

static size_t cpu_matmul_a8_work_floats(const nd_backend *be, const nd_matrix *w, int T)
{
    return nd_cpu_matmul_a8_work_floats(w, T, nd_threadpool_threads(be->pool));
}

/* Row-wise ops over a whole prefill chunk (the q/k norms of every token and
 * head, the KV quantisation of a run of slots, the engram rows and taps) are
 * split over the pool by rows: each row's arithmetic is the same whatever task
 * runs it, so results do not depend on the thread count.  Small calls
 * (decode) run inline. */
#define ROWS_MIN_VALUES 8192  /* below this a job costs more than it saves */
#define ROWS_TASK_VALUES 4096 /* values per task */

/* Rows per task for `count` rows of `values` values each, or 0 when the call
 * is too small to split (or there is no second thread): run it inline. */
static int split_rows_per_task(const nd_backend *be, int count, size_t values)
{
    if (values * (size_t)count < ROWS_MIN_VALUES || nd_threadpool_threads(be->pool) < 2) return 0;
    size_t per = ROWS_TASK_VALUES / (values ? values : 1);
    return per > 0 ? (int)per : 1;
}

/* The rows [*r0, *r1) of task `task` of `count` rows, `per` to a task. */
static void task_rows(int task, int per, int count, int *r0, int *r1)
{
    *r0 = task * per;
    *r1 = *r0 + per < count ? *r0 + per : count;
}

typedef struct gather_job {
    const nd_matrix *w;
    const int *rows;
    int n, rows_per_task;
    float *out;
} gather_job;

static void gather_task(void *ctx, int task, int thread)
{
    (void)thread;
    const gather_job *j = ctx;
    int r0, r1;
    task_rows(task, j->rows_per_task, j->n, &r0, &r1);
    nd_cpu_gather_rows(j->w, j->rows + r0, r1 - r0, j->out + (size_t)r0 * (size_t)j->w->cols);
}

/* many rows (the engram tables' T x tables rows of a prefill chunk, the
 * embeddings of a chunk) split over the pool; each row decodes the same anywhere */
static void cpu_gather_rows(const nd_backend *be, const nd_matrix *w, const int *rows, int n, float *out)
{
    gather_job j = {.w = w, .rows = rows, .n = n, .out = out};
    if ((j.rows_per_task = split_rows_per_task(be, n, (size_t)w->cols)) > 0) {
        nd_threadpool_run(be->pool, (n + j.rows_per_task - 1) / j.rows_per_task, gather_task, &j);
        return;
    }
    nd_cpu_gather_rows(w, rows, n, out);
}

typedef struct rows_job {
    const float *x;
    int n, count, rows_per_task;
    const float *scale;
    float *out;    /* rmsnorm */
    int8_t *q;     /* quantize_kv: codes, and one scale per ND_KV_GROUP values */
    float *qscale;
    int act_quant; /* act_quant: x quantised in place, codes q and one scale per row (each optional) */
} rows_job;

/* the one A8 quantiser (quant/act_quant.h, this CPU's copy) on row i, in place */
static void act_quant_row(float *x, int n, int i, int8_t *codes, float *scales)
{
    float *xi = x + (size_t)i * (size_t)n;
    float s = nd_cpu_act_quant(xi, n, codes ? codes + (size_t)i * (size_t)n : NULL, xi);
    if (scales) scales[i] = s;
}

static void rows_task(void *ctx, int task, int thread)
{
    (void)thread;
    const rows_job *j = ctx;
    int r0, r1;
    task_rows(task, j->rows_per_task, j->count, &r0, &r1);
    for (int i = r0; i < r1; i++) {
        size_t off = (size_t)i * (size_t)j->n;
        if (j->act_quant) act_quant_row((float *)j->x, j->n, i, j->q, j->qscale);
        else if (j->out) nd_cpu_rmsnorm(j->x + off, j->n, j->scale, j->out + off);
        else nd_cpu_quantize_kv(j->x + off, j->n, j->q + off, j->qscale + off / ND_KV_GROUP);
    }
}

static int rows_split(const nd_backend *be, rows_job *j)
{
    if ((j->rows_per_task = split_rows_per_task(be, j->count, (size_t)j->n)) == 0) return 0;
    nd_threadpool_run(be->pool, (j->count + j->rows_per_task - 1) / j->rows_per_task, rows_task, j);
    return 1;
}

static void cpu_rmsnorm(const nd_backend *be, const float *x, int n, int count, const float *scale, float *out)
{
    rows_job j = {.x = x, .n = n, .count = count, .scale = scale, .out = out};
    if (rows_split(be, &j)) return;
    for (int i = 0; i < count; i++) nd_cpu_rmsnorm(x + (size_t)i * n, n, scale, out + (size_t)i * n);
}

static void cpu_rope(const nd_backend *be, float *x, int heads, int head_dim, const float *cs)
{
    (void)be;
    nd_cpu_rope(x, heads, head_dim, cs);
}

static void cpu_hadamard(const nd_backend *be, float *x, int n)
{
    (void)be;
    nd_cpu_hadamard(x, n);
}

static void cpu_attention(const nd_backend *be, const nd_attn_args *a, float *work)
{
    nd_cpu_attention(be->pool, a, work);
}

static size_t cpu_attention_work_floats(const nd_backend *be, const nd_attn_args *a)
{
    return nd_cpu_attention_work_floats(a, nd_threadpool_threads(be->pool));
}

static void cpu_sinkhorn(const nd_backend *be, float *m, int n, int iters)
{
    (void)be;
    nd_cpu_sinkhorn(m, n, iters);
}

static void cpu_quantize_kv(const nd_backend *be, const float *x, int n, int8_t *q, float *scale)
{
    /* split in rows of whole groups when a chunk's run of slots comes at once */
    enum { KV_ROW_VALUES = 8 * ND_KV_GROUP };
    if (n % KV_ROW_VALUES == 0) {
        rows_job j = {.x = x, .n = KV_ROW_VALUES, .count = n / KV_ROW_VALUES, .q = q, .qscale = scale};
        if (rows_split(be, &j)) return;
    }
    nd_cpu_quantize_kv(x, n, q, scale);
}

/* per vector; a chunk's rows (Needle 3's q per head: T x H of them) split over the pool */
static void cpu_act_quant(const nd_backend *be, float *x, int n, int count, int8_t *codes, float *scales)
{
    rows_job j = {.x = x, .n = n, .count = count, .q = codes, .qscale = scales, .act_quant = 1};
    if (rows_split(be, &j)) return;
    for (int i = 0; i < count; i++) act_quant_row(x, n, i, codes, scales);
}

static void cpu_copy(const nd_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    nd_cpu_copy(dst, src, bytes);
}

static void cpu_zero(const nd_backend *be, void *dst, size_t bytes)
{
    (void)be;
    nd_cpu_zero(dst, bytes);
}

static void cpu_scale(const nd_backend *be, float *x, int n, float a)
{
    (void)be;
    nd_cpu_scale(x, n, a);
}

static void cpu_axpy(const nd_backend *be, float *y, float a, const float *x, int n)
{
    (void)be;
    nd_cpu_axpy(y, a, x, n);
}

static void cpu_sigmoid_gate(const nd_backend *be, float *x, const float *g, size_t n)
{
    (void)be;
    nd_cpu_sigmoid_gate(x, g, n);
}

/* The per-token layer ops (the MLP, the mHC mixing) of a prefill chunk are
 * split over the pool by tokens: every token's arithmetic is independent of
 * the others and of the split, so results do not depend on the thread count.
 * Decode-sized calls run inline (a job costs more than they do). */
#define TOKENS_PER_TASK 4
#define SPLIT_MIN_T 8
#define MLP_MAX_HADA 4096 /* the per-task MLP scratch lives on the stack */
#define MONARCH_MAX_SCRATCH (3 * MLP_MAX_HADA + 64) /* Needle 3's: 3 hada_n + rank floats */

typedef struct token_job {
    const nd_hada_mlp_args *mlp;
    const nd_monarch_mlp_args *monarch;
    const nd_mhc_args *mhc;
    void (*mhc_fn)(const nd_mhc_args *a);
} token_job;

/* How many of a job's T tokens the task starting at token t0 takes. */
static int task_tokens(int T, int t0) { return T - t0 < TOKENS_PER_TASK ? T - t0 : TOKENS_PER_TASK; }

static void token_task(void *ctx, int task, int thread)
{
    (void)thread;
    const token_job *j = ctx;
    int t0 = task * TOKENS_PER_TASK;
    if (j->monarch) {
        nd_monarch_mlp_args a = *j->monarch;
        float z[MONARCH_MAX_SCRATCH];
        a.T = task_tokens(a.T, t0);
        a.b += (size_t)t0 * (size_t)a.d;
        a.z = z;
        nd_cpu_monarch_mlp(&a);
        return;
    }
    if (j->mlp) {
        nd_hada_mlp_args a = *j->mlp;
        float z[MLP_MAX_HADA];
        a.T = task_tokens(a.T, t0);
        a.b += (size_t)t0 * (size_t)a.d;
        a.z = z;
        nd_cpu_hada_mlp(&a);
        return;
    }
    nd_mhc_args a = *j->mhc;
    size_t n = (size_t)a.n, d = (size_t)a.d, t = (size_t)t0;
    a.T = task_tokens(a.T, t0);
    a.X += t * n * d;
    a.phi_pre += t * n;
    a.phi_post += t * n;
    a.phi_res += t * n * n;
    a.u += t * d;
    if (a.y) a.y += t * d;
    if (a.scratch) a.scratch += t * n * d;
    j->mhc_fn(&a);
}

static int token_tasks(int T) { return (T + TOKENS_PER_TASK - 1) / TOKENS_PER_TASK; }

/* Decode (chunks under SPLIT_MIN_T tokens) runs a layer's mHC residual map
 * (Sinkhorn over n x n logits: ~40 expf/logf per iteration, a serial step of
 * a token) beside other work: it depends only on the maps computed before the
 * block, so mhc_pre notes the layer's mHC arguments, the next job takes the
 * Sinkhorn as one more piece of its work, and mhc_mix takes the result.  The
 * next job is the A8 matmul of the block's input (q, k, v, gate) under A8
 * activations; with float activations it is the MLP's (the Hadamard MLP as a
 * 2-task job beside it, the Monarch MLP's first product).  mhc_mix uses the
 * result only when its own input is bit for bit the input the result was
 * made from (the same maps, scale and biases), otherwise it computes it
 * itself, so results do not change.  Per calling thread: a pool serves one
 * forward pass at a time, but several sessions may share it. */
#define AHEAD_FLOATS 256 /* T x n x n: one token of up to 16 lanes (decode), or a few of 4 */

typedef struct sinkhorn_ahead {
    int noted;              /* mhc_pre noted args (pointers valid until that layer's mhc_mix) */
    int ready;              /* P holds the residual maps of `args` */
    nd_mhc_args args;
    float a_res;            /* the input P was made from */
    float phi_res[AHEAD_FLOATS], b_res[256];
    float P[AHEAD_FLOATS];
} sinkhorn_ahead;

static _Thread_local sinkhorn_ahead ahead;

static int ahead_fits(const nd_mhc_args *a) { return a->n <= 16 && a->T * a->n * a->n <= AHEAD_FLOATS; }

static void ahead_compute(sinkhorn_ahead *h)
{
    const nd_mhc_args *a = &h->args;
    size_t nn = (size_t)a->n * (size_t)a->n;
    for (int t = 0; t < a->T; t++) nd_cpu_mhc_res(a, t, h->P + (size_t)t * nn);
    h->a_res = a->a_res;
    memcpy(h->phi_res, a->phi_res, sizeof(float) * (size_t)a->T * nn);
    memcpy(h->b_res, a->b_res, sizeof(float) * nn);
    h->ready = 1;
}

/* ahead.P if it was made from exactly a's residual-map input, else NULL */
static const float *ahead_take(const nd_mhc_args *a)
{
    sinkhorn_ahead *h = &ahead;
    int ok = h->ready && h->args.T == a->T && h->args.n == a->n && h->args.sinkhorn_iters == a->sinkhorn_iters &&
             ahead_fits(a);
    size_t nn = (size_t)a->n * (size_t)a->n;
    ok = ok && !memcmp(&h->a_res, &a->a_res, sizeof(float)) &&
         !memcmp(h->phi_res, a->phi_res, sizeof(float) * (size_t)a->T * nn) &&
         !memcmp(h->b_res, a->b_res, sizeof(float) * nn);
    h->ready = h->noted = 0;
    return ok ? h->P : NULL;
}

static void ahead_compute_fn(void *h) { ahead_compute(h); }

static void *ahead_ptr(void) { return &ahead; }

/* 1 (and the note cleared) when a decode job should take the noted Sinkhorn */
static int ahead_take_noted(const nd_backend *be, int T)
{
    if (!ahead.noted || T >= SPLIT_MIN_T || nd_threadpool_threads(be->pool) < 2) return 0;
    ahead.noted = 0;
    return 1;
}

typedef struct mlp_ahead_job {
    const nd_hada_mlp_args *mlp;
    sinkhorn_ahead *ahead;
} mlp_ahead_job;

static void mlp_ahead_task(void *ctx, int task, int thread)
{
    (void)thread;
    const mlp_ahead_job *j = ctx;
    if (task == 0) nd_cpu_hada_mlp(j->mlp);
    else ahead_compute(j->ahead);
}

static void cpu_hada_mlp(const nd_backend *be, const nd_hada_mlp_args *a)
{
    if (a->T < SPLIT_MIN_T && ahead.noted && nd_threadpool_threads(be->pool) >= 2) {
        mlp_ahead_job j = {.mlp = a, .ahead = &ahead}; /* the MLP and the layer's Sinkhorn side by side */
        ahead.noted = 0;
        nd_threadpool_run(be->pool, 2, mlp_ahead_task, &j);
        return;
    }
    if (a->T < SPLIT_MIN_T || a->hada_n > MLP_MAX_HADA || nd_threadpool_threads(be->pool) < 2) {
        nd_cpu_hada_mlp(a);
        return;
    }
    token_job j = {.mlp = a};
    nd_threadpool_run(be->pool, token_tasks(a->T), token_task, &j);
}

static void cpu_mhc_pre(const nd_backend *be, const nd_mhc_args *a)
{
    ahead.ready = 0; /* whatever an earlier layer left is not this layer's */
    ahead.noted = a->T < SPLIT_MIN_T && nd_threadpool_threads(be->pool) >= 2 && ahead_fits(a);
    if (ahead.noted) ahead.args = *a;
    if (a->T < SPLIT_MIN_T || nd_threadpool_threads(be->pool) < 2) {
        nd_cpu_mhc_pre(a);
        return;
    }
    token_job j = {.mhc = a, .mhc_fn = nd_cpu_mhc_pre};
    nd_threadpool_run(be->pool, token_tasks(a->T), token_task, &j);
}

static void cpu_mhc_mix(const nd_backend *be, const nd_mhc_args *a)
{
    if (a->T < SPLIT_MIN_T || nd_threadpool_threads(be->pool) < 2) {
        nd_cpu_mhc_mix_res(a, ahead_take(a)); /* NULL: computed here */
        return;
    }
    ahead.ready = ahead.noted = 0;
    token_job j = {.mhc = a, .mhc_fn = nd_cpu_mhc_mix};
    nd_threadpool_run(be->pool, token_tasks(a->T), token_task, &j);
}

typedef struct taps_job {
    const float *taps;
    const float *const *src;
    int ntaps, d, count, rows_per_task;
    float *out;
    size_t ldo;
} taps_job;

static void taps_task(void *ctx, int task, int thread)
{
    (void)thread;
    const taps_job *j = ctx;
    int r0, r1;
    task_rows(task, j->rows_per_task, j->count, &r0, &r1);
    for (int r = r0; r < r1; r++)
        nd_cpu_engram_taps(j->taps, j->ntaps, j->src + (size_t)r * j->ntaps, j->d, j->out + (size_t)r * j->ldo);
}

/* a chunk's rows split over the pool like the other row ops (each row's sum
 * is the same in any task) */
static void cpu_engram_taps(const nd_backend *be, const float *taps, int ntaps, const float *const *src, int d,
                            int count, float *out, size_t ldo)
{
    taps_job j = {.taps = taps, .src = src, .ntaps = ntaps, .d = d, .count = count, .out = out, .ldo = ldo};
    if ((j.rows_per_task = split_rows_per_task(be, count, (size_t)d * (size_t)ntaps)) > 0) {
        nd_threadpool_run(be->pool, (count + j.rows_per_task - 1) / j.rows_per_task, taps_task, &j);
        return;
    }
    j.rows_per_task = count; /* one task, inline */
    taps_task(&j, 0, 0);
}

static void cpu_engram_gate(const nd_backend *be, const float *u, const float *k, const float *v, int d, float *b,
                            float *un, float *kn)
{
    (void)be;
    nd_cpu_engram_gate(u, k, v, d, b, un, kn);
}

static void cpu_lane_mean(const nd_backend *be, const float *X, int T, int n, int d, float *out, size_t ld)
{
    (void)be;
    nd_cpu_lane_mean(X, T, n, d, out, ld);
}

static void cpu_head_pool(const nd_backend *be, const float *probes, int num_probes, int d, const float *cells,
                          int n_cells, float *pooled, float *wts)
{
    (void)be;
    nd_cpu_head_pool(probes, num_probes, d, cells, n_cells, pooled, wts);
}

static void cpu_monarch_mlp(const nd_backend *be, const nd_monarch_mlp_args *a)
{
    if (a->T < SPLIT_MIN_T || 3 * (size_t)a->hada_n + (size_t)a->rank > MONARCH_MAX_SCRATCH ||
        nd_threadpool_threads(be->pool) < 2) {
        /* decode: a token's Kronecker products by column blocks (one job each) */
        if (nd_threadpool_threads(be->pool) >= 2) {
            int side = ahead.noted; /* and the layer's Sinkhorn as one more task of the first product */
            ahead.noted = 0;
            nd_cpu_monarch_mlp_pooled(be->pool, a, side ? ahead_compute_fn : NULL, &ahead);
        } else {
            nd_cpu_monarch_mlp(a);
        }
        return;
    }
    token_job j = {.monarch = a};
    nd_threadpool_run(be->pool, token_tasks(a->T), token_task, &j);
}

static void cpu_probe_head(const nd_backend *be, const nd_probe_head_args *a)
{
    (void)be;
    nd_cpu_probe_head(a);
}

static const nd_backend_ops cpu_ops = {
    .supports_op = cpu_supports,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .matmul = cpu_matmul,
    .matmul_work_floats = cpu_matmul_work_floats,
    .matmul_multi = cpu_matmul_multi,
    .matmul_a8 = cpu_matmul_a8,
    .matmul_a8_work_floats = cpu_matmul_a8_work_floats,
    .gather_rows = cpu_gather_rows,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .hadamard = cpu_hadamard,
    .attention = cpu_attention,
    .attention_work_floats = cpu_attention_work_floats,
    .sinkhorn = cpu_sinkhorn,
    .quantize_kv = cpu_quantize_kv,
    .act_quant = cpu_act_quant,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .sigmoid_gate = cpu_sigmoid_gate,
    .hada_mlp = cpu_hada_mlp,
    .mhc_pre = cpu_mhc_pre,
    .mhc_mix = cpu_mhc_mix,
    .engram_taps = cpu_engram_taps,
    .engram_gate = cpu_engram_gate,
    .lane_mean = cpu_lane_mean,
    .head_pool = cpu_head_pool,
    .monarch_mlp = cpu_monarch_mlp,
    .probe_head = cpu_probe_head,
};

/* usable unless NEEDLE_ISA forces a kernel path this build or CPU cannot run */
static int cpu_probe(char *why, size_t size)
{
    const char *reason = NULL;
    if (nd_cpu_isa_choose(NULL, &reason) == 0) return 0;
    snprintf(why, size, "%s", reason);
    return 1;
}

static int cpu_describe(char *buf, size_t size)
{
    nd_cpu_isa isa;
    const char *reason = NULL;
    nd_cpu_isa_choose(&isa, &reason);
    /* and the A8 path's integer kernel, which on AArch64 also depends on the dot-product extension */
    snprintf(buf, size, "%s kernels (%s); int8 kernel: %s (%s)", nd_cpu_isa_name(nd_cpu_kernels_active()->isa), reason,
             nd_cpu_cq_int_kernel()->name, nd_cpu_cq_int_kernel_reason());
    return 0;
}

const nd_backend_entry nd_backend_entry_cpu = {
    .name = "cpu",
    .description = "C kernels: AVX-512, AVX2+FMA, NEON or portable, chosen at start-up",
    .ops = &cpu_ops,
    .probe = cpu_probe,
    .describe = cpu_describe,
};
