/* cmd_bench.c - `needle bench`: load time, prefill and decode speed, peak
 * memory, and what bounds them: the bytes of weights one decoded token reads,
 * the read bandwidth this machine reaches over those same bytes (so the
 * fraction of it decode uses), and the time split between matmuls, attention
 * and everything else (timed by wrapping the instance's op table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "model/params.h"
#include "quant/cq.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU time of the whole process (every thread), so rates can be normalised on
 * a machine other jobs share: tokens per CPU-second do not depend on how much
 * of the machine this run got. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- per-op time: the instance's ops, wrapped */
static nd_backend_ops real_ops;
static double t_matmul_ms, t_attn_ms;

static void timed_matmul(const nd_backend *be, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                         float *work)
{
    double t = now_ms();
    real_ops.matmul(be, w, x, T, ldx, y, ldy, work);
    t_matmul_ms += now_ms() - t;
}
static void timed_matmul_multi(const nd_backend *be, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                               float *const *y, const int *ldy, float *work)
{
    double t = now_ms();
    real_ops.matmul_multi(be, n, w, x, T, ldx, y, ldy, work);
    t_matmul_ms += now_ms() - t;
}
static void timed_matmul_a8(const nd_backend *be, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                            float *const *y, const int *ldy, float *work)
{
    double t = now_ms();
    real_ops.matmul_a8(be, n, w, x, T, ldx, y, ldy, work);
    t_matmul_ms += now_ms() - t;
}
static void timed_attention(const nd_backend *be, const nd_attn_args *a, float *work)
{
    double t = now_ms();
    real_ops.attention(be, a, work);
    t_attn_ms += now_ms() - t;
}

/* ---- the weights one decoded token reads */
#define MAX_MATS 4096
typedef struct weight_set {
    const nd_matrix *m[MAX_MATS];
    int n;
    double bytes;   /* read per decoded token */
    uint64_t sums[MAX_MATS];
} weight_set;

static size_t matrix_bytes(const nd_matrix *w)
{
    if (w->kind == ND_MAT_F32) return (size_t)w->rows * (size_t)w->cols * sizeof(float);
    return (size_t)w->rows * (nd_cq_row_bytes(w->cols, w->cq_bits) + (size_t)(w->cols_pad / ND_CQ_GROUP) * 2);
}

/* Every matrix the forward pass multiplies (not the heads; the engram tables
 * are gathered: a few rows per token). */
static void collect_weights(const nd_weights *w, weight_set *ws)
{
    ws->n = 0, ws->bytes = 0;
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (p->kind != ND_KIND_MATRIX || p->scope == ND_SCOPE_HEAD || !nd_param_in_config(p, &w->cfg)) continue;
        for (int k = 0; k < nd_param_instances(w, p); k++) {
            const nd_matrix *mat = nd_param_field_c(p, nd_param_base_c(w, p, k));
            if (p->gather) {
                ws->bytes += (double)matrix_bytes(mat) / mat->rows * (w->cfg.num_tables > 0 ? w->cfg.num_tables : 1);
                continue;
            }
            ws->bytes += (double)matrix_bytes(mat);
            if (ws->n < MAX_MATS) ws->m[ws->n++] = mat;
        }
    }
}

/* Read one matrix's bytes (the sum keeps the compiler from skipping it). */
static void read_task(void *ctx, int task, int thread)
{
    (void)thread;
    weight_set *ws = ctx;
    const nd_matrix *w = ws->m[task];
    const uint8_t *p = w->kind == ND_MAT_F32 ? (const uint8_t *)w->f32 : w->cq_idx;
    size_t n = w->kind == ND_MAT_F32 ? matrix_bytes(w) : (size_t)w->rows * nd_cq_row_bytes(w->cols, w->cq_bits);
    uint64_t s[8] = {0};
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 8; k++) {
            uint64_t v;
            memcpy(&v, p + i + 8 * k, 8);
            s[k] += v;
        }
    ws->sums[task] = s[0] ^ s[1] ^ s[2] ^ s[3] ^ s[4] ^ s[5] ^ s[6] ^ s[7];
}

/* Best of five passes over the weights, with the model's threads: GB/s. */
static double read_bandwidth(nd_threadpool *pool, weight_set *ws)
{
    double best = 1e30, bytes = 0;
    for (int i = 0; i < ws->n; i++)
        bytes += (double)(ws->m[i]->kind == ND_MAT_F32 ? matrix_bytes(ws->m[i])
                                                       : (size_t)ws->m[i]->rows * nd_cq_row_bytes(ws->m[i]->cols, ws->m[i]->cq_bits));
    for (int pass = 0; pass < 5; pass++) {
        double t = now_ms();
        nd_threadpool_run(pool, ws->n, read_task, ws);
        t = now_ms() - t;
        best = t < best ? t : best;
    }
    return best > 0 ? bytes / (best / 1e3) / 1e9 : 0.0;
}

static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}

static int usage(void)
{
    fprintf(stderr, "usage: needle bench [--model FILE] [--prompt-tokens N (512)] [--gen-tokens M (128)] [--threads T]\n"
                    "                    [--window W] [--kv-bits 32|8] [--acts a8|float] [--float]\n");
    return 2;
}

int cmd_bench(int argc, char **argv)
{
    const char *v;
    int n_prompt = 512, n_gen = 128, dequant = 0;
    cli_common c;
    cli_common_init(&c, CLI_MODEL | CLI_THREADS | CLI_WINDOW | CLI_KV_BITS | CLI_ACTS);
    for (int i = 1; i < argc; i++) {
        int bad = 0, shared;
        if ((shared = cli_common_parse(&c, "bench", argc, argv, &i)) != 0) bad = shared < 0;
        else if ((v = cli_flag_value(argc, argv, &i, "--prompt-tokens")))
            bad = cli_int("bench", "--prompt-tokens", v, 1, 1 << 20, &n_prompt);
        else if ((v = cli_flag_value(argc, argv, &i, "--gen-tokens")))
            bad = cli_int("bench", "--gen-tokens", v, 0, 1 << 20, &n_gen);
        else if (!strcmp(argv[i], "--float")) dequant = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(); return 0; }
        else {
            fprintf(stderr, "needle bench: unknown option or argument '%s'\n", argv[i]);
            return usage();
        }
        if (bad) return 2;
    }
    char *model_default = NULL;
    const char *model = cli_model_path(&c, "bench", &model_default);
    if (!model) return 2;
    int threads = c.threads, kv_bits = c.kv_bits, window = c.window;

    needle_error err = {0};
    nd_model *m = NULL;
    nd_state *s = NULL;
    float *lg = NULL;
    int *ids = NULL, status = 1;
    double rss_before = peak_rss_mb();
    double t0 = now_ms();
    nd_model_options mo = {.threads = threads, .dequantize = dequant, .acts = c.acts};
    if (nd_model_open(model, &mo, &m, &err)) goto done;
    double load_ms = now_ms() - t0;
    nd_state_options so = {.window = window, .kv_bits = kv_bits};
    if (so.window > m->weights.cfg.max_seq_len) {
        snprintf(err.message, sizeof err.message, "--window %d is larger than the model's max_seq_len %d", so.window,
                 m->weights.cfg.max_seq_len);
        goto done;
    }
    if (nd_state_create(m, &so, &s, &err)) goto done;
    real_ops = m->be->ops;
    m->be->ops.matmul = timed_matmul;
    m->be->ops.matmul_multi = timed_matmul_multi;
    m->be->ops.matmul_a8 = timed_matmul_a8;
    m->be->ops.attention = timed_attention;
    int V = m->weights.cfg.vocab_size;
    lg = malloc(sizeof(float) * (size_t)V);
    ids = malloc(sizeof(int) * (size_t)n_prompt);
    if (!lg || !ids) { snprintf(err.message, sizeof err.message, "out of memory"); goto done; }
    /* a fixed pseudo-random prompt of ordinary pieces (ids past the 14 specials) */
    uint32_t x = 12345;
    for (int i = 0; i < n_prompt; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = 14 + (int)((x >> 8) % (uint32_t)(V > 14 ? V - 14 : 1));
    }

    /* first token: a short prompt (32 tokens) from an empty session */
    int short_n = n_prompt < 32 ? n_prompt : 32;
    t0 = now_ms();
    if (nd_state_eval(s, ids, short_n, NULL, lg, NULL, &err)) goto done;
    double first_ms = now_ms() - t0;
    nd_state_reset(s);

    t0 = now_ms();
    double c0 = cpu_ms();
    t_matmul_ms = t_attn_ms = 0;
    if (nd_state_eval(s, ids, n_prompt, NULL, lg, NULL, &err)) goto done;
    double prefill_ms = now_ms() - t0, prefill_cpu = cpu_ms() - c0;
    double pre_mm = t_matmul_ms, pre_at = t_attn_ms;
    t_matmul_ms = t_attn_ms = 0;

    t0 = now_ms();
    c0 = cpu_ms();
    for (int i = 0; i < n_gen; i++) {
        int best = 0;
        for (int k = 1; k < V; k++)
            if (lg[k] > lg[best]) best = k;
        if (nd_state_eval(s, &best, 1, NULL, lg, NULL, &err)) goto done;
    }
    double decode_ms = now_ms() - t0, decode_cpu = cpu_ms() - c0;
    double dec_mm = t_matmul_ms, dec_at = t_attn_ms;
    m->be->ops = real_ops;
    static weight_set ws;
    collect_weights(&m->weights, &ws);
    double bw = read_bandwidth(m->pool, &ws);
    double decode_tps = n_gen ? n_gen / (decode_ms / 1e3) : 0.0;

    struct stat st;
    double file_mb = stat(model, &st) == 0 ? st.st_size / 1048576.0 : 0.0;
    printf("{\"model\":\"%s\",\"file_mb\":%.2f,\"load_ms\":%.1f,\"first_token_ms\":%.2f,\"prompt_tokens\":%d,"
           "\"prefill_ms\":%.1f,\"prefill_tps\":%.1f,\"gen_tokens\":%d,\"decode_ms\":%.1f,\"decode_tps\":%.1f,"
           "\"prefill_cpu_ms\":%.1f,\"decode_cpu_ms\":%.1f,\"prefill_tok_per_cpu_s\":%.1f,\"decode_tok_per_cpu_s\":%.1f,"
           "\"peak_rss_mb\":%.1f,\"rss_bound_mb\":%.2f,\"rss_before_load_mb\":%.1f,\"session_mb\":%.2f,\"window\":%d,\"threads\":%d,"
           "\"backend\":\"%s\",\"kv_bits\":%d,\"float_path\":%s,\"acts\":\"%s\",\n"
           " \"weight_mb_per_token\":%.2f,\"read_gb_s\":%.1f,\"decode_read_gb_s\":%.2f,\"bandwidth_fraction\":%.3f,\n"
           " \"prefill_split\":{\"matmul\":%.3f,\"attention\":%.3f,\"other\":%.3f},"
           "\"decode_split\":{\"matmul\":%.3f,\"attention\":%.3f,\"other\":%.3f}}\n",
           model, file_mb, load_ms, first_ms, n_prompt, prefill_ms, n_prompt / (prefill_ms / 1e3), n_gen, decode_ms,
           n_gen ? n_gen / (decode_ms / 1e3) : 0.0, prefill_cpu, decode_cpu, n_prompt / (prefill_cpu / 1e3),
           n_gen ? n_gen / (decode_cpu / 1e3) : 0.0, peak_rss_mb(), file_mb + ND_KV_BUDGET_BYTES / 1048576.0 + 1.0, rss_before, nd_state_bytes(s) / 1048576.0,
           nd_state_window(s), nd_threadpool_threads(m->pool), m->be->name, nd_state_kv_bits(s), dequant ? "true" : "false",
           m->acts == NEEDLE_ACTS_A8 ? "a8" : "float", ws.bytes / 1048576.0, bw,
           ws.bytes * decode_tps / 1e9, bw > 0 ? ws.bytes * decode_tps / 1e9 / bw : 0.0, pre_mm / prefill_ms,
           pre_at / prefill_ms, 1.0 - (pre_mm + pre_at) / prefill_ms, n_gen ? dec_mm / decode_ms : 0.0,
           n_gen ? dec_at / decode_ms : 0.0, n_gen ? 1.0 - (dec_mm + dec_at) / decode_ms : 0.0);
    status = 0;
done:
    if (status) fprintf(stderr, "needle bench: %s\n", err.message);
    free(lg);
    free(ids);
    nd_state_free(s);
    nd_model_free(m);
    free(model_default);
    return status;
}
