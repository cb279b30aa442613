/* merge.c - W += (alpha / r) * A B for the five LoRA targets of every layer. */
#include "train/merge.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/bits_map.h"
#include "model/params.h"
#include "train/train_ckpt.h"
#include "train/train_model.h"

/* The layer's matrix that LoRA target t (0-based; model/params.def .lora) adapts. */
static nd_matrix *target_matrix(nd_layer_weights *ly, int t)
{
    for (int i = 0; i < ND_P_COUNT; i++)
        if (nd_params[i].lora == t + 1) return nd_param_field(&nd_params[i], ly);
    return NULL; /* not reached: the table has ND_LORA_TARGETS targets */
}

/* A positive number from metadata (rank, alpha). */
static int meta_number(const nd_safetensors *st, const char *key, const char *path, double *out, needle_error *err)
{
    const char *v = nd_st_meta(st, key);
    char *end = NULL;
    double x = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !isfinite(x) || x <= 0 || x > 1e9)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: metadata \"%s\" missing or not a positive number", path, key);
    *out = x;
    return 0;
}

/* A (L, in, r) or B (L, r, out) factor of target t, checked and read as
 * float: `<kernel>.lora_A` / `.lora_B` (Needle 2), or in the reference's
 * Needle 3 layout `lora/<kernel path>/A` / `/B`. */
static int read_factor(const nd_safetensors *st, const nd_config *c, const char *path, int t, int which_b,
                       int64_t d0, int64_t d1, int64_t d2, float **out, needle_error *err)
{
    char name[192], kernel[160];
    snprintf(name, sizeof name, "%s.%s", nd_train_lora_target_name(t), which_b ? "lora_B" : "lora_A");
    const nd_st_tensor *ts = nd_st_find(st, name);
    if (!ts && nd_config_generation(c) == 3) {
        nd_train_lora_target_ckpt(c, t, kernel, sizeof kernel);
        snprintf(name, sizeof name, "lora/%s/%s", kernel, which_b ? "B" : "A");
        ts = nd_st_find(st, name);
    }
    if (!ts) return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %s is missing", path, name);
    if (!nd_st_is_float(ts->dtype) || ts->ndim != 3 || ts->shape[0] != d0 || ts->shape[1] != d1 || ts->shape[2] != d2)
        return nd_errorf(err, NEEDLE_EFORMAT,
                         "%s: tensor %s has dtype %s and %d dims (%lld, %lld, %lld), the base needs float "
                         "(%lld, %lld, %lld)", path, name, nd_st_dtype_name(ts->dtype), ts->ndim,
                         (long long)(ts->ndim > 0 ? ts->shape[0] : 0), (long long)(ts->ndim > 1 ? ts->shape[1] : 0),
                         (long long)(ts->ndim > 2 ? ts->shape[2] : 0), (long long)d0, (long long)d1, (long long)d2);
    *out = malloc(sizeof(float) * (ts->numel ? ts->numel : 1));
    if (!*out) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory for %s", path, name);
    int rc = nd_st_read_f32(ts, *out, path, err);
    if (rc) { free(*out); *out = NULL; }
    return rc;
}

static int inside_mapping(const nd_weights *w, const float *p)
{
    const uint8_t *b = (const uint8_t *)p;
    return w->map.data && b >= w->map.data && b < w->map.data + w->map.size;
}

int nd_lora_merge(nd_weights *w, const char *adapter_path, const char *base_path, needle_error *err)
{
    nd_safetensors st;
    int rc = nd_st_open(adapter_path, &st, err);
    if (rc) return rc;
    const char *fmt = nd_st_meta(&st, "format"), *langs = nd_st_meta(&st, "languages");
    double rank_d = 0, alpha = 0, scale_d = 0;
    if (fmt && strcmp(fmt, "needle-lora") != 0)
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: metadata format is \"%s\", not a needle-lora adapter", adapter_path,
                       fmt);
    if (!rc && ((langs && strcmp(langs, "null") && *langs) || nd_st_find(&st, "rows")))
        rc = nd_errorf(err, NEEDLE_EUNSUPPORTED, "%s: a Whistle (speech) adapter, not a Needle one", adapter_path);
    if (!rc) rc = meta_number(&st, "rank", adapter_path, &rank_d, err);
    /* ours records alpha; the reference's adapters only the scale alpha / r */
    if (!rc && nd_st_meta(&st, "alpha")) rc = meta_number(&st, "alpha", adapter_path, &alpha, err);
    else if (!rc && nd_st_meta(&st, "scale")) {
        rc = meta_number(&st, "scale", adapter_path, &scale_d, err);
        alpha = scale_d * rank_d;
    } else if (!rc) rc = meta_number(&st, "alpha", adapter_path, &alpha, err); /* names the missing key */
    const char *sum = nd_st_meta(&st, "base_checksum");
    if (!rc && sum && base_path) {
        uint64_t have = 0;
        rc = nd_train_base_checksum_file(base_path, &have, err);
        char have_s[32];
        snprintf(have_s, sizeof have_s, "%016" PRIx64, have);
        if (!rc && strcmp(have_s, sum) != 0)
            rc = nd_errorf(err, NEEDLE_EINVAL, "%s: trained on a different base (base_checksum %s; %s has %s)",
                           adapter_path, sum, base_path, have_s);
    }
    int L = w->cfg.num_layers, r = (int)rank_d;
    /* the reference's own scale when it gave one (alpha / r as it computed it) */
    float scale = scale_d > 0 ? (float)scale_d : (float)(alpha / rank_d);
    for (int t = 0; t < ND_LORA_TARGETS && !rc; t++)
        for (int l = 0; l < L && !rc; l++) {
            const nd_matrix *m = target_matrix(&w->layers[l], t);
            if (m->kind != ND_MAT_F32 || inside_mapping(w, m->f32))
                rc = nd_errorf(err, NEEDLE_EUNSUPPORTED, "%s: layer %d of %s is not a writable float matrix (merge "
                               "needs a .safetensors base, not a .cact)", adapter_path, l, nd_train_lora_target_name(t));
        }
    /* read every factor first, so a bad adapter leaves w untouched */
    float *A[ND_LORA_TARGETS] = {0}, *B[ND_LORA_TARGETS] = {0};
    for (int t = 0; t < ND_LORA_TARGETS && !rc; t++) {
        const nd_matrix *m = target_matrix(&w->layers[0], t);
        rc = read_factor(&st, &w->cfg, adapter_path, t, 0, L, m->cols, r, &A[t], err);
        if (!rc) rc = read_factor(&st, &w->cfg, adapter_path, t, 1, L, r, m->rows, &B[t], err);
    }
    int widest = 1; /* B transposed, one target's out rows at a time */
    for (int t = 0; t < ND_LORA_TARGETS; t++)
        if (target_matrix(&w->layers[0], t)->rows > widest) widest = target_matrix(&w->layers[0], t)->rows;
    float *bt = rc ? NULL : malloc(sizeof(float) * (size_t)r * (size_t)widest);
    if (!rc && !bt) rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", adapter_path);
    for (int t = 0; t < ND_LORA_TARGETS && !rc; t++)
        for (int l = 0; l < L; l++) {
            nd_matrix *m = target_matrix(&w->layers[l], t);
            int in = m->cols, out = m->rows;
            const float *Al = A[t] + (size_t)l * in * r, *Bl = B[t] + (size_t)l * r * out;
            float *W = (float *)m->f32; /* owned by w (checked above) */
            for (int o = 0; o < out; o++)
                for (int k = 0; k < r; k++) bt[(size_t)o * r + k] = Bl[(size_t)k * out + o];
            for (int o = 0; o < out; o++) {
                const float *bo = bt + (size_t)o * r;
                float *row = W + (size_t)o * in;
                for (int i = 0; i < in; i++) {
                    const float *ai = Al + (size_t)i * r;
                    float s = 0.0f;
                    for (int k = 0; k < r; k++) s += ai[k] * bo[k];
                    row[i] += scale * s;
                }
            }
        }
    free(bt);
    for (int t = 0; t < ND_LORA_TARGETS; t++) { free(A[t]); free(B[t]); }
    nd_st_close(&st);
    return rc;
}

/* ---- the deploy scheme an adapter was trained for (SPEC 12) ---------------- */
int nd_lora_deploy_scheme(const char *adapter_path, const char *bits, const char *bits_map, char *out, size_t n,
                          needle_error *err)
{
    out[0] = '\0';
    nd_safetensors st;
    int rc = nd_st_open(adapter_path, &st, err);
    if (rc) return rc;
    const char *qb = nd_st_meta(&st, "qat_bits"), *qm = nd_st_meta(&st, "qat_bits_map");
    int has_bits = qb && *qb && strcmp(qb, "null"), has_map = qm && *qm && strcmp(qm, "null");
    int width = has_bits ? nd_bits_parse_width(qb, (int)strlen(qb)) : 0;
    char mine[64];
    if (has_bits && width < 0) {
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: metadata \"qat_bits\" is '%.20s', not 2, 3, 4 or 1.58", adapter_path, qb);
    } else if (has_map) {
        nd_bits_map check;
        if (nd_bits_map_parse(qm, &check, err)) {
            char why[sizeof err->message];
            snprintf(why, sizeof why, "%s", err->message);
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: metadata \"qat_bits_map\": %s", adapter_path, why);
        } else if (bits) {
            rc = nd_errorf(err, NEEDLE_EINVAL,
                           "%s was trained for the checkpoint's mixed CQ bits map %.200s, but --bits %s would deploy "
                           "different numerics", adapter_path, qm, bits);
        } else if (bits_map && strcmp(bits_map, qm)) {
            rc = nd_errorf(err, NEEDLE_EINVAL,
                           "%s was trained for the CQ bits map %.200s, but --bits-map %.200s would deploy different "
                           "numerics", adapter_path, qm, bits_map);
        } else if (strlen(qm) >= n) {
            rc = nd_errorf(err, NEEDLE_ELIMIT, "%s: metadata \"qat_bits_map\" is too long", adapter_path);
        } else {
            snprintf(out, n, "%s", qm);
        }
    } else if (has_bits) {
        snprintf(mine, sizeof mine, "default=%s", qb);
        if (bits && nd_bits_parse_width(bits, (int)strlen(bits)) != width)
            rc = nd_errorf(err, NEEDLE_EINVAL,
                           "%s was trained for CQ W%s, but --bits %s would deploy different numerics; rebuild at the "
                           "adapter's width (leave --bits out)", adapter_path, qb, bits);
        else if (bits_map && strcmp(bits_map, mine))
            rc = nd_errorf(err, NEEDLE_EINVAL,
                           "%s was trained for CQ W%s, but --bits-map %.200s would deploy different numerics",
                           adapter_path, qb, bits_map);
        else snprintf(out, n, "%s", mine);
    }
    nd_st_close(&st);
    return rc;
}
