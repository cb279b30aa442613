/* qat.c - deploy numerics inside fine-tuning, LoRA or full (see qat.h). */
#include "train/qat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/bits_map.h"
#include "quant/cq.h"
#include "train/train_ops.h"
#include "train/train_par.h"

int nd_qat_parse_mode(const char *mode, const nd_config *cfg, int *bits, int *use_map)
{
    *bits = 0;
    *use_map = 0;
    if (!mode || !strcmp(mode, "auto")) {
        if (cfg->weight_bits[0]) *use_map = 1;
        else *bits = 4;
        return 0;
    }
    if (!strcmp(mode, "none")) return 0;
    if (!strcmp(mode, "2") || !strcmp(mode, "4")) {
        *bits = mode[0] - '0';
        return 0;
    }
    return -1;
}

/* ---- activations ----------------------------------------------------------- */
void nd_qat_act_rows(float *x, int N, int D, int bits)
{
    if (bits <= 0) return;
    float qmax = (float)((1 << (bits - 1)) - 1);
    for (int r = 0; r < N; r++) {
        float *v = x + (size_t)r * D;
        float amax = 0.0f;
        for (int i = 0; i < D; i++) { /* a compare, not fmaxf (a libm call here): the same maximum, NaN never wins */
            float a = fabsf(v[i]);
            amax = a > amax ? a : amax;
        }
        /* the reference divides by s (not a multiplication by 1/s) and rounds half to even */
        float s = amax > 0.0f ? amax / qmax : 1.0f;
        for (int i = 0; i < D; i++) {
            float c = rintf(v[i] / s);
            if (c > qmax) c = qmax;
            if (c < -qmax - 1.0f) c = -qmax - 1.0f;
            v[i] = c * s;
        }
    }
}

/* ---- CQ on one vector ------------------------------------------------------ */
/* v (n floats) -> its CQ-dequantised value at `bits`, in place (what the .cact holds). */
static void cq_fake_quant(float *v, int n, int bits, uint8_t *packed, uint16_t *norms, uint8_t *norms_le)
{
    float cb[16];
    nd_cq_codebook_by_code(bits, nd_cq_codebooks, cb);
    nd_cq_quantize_row(v, n, bits, nd_cq_codebooks, packed, norms);
    int groups = nd_cq_cols_pad(n) / ND_CQ_GROUP;
    for (int g = 0; g < groups; g++) {
        norms_le[2 * g] = (uint8_t)(norms[g] & 0xff);
        norms_le[2 * g + 1] = (uint8_t)(norms[g] >> 8);
    }
    nd_cq_dequant_row(packed, norms_le, n, nd_cq_storage_bits(bits), cb, v);
}

/* count matrices [rows_in, cols] of a slab, quantised along rows_in (a
 * kernel [in, out]: each output column is one CQ row) when by_column, else
 * along cols (each row is one CQ row). */
typedef struct {
    float *dst;
    const float *src; /* NULL: in place */
    int in, out, bits, by_column;
} cq_job;

static void cq_rows(void *ctx, int r0, int r1, float *partial)
{
    (void)partial;
    cq_job *j = ctx;
    int n = j->by_column ? j->in : j->out;
    int pad = nd_cq_cols_pad(n);
    float *v = malloc(sizeof(float) * (size_t)pad);
    uint8_t *packed = malloc(nd_cq_row_bytes(n, j->bits) + 8);
    uint16_t *norms = malloc(sizeof(uint16_t) * (size_t)(pad / ND_CQ_GROUP));
    uint8_t *norms_le = malloc(2 * (size_t)(pad / ND_CQ_GROUP));
    if (!v || !packed || !norms || !norms_le) { /* no memory: leave the float values (never seen in practice) */
        free(v); free(packed); free(norms); free(norms_le);
        return;
    }
    const float *src = j->src ? j->src : j->dst;
    for (int r = r0; r < r1; r++) {
        if (j->by_column) {
            /* r indexes (matrix, column) pairs */
            size_t mat = (size_t)(r / j->out) * (size_t)j->in * (size_t)j->out;
            int col = r % j->out;
            for (int i = 0; i < j->in; i++) v[i] = src[mat + (size_t)i * j->out + col];
            cq_fake_quant(v, n, j->bits, packed, norms, norms_le);
            for (int i = 0; i < j->in; i++) j->dst[mat + (size_t)i * j->out + col] = v[i];
        } else {
            memcpy(v, src + (size_t)r * n, sizeof(float) * (size_t)n);
            cq_fake_quant(v, n, j->bits, packed, norms, norms_le);
            memcpy(j->dst + (size_t)r * n, v, sizeof(float) * (size_t)n);
        }
    }
    free(v); free(packed); free(norms); free(norms_le);
}

/* The bits-map (canonical) name of tensor t: its .cact name with the site filled in. */
static void canonical_name(const nd_tensor_info *t, char *out, size_t n)
{
    snprintf(out, n, t->param->cact_name, t->instance);
}

static int width_of(const nd_train_model *m, const nd_bits_map *map, const nd_tensor_info *t)
{
    if (m->qat->bits) return m->qat->bits;
    char name[64];
    canonical_name(t, name, sizeof name);
    return nd_bits_map_lookup(map, name);
}

static int enable_full(nd_train_model *m, const nd_bits_map *map, needle_error *err)
{
    nd_qat *q = m->qat;
    q->n_master = nd_train_full_trainable(m);
    q->master = malloc(sizeof(float) * (q->n_master ? q->n_master : 1));
    q->width = calloc((size_t)m->n_tensors, sizeof(int));
    if (!q->master || !q->width) {
        nd_qat_free(m);
        return nd_errorf(err, NEEDLE_ENOMEM, "qat: cannot allocate the master weights (%zu floats)", q->n_master);
    }
    memcpy(q->master, m->params, sizeof(float) * q->n_master);
    for (int i = 0; i < m->n_tensors; i++) {
        nd_tensor_info *t = &m->tensors[i];
        if (t->role < 0 || !t->param->cq || t->offset >= q->n_master) continue;
        int w = width_of(m, map, t);
        if (!nd_cq_bits_valid(w)) {
            nd_qat_free(m);
            return nd_errorf(err, NEEDLE_EINVAL, "qat: width %d for %s is not a CQ width", w, t->name);
        }
        q->width[i] = w;
    }
    q->stale = 1;
    nd_qat_refresh(m);
    return 0;
}

int nd_qat_enable(nd_train_model *m, int bits, needle_error *err)
{
    if (m->cfg.kv_bits > 0 && m->cfg.kv_bits < 8)
        return nd_errorf(err, NEEDLE_EUNSUPPORTED,
                         "qat: the config's kv_bits %d asks for a CQ-quantised KV cache, which the trainer does not "
                         "simulate yet (use --qat-bits none, or a config with kv_bits 8)",
                         m->cfg.kv_bits);
    if (m->cfg.act_bits < 0 || m->cfg.act_bits > 16)
        return nd_errorf(err, NEEDLE_EINVAL, "qat: act_bits %d outside 0..16", m->cfg.act_bits);
    nd_bits_map map;
    memset(&map, 0, sizeof map);
    if (!bits && nd_bits_map_parse(m->cfg.weight_bits, &map, err)) return err ? err->code : NEEDLE_EINVAL;
    nd_qat *q = calloc(1, sizeof *q);
    if (!q) return nd_errorf(err, NEEDLE_ENOMEM, "qat: out of memory");
    q->bits = bits;
    if (!bits) snprintf(q->bits_map, sizeof q->bits_map, "%s", m->cfg.weight_bits);
    q->act_bits = m->cfg.act_bits;
    m->qat = q;
    if (!m->lora) return enable_full(m, &map, err);
    size_t total = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        nd_tensor_info *t = &m->tensors[i];
        if (t->role < 0 || !t->param->cq) continue;
        int w = width_of(m, &map, t);
        if (!nd_cq_bits_valid(w)) {
            nd_qat_free(m);
            return nd_errorf(err, NEEDLE_EINVAL, "qat: width %d for %s is not a CQ width", w, t->name);
        }
        if (t->param->lora) {
            int k = t->param->lora - 1;
            q->target_bits[k] = w;
            q->off[k] = total;
            total += t->count;
            continue;
        }
        /* frozen: its deploy value, once */
        int in = (int)t->shape[t->ndim - 2], out = (int)t->shape[t->ndim - 1];
        cq_job j = {m->params + t->offset, NULL, in, out, w, t->param->transpose};
        int rows = j.by_column ? (int)(t->count / (size_t)in) : (int)(t->count / (size_t)out);
        nd_par_rows(m->pool, rows, cq_rows, &j, NULL, 0);
    }
    q->w = malloc(sizeof(float) * (total ? total : 1));
    if (!q->w) {
        nd_qat_free(m);
        return nd_errorf(err, NEEDLE_ENOMEM, "qat: cannot allocate the merged weights (%zu floats)", total);
    }
    nd_qat_refresh(m);
    return 0;
}

void nd_qat_free(nd_train_model *m)
{
    nd_qat *q = m->qat;
    if (!q) return;
    if (q->master && q->width) { /* the float weights, not their deploy values, are what the run trained */
        memcpy(m->params, q->master, sizeof(float) * q->n_master);
        nd_train_restore_constants(m);
    }
    free(q->w);
    free(q->master);
    free(q->width);
    free(q);
    m->qat = NULL;
}

float *nd_qat_master(nd_train_model *m, size_t *n)
{
    if (!m->qat || !m->qat->master) return NULL;
    *n = m->qat->n_master;
    return m->qat->master;
}

void nd_qat_master_moved(nd_train_model *m)
{
    if (m->qat && m->qat->master) m->qat->stale = 1;
}

/* Full: m->params = the master, each CQ matrix at its deploy value. */
static void refresh_full(nd_train_model *m)
{
    nd_qat *q = m->qat;
    if (!q->stale) return;
    memcpy(m->params, q->master, sizeof(float) * q->n_master);
    nd_train_restore_constants(m);
    for (int i = 0; i < m->n_tensors; i++) {
        const nd_tensor_info *t = &m->tensors[i];
        if (!q->width[i]) continue;
        int in = (int)t->shape[t->ndim - 2], out = (int)t->shape[t->ndim - 1];
        cq_job j = {m->params + t->offset, NULL, in, out, q->width[i], t->param->transpose};
        int rows = j.by_column ? (int)(t->count / (size_t)in) : (int)(t->count / (size_t)out);
        nd_par_rows(m->pool, rows, cq_rows, &j, NULL, 0);
    }
    q->stale = 0;
}

void nd_qat_refresh(nd_train_model *m)
{
    nd_qat *q = m->qat;
    if (!q) return;
    if (q->master) {
        refresh_full(m);
        return;
    }
    int L = m->cfg.num_layers, r = m->lora_rank;
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, out;
        nd_train_lora_dims(m, t, &in, &out);
        const nd_tensor_info *ti = NULL;
        for (int i = 0; i < m->n_tensors && !ti; i++)
            if (m->tensors[i].param && m->tensors[i].param->lora == t + 1 && m->tensors[i].role >= 0) ti = &m->tensors[i];
        if (!ti) continue;
        for (int l = 0; l < L; l++) {
            size_t per = (size_t)in * out;
            float *dst = q->w + q->off[t] + (size_t)l * per;
            const float *W = m->params + ti->offset + (size_t)l * per;
            const float *A = m->lora + m->lora_a_off[t] + (size_t)l * in * r;
            const float *B = m->lora + m->lora_b_off[t] + (size_t)l * r * out;
            /* merged = W + scale * (A B), as the reference merges (then quantised) */
            nd_op_matmul_fwd(m->pool, dst, A, B, in, r, out, 0);
            for (size_t i = 0; i < per; i++) dst[i] = W[i] + m->lora_scale * dst[i];
        }
        cq_job j = {q->w + q->off[t], NULL, in, out, q->target_bits[t], 1};
        nd_par_rows(m->pool, L * out, cq_rows, &j, NULL, 0);
    }
}

void nd_qat_metadata(const nd_train_model *m, char *bits, size_t bits_n, char *map, size_t map_n)
{
    const nd_qat *q = m->qat;
    if (q && q->bits) snprintf(bits, bits_n, "%d", q->bits);
    else snprintf(bits, bits_n, "null");
    if (q && !q->bits) snprintf(map, map_n, "%s", q->bits_map);
    else snprintf(map, map_n, "null");
}
