/* test_lazy_heads.c - a .cact loaded for inference (nd_weights_load_lazy_heads,
 * what nd_model_open uses) widens its heads' float tensors only when a head
 * first runs: before that they are still zero (the block is untouched), after
 * nd_weights_heads_ready they equal an eager load's bit for bit, and the
 * head outputs through a model are the same as through an eager load. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/heads.h"
#include "model/model.h"
#include "model/weights.h"

#define MODEL "tests/golden/tiny_w4.cact"

static void test_widened_on_first_use(void)
{
    nd_weights eager, lazy;
    needle_error e = {0};
    CHECKF(nd_weights_load(MODEL, &eager, &e) == 0, "%s", e.message);
    CHECKF(nd_weights_load_lazy_heads(MODEL, &lazy, &e) == 0, "%s", e.message);
    const nd_head_weights *he = &eager.contrastive, *hl = &lazy.contrastive;
    CHECK(he->present && hl->present && lazy.lazy_heads != NULL && eager.lazy_heads == NULL);
    if (!he->present || !hl->present) goto out;
    size_t n = (size_t)hl->proj.rows * (size_t)hl->proj.cols, pn = (size_t)hl->num_probes * lazy.cfg.d_model;
    CHECK(hl->proj.kind == ND_MAT_F32 && hl->proj.f32 != NULL && n > 0);
    int zero = 1, any_nonzero = 0;
    for (size_t i = 0; i < n; i++) zero &= hl->proj.f32[i] == 0.0f;
    for (size_t i = 0; i < n; i++) any_nonzero |= he->proj.f32[i] != 0.0f;
    CHECKF(zero && any_nonzero, "before first use the lazy projection is %s", zero ? "zero" : "already widened");
    nd_weights_heads_ready(&lazy);
    nd_weights_heads_ready(&lazy); /* a second call is a no-op */
    CHECK(memcmp(hl->proj.f32, he->proj.f32, n * sizeof(float)) == 0);
    CHECK(memcmp(hl->probes, he->probes, pn * sizeof(float)) == 0);
    CHECK(memcmp(lazy.confidence.proj.f32, eager.confidence.proj.f32,
                 (size_t)eager.confidence.proj.rows * (size_t)eager.confidence.proj.cols * sizeof(float)) == 0);
    /* the body's own vectors were widened at load either way */
    CHECK(memcmp(lazy.final_norm, eager.final_norm, (size_t)lazy.cfg.d_model * sizeof(float)) == 0);
out:
    nd_weights_free(&lazy);
    nd_weights_free(&eager);
}

/* The heads through a model opened lazily equal those through a model created eagerly. */
static void test_model_heads_match_eager(void)
{
    nd_model_options o = {.threads = 1};
    needle_error e = {0};
    nd_model *ml = NULL, *me = NULL;
    nd_weights w;
    CHECKF(nd_model_open(MODEL, &o, &ml, &e) == 0, "%s", e.message);
    CHECKF(nd_weights_load(MODEL, &w, &e) == 0, "%s", e.message);
    CHECKF(nd_model_create(&w, &o, &me, &e) == 0, "%s", e.message);
    if (!ml || !me) return;
    const nd_config *c = &ml->weights.cfg;
    int ids[6] = {1, 40, 77, 123, 9, 300}, T = 6, ncell = T * (c->num_layers + 1);
    float *cells = malloc(sizeof(float) * (size_t)ncell * (size_t)c->d_model);
    float *lg = malloc(sizeof(float) * (size_t)c->vocab_size);
    nd_state *s = NULL;
    CHECK(nd_state_create(ml, NULL, &s, &e) == 0);
    CHECKF(nd_state_eval(s, ids, T, NULL, lg, cells, &e) == 0, "%s", e.message);
    float a[1024], b[1024], ca = 0, cb = 0;
    CHECKF(nd_head_contrastive(ml, cells, ncell, a, &e) == 0, "%s", e.message);
    CHECKF(nd_head_contrastive(me, cells, ncell, b, &e) == 0, "%s", e.message);
    CHECK(memcmp(a, b, sizeof(float) * (size_t)ml->weights.contrastive.out_dim) == 0);
    CHECKF(nd_head_confidence(ml, cells, ncell, &ca, &e) == 0, "%s", e.message);
    CHECKF(nd_head_confidence(me, cells, ncell, &cb, &e) == 0, "%s", e.message);
    CHECK(ca == cb);
    nd_state_free(s);
    free(cells);
    free(lg);
    nd_model_free(ml);
    nd_model_free(me);
    nd_weights_free(&w);
}

int main(void)
{
    RUN(test_widened_on_first_use);
    RUN(test_model_heads_match_eager);
    return check_summary();
}
