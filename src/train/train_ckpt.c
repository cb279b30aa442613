/* train_ckpt.c - reading and writing the training model by tensor name. */
#include "train/train_ckpt.h"

#include <inttypes.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "core/file_kind.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "train/qat.h"

int nd_train_model_load(nd_train_model *m, const char *path, int *n_ignored, needle_error *err)
{
    if (nd_file_kind_of_path(path) == ND_KIND_CACT) { /* a deploy file: its dequantised weights */
        if (n_ignored) *n_ignored = 0;
        return nd_train_model_load_cact(m, path, err);
    }
    nd_safetensors st;
    int rc = nd_st_open(path, &st, err);
    if (rc) return rc;
    const char *cfg_json = nd_st_meta(&st, "config");
    if (!cfg_json) {
        nd_st_close(&st);
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: no \"config\" in __metadata__", path);
    }
    nd_config cfg;
    rc = nd_config_from_json(&cfg, cfg_json, strlen(cfg_json), path, err);
    if (!rc) rc = nd_train_model_create(m, &cfg, err);
    if (rc) {
        nd_st_close(&st);
        return rc;
    }
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        nd_tensor_info *t = &m->tensors[i];
        const nd_st_tensor *s = nd_st_find(&st, t->name);
        if (!s) {
            t->absent = 1;
            if (t->param->ckpt_optional) { /* as the inference loader: its initialiser's values */
                nd_param_init_fill_cfg(t->param, &m->cfg, t->name, m->params + t->offset, t->ndim, t->shape, 0);
                continue;
            }
            if (t->role >= 0) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %s is missing", path, t->name);
            continue; /* a head the checkpoint does not have stays zero */
        }
        int same = s->numel == t->count;
        if (t->role >= 0) { /* the forward's tensors must match exactly */
            same = same && s->ndim == t->ndim;
            for (int k = 0; same && k < t->ndim; k++) same = s->shape[k] == t->shape[k];
        }
        if (!same) {
            char want[96], have[96];
            nd_st_shape_text(want, sizeof want, t->ndim, t->shape);
            nd_st_shape_text(have, sizeof have, s->ndim, s->shape);
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %s has shape %s, the config needs %s", path, t->name, have,
                           want);
            break;
        }
        if (t->role < 0) { /* heads keep the file's own shape (log_temp may be () or (1,)) */
            t->ndim = s->ndim;
            for (int k = 0; k < 4; k++) t->shape[k] = k < s->ndim ? s->shape[k] : 1;
        }
        rc = nd_st_read_f32(s, m->params + t->offset, path, err);
    }
    int ignored = 0;
    for (size_t i = 0; i < st.count; i++)
        if (nd_train_find(m, st.tensors[i].name) < 0) ignored++;
    if (n_ignored) *n_ignored = ignored;
    nd_st_close(&st);
    if (rc) nd_train_model_free(m);
    return rc;
}

int nd_train_save_full(const nd_train_model *m, const char *path, needle_error *err)
{
    int v3 = nd_config_generation(&m->cfg) == 3;
    nd_st_out_tensor *out = calloc((size_t)m->n_tensors, sizeof *out);
    if (!out) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
    size_t n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const nd_tensor_info *t = &m->tensors[i];
        /* Needle 3 writes what the reference's checkpoints hold: not the
         * constants it draws itself (hada_p1/p2, the router calibration),
         * nor a head the base did not have */
        if (v3 && (t->absent || t->param->ckpt_optional)) continue;
        out[n].name = t->name;
        out[n].dtype = ND_ST_F32;
        out[n].ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++) out[n].shape[k] = t->shape[k];
        out[n].data = m->params + t->offset;
        n++;
    }
    int rc;
    if (v3) { /* the reference's checkpoint metadata (its load_checkpoint wants format_version 2) */
        char *ref = nd_config_to_reference_json(&m->cfg);
        const char *keys[4] = {"format_version", "config", "step", "run"};
        const char *vals[4] = {"2", ref ? ref : "{}", "", "{\"generator\": \"needle finetune --full\"}"};
        rc = ref ? nd_st_write(path, out, n, keys, vals, 4, err) : nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
        free(ref);
    } else {
        char *cfg = nd_config_to_json(&m->cfg);
        const char *keys[2] = {"format", "config"};
        const char *vals[2] = {"needle-checkpoint", cfg ? cfg : "{}"};
        rc = nd_st_write(path, out, n, keys, vals, 2, err);
        free(cfg);
    }
    free(out);
    return rc;
}

/* The reference's adapter layout (Needle 3): `lora/<kernel path>/A` (L,in,r)
 * and `/B` (L,r,out) with the paths `/`-joined, and its metadata as JSON
 * values (scale, base, rank, seed, pieces, languages); our own keys (format,
 * alpha, targets, config, base_checksum, qat_*) ride along, the reference
 * ignores them. */
int nd_train_save_lora(const nd_train_model *m, const char *path, needle_error *err)
{
    if (!m->lora) return nd_errorf(err, NEEDLE_ESTATE, "%s: the model has no LoRA adapter to save", path);
    int v3 = nd_config_generation(&m->cfg) == 3;
    nd_st_out_tensor out[2 * ND_LORA_TARGETS];
    char names[2 * ND_LORA_TARGETS][192];
    int L = m->cfg.num_layers, r = m->lora_rank;
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, o;
        nd_train_lora_dims(m, t, &in, &o);
        if (v3) {
            char kernel[160];
            nd_train_lora_target_ckpt(&m->cfg, t, kernel, sizeof kernel);
            snprintf(names[2 * t], sizeof names[0], "lora/%s/A", kernel);
            snprintf(names[2 * t + 1], sizeof names[0], "lora/%s/B", kernel);
        } else {
            snprintf(names[2 * t], sizeof names[0], "%s.lora_A", nd_train_lora_target_name(t));
            snprintf(names[2 * t + 1], sizeof names[0], "%s.lora_B", nd_train_lora_target_name(t));
        }
        out[2 * t] = (nd_st_out_tensor){names[2 * t], ND_ST_F32, 3, {L, in, r}, m->lora + m->lora_a_off[t]};
        out[2 * t + 1] = (nd_st_out_tensor){names[2 * t + 1], ND_ST_F32, 3, {L, r, o}, m->lora + m->lora_b_off[t]};
    }
    char rank[32], alpha[64], scale[64];
    snprintf(rank, sizeof rank, "%d", r);
    snprintf(alpha, sizeof alpha, "%.9g", (double)(m->lora_scale * (float)r));
    /* a JSON float, as Python's json.dumps writes one (always with a '.' or an exponent) */
    snprintf(scale, sizeof scale, "%.9g", (double)m->lora_scale);
    if (!strpbrk(scale, ".eEn")) snprintf(scale + strlen(scale), sizeof scale - strlen(scale), ".0");
    char *cfg = nd_config_to_json(&m->cfg);
    char base_sum[32];
    snprintf(base_sum, sizeof base_sum, "%016" PRIx64, nd_train_base_checksum(m));
    /* the targets' field names in target order (model/params.def .lora) */
    char targets[160] = "";
    for (int t = 1; t <= ND_LORA_TARGETS; t++)
        for (int i = 0; i < ND_P_COUNT; i++)
            if (nd_params[i].lora == t) {
                size_t at = strlen(targets);
                snprintf(targets + at, sizeof targets - at, "%s%s", t > 1 ? "," : "", nd_params[i].field_name);
            }
    /* the numerics it was trained under (SPEC 12): build --lora deploys exactly these */
    char qat_bits[16], qat_map[256], seed[32];
    nd_qat_metadata(m, qat_bits, sizeof qat_bits, qat_map, sizeof qat_map);
    snprintf(seed, sizeof seed, "%" PRIu64, m->lora_seed);
    /* the base's path as a JSON string (null when unknown) */
    nd_buf base;
    nd_buf_init(&base);
    if (m->source_path) nd_json_write_string(&base, m->source_path, strlen(m->source_path), 0);
    else nd_buf_puts(&base, "null");
    const char *keys[13] = {"format", "rank", "alpha", "targets", "config", "base_checksum", "qat_bits",
                            "qat_bits_map", "seed", "scale", "base", "pieces", "languages"};
    const char *vals[13] = {"needle-lora", rank, alpha, targets, cfg ? cfg : "{}", base_sum, qat_bits, qat_map, seed,
                            scale, base.oom ? "null" : base.data, "null", "null"};
    int rc = nd_st_write(path, out, 2 * ND_LORA_TARGETS, keys, vals, v3 ? 13 : 9, err);
    nd_buf_free(&base);
    free(cfg);
    return rc;
}

/* ---- base checksum ------------------------------------------------------------ */
static uint64_t fnv_floats(uint64_t h, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        for (int k = 0; k < 4; k++) h = (h ^ ((u >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    }
    return h;
}

uint64_t nd_train_base_checksum(const nd_train_model *m)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        char name[160];
        nd_train_lora_target_ckpt(&m->cfg, t, name, sizeof name);
        int i = nd_train_find(m, name);
        if (i >= 0) h = fnv_floats(h, m->params + m->tensors[i].offset, m->tensors[i].count);
    }
    return h;
}

int nd_train_base_checksum_file(const char *path, uint64_t *out, needle_error *err)
{
    nd_safetensors st;
    int rc = nd_st_open(path, &st, err);
    if (rc) return rc;
    uint64_t h = 0xcbf29ce484222325ull;
    for (int t = 0; t < ND_LORA_TARGETS && !rc; t++) {
        /* the Needle 2 name, or the Needle 3 one (the same path `/`-joined) */
        char name3[160];
        snprintf(name3, sizeof name3, "%s", nd_train_lora_target_name(t));
        for (char *c = name3; *c; c++)
            if (*c == '.') *c = '/';
        const nd_st_tensor *ts = nd_st_find(&st, nd_train_lora_target_name(t));
        if (!ts) ts = nd_st_find(&st, name3);
        if (!ts) {
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %s is missing", path, name3);
            break;
        }
        float *buf = malloc(sizeof(float) * (ts->numel ? ts->numel : 1));
        if (!buf) rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
        if (!rc) rc = nd_st_read_f32(ts, buf, path, err);
        if (!rc) h = fnv_floats(h, buf, ts->numel);
        free(buf);
    }
    nd_st_close(&st);
    *out = h;
    return rc;
}

/* ---- resumable state ---------------------------------------------------------- */
int nd_train_state_init(nd_train_state *s, int n, int steps, int epochs, needle_error *err)
{
    memset(s, 0, sizeof *s);
    if (n < 0 || steps < 0 || epochs < 0) return nd_errorf(err, NEEDLE_EINVAL, "train state: negative size");
    s->order = calloc((size_t)n + 1, sizeof(int32_t));
    s->train_loss = calloc((size_t)steps + 1, sizeof(float));
    s->val_loss = calloc((size_t)epochs + 1, sizeof(float));
    s->val_step = calloc((size_t)epochs + 1, sizeof(int32_t));
    if (!s->order || !s->train_loss || !s->val_loss || !s->val_step) {
        nd_train_state_free(s);
        return nd_errorf(err, NEEDLE_ENOMEM, "train state: out of memory");
    }
    s->n_order = n;
    s->cap_train_loss = steps;
    s->cap_val_loss = epochs;
    return 0;
}

void nd_train_state_free(nd_train_state *s)
{
    free(s->order);
    free(s->train_loss);
    free(s->val_loss);
    free(s->val_step);
    memset(s, 0, sizeof *s);
}

void nd_train_state_copy(nd_train_state *dst, const nd_train_state *src)
{
    dst->step = src->step;
    dst->epoch = src->epoch;
    dst->batch = src->batch;
    dst->ep_steps = src->ep_steps;
    dst->ep_sum = src->ep_sum;
    dst->data_hash = src->data_hash;
    memcpy(dst->opts, src->opts, sizeof dst->opts);
    int n = src->n_order < dst->n_order ? src->n_order : dst->n_order;
    memcpy(dst->order, src->order, sizeof(int32_t) * (size_t)n);
    dst->n_train_loss = src->n_train_loss < dst->cap_train_loss ? src->n_train_loss : dst->cap_train_loss;
    memcpy(dst->train_loss, src->train_loss, sizeof(float) * (size_t)dst->n_train_loss);
    dst->n_val_loss = src->n_val_loss < dst->cap_val_loss ? src->n_val_loss : dst->cap_val_loss;
    memcpy(dst->val_loss, src->val_loss, sizeof(float) * (size_t)dst->n_val_loss);
    memcpy(dst->val_step, src->val_step, sizeof(int32_t) * (size_t)dst->n_val_loss);
}

static void state_weights(const nd_train_model *m, float **w, size_t *n)
{
    *w = m->lora ? m->lora : m->params;
    *n = m->lora ? m->n_lora : m->n_params;
}

int nd_train_state_save(const char *path, const nd_train_model *m, const nd_adamw *opt, const nd_train_state *s,
                        needle_error *err)
{
    float *w;
    size_t nw;
    state_weights(m, &w, &nw);
    nd_st_out_tensor out[8];
    size_t k = 0;
    out[k++] = (nd_st_out_tensor){"weights", ND_ST_F32, 1, {(int64_t)nw}, w};
    out[k++] = (nd_st_out_tensor){"adam.m", ND_ST_F32, 1, {(int64_t)opt->n}, opt->m};
    out[k++] = (nd_st_out_tensor){"adam.v", ND_ST_F32, 1, {(int64_t)opt->n}, opt->v};
    if (s->n_order) out[k++] = (nd_st_out_tensor){"order", ND_ST_I32, 1, {s->n_order}, s->order};
    if (s->n_train_loss) out[k++] = (nd_st_out_tensor){"train_loss", ND_ST_F32, 1, {s->n_train_loss}, s->train_loss};
    if (s->n_val_loss) {
        out[k++] = (nd_st_out_tensor){"val_loss", ND_ST_F32, 1, {s->n_val_loss}, s->val_loss};
        out[k++] = (nd_st_out_tensor){"val_step", ND_ST_I32, 1, {s->n_val_loss}, s->val_step};
    }
    char v[9][64];
    snprintf(v[0], 64, "%d", s->step);
    snprintf(v[1], 64, "%d", s->epoch);
    snprintf(v[2], 64, "%d", s->batch);
    snprintf(v[3], 64, "%d", s->ep_steps);
    snprintf(v[4], 64, "%.17g", s->ep_sum);
    snprintf(v[5], 64, "%016" PRIx64, s->data_hash);
    snprintf(v[6], 64, "%ld", opt->step);
    snprintf(v[7], 64, "%s", m->lora ? "lora" : "full");
    /* a LoRA state is only meaningful on the base it was trained on: record it */
    snprintf(v[8], 64, "%016" PRIx64, m->lora ? nd_train_base_checksum(m) : (uint64_t)0);
    const char *keys[11] = {"format", "step", "epoch", "batch", "epoch_steps", "epoch_loss_sum", "data_hash",
                            "adam_step", "mode", "options", "base_checksum"};
    const char *vals[11] = {"needle-train-state", v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], s->opts, v[8]};
    return nd_st_write(path, out, k, keys, vals, m->lora ? 11 : 10, err);
}

static int meta_long(const nd_safetensors *st, const char *key, long lo, long hi, long *out, const char *path,
                     needle_error *err)
{
    const char *v = nd_st_meta(st, key);
    char *end = NULL;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || x < lo || x > hi)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: metadata \"%s\" missing or outside %ld..%ld", path, key, lo, hi);
    *out = x;
    return 0;
}

/* A 1-D tensor of `want` elements of dtype dt (want < 0: any length up to
 * max), or absent when optional. */
static const nd_st_tensor *vec(const nd_safetensors *st, const char *name, nd_st_dtype dt, long want, long max,
                               int optional, const char *path, int *rc, needle_error *err)
{
    if (*rc) return NULL;
    const nd_st_tensor *t = nd_st_find(st, name);
    if (!t) {
        if (!optional) *rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %s is missing", path, name);
        return NULL;
    }
    if (t->dtype != dt || t->ndim != 1 || (want >= 0 && (long)t->numel != want) || (long)t->numel > max)
        *rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %s has dtype %s and %zu elements, expected %s x %ld", path,
                        name, nd_st_dtype_name(t->dtype), t->numel, nd_st_dtype_name(dt), want);
    return *rc ? NULL : t;
}

int nd_train_state_load(const char *path, nd_train_model *m, nd_adamw *opt, nd_train_state *s, needle_error *err)
{
    memset(s, 0, sizeof *s);
    nd_safetensors st;
    int rc = nd_st_open(path, &st, err);
    if (rc) return rc;
    const char *fmt = nd_st_meta(&st, "format"), *mode = nd_st_meta(&st, "mode"), *opts = nd_st_meta(&st, "options");
    const char *hash = nd_st_meta(&st, "data_hash"), *ep_sum = nd_st_meta(&st, "epoch_loss_sum");
    if (!fmt || strcmp(fmt, "needle-train-state") != 0)
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: not a training state (metadata format is not needle-train-state)",
                       path);
    else if (!mode || strcmp(mode, m->lora ? "lora" : "full") != 0)
        rc = nd_errorf(err, NEEDLE_EINVAL, "%s: a %s training state, this run is %s", path, mode ? mode : "?",
                       m->lora ? "lora" : "full");
    else if (!opts || strlen(opts) >= sizeof s->opts || !hash || !ep_sum)
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: metadata options/data_hash/epoch_loss_sum missing", path);
    else if (m->lora) {
        /* states written before base_checksum existed cannot be checked; every newer one is */
        const char *base = nd_st_meta(&st, "base_checksum");
        char have[32];
        snprintf(have, sizeof have, "%016" PRIx64, nd_train_base_checksum(m));
        if (base && strcmp(base, have) != 0)
            rc = nd_errorf(err, NEEDLE_EINVAL,
                           "%s: this LoRA training state was made on a base checkpoint with checksum %.20s, but "
                           "--checkpoint has checksum %s (a different base); resume with the original checkpoint",
                           path, base, have);
    }
    long step = 0, epoch = 0, batch = 0, ep_steps = 0, adam_step = 0;
    const long BIG = 1L << 30;
    if (!rc) rc = meta_long(&st, "step", 0, BIG, &step, path, err);
    if (!rc) rc = meta_long(&st, "epoch", 0, BIG, &epoch, path, err);
    if (!rc) rc = meta_long(&st, "batch", 0, BIG, &batch, path, err);
    if (!rc) rc = meta_long(&st, "epoch_steps", 0, BIG, &ep_steps, path, err);
    if (!rc) rc = meta_long(&st, "adam_step", 0, BIG, &adam_step, path, err);
    float *w;
    size_t nw;
    state_weights(m, &w, &nw);
    const nd_st_tensor *tw = vec(&st, "weights", ND_ST_F32, (long)nw, LONG_MAX, 0, path, &rc, err);
    const nd_st_tensor *tm = vec(&st, "adam.m", ND_ST_F32, (long)opt->n, LONG_MAX, 0, path, &rc, err);
    const nd_st_tensor *tv = vec(&st, "adam.v", ND_ST_F32, (long)opt->n, LONG_MAX, 0, path, &rc, err);
    const nd_st_tensor *to = vec(&st, "order", ND_ST_I32, -1, BIG, 1, path, &rc, err);
    const nd_st_tensor *tl = vec(&st, "train_loss", ND_ST_F32, -1, BIG, 1, path, &rc, err);
    const nd_st_tensor *tvl = vec(&st, "val_loss", ND_ST_F32, -1, BIG, 1, path, &rc, err);
    const nd_st_tensor *tvs = vec(&st, "val_step", ND_ST_I32, tvl ? (long)tvl->numel : 0, BIG, tvl == NULL, path,
                                  &rc, err);
    if (!rc)
        rc = nd_train_state_init(s, to ? (int)to->numel : 0, tl ? (int)tl->numel : 0, tvl ? (int)tvl->numel : 0,
                                 err);
    if (!rc) {
        s->step = (int)step;
        s->epoch = (int)epoch;
        s->batch = (int)batch;
        s->ep_steps = (int)ep_steps;
        s->ep_sum = strtod(ep_sum, NULL);
        s->data_hash = strtoull(hash, NULL, 16);
        snprintf(s->opts, sizeof s->opts, "%s", opts);
        s->n_train_loss = s->cap_train_loss;
        s->n_val_loss = s->cap_val_loss;
        if (to) memcpy(s->order, to->data, sizeof(int32_t) * to->numel);
        if (tvs) memcpy(s->val_step, tvs->data, sizeof(int32_t) * tvs->numel);
        if (tl) rc = nd_st_read_f32(tl, s->train_loss, path, err);
        if (!rc && tvl) rc = nd_st_read_f32(tvl, s->val_loss, path, err);
        /* the model and optimizer change only once everything has been read */
        float *mm = malloc(sizeof(float) * (opt->n ? opt->n : 1)), *vv = malloc(sizeof(float) * (opt->n ? opt->n : 1));
        float *ww = malloc(sizeof(float) * (nw ? nw : 1));
        if (!rc && (!mm || !vv || !ww)) rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
        if (!rc) rc = nd_st_read_f32(tw, ww, path, err);
        if (!rc) rc = nd_st_read_f32(tm, mm, path, err);
        if (!rc) rc = nd_st_read_f32(tv, vv, path, err);
        if (!rc) {
            memcpy(w, ww, sizeof(float) * nw);
            memcpy(opt->m, mm, sizeof(float) * opt->n);
            memcpy(opt->v, vv, sizeof(float) * opt->n);
            opt->step = adam_step;
        }
        free(mm); free(vv); free(ww);
    }
    nd_st_close(&st);
    if (rc) nd_train_state_free(s);
    return rc;
}
