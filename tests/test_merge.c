/* test_merge.c - `needle build --lora`: folding an adapter into the float
 * weights gives the logits of the LoRA training forward, and the merged .cact
 * is as close to the merged float model as a plain .cact is to its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/rng.h"
#include "model/cact/cact.h"
#include "io/spm_model.h"
#include "model/model.h"
#include "model/weights.h"
#include "train/merge.h"
#include "train/train_ckpt.h"
#include "train/train_model.h"

#define GOLDEN "tests/golden/"
#define ADAPTER "build-tmp-test-merge-adapter.safetensors"
enum { T = 24 };

static int ids_of(int t) { return 2 + ((t * 131 + 7) % 4000) + 14 * (t > 0); }

/* Logits of every position from the inference forward (float KV). */
static int infer_logits(const nd_weights *w, const char *path, float *out)
{
    needle_error err;
    nd_model *m = NULL;
    nd_model_options mo = {.threads = 1, .acts = NEEDLE_ACTS_FLOAT}; /* the trainer's forward is float */
    int rc = path ? nd_model_open(path, &mo, &m, &err) : nd_model_create(w, &mo, &m, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return rc;
    nd_state *s = NULL;
    nd_state_options so = {0};
    so.window = T;
    so.max_chunk = T;
    rc = nd_state_create(m, &so, &s, &err);
    CHECKF(rc == 0, "%s", err.message);
    int tok[T];
    uint8_t want[T];
    for (int t = 0; t < T; t++) { tok[t] = ids_of(t); want[t] = 1; }
    if (!rc) rc = nd_state_eval(s, tok, T, want, out, NULL, &err);
    CHECKF(rc == 0, "%s", err.message);
    nd_state_free(s);
    nd_model_free(m);
    return rc;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* Train-forward logits of the tiny model with a random (non-identity) adapter,
 * which is saved to ADAPTER. */
static int lora_reference(float *ref, int V)
{
    nd_train_model m;
    needle_error err;
    int rc = nd_train_model_load(&m, GOLDEN "tiny.safetensors", NULL, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return rc;
    rc = nd_train_lora_create(&m, 4, 8.0f, 7, &err);
    CHECK(rc == 0);
    /* B = 0 at init would make the merge a no-op: give it values */
    nd_rng r;
    nd_rng_seed(&r, 99);
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, out;
        nd_train_lora_dims(&m, t, &in, &out);
        nd_rng_fill_normal(&r, m.lora + m.lora_b_off[t], (size_t)m.cfg.num_layers * 4 * out, 0.0f, 0.05f);
    }
    int32_t ids[T];
    for (int t = 0; t < T; t++) ids[t] = ids_of(t);
    if (!rc) rc = nd_train_forward(&m, ids, 1, T, &err);
    for (int t = 0; !rc && t < T; t++) nd_train_logits_row(&m, t, ref + (size_t)t * V);
    if (!rc) rc = nd_train_save_lora(&m, ADAPTER, &err);
    CHECKF(rc == 0, "%s", err.message);
    nd_train_model_free(&m);
    return rc;
}

static void test_merge_matches_lora_forward_and_cact(void)
{
    int V = 8192;
    size_t n = (size_t)T * V;
    float *ref = malloc(sizeof(float) * n), *merged = malloc(sizeof(float) * n), *plain = malloc(sizeof(float) * n);
    float *cact_m = malloc(sizeof(float) * n), *cact_p = malloc(sizeof(float) * n);
    if (lora_reference(ref, V)) goto out;
    needle_error err;
    nd_weights w, w0;
    CHECK(nd_weights_load_safetensors(GOLDEN "tiny.safetensors", &w, &err) == 0);
    CHECK(nd_weights_load_safetensors(GOLDEN "tiny.safetensors", &w0, &err) == 0);
    int rc = nd_lora_merge(&w, ADAPTER, GOLDEN "tiny.safetensors", &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) goto out;
    CHECK(infer_logits(&w, NULL, merged) == 0);
    CHECK(infer_logits(&w0, NULL, plain) == 0);
    double d_merge = max_diff(merged, ref, n), d_plain = max_diff(plain, ref, n);
    printf("  merged float vs LoRA train forward: %.3g (unmerged: %.3g)\n", d_merge, d_plain);
    CHECKF(d_merge < 1e-4, "merged logits differ from the LoRA forward by %g", d_merge);
    CHECKF(d_plain > 1e-2, "the adapter should change the logits (by %g only)", d_plain);

    nd_vocab v;
    CHECK(nd_vocab_load_spm_file(GOLDEN "tok8k.model", &v, &err) == 0);
    CHECK(nd_cact_write("build-tmp-test-merge.cact", &w, &v, "default=4", NULL, &err) == 0);
    CHECK(nd_cact_write("build-tmp-test-plain.cact", &w0, &v, "default=4", NULL, &err) == 0);
    nd_vocab_free(&v);
    CHECK(infer_logits(NULL, "build-tmp-test-merge.cact", cact_m) == 0);
    CHECK(infer_logits(NULL, "build-tmp-test-plain.cact", cact_p) == 0);
    double q_merge = max_diff(cact_m, merged, n), q_plain = max_diff(cact_p, plain, n);
    printf("  4-bit .cact vs its float model: merged %.3g, unmerged %.3g\n", q_merge, q_plain);
    CHECKF(q_merge < 2.0 * q_plain + 1e-3, "merged .cact error %g vs unmerged %g", q_merge, q_plain);
    CHECKF(max_diff(cact_m, cact_p, n) > 1e-2, "the merged .cact should differ from the plain one");
    remove("build-tmp-test-merge.cact");
    remove("build-tmp-test-plain.cact");
    nd_weights_free(&w);
    nd_weights_free(&w0);
out:
    free(ref); free(merged); free(plain); free(cact_m); free(cact_p);
}

/* Wrong base, missing file, a truncated adapter: errors, and w unchanged. */
static void test_merge_rejects(void)
{
    needle_error err;
    nd_weights w;
    CHECK(nd_weights_load_safetensors(GOLDEN "tiny.safetensors", &w, &err) == 0);
    float before = w.layers[1].q_proj.f32[5];
    /* ADAPTER (from the test above) records the tiny base's checksum; the file
     * named as base must match it */
    CHECK(nd_lora_merge(&w, ADAPTER, GOLDEN "tiny_w4.cact", &err) != 0);
    CHECK(nd_lora_merge(&w, "build-tmp-no-such-adapter.safetensors", NULL, &err) != 0);
    CHECK(nd_lora_merge(&w, GOLDEN "tiny.safetensors", NULL, &err) != 0); /* not an adapter */
    FILE *f = fopen(ADAPTER, "rb");
    char *buf = malloc(1 << 20);
    size_t got = f ? fread(buf, 1, 1 << 20, f) : 0;
    if (f) fclose(f);
    for (size_t cut = 8; cut < got; cut += got / 7) {
        FILE *g = fopen("build-tmp-test-merge-cut.safetensors", "wb");
        fwrite(buf, 1, cut, g);
        fclose(g);
        CHECKF(nd_lora_merge(&w, "build-tmp-test-merge-cut.safetensors", NULL, &err) != 0, "cut at %zu", cut);
    }
    CHECK(w.layers[1].q_proj.f32[5] == before);
    /* a .cact base cannot be merged into */
    nd_weights wc;
    CHECK(nd_weights_load_cact(GOLDEN "tiny_w4.cact", &wc, &err) == 0);
    CHECK(nd_lora_merge(&wc, ADAPTER, NULL, &err) == NEEDLE_EUNSUPPORTED);
    nd_weights_free(&wc);
    free(buf);
    remove("build-tmp-test-merge-cut.safetensors");
    nd_weights_free(&w);
}

int main(void)
{
    RUN(test_merge_matches_lora_forward_and_cact);
    RUN(test_merge_rejects);
    remove(ADAPTER);
    return check_summary();
}
