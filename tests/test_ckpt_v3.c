/* test_ckpt_v3.c - Needle 3 float checkpoints in the reference's layout
 * (tests/golden/needle3/n3_tiny.safetensors: `/`-joined names, kernels
 * [in, out], `layers` leaves with a leading layer axis, F16), read through
 * the one parameter table:
 *   - the config from its metadata (geometry, sliding window, global layers,
 *     conv taps, per-head probes/queries);
 *   - every parameter the reference exported to n3_tiny.cact (made from this
 *     very checkpoint): FP16/FP32 tensors bit-identical, CQ matrices within
 *     4-bit CQ error of the float matrix (a transposed or misplaced matrix
 *     is off by ~1.4 relative, CQ error is ~0.1);
 *   - what the checkpoint leaves out comes from the table's initialisers:
 *     the MLP permutations (numpy RandomState 11 / 13), the router's
 *     calibration (0.90, 0.00, 0.60);
 *   - the training-only embedding-head scalars (log_temp, bias) are read;
 *   - a missing tensor is refused naming the file and the tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/file.h"
#include "core/fp16.h"
#include "io/safetensors.h"
#include "io/spm_model.h"
#include "model/cact/cact.h"
#include "model/init.h"
#include "model/model.h"
#include "model/params.h"
#include "model/weights.h"

#define DIR "tests/golden/needle3/"

static void test_config_from_metadata(void)
{
    nd_weights w;
    needle_error e = {0};
    int rc = nd_weights_load(DIR "n3_tiny.safetensors", &w, &e);
    CHECKF(rc == 0, "%s", e.message);
    if (rc) return;
    const nd_config *c = &w.cfg;
    CHECK(nd_config_generation(c) == 3);
    CHECK(c->vocab_size == 8192 && c->d_model == 128 && c->num_layers == 5);
    CHECK(c->num_heads == 4 && c->num_kv_heads == 2 && c->qk_dim == 16 && c->v_dim == 32);
    CHECK(c->sliding_window == 8 && c->global_mask == (1ull << 2 | 1ull << 4) && c->qkv_conv_taps == 3);
    CHECK(c->num_sites == 2 && c->engram_layers[0] == 1 && c->engram_layers[1] == 2 && c->engram_slots == 512);
    CHECK(c->hada_n == 128 && c->hada_a == 8 && c->hada_b == 16 && c->contrastive_dim == 32);
    CHECK(w.contrastive.present && w.confidence.present && w.router.present);
    CHECK(w.contrastive.num_probes == 4 && w.contrastive.num_queries == 4 && w.contrastive.out_dim == 32);
    CHECK(w.router.out_dim == 3 && w.confidence.out_dim == 1);
    nd_weights_free(&w);
}

/* Values of one parameter instance as floats (CQ matrices dequantised). */
static float *param_values(const nd_weights *w, const nd_param_desc *p, int index, size_t *n)
{
    int head = p->scope == ND_SCOPE_HEAD ? index : -1;
    const void *f = nd_param_field_c(p, nd_param_base_c(w, p, index));
    *n = (size_t)nd_param_elems(p, &w->cfg, head);
    float *v = malloc(sizeof(float) * *n);
    if (p->kind == ND_KIND_SCALAR) v[0] = *(const float *)f;
    else if (p->kind == ND_KIND_VECTOR) memcpy(v, *(const float *const *)f, sizeof(float) * *n);
    else {
        const nd_matrix *m = f;
        nd_matrix_dequant_rows(m, 0, m->rows, v);
    }
    return v;
}

static void test_every_parameter_matches_the_reference_export(void)
{
    nd_weights ck, ex;
    needle_error e = {0};
    int rc = nd_weights_load_safetensors(DIR "n3_tiny.safetensors", &ck, &e);
    CHECKF(rc == 0, "%s", e.message);
    int rc2 = nd_weights_load_cact(DIR "n3_tiny.cact", &ex, &e);
    CHECKF(rc2 == 0, "%s", e.message);
    if (rc || rc2) return;
    int checked = 0, exact = 0, quant = 0;
    double worst_cq = 0.0;
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (p->no_cact || !nd_param_in_config(p, &ck.cfg)) continue;
        int instances = nd_param_instances(&ck, p);
        for (int k = 0; k < instances; k++) {
            if (p->scope == ND_SCOPE_HEAD && !nd_param_in_head_cact(p, k)) continue;
            size_t n1, n2;
            float *a = param_values(&ck, p, k, &n1), *b = param_values(&ex, p, k, &n2);
            CHECKF(n1 == n2, "%s: %zu vs %zu values", p->field_name, n1, n2);
            if (p->cq) {
                double num = 0, den = 0;
                for (size_t j = 0; j < n1 && j < n2; j++) num += (a[j] - b[j]) * (double)(a[j] - b[j]), den += (double)a[j] * a[j];
                double rel = sqrt(num / (den > 0 ? den : 1));
                if (rel > worst_cq) worst_cq = rel;
                CHECKF(rel < 0.2, "%s[%d]: CQ relative error %g", p->field_name, k, rel);
                quant++;
            } else {
                size_t bad = 0;
                /* the file holds FP16 (the permutations FP32): the checkpoint's F16
                 * values exactly, the calibration's constants rounded */
                for (size_t j = 0; j < n1 && j < n2; j++)
                    bad += (p->fp32 ? a[j] : nd_half_to_float(nd_float_to_half(a[j]))) != b[j];
                CHECKF(bad == 0, "%s[%d]: %zu of %zu values differ (first %g vs %g)", p->field_name, k, bad, n1, a[0],
                       b[0]);
                exact++;
            }
            checked++;
            free(a);
            free(b);
        }
    }
    printf("  %d tensors: %d exact, %d CQ (worst relative error %.4f)\n", checked, exact, quant, worst_cq);
    CHECK(exact > 100 && quant > 40);
    nd_weights_free(&ck);
    nd_weights_free(&ex);
}

static void test_left_out_parameters_come_from_the_table(void)
{
    nd_weights w;
    needle_error e = {0};
    if (nd_weights_load(DIR "n3_tiny.safetensors", &w, &e)) {
        CHECKF(0, "%s", e.message);
        return;
    }
    /* numpy.random.RandomState(11).permutation(128)[:8] and RandomState(13)'s */
    static const float p1[8] = {51, 2, 78, 9, 16, 77, 0, 104}, p2[8] = {89, 91, 23, 94, 64, 30, 60, 14};
    for (int i = 0; i < 8; i++) CHECKF(w.hada_p1[i] == p1[i] && w.hada_p2[i] == p2[i], "perm[%d]", i);
    CHECK(w.router.calibration[0] == 0.90f && w.router.calibration[1] == 0.0f && w.router.calibration[2] == 0.60f);
    /* training-only scalars of the embedding head, as stored (F16) */
    nd_safetensors st;
    CHECK(nd_st_open(DIR "n3_tiny.safetensors", &st, &e) == 0);
    const nd_st_tensor *lt = nd_st_find(&st, "embedding_head/log_temp"), *tb = nd_st_find(&st, "embedding_head/bias");
    CHECK(lt && tb && lt->ndim == 0 && tb->ndim == 0);
    if (lt && tb) CHECK(w.contrastive.log_temp == nd_st_get_f32(lt, 0) && w.contrastive.temp_bias == nd_st_get_f32(tb, 0));
    nd_st_close(&st);
    nd_weights_free(&w);
}

static void test_missing_tensor_named(void)
{
    /* the golden with one tensor renamed: the loader must name the one it lacks */
    char *data = NULL;
    size_t len = 0;
    needle_error e = {0};
    CHECK(nd_read_file(DIR "n3_tiny.safetensors", &data, &len, &e) == 0);
    if (!data) return;
    char *hit = memmem(data, len, "\"stack/layers/block/self_attn/k_taps\"", 37);
    CHECK(hit != NULL);
    if (hit) hit[30] = 'X'; /* k_taps -> X_taps */
    const char *path = "/tmp/needle_test_ckpt_v3_missing.safetensors";
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len);
    if (f) fclose(f);
    free(data);
    nd_weights w;
    int rc = nd_weights_load(path, &w, &e);
    CHECK(rc != 0);
    CHECKF(strstr(e.message, path) && strstr(e.message, "stack/layers/block/self_attn/k_taps") &&
               strstr(e.message, "missing"),
           "%s", e.message);
    remove(path);
}

/* `needle init --preset needle3-tiny`: exactly the golden checkpoint's tensor
 * names, shapes and config JSON, the reference's deterministic initial values,
 * and a file our loader reads back. */
static void test_init_v3_layout_and_values(void)
{
    nd_config c;
    needle_error e = {0};
    CHECK(nd_config_preset(&c, "needle3-tiny", &e) == 0);
    nd_param_set ps;
    if (nd_init_params(&c, 3, &ps, &e)) {
        CHECKF(0, "%s", e.message);
        return;
    }
    nd_safetensors st;
    CHECK(nd_st_open(DIR "n3_tiny.safetensors", &st, &e) == 0);
    CHECKF(ps.count == st.count, "%zu tensors, the golden has %zu", ps.count, st.count);
    for (size_t i = 0; i < ps.count; i++) {
        const nd_param *p = &ps.params[i];
        const nd_st_tensor *t = nd_st_find(&st, p->name);
        CHECKF(t != NULL, "%s is not in the golden checkpoint", p->name);
        if (!t) continue;
        int same = t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
        CHECKF(same, "%s: shape differs from the golden's", p->name);
    }
    const char *gcfg = nd_st_meta(&st, "config");
    char *ours = nd_config_to_reference_json(&c);
    CHECKF(gcfg && ours && strcmp(gcfg, ours) == 0, "config JSON differs:\n%s\n%s", ours, gcfg);
    free(ours);
    nd_st_close(&st);

    /* deterministic initial values (SPEC-needle3 1.2) */
    const nd_param *taps = nd_param_find(&ps, "stack/layers/block/self_attn/q_taps"); /* (L, 3, Q) */
    const nd_param *w1a = nd_param_find(&ps, "stack/layers/block/hadamard_mlp/w1a"); /* (L, 8, 8) */
    const nd_param *d3 = nd_param_find(&ps, "stack/layers/block/hadamard_mlp/d3");
    const nd_param *d4 = nd_param_find(&ps, "stack/layers/block/hadamard_mlp/d4");
    const nd_param *cu = nd_param_find(&ps, "stack/layers/block/hadamard_mlp/cond_u");
    const nd_param *lt = nd_param_find(&ps, "embedding_head/log_temp"), *tb = nd_param_find(&ps, "embedding_head/bias");
    const nd_param *q = nd_param_find(&ps, "stack/layers/block/self_attn/q_proj/kernel");
    CHECK(taps && w1a && d3 && d4 && cu && lt && tb && q);
    if (!(taps && w1a && d3 && d4 && cu && lt && tb && q)) {
        nd_param_set_free(&ps);
        return;
    }
    int Q = (int)taps->shape[2];
    for (int l = 0; l < 5; l++)
        for (int j = 0; j < 3; j++) CHECK(taps->data[(size_t)(l * 3 + j) * Q + 7] == (j == 0 ? 1.0f : 0.0f));
    float h = (float)(1.0 / sqrt(8.0));
    CHECK(w1a->data[0] == h && w1a->data[1] == h && w1a->data[9] == -h && w1a->data[3 * 8 + 5] == -h &&
          w1a->data[3 * 8 + 3] == h && w1a->data[7 * 8 + 1] == -h);
    for (size_t i = 0; i < d3->numel; i++) CHECK(d3->data[i] == 1.0f && d4->data[i] == 0.02f);
    for (size_t i = 0; i < cu->numel; i++) CHECK(cu->data[i] == 0.0f);
    CHECK(lt->ndim == 0 && lt->data[0] == (float)log(10.0) && tb->ndim == 0 && tb->data[0] == -10.0f);
    CHECK(nd_param_find(&ps, "hada_p1") == NULL && nd_param_find(&ps, "router_head/calibration") == NULL);
    double ss = 0;
    for (size_t i = 0; i < q->numel; i++) ss += (double)q->data[i] * q->data[i];
    double sd = sqrt(ss / (double)q->numel);
    CHECKF(fabs(sd - 0.02) < 0.001, "q_proj std %g", sd);

    /* written and read back */
    const char *path = "/tmp/needle_test_ckpt_v3_init.safetensors";
    CHECKF(nd_param_set_write(&ps, &c, path, &e) == 0, "%s", e.message);
    nd_weights w;
    int rc = nd_weights_load(path, &w, &e);
    CHECKF(rc == 0, "%s", e.message);
    if (!rc) {
        CHECK(nd_config_generation(&w.cfg) == 3 && w.cfg.num_layers == 5 && w.router.present);
        CHECK(w.layers[2].d3[5] == 1.0f && w.layers[4].q_taps[0] == 1.0f && w.hada_p1[0] == 51.0f);
        nd_weights_free(&w);
    }
    remove(path);
    nd_param_set_free(&ps);
}

/* A checkpoint with only the embedding head: the .cact gets a one-entry
 * manifest and that head's tensors, as the reference exports whichever heads
 * the parameters hold. */
static void test_build_with_the_heads_present(void)
{
    nd_config c;
    needle_error e = {0};
    CHECK(nd_config_preset(&c, "needle3-tiny", &e) == 0);
    nd_param_set ps;
    if (nd_init_params(&c, 1, &ps, &e)) {
        CHECKF(0, "%s", e.message);
        return;
    }
    size_t kept = 0;
    for (size_t i = 0; i < ps.count; i++)
        if (strncmp(ps.params[i].name, "router_head/", 12) && strncmp(ps.params[i].name, "confidence_head/", 16))
            ps.params[kept++] = ps.params[i];
    CHECK(kept < ps.count);
    ps.count = kept;
    const char *ck = "/tmp/needle_test_ckpt_v3_heads.safetensors", *out = "/tmp/needle_test_ckpt_v3_heads.cact";
    CHECKF(nd_param_set_write(&ps, &c, ck, &e) == 0, "%s", e.message);
    nd_param_set_free(&ps);
    nd_weights w;
    int rc = nd_weights_load(ck, &w, &e);
    CHECKF(rc == 0, "%s", e.message);
    if (rc) return;
    CHECK(w.contrastive.present && !w.confidence.present && !w.router.present);
    nd_vocab v;
    CHECK(nd_vocab_load_spm_file("tests/golden/tok8k.model", &v, &e) == 0);
    CHECKF(nd_cact_write(out, &w, &v, NULL, NULL, &e) == 0, "%s", e.message);
    nd_vocab_free(&v);
    nd_weights_free(&w);
    nd_cact_file f;
    nd_config fc;
    nd_cact_slot *slots = NULL;
    rc = nd_cact_open(out, &f, &e);
    CHECKF(rc == 0, "%s", e.message);
    if (!rc) {
        CHECKF(nd_cact_resolve(&f, out, &fc, &slots, &e) == 0, "%s", e.message);
        int manifest = 0, heads = 0;
        for (uint32_t i = 0; slots && i < f.hdr.num_tensors; i++) {
            manifest += slots[i].role == ND_SLOT_MANIFEST;
            heads += slots[i].head_code == ND_HEAD_CONTRASTIVE && slots[i].param != NULL;
            CHECK(slots[i].head_code != ND_HEAD_CONFIDENCE && slots[i].head_code != ND_HEAD_ROUTER);
        }
        CHECKF(manifest == 1 && heads == 6, "manifest %d, embedding-head tensors %d", manifest, heads);
        free(slots);
        nd_cact_close(&f);
    }
    remove(ck);
    remove(out);
}

static void test_width_ladder_refused(void)
{
    char *data = NULL;
    size_t len = 0;
    needle_error e = {0};
    CHECK(nd_read_file(DIR "n3_tiny.safetensors", &data, &len, &e) == 0);
    if (!data) return;
    /* the same length, so the header's size field stays right */
    static const char from[] = "\\\"ladder_widths\\\": [], \\\"ladder_order", to[] = "\\\"ladder_widths\\\": [1],\\\"ladder_order";
    char *hit = memmem(data, len, from, sizeof from - 1);
    CHECK(hit != NULL && sizeof from == sizeof to);
    if (hit) memcpy(hit, to, sizeof to - 1);
    const char *path = "/tmp/needle_test_ckpt_v3_widths.safetensors";
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len);
    if (f) fclose(f);
    free(data);
    nd_weights w;
    CHECK(nd_weights_load(path, &w, &e) != 0);
    CHECKF(strstr(e.message, "ladder_widths") && strstr(e.message, path), "%s", e.message);
    remove(path);
}

/* A config that carries a ladder order (a sliced rung's) is sliced by it, as
 * the reference's ladder_layer_indices does, and the rung's own order is the
 * parent's restricted to the kept layers, renumbered. */
static void test_rung_follows_saved_ladder_order(void)
{
    nd_config c;
    needle_error e = {0};
    CHECK(nd_config_preset(&c, "needle3-tiny", &e) == 0);
    CHECK(nd_config_set(&c, "ladder_order=0,4,1,2,3", &e) == 0);
    CHECKF(nd_config_derive(&c, "test", &e) == 0, "%s", e.message);
    nd_param_set ps;
    if (nd_init_params(&c, 2, &ps, &e)) {
        CHECKF(0, "%s", e.message);
        return;
    }
    const char *path = "/tmp/needle_test_ckpt_v3_order.safetensors";
    CHECKF(nd_param_set_write(&ps, &c, path, &e) == 0, "%s", e.message);
    nd_param_set_free(&ps);
    nd_weights w;
    if (nd_weights_load(path, &w, &e)) {
        CHECKF(0, "%s", e.message);
        return;
    }
    CHECK(w.cfg.num_ladder_order == 5 && w.cfg.ladder_order[1] == 4);
    const float *l1 = w.layers[1].norm_in, *l4 = w.layers[4].norm_in;
    float *block = NULL;
    CHECKF(nd_weights_ladder(NULL, &w, 3, &block, &e) == 0, "%s", e.message);
    /* bisection would keep 0, 2, 4; the saved order keeps 0, 1, 4 */
    CHECK(w.cfg.num_layers == 3 && w.layers[1].norm_in == l1 && w.layers[2].norm_in == l4);
    CHECK(w.cfg.num_ladder_order == 3 && w.cfg.ladder_order[0] == 0 && w.cfg.ladder_order[1] == 2 &&
          w.cfg.ladder_order[2] == 1);
    /* sites (1, 2) -> (1); global layers (2, 4) -> (2) */
    CHECK(w.cfg.num_sites == 1 && w.cfg.engram_layers[0] == 1 && w.cfg.global_mask == 1ull << 2);
    char *json = nd_config_to_reference_json(&w.cfg);
    CHECKF(json && strstr(json, "\"ladder_order\": [0, 2, 1]"), "%s", json ? json : "(null)");
    free(json);
    free(block);
    nd_weights_free(&w);
    remove(path);
    CHECK(nd_config_set(&c, "ladder_order=0,4,1,2,2", &e) == 0);
    CHECK(nd_config_derive(&c, "test", &e) != 0 && strstr(e.message, "ladder_order"));
}

int main(void)
{
    RUN(test_rung_follows_saved_ladder_order);
    RUN(test_width_ladder_refused);
    RUN(test_build_with_the_heads_present);
    RUN(test_init_v3_layout_and_values);
    RUN(test_config_from_metadata);
    RUN(test_every_parameter_matches_the_reference_export);
    RUN(test_left_out_parameters_come_from_the_table);
    RUN(test_missing_tensor_named);
    return check_summary();
}
