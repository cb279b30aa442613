/* test_config.c - model config (SPEC sections 2 and 5), presets, overrides,
 * and the reference initialisation written by `needle init`.
 *
 * Expected numbers come from the SPEC (704 for the base window), from
 * tests/golden/tiny.json (effective_kv_window, config) and from
 * tests/golden/tiny.safetensors (tensor names and shapes).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/file.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/init.h"
#include "model/weights.h"

static void test_defaults(void)
{
    nd_config c;
    nd_config_defaults(&c);
    CHECK(c.vocab_size == 8192 && c.d_model == 512 && c.num_heads == 8 && c.num_kv_heads == 4);
    CHECK(c.num_layers == 12 && c.max_seq_len == 2048 && c.rope_theta == 100000.0f);
    CHECK(c.num_orders == 2 && c.engram_orders[0] == 2 && c.engram_orders[1] == 3);
    CHECK(c.engram_slots == 8192 && c.num_sites == 2 && c.engram_layers[0] == 2 && c.engram_layers[1] == 15);
    CHECK(c.mhc_lanes == 4 && c.kv_window == 0 && c.kv_bits == 8 && c.act_bits == 8 && c.contrastive_dim == 128);
    CHECK(c.weight_bits[0] == '\0' && c.engram_heads == 0);
    /* derived: hd 64, KV 256, N_h 512, h_e = max(1, 512 // 256) = 2, T_e 4, sub 128, D 3 */
    CHECK(c.attn_dim == 512 && c.head_dim == 64 && c.kv_dim == 256 && c.hada_n == 512);
    CHECK(c.engram_heads_eff == 2 && c.num_tables == 4 && c.engram_sub == 128 && c.conv_dilation == 3);
}

static void test_base_preset_window(void)
{
    nd_config c;
    needle_error err;
    CHECKF(nd_config_preset(&c, "base", &err) == 0, "%s", err.message);
    CHECK(c.num_layers == 27 && c.d_model == 512 && c.engram_layers[1] == 15 && c.engram_slots == 8192);
    CHECKF(nd_config_budget_window(&c) == 704, "window %d", nd_config_budget_window(&c)); /* SPEC section 5 */
    CHECK(nd_config_effective_window(&c) == 704);
    c.kv_window = 256;
    CHECK(nd_config_effective_window(&c) == 256);
    CHECK(nd_config_preset(&c, "huge", &err) == NEEDLE_EINVAL);
}

static void test_tiny_matches_golden(void)
{
    char *text = NULL;
    size_t len = 0;
    needle_error err;
    CHECKF(nd_read_file("tests/golden/tiny.json", &text, &len, &err) == 0, "%s", err.message);
    if (!text) return;
    nd_json *doc = NULL;
    CHECKF(nd_json_parse(text, len, "tiny.json", &doc, &err) == 0, "%s", err.message);
    free(text);
    if (!doc) return;
    const nd_json *gcfg = nd_json_get(doc, "config");
    const nd_json *win = nd_json_get(doc, "effective_kv_window");
    CHECK(gcfg && win && win->num == 512.0);
    /* the golden config (with its extra keys dtype/flash/remat) parses ... */
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, gcfg, 1);
    nd_config g, t;
    CHECKF(nd_config_from_json(&g, b.data, b.len, "tiny.json", &err) == 0, "%s", err.message);
    CHECK(nd_config_effective_window(&g) == (int)win->num);
    /* ... and equals the tiny preset field by field (as JSON values) */
    CHECK(nd_config_preset(&t, "tiny", &err) == 0);
    char *tj = nd_config_to_json(&t);
    nd_json *tdoc = NULL;
    CHECK(tj && nd_json_parse(tj, strlen(tj), "to_json", &tdoc, &err) == 0);
    for (size_t i = 0; tdoc && i < tdoc->count; i++) {
        const nd_json *gv = nd_json_get(gcfg, tdoc->keys[i]);
        CHECKF(gv && nd_json_equal(gv, &tdoc->items[i]), "field %s differs from the golden config", tdoc->keys[i]);
    }
    /* every golden field the engine reads is written by to_json */
    static const char *const known[] = {"vocab_size", "d_model", "attn_dim", "num_heads", "num_kv_heads",
                                        "num_layers", "max_seq_len", "pad_token_id", "contrastive_dim",
                                        "rope_theta", "engram_orders", "engram_heads", "engram_slots",
                                        "engram_layers", "mhc_lanes", "kv_window", "kv_bits", "act_bits",
                                        "weight_bits"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        CHECKF(nd_json_get(tdoc, known[i]) != NULL, "to_json lacks %s", known[i]);
    CHECK(memcmp(&g, &t, sizeof g) == 0);
    nd_json_free(tdoc);
    free(tj);
    nd_buf_free(&b);
    nd_json_free(doc);
}

static void test_to_json_round_trip(void)
{
    nd_config a, b;
    needle_error err;
    CHECK(nd_config_preset(&a, "tiny", &err) == 0);
    a.rope_theta = 12345.5f;
    a.kv_window = 96;
    a.engram_orders[2] = 4;
    a.num_orders = 3;
    strcpy(a.weight_bits, "default=4,embedding=3 \"q\"");
    CHECK(nd_config_derive(&a, "t", &err) == 0);
    char *j = nd_config_to_json(&a);
    CHECK(j != NULL);
    CHECKF(j && nd_config_from_json(&b, j, strlen(j), "t", &err) == 0, "%s", err.message);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    free(j);
}

static void test_from_json_errors(void)
{
    static const struct {
        const char *json;
        const char *needle;
    } bad[] = {
        {"[]", "not a JSON object"},
        {"{\"d_model\": \"128\"}", "d_model"},
        {"{\"d_model\": 12.5}", "d_model"},
        {"{\"d_model\": 1e12}", "d_model"},
        {"{\"d_model\": 0}", "d_model"},
        {"{\"num_heads\": 3, \"num_layers\": 16}", "divisible"},
        {"{\"num_kv_heads\": 3, \"num_layers\": 16}", "divisible"},
        {"{\"engram_orders\": 2, \"num_layers\": 16}", "engram_orders"},
        {"{\"engram_orders\": [], \"num_layers\": 16}", "num_orders"},
        {"{\"engram_orders\": [2,3,4,5,6], \"num_layers\": 16}", "engram_orders"},
        {"{\"engram_orders\": [0], \"num_layers\": 16}", "engram_orders[0]"},
        {"{\"num_layers\": 12}", "engram_layers[1] = 15"},
        {"{\"engram_layers\": [1,1], \"num_layers\": 4}", "twice"},
        {"{\"weight_bits\": 4, \"num_layers\": 16}", "weight_bits"},
        {"{\"rope_theta\": -1, \"num_layers\": 16}", "rope_theta"},
        {"{\"vocab_size\": 4000000, \"d_model\": 1024, \"num_layers\": 16}", "2^31"},
        {"{\"d_model\": 130, \"num_heads\": 10, \"num_kv_heads\": 5, \"num_layers\": 16}", "even"},
        {"{\"num_layers\": 16,}", "trailing comma"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nd_config c;
        needle_error err = {0, ""};
        int rc = nd_config_from_json(&c, bad[i].json, strlen(bad[i].json), "cfg.json", &err);
        CHECKF(rc != 0 && strstr(err.message, bad[i].needle) && strncmp(err.message, "cfg.json", 8) == 0,
               "case %zu: rc %d <%s> lacks <%s>", i, rc, err.message, bad[i].needle);
    }
    /* unknown keys are ignored, missing ones keep defaults, null weight_bits is "" */
    nd_config c;
    needle_error err;
    const char *ok = "{\"num_layers\": 16, \"remat\": true, \"future\": {\"x\": [1]}, \"weight_bits\": null}";
    CHECKF(nd_config_from_json(&c, ok, strlen(ok), "ok", &err) == 0, "%s", err.message);
    CHECK(c.num_layers == 16 && c.d_model == 512 && c.attn_dim == 512);
}

static void test_set_overrides(void)
{
    nd_config c;
    needle_error err;
    CHECK(nd_config_preset(&c, "base", &err) == 0);
    /* passes through an inconsistent state (sites 2,15 with 4 layers) */
    CHECKF(nd_config_set(&c, "num_layers=4", &err) == 0, "%s", err.message);
    CHECK(nd_config_set(&c, "engram_layers=1,3", &err) == 0);
    CHECK(nd_config_set(&c, "engram_orders=[2,3,4]", &err) == 0);
    CHECK(nd_config_set(&c, "rope_theta=1e4", &err) == 0);
    CHECK(nd_config_set(&c, "weight_bits=default=4,embedding=3", &err) == 0);
    CHECK(nd_config_set(&c, "kv_window=128", &err) == 0);
    CHECKF(nd_config_derive(&c, "t", &err) == 0, "%s", err.message);
    CHECK(c.num_layers == 4 && c.num_sites == 2 && c.engram_layers[1] == 3 && c.num_orders == 3);
    CHECK(c.rope_theta == 10000.0f && strcmp(c.weight_bits, "default=4,embedding=3") == 0 && c.kv_window == 128);
    CHECK(c.conv_dilation == 4 && c.engram_heads_eff == 1 && c.num_tables == 3 && c.engram_sub == 170);
    /* attn_dim follows d_model while it is the automatic value */
    CHECK(nd_config_set(&c, "d_model=256", &err) == 0 && c.attn_dim == 256);
    CHECK(nd_config_set(&c, "attn_dim=128", &err) == 0 && nd_config_set(&c, "d_model=512", &err) == 0);
    CHECK(c.attn_dim == 128 && nd_config_derive(&c, "t", &err) == 0 && c.head_dim == 16);
    nd_config before = c;
    CHECK(nd_config_set(&c, "no_such_key=1", &err) == NEEDLE_EINVAL && strstr(err.message, "no_such_key"));
    CHECK(nd_config_set(&c, "d_model=abc", &err) == NEEDLE_EINVAL);
    CHECK(nd_config_set(&c, "d_model=1.5", &err) != 0);
    CHECK(nd_config_set(&c, "novalue", &err) == NEEDLE_EINVAL);
    CHECK(memcmp(&before, &c, sizeof c) == 0); /* failed overrides change nothing */
}

/* ---------------------------------------------------------------- init */

static char tmp_path[256];
static const char *tmp_file(const char *tag)
{
    snprintf(tmp_path, sizeof tmp_path, "/tmp/needle_test_cfg_%ld_%s.safetensors", (long)getpid(), tag);
    return tmp_path;
}

static void test_init_names_shapes_match_golden(void)
{
    nd_config c;
    needle_error err;
    nd_param_set ps;
    CHECK(nd_config_preset(&c, "tiny", &err) == 0);
    CHECKF(nd_init_params(&c, 0, &ps, &err) == 0, "%s", err.message);
    nd_safetensors g;
    CHECK(nd_st_open("tests/golden/tiny.safetensors", &g, &err) == 0);
    CHECKF(ps.count == g.count, "init makes %zu tensors, golden has %zu", ps.count, g.count);
    size_t golden_params = 0;
    for (size_t i = 0; i < g.count; i++) {
        const nd_st_tensor *t = &g.tensors[i];
        golden_params += t->numel;
        const nd_param *p = nd_param_find(&ps, t->name);
        CHECKF(p != NULL, "init lacks %s", t->name);
        if (!p) continue;
        int same = p->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = p->shape[d] == t->shape[d];
        CHECKF(same, "%s: shape differs from golden", t->name);
    }
    CHECK(ps.total == golden_params);
    nd_st_close(&g);
    nd_param_set_free(&ps);
}

static double mean_sq(const nd_param *p)
{
    double s = 0;
    for (size_t i = 0; i < p->numel; i++) s += (double)p->data[i] * p->data[i];
    return s / (double)p->numel;
}

static void test_init_values(void)
{
    nd_config c;
    needle_error err;
    nd_param_set ps;
    CHECK(nd_config_preset(&c, "tiny", &err) == 0);
    CHECK(nd_init_params(&c, 42, &ps, &err) == 0);
    const nd_param *p;
    p = nd_param_find(&ps, "stack.layers.block.self_attn.q_proj.kernel"); /* 65536 draws */
    CHECKF(p && fabs(sqrt(mean_sq(p)) - 0.02) < 0.0005, "q std %g", p ? sqrt(mean_sq(p)) : -1.0);
    p = nd_param_find(&ps, "stack.layers.block.self_attn.out_proj.kernel"); /* 0.02/sqrt(8) */
    CHECKF(p && fabs(sqrt(mean_sq(p)) - 0.02 / sqrt(8.0)) < 0.0003, "out std %g", p ? sqrt(mean_sq(p)) : -1.0);
    p = nd_param_find(&ps, "engrams_1.value_proj.kernel");
    CHECKF(p && fabs(sqrt(mean_sq(p)) - 0.02 / sqrt(8.0)) < 0.0003, "value std %g", p ? sqrt(mean_sq(p)) : -1.0);
    p = nd_param_find(&ps, "embedding.embedding");
    CHECKF(p && fabs(sqrt(mean_sq(p)) - 0.02) < 0.0002, "emb std %g", p ? sqrt(mean_sq(p)) : -1.0);
    p = nd_param_find(&ps, "stack.layers.block.ZCRMSNorm_0.scale");
    CHECK(p && mean_sq(p) == 0.0);
    p = nd_param_find(&ps, "stack.final_norm.scale");
    CHECK(p && mean_sq(p) == 0.0);
    p = nd_param_find(&ps, "stack.layers.block.hadamard_mlp.d1");
    CHECK(p && p->data[0] == 1.0f && p->data[p->numel - 1] == 1.0f);
    p = nd_param_find(&ps, "stack.layers.block.hadamard_mlp.d3");
    CHECK(p && p->data[5] == 0.02f);
    p = nd_param_find(&ps, "stack.mhc_b_res"); /* (4,4,4): 4*I per layer */
    if (p)
        for (int l = 0; l < 4; l++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) CHECK(p->data[l * 16 + i * 4 + j] == (i == j ? 4.0f : 0.0f));
    p = nd_param_find(&ps, "stack.mhc_a_post");
    CHECK(p && p->data[3] == 0.01f);
    p = nd_param_find(&ps, "stack.mhc_b_pre");
    CHECK(p && mean_sq(p) == 0.0);
    p = nd_param_find(&ps, "engrams_0.taps"); /* (4, d): row 0 ones */
    if (p)
        for (int r = 0; r < 4; r++)
            for (int k = 0; k < 128; k += 17) CHECK(p->data[r * 128 + k] == (r == 0 ? 1.0f : 0.0f));
    p = nd_param_find(&ps, "contrastive_head.log_temp");
    CHECK(p && p->numel == 1 && p->data[0] == 0.0f);
    nd_param_set_free(&ps);
}

static void test_init_deterministic_and_loadable(void)
{
    nd_config c;
    needle_error err;
    CHECK(nd_config_preset(&c, "tiny", &err) == 0);
    nd_param_set a, b, d;
    CHECK(nd_init_params(&c, 7, &a, &err) == 0);
    CHECK(nd_init_params(&c, 7, &b, &err) == 0);
    CHECK(nd_init_params(&c, 8, &d, &err) == 0);
    CHECK(a.total == b.total && memcmp(a.block, b.block, a.total * sizeof(float)) == 0);
    CHECK(memcmp(a.block, d.block, a.total * sizeof(float)) != 0);
    /* independent per-tensor streams: two kernels are not copies of each other */
    const nd_param *q = nd_param_find(&a, "stack.layers.block.self_attn.q_proj.kernel");
    const nd_param *g = nd_param_find(&a, "stack.layers.block.self_attn.gate_proj.kernel");
    CHECK(q && g && q->data[0] != g->data[0]);
    const char *path = tmp_file("init");
    CHECKF(nd_param_set_write(&a, &c, path, &err) == 0, "%s", err.message);
    nd_weights w;
    CHECKF(nd_weights_load(path, &w, &err) == 0, "%s", err.message);
    if (!err.code || w.layers) {
        CHECK(memcmp(&w.cfg, &c, sizeof c) == 0); /* config round-trips through __metadata__ */
        /* kernel [in=3, out=10] of layer 1 appears transposed at [10, 3] */
        CHECK(w.layers[1].q_proj.f32[10 * 128 + 3] == q->data[1 * 128 * 128 + 3 * 128 + 10]);
        CHECK(w.layers[2].b_res[5] == 4.0f && w.sites[0].taps[0] == 1.0f && w.layers[0].a_res == 0.01f);
        nd_weights_free(&w);
    }
    unlink(path);
    nd_param_set_free(&a);
    nd_param_set_free(&b);
    nd_param_set_free(&d);
}

static void test_base_param_count(void)
{
    /* SPEC: the released base geometry is ~45M parameters */
    nd_config c;
    needle_error err;
    nd_param_set ps;
    CHECK(nd_config_preset(&c, "base", &err) == 0);
    CHECK(nd_init_params(&c, 1, &ps, &err) == 0);
    CHECKF(ps.total > 40000000 && ps.total < 47000000, "base has %zu params", ps.total);
    const nd_param *p = nd_param_find(&ps, "engrams_1.embedding");
    CHECK(p && p->shape[0] == 4 && p->shape[1] == 8192 && p->shape[2] == 128);
    nd_param_set_free(&ps);
}

int main(void)
{
    RUN(test_defaults);
    RUN(test_base_preset_window);
    RUN(test_tiny_matches_golden);
    RUN(test_to_json_round_trip);
    RUN(test_from_json_errors);
    RUN(test_set_overrides);
    RUN(test_init_names_shapes_match_golden);
    RUN(test_init_values);
    RUN(test_init_deterministic_and_loadable);
    RUN(test_base_param_count);
    return check_summary();
}
