/* test_heads_train.c - training the confidence and contrastive heads.
 *
 * The analytic gradients (probes through the attention pooling, the
 * projection, bias and log_temp) are held to central finite differences;
 * ECE to a hand-computed value; and a short run of `needle train-heads`'s
 * library entry on the golden tiny checkpoint must lower both losses and
 * write a checkpoint whose heads changed and whose body did not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "train/heads_train.h"

static void test_ece_by_hand(void)
{
    /* bin [0.1,0.2): p .15 .15, y 0 1 -> |0.5-0.15| = .35, weight 2/5
     * bin [0.9,1.0]: p .9 .95 1.0, y 1 1 1 -> |1-0.95| = .05, weight 3/5 */
    double p[] = {0.15, 0.15, 0.9, 0.95, 1.0};
    int y[] = {0, 1, 1, 1, 1};
    double e = nd_ece(p, y, 5, 10);
    CHECKF(fabs(e - (0.4 * 0.35 + 0.6 * 0.05)) < 1e-12, "ece %.12f", e);
    double q[] = {0.5, 0.5};
    int z[] = {1, 0};
    CHECK(fabs(nd_ece(q, z, 2, 10)) < 1e-12); /* perfectly calibrated */
    CHECK(isnan(nd_ece(q, z, 0, 10)));
}

static void random_cells(nd_rng *r, nd_cells *c, int n, int d)
{
    c->n = n;
    c->x = malloc(sizeof(float) * (size_t)n * d);
    nd_rng_fill_normal(r, c->x, (size_t)n * d, 0.0f, 1.0f);
}

/* Compare grad[i] with (L(w+h) - L(w-h)) / 2h for every parameter. */
static void check_gradient(nd_head_params *h, double (*loss)(nd_head_params *, float *), const char *what)
{
    float *g = calloc(h->n, sizeof(float));
    loss(h, g);
    int bad = 0;
    double worst = 0.0;
    for (size_t i = 0; i < h->n; i++) {
        float keep = h->flat[i];
        const float step = 1e-2f;
        h->flat[i] = keep + step;
        double lp = loss(h, NULL);
        h->flat[i] = keep - step;
        double lm = loss(h, NULL);
        h->flat[i] = keep;
        double num = (lp - lm) / (2 * step);
        double diff = fabs(num - g[i]), tol = 2e-3 + 2e-2 * fabs(num);
        if (diff > worst) worst = diff;
        if (diff > tol && bad++ < 5) fprintf(stderr, "  %s param %zu: analytic %.6g numeric %.6g\n", what, i, g[i], num);
    }
    CHECKF(bad == 0, "%s: %d gradients off (worst %.3g)", what, bad, worst);
    free(g);
}

static nd_cells g_cells[6], g_tools[3];
static int g_y[6] = {1, 0, 0, 1, 1, 0}, g_idx[6] = {0, 1, 2, 3, 4, 5}, g_tool_of[6] = {0, 1, 2, 0, 2, 1};

static double conf_loss_fn(nd_head_params *h, float *g) { return nd_conf_loss(h, g_cells, g_y, g_idx, 6, g, NULL); }
static double con_loss_fn(nd_head_params *h, float *g)
{
    return nd_contrastive_loss(h, g_cells, g_tools, g_tool_of, g_idx, 6, g, NULL);
}

static void test_gradients_match_finite_differences(void)
{
    nd_rng r;
    nd_rng_seed(&r, 7);
    const int d = 6;
    for (int i = 0; i < 6; i++) random_cells(&r, &g_cells[i], 5 + i, d);
    for (int i = 0; i < 3; i++) random_cells(&r, &g_tools[i], 4 + 2 * i, d);
    nd_head_params h;
    needle_error err = {0};
    CHECK(nd_head_params_alloc(&h, 3, d, 1, &err) == 0);
    nd_rng_fill_normal(&r, h.flat, h.n, 0.0f, 0.5f);
    *h.log_temp = 0.0f;
    /* the trainer zeroes the confidence head's log_temp gradient; the loss ignores it anyway */
    check_gradient(&h, conf_loss_fn, "confidence");
    nd_head_params_free(&h);
    CHECK(nd_head_params_alloc(&h, 2, d, 4, &err) == 0);
    nd_rng_fill_normal(&r, h.flat, h.n, 0.0f, 0.5f);
    *h.log_temp = 0.7f;
    check_gradient(&h, con_loss_fn, "contrastive");
    nd_head_params_free(&h);
    for (int i = 0; i < 6; i++) free(g_cells[i].x);
    for (int i = 0; i < 3; i++) free(g_tools[i].x);
}

static int tensors_equal(const nd_safetensors *a, const nd_safetensors *b, const char *name)
{
    const nd_st_tensor *x = nd_st_find(a, name), *y = nd_st_find(b, name);
    return x && y && x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes);
}

static void test_train_heads_on_tiny(void)
{
    char dir[] = "/tmp/needle_heads_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    char cmd[512], data[300], out[300];
    /* 20 rows (each decoded once to label the confidence head): 8 confidence and 14 contrastive
     * examples, above the 5 each the checks need; 40 cost twice the time under qemu-aarch64 */
    snprintf(cmd, sizeof cmd,
             "python3 tools/gen_data.py --out %s --train 20 --val 0 --test 0 --seed 5 --max-tools 3 --compact "
             ">/dev/null 2>&1",
             dir);
    CHECK(system(cmd) == 0);
    snprintf(data, sizeof data, "%s/train.jsonl", dir);
    snprintf(out, sizeof out, "%s/heads.safetensors", dir);
    nd_heads_train_options o = {.epochs = 20, .max_new_tokens = 96, .seed = 3};
    nd_heads_report rep;
    needle_error err = {0};
    int rc = nd_heads_train("tests/golden/tiny.safetensors", "tests/golden/tok8k.model", data, out, &o, &rep, &err);
    CHECKF(rc == 0, "%s", err.message);
    printf("    rows %d, confidence %d train / %d held (%d right): loss %.4f -> %.4f, held ECE %.3f -> %.3f\n",
           rep.rows, rep.conf_train, rep.conf_held, rep.conf_correct, rep.conf_loss_before, rep.conf_loss_after,
           rep.ece_before, rep.ece_after);
    printf("    contrastive %d pairs over %d tools: loss %.4f -> %.4f\n", rep.con_train, rep.con_tools,
           rep.con_loss_before, rep.con_loss_after);
    CHECK(rep.rows == 20);
    CHECK(rep.conf_train >= 5 && rep.con_train >= 5);
    CHECKF(rep.conf_loss_after < rep.conf_loss_before, "%.4f -> %.4f", rep.conf_loss_before, rep.conf_loss_after);
    CHECKF(rep.con_loss_after < rep.con_loss_before, "%.4f -> %.4f", rep.con_loss_before, rep.con_loss_after);
    CHECK(rep.ece_before >= 0 && rep.ece_before <= 1 && rep.ece_after >= 0 && rep.ece_after <= 1);

    /* the written checkpoint: loads, new heads, body untouched, metadata kept */
    nd_weights w;
    rc = nd_weights_load_safetensors(out, &w, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc == 0) {
        CHECK(w.confidence.present && w.contrastive.present);
        nd_weights_free(&w);
    }
    nd_safetensors a, b;
    CHECK(nd_st_open("tests/golden/tiny.safetensors", &a, &err) == 0);
    CHECK(nd_st_open(out, &b, &err) == 0);
    CHECK(a.count == b.count);
    CHECK(tensors_equal(&a, &b, "embedding.embedding"));
    CHECK(tensors_equal(&a, &b, "stack.layers.block.self_attn.q_proj.kernel"));
    CHECK(!tensors_equal(&a, &b, "confidence_head.probes"));
    CHECK(!tensors_equal(&a, &b, "confidence_head.proj.kernel"));
    CHECK(!tensors_equal(&a, &b, "contrastive_head.proj.kernel"));
    CHECK(nd_st_meta(&b, "config") && !strcmp(nd_st_meta(&a, "config"), nd_st_meta(&b, "config")));
    const nd_st_tensor *lt_a = nd_st_find(&a, "contrastive_head.log_temp"), *lt_b = nd_st_find(&b, "contrastive_head.log_temp");
    CHECK(lt_a && lt_b && lt_a->ndim == lt_b->ndim);
    nd_st_close(&a);
    nd_st_close(&b);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
    RUN(test_ece_by_hand);
    RUN(test_gradients_match_finite_differences);
    RUN(test_train_heads_on_tiny);
    return check_summary();
}
