/* test_params.c - the parameter table (model/params.def) is self-consistent
 * and drives the .cact layout, the bits map and the LoRA targets. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/cact/cact.h"
#include "model/bits_map.h"
#include "model/params.h"

static void tiny(nd_config *c, int layers, int sites, int lanes)
{
    nd_config_defaults(c);
    c->vocab_size = 50;
    c->d_model = 48;
    c->attn_dim = 48;
    c->num_heads = 4;
    c->num_kv_heads = 2;
    c->num_layers = layers;
    c->num_sites = sites;
    for (int s = 0; s < sites; s++) c->engram_layers[s] = s;
    c->mhc_lanes = lanes;
    c->engram_slots = 16;
    c->contrastive_dim = 8;
    needle_error err;
    CHECKF(nd_config_derive(c, "tiny", &err) == 0, "%s", err.message);
}

/* Every line: the engine's elements equal the checkpoint's per instance,
 * matrices name both dimensions, names carry the placeholder their scope needs. */
static void test_lines_consistent(void)
{
    nd_config c;
    tiny(&c, 3, 2, 4);
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        CHECKF(p->role == (nd_param_role)i, "%s: role %d at index %d", p->field_name, p->role, i);
        int heads = p->scope == ND_SCOPE_HEAD ? nd_head_kinds(&c) : 1;
        for (int k = 0; k < heads; k++) {
            int head = p->scope == ND_SCOPE_HEAD ? k : -1;
            int64_t shape[4], ck = 1;
            int nd = nd_param_ckpt_shape(p, &c, head, shape);
            for (int d = p->scope == ND_SCOPE_LAYER ? 1 : 0; d < nd; d++) ck *= shape[d];
            CHECKF(ck == nd_param_elems(p, &c, head), "%s: checkpoint %lld elements, engine %lld", p->field_name,
                   (long long)ck, (long long)nd_param_elems(p, &c, head));
        }
        if (p->kind == ND_KIND_MATRIX) CHECKF(p->rows != ND_DIM_NONE && p->cols != ND_DIM_NONE, "%s", p->field_name);
        CHECKF(!p->stacked || p->scope == ND_SCOPE_LAYER, "%s: only layer lines stack", p->field_name);
        CHECKF((strstr(p->ckpt, "%d") != NULL) == (p->scope == ND_SCOPE_SITE), "%s: %%d in the name", p->field_name);
        CHECKF((strstr(p->ckpt, "%s") != NULL) == (p->scope == ND_SCOPE_HEAD), "%s: %%s in the name", p->field_name);
        CHECKF(!p->cq || p->kind == ND_KIND_MATRIX, "%s: only matrices are CQ", p->field_name);
    }
}

/* Each LoRA target 1..ND_LORA_TARGETS is exactly one per-layer matrix. */
static void test_lora_targets(void)
{
    for (int t = 1; t <= ND_LORA_TARGETS; t++) {
        int found = 0;
        for (int i = 0; i < ND_P_COUNT; i++)
            if (nd_params[i].lora == t) {
                found++;
                CHECK(nd_params[i].scope == ND_SCOPE_LAYER && nd_params[i].kind == ND_KIND_MATRIX);
            }
        CHECKF(found == 1, "target %d: %d lines", t, found);
    }
}

/* The layout the table produces has SPEC section 8's count: 1 + 14 L + 9 +
 * 4 S + 1 (+ 1 + 3 per head) + 1, in its order. */
static void test_layout_counts(void)
{
    for (int L = 1; L <= 4; L++)
        for (int S = 0; S <= L && S <= ND_MAX_SITES; S++)
            for (int H = 0; H <= 2; H++) {
                nd_config c;
                tiny(&c, L, S, 3);
                nd_cact_head_shape heads[2] = {{ND_HEAD_CONTRASTIVE, 4, 8, 0}, {ND_HEAD_CONFIDENCE, 8, 1, 0}};
                nd_cact_slot *slots = NULL;
                int n = 0;
                needle_error err;
                CHECKF(nd_cact_layout(&c, heads, H, &slots, &n, &err) == 0, "%s", err.message);
                int want = 1 + 14 * L + 9 + 4 * S + 1 + (H ? 1 + 3 * H : 0) + 1;
                CHECKF(n == want, "L %d S %d H %d: %d slots, expected %d", L, S, H, n, want);
                if (n == want) {
                    CHECK(slots[0].role == ND_P_EMBEDDING && !strcmp(slots[0].name, "embedding"));
                    CHECK(slots[1].role == ND_P_NORM_IN && slots[1].layer == 0);
                    CHECK(slots[14 * L + 1].role == ND_P_A_PRE && slots[14 * L + 1].shape[0] == (uint32_t)L);
                    CHECK(slots[14 * L].role == ND_P_D3 && slots[14 * L].layer == L - 1);
                    CHECK(slots[n - 1].role == ND_SLOT_TOKENIZER);
                    if (H) CHECK(slots[14 * L + 10 + 4 * S + 1].role == ND_SLOT_MANIFEST);
                }
                free(slots);
            }
}

/* The bits map accepts the table's CQ names (and prefixes) and nothing else. */
static void test_bits_map_keys(void)
{
    static const char *const good[] = {"default=4,embedding=3", "default=4,attn.q_proj=2", "default=4,attn=2",
                                       "default=4,mhc_phi_res=2", "default=4,engram12.tables=1.58",
                                       "default=4,engram0.key=3", "default=4,engram=2", "default=4,e=2"};
    static const char *const bad[] = {"default=4,attn.qproj=2", "default=4,engramX.tables=2", "default=4,norm_in=2",
                                      "default=4,engram1.tablesX=2", "default=4,mlp.d1=2"};
    nd_bits_map m;
    needle_error err;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECKF(nd_bits_map_parse(good[i], &m, &err) == 0, "%s: %s", good[i], err.message);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECKF(nd_bits_map_parse(bad[i], &m, &err) != 0, "%s", bad[i]);
}

int main(void)
{
    RUN(test_lines_consistent);
    RUN(test_lora_targets);
    RUN(test_layout_counts);
    RUN(test_bits_map_keys);
    return check_summary();
}
