/* test_train_ckpt_v3.c - the trainer's Needle 3 checkpoint and adapter IO in
 * the reference's layout (SPEC-needle3 1.1/1.2), on tests/golden/needle3/
 * n3_tiny.safetensors (written by the reference):
 *   - every tensor of the file is read by its `/`-joined name, nothing is left
 *     unused, the values are the file's, and the tensors the reference does not
 *     store (hada_p1/p2, the router calibration) hold their initialisers, as
 *     the inference loader fills them;
 *   - a wrongly shaped tensor (same element count) and a missing one are
 *     refused with the file and the tensor named;
 *   - a --full save writes exactly the file's names and shapes with the
 *     reference's metadata (format_version 2), and both loaders read it back
 *     to the same values; a base without heads is saved without heads;
 *   - a LoRA adapter is saved as lora/<kernel path>/A (L,in,r) and /B
 *     (L,r,out) with the reference's JSON metadata, and merging it into the
 *     inference weights gives W + (alpha/r) A B on every target of every layer.
 * The Needle 2 layout is tests/test_train.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/safetensors.h"
#include "model/params.h"
#include "model/weights.h"
#include "train/merge.h"
#include "train/train_ckpt.h"
#include "train/train_model.h"

#define N3 "tests/golden/needle3/n3_tiny.safetensors"
#define TMP_FULL "build-tmp-test-train-ckpt-v3-full.safetensors"
#define TMP_BAD "build-tmp-test-train-ckpt-v3-bad.safetensors"
#define TMP_LORA "build-tmp-test-train-ckpt-v3-lora.safetensors"

/* Every tensor of the file equals the model's tensor of that name. */
static int same_as_file(const nd_train_model *m, const char *path, int *n_file)
{
    nd_safetensors st;
    needle_error err;
    if (nd_st_open(path, &st, &err)) return 0;
    int ok = 1;
    *n_file = (int)st.count;
    for (size_t i = 0; i < st.count && ok; i++) {
        const nd_st_tensor *s = &st.tensors[i];
        int k = nd_train_find(m, s->name);
        float *buf = malloc(sizeof(float) * (s->numel ? s->numel : 1));
        ok = k >= 0 && buf && m->tensors[k].count == s->numel && nd_st_read_f32(s, buf, path, &err) == 0 &&
             !memcmp(buf, m->params + m->tensors[k].offset, sizeof(float) * s->numel);
        if (!ok) fprintf(stderr, "  %s differs\n", s->name);
        free(buf);
    }
    nd_st_close(&st);
    return ok;
}

static void test_load_reference_checkpoint(void)
{
    nd_train_model m;
    needle_error err;
    int ignored = -1;
    int rc = nd_train_model_load(&m, N3, &ignored, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    CHECKF(ignored == 0, "%d tensors of the file not used", ignored);
    int n_file = 0;
    CHECK(same_as_file(&m, N3, &n_file));
    int absent = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        const nd_tensor_info *t = &m.tensors[i];
        CHECKF(!strchr(t->name, '.'), "%s is not a reference name", t->name);
        if (!t->absent) continue;
        absent++;
        CHECKF(t->param->ckpt_optional, "%s absent but not optional", t->name);
        /* its initialiser's values, as the inference loader fills them */
        float *want = malloc(sizeof(float) * t->count);
        nd_param_init_fill_cfg(t->param, &m.cfg, t->name, want, t->ndim, t->shape, 0);
        CHECKF(!memcmp(want, m.params + t->offset, sizeof(float) * t->count), "%s is not its init", t->name);
        free(want);
    }
    CHECKF(absent == 3 && absent + n_file == m.n_tensors, "absent %d, file %d, model %d", absent, n_file, m.n_tensors);
    const float *p1 = nd_train_param(&m, ND_P_HADA_P1);
    float perm[128];
    nd_legacy_permutation(11, perm, 128);
    CHECK(p1 && m.cfg.hada_n == 128 && !memcmp(p1, perm, sizeof perm));
    nd_train_model_free(&m);
}

/* Rewrite the golden file with tensor `name` changed: reshaped to (a,b,c)
 * with the same data, or dropped (a = 0). */
static int rewrite(const char *name, int64_t a, int64_t b, int64_t c)
{
    nd_safetensors st;
    needle_error err;
    if (nd_st_open(N3, &st, &err)) return -1;
    nd_st_out_tensor *out = calloc(st.count, sizeof *out);
    float **bufs = calloc(st.count, sizeof *bufs);
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < st.count && !rc; i++) {
        const nd_st_tensor *s = &st.tensors[i];
        int hit = !strcmp(s->name, name);
        if (hit && a == 0) continue;
        bufs[n] = malloc(sizeof(float) * (s->numel ? s->numel : 1));
        rc = nd_st_read_f32(s, bufs[n], N3, &err);
        out[n] = (nd_st_out_tensor){s->name, ND_ST_F32, s->ndim, {0}, bufs[n]};
        for (int k = 0; k < s->ndim; k++) out[n].shape[k] = s->shape[k];
        if (hit) {
            out[n].ndim = 3;
            out[n].shape[0] = a, out[n].shape[1] = b, out[n].shape[2] = c;
        }
        n++;
    }
    const char *keys[2] = {"format_version", "config"}, *vals[2] = {"2", nd_st_meta(&st, "config")};
    if (!rc) rc = nd_st_write(TMP_BAD, out, n, keys, vals, 2, &err);
    for (size_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(out);
    nd_st_close(&st);
    return rc;
}

static void test_bad_shapes_refused(void)
{
    nd_train_model m;
    needle_error err;
    const char *q = "stack/layers/block/self_attn/q_proj/kernel"; /* (5, 128, 64) */
    CHECK(rewrite(q, 5, 64, 128) == 0);
    int rc = nd_train_model_load(&m, TMP_BAD, NULL, &err);
    CHECKF(rc != 0 && strstr(err.message, TMP_BAD) && strstr(err.message, q) && strstr(err.message, "(5,64,128)") &&
               strstr(err.message, "(5,128,64)"),
           "rc %d: %s", rc, rc ? err.message : "");
    if (!rc) nd_train_model_free(&m);
    const char *taps = "stack/layers/block/self_attn/v_taps";
    CHECK(rewrite(taps, 0, 0, 0) == 0);
    rc = nd_train_model_load(&m, TMP_BAD, NULL, &err);
    CHECKF(rc != 0 && strstr(err.message, taps) && strstr(err.message, "missing"), "rc %d: %s", rc,
           rc ? err.message : "");
    if (!rc) nd_train_model_free(&m);
    remove(TMP_BAD);
}

static void test_full_save_round_trips(void)
{
    nd_train_model m, back;
    needle_error err;
    if (nd_train_model_load(&m, N3, NULL, &err)) { CHECKF(0, "%s", err.message); return; }
    m.params[m.tensors[0].offset] += 0.25f; /* a trained value, to see it come back */
    CHECKF(nd_train_save_full(&m, TMP_FULL, &err) == 0, "%s", err.message);
    /* the same names and shapes as the reference's file, and its metadata */
    nd_safetensors a, b;
    CHECK(nd_st_open(N3, &a, &err) == 0);
    CHECK(nd_st_open(TMP_FULL, &b, &err) == 0);
    CHECKF(a.count == b.count, "%zu vs %zu tensors", a.count, b.count);
    for (size_t i = 0; i < a.count; i++) {
        const nd_st_tensor *t = nd_st_find(&b, a.tensors[i].name);
        int same = t && t->ndim == a.tensors[i].ndim;
        for (int k = 0; same && k < t->ndim; k++) same = t->shape[k] == a.tensors[i].shape[k];
        CHECKF(same, "%s", a.tensors[i].name);
    }
    const char *fv = nd_st_meta(&b, "format_version"), *cfg = nd_st_meta(&b, "config");
    CHECK(fv && !strcmp(fv, "2") && cfg && strstr(cfg, "\"qk_head_dim\": 16") && nd_st_meta(&b, "run"));
    nd_st_close(&a);
    nd_st_close(&b);
    /* both loaders read it back */
    int n_file = 0;
    if (nd_train_model_load(&back, TMP_FULL, NULL, &err) == 0) {
        CHECK(back.n_params == m.n_params && !memcmp(back.params, m.params, sizeof(float) * m.n_params));
        nd_train_model_free(&back);
    } else CHECKF(0, "%s", err.message);
    CHECK(same_as_file(&m, TMP_FULL, &n_file));
    nd_weights w;
    int rc = nd_weights_load(TMP_FULL, &w, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (!rc) {
        CHECK(w.confidence.present && w.router.present && w.embedding.rows == 8192);
        CHECK(fabsf(w.embedding.f32[0] - m.params[m.tensors[0].offset]) == 0.0f);
        nd_weights_free(&w);
    }
    /* a base without heads stays without heads */
    for (int i = 0; i < m.n_tensors; i++)
        if (m.tensors[i].param->scope == ND_SCOPE_HEAD) m.tensors[i].absent = 1;
    CHECK(nd_train_save_full(&m, TMP_FULL, &err) == 0);
    CHECK(nd_st_open(TMP_FULL, &b, &err) == 0);
    int heads = 0;
    for (size_t i = 0; i < b.count; i++) heads += strstr(b.tensors[i].name, "_head/") != NULL;
    CHECKF(heads == 0 && b.count > 40, "%d head tensors of %zu", heads, b.count);
    nd_st_close(&b);
    rc = nd_weights_load(TMP_FULL, &w, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (!rc) {
        CHECK(!w.confidence.present && !w.router.present);
        nd_weights_free(&w);
    }
    remove(TMP_FULL);
    nd_train_model_free(&m);
}

static void test_lora_adapter_layout_and_merge(void)
{
    nd_train_model m;
    needle_error err;
    if (nd_train_model_load(&m, N3, NULL, &err)) { CHECKF(0, "%s", err.message); return; }
    CHECK(nd_train_lora_create(&m, 4, 8.0f, 7, &err) == 0);
    for (size_t i = 0; i < m.n_lora; i++) m.lora[i] = 0.05f * sinf((float)i * 0.37f); /* B = 0 would merge nothing */
    m.source_path = N3;
    CHECKF(nd_train_save_lora(&m, TMP_LORA, &err) == 0, "%s", err.message);
    nd_safetensors st;
    CHECK(nd_st_open(TMP_LORA, &st, &err) == 0);
    CHECK(st.count == 10);
    const nd_st_tensor *qa = nd_st_find(&st, "lora/stack/layers/block/self_attn/q_proj/kernel/A");
    const nd_st_tensor *ob = nd_st_find(&st, "lora/stack/layers/block/self_attn/out_proj/kernel/B");
    CHECK(qa && qa->ndim == 3 && qa->shape[0] == 5 && qa->shape[1] == 128 && qa->shape[2] == 4);
    CHECK(ob && ob->ndim == 3 && ob->shape[0] == 5 && ob->shape[1] == 4 && ob->shape[2] == 128);
    const char *scale = nd_st_meta(&st, "scale"), *rank = nd_st_meta(&st, "rank"), *base = nd_st_meta(&st, "base");
    CHECK(scale && !strcmp(scale, "2.0") && rank && !strcmp(rank, "4") && base && !strcmp(base, "\"" N3 "\""));
    CHECK(nd_st_meta(&st, "pieces") && !strcmp(nd_st_meta(&st, "pieces"), "null"));
    nd_st_close(&st);

    nd_weights w0, w;
    CHECK(nd_weights_load(N3, &w0, &err) == 0);
    CHECK(nd_weights_load(N3, &w, &err) == 0);
    int rc = nd_lora_merge(&w, TMP_LORA, N3, &err);
    CHECKF(rc == 0, "%s", err.message);
    double worst = 0, moved = 0;
    const nd_param_role roles[ND_LORA_TARGETS] = {ND_P_Q_PROJ, ND_P_K_PROJ, ND_P_V_PROJ, ND_P_GATE_PROJ, ND_P_OUT_PROJ};
    for (int t = 0; t < ND_LORA_TARGETS && !rc; t++) {
        int in, out, r = 4;
        nd_train_lora_dims(&m, t, &in, &out);
        for (int l = 0; l < 5; l++) {
            const nd_matrix *W0 = nd_param_field_c(&nd_params[roles[t]], &w0.layers[l]);
            const nd_matrix *W = nd_param_field_c(&nd_params[roles[t]], &w.layers[l]);
            const float *A = m.lora + m.lora_a_off[t] + (size_t)l * in * r, *B = m.lora + m.lora_b_off[t] + (size_t)l * r * out;
            for (int o = 0; o < out; o++)
                for (int i = 0; i < in; i++) {
                    double s = 0;
                    for (int k = 0; k < r; k++) s += (double)A[i * r + k] * B[k * out + o];
                    double want = W0->f32[(size_t)o * in + i] + 2.0 * s, have = W->f32[(size_t)o * in + i];
                    worst = fmax(worst, fabs(have - want));
                    moved = fmax(moved, fabs(2.0 * s));
                }
        }
    }
    CHECKF(worst < 1e-6 && moved > 1e-3, "merge off by %g (delta up to %g)", worst, moved);
    nd_weights_free(&w);
    /* another base is refused by its checksum */
    CHECK(nd_weights_load(N3, &w, &err) == 0);
    CHECK(nd_lora_merge(&w, TMP_LORA, "tests/golden/tiny.safetensors", &err) != 0);
    nd_weights_free(&w);
    nd_weights_free(&w0);
    remove(TMP_LORA);
    nd_train_model_free(&m);
}

int main(void)
{
    RUN(test_load_reference_checkpoint);
    RUN(test_bad_shapes_refused);
    RUN(test_full_save_round_trips);
    RUN(test_lora_adapter_layout_and_merge);
    return check_summary();
}
