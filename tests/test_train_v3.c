/* test_train_v3.c - fine-tuning a tiny Needle 3 model with the reference's
 * v3 recipe (LoRA on q, k, v, gate, out; rank 16, alpha 32; AdamW + clip +
 * warmup-cosine; power-of-two length buckets) on a small JSONL whose rows
 * come in both data formats (local {query, tools, answers} and the platform
 * chat {messages, tools} with OpenAI tool_calls): the training and the
 * validation loss go down.  Also: the chat format reads to exactly the ids of
 * the equivalent local row, and bad chat rows are refused with a reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/config.h"
#include "text/tokenizer.h"
#include "train/data.h"
#include "train/trainer.h"
#include "train/train_model.h"

#define GOLDEN "tests/golden/"

static const char *TOOLS =
    "[{\"name\":\"set_lights\",\"description\":\"Turn lights on or off\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"room\":{\"type\":\"string\"},\"on\":{\"type\":\"boolean\"}},\"required\":[\"room\",\"on\"]}},"
    "{\"name\":\"lock_door\",\"description\":\"Lock a door\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"door\":{\"type\":\"string\"}},\"required\":[\"door\"]}}]";

/* The same tools in OpenAI form. */
static void openai_tools(char *out, size_t n)
{
    snprintf(out, n,
             "[{\"type\":\"function\",\"function\":{\"name\":\"set_lights\",\"description\":\"Turn lights on or off\","
             "\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},\"on\":{\"type\":"
             "\"boolean\"}},\"required\":[\"room\",\"on\"]}}},{\"type\":\"function\",\"function\":{\"name\":"
             "\"lock_door\",\"description\":\"Lock a door\",\"parameters\":{\"type\":\"object\",\"properties\":"
             "{\"door\":{\"type\":\"string\"}},\"required\":[\"door\"]}}}]");
}

static void test_chat_format_equals_local_row(void)
{
    nd_tokenizer *tok = NULL;
    needle_error err;
    CHECK(nd_tokenizer_load_spm(GOLDEN "tok8k.model", &tok, &err) == 0);
    char oa[2048], local[4096], chat[4096];
    openai_tools(oa, sizeof oa);
    snprintf(local, sizeof local,
             "{\"query\":\"turn off the kitchen lights\",\"system\":\"Be brief.\",\"tools\":%s,\"answers\":"
             "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"on\":false}}]}", TOOLS);
    /* arguments as an OpenAI JSON string, system turn first */
    snprintf(chat, sizeof chat,
             "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
             "\"turn off the kitchen lights\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
             "\"c1\",\"type\":\"function\",\"function\":{\"name\":\"set_lights\",\"arguments\":"
             "\"{\\\"room\\\": \\\"kitchen\\\", \\\"on\\\": false}\"}}]}],\"tools\":%s}", oa);
    for (int layout = NEEDLE_LAYOUT_2_0_8; layout <= NEEDLE_LAYOUT_2_0_15; layout++) {
        nd_example a, b;
        int ra = nd_example_from_json_line_layout(local, strlen(local), "local", tok, layout, &a, &err);
        CHECKF(ra == 0, "%s", err.message);
        int rb = nd_example_from_json_line_layout(chat, strlen(chat), "chat", tok, layout, &b, &err);
        CHECKF(rb == 0, "%s", err.message);
        if (ra || rb) continue;
        CHECKF(a.len == b.len && !memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)a.len) &&
                   !memcmp(a.mask, b.mask, (size_t)a.len),
               "layout %d: chat row gives %d ids, local row %d", layout, b.len, a.len);
        free(a.ids); free(a.mask); free(b.ids); free(b.mask);
    }
    /* refused: two user turns, a call without a name, arguments that are not JSON */
    const char *bad[3] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}],\"tools\":[]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
        "{\"arguments\":\"{}\"}}]}],\"tools\":[]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
        "{\"name\":\"f\",\"arguments\":\"{oops\"}}]}],\"tools\":[{\"name\":\"f\"}]}"};
    const char *why[3] = {"one user turn then one assistant turn", "no function \"name\"", "not JSON"};
    for (int i = 0; i < 3; i++) {
        nd_example e;
        int rc = nd_example_from_json_line_layout(bad[i], strlen(bad[i]), "bad.jsonl:1", tok, NEEDLE_LAYOUT_2_0_15, &e,
                                                  &err);
        CHECKF(rc != 0 && strstr(err.message, why[i]) && strstr(err.message, "bad.jsonl:1"), "row %d: rc %d: %s", i,
               rc, rc ? err.message : "");
    }
    /* an assistant turn with no calls (off-topic) is an empty answer list */
    const char *empty = "{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"},{\"role\":\"assistant\","
                        "\"content\":\"hi\"}],\"tools\":[]}";
    const char *empty_local = "{\"query\":\"hello\",\"tools\":[],\"answers\":[]}";
    nd_example a, b;
    CHECK(nd_example_from_json_line_layout(empty, strlen(empty), "e", tok, NEEDLE_LAYOUT_2_0_15, &a, &err) == 0);
    CHECK(nd_example_from_json_line_layout(empty_local, strlen(empty_local), "e", tok, NEEDLE_LAYOUT_2_0_15, &b,
                                           &err) == 0);
    CHECK(a.len == b.len && !memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)a.len));
    free(a.ids); free(a.mask); free(b.ids); free(b.mask);
    nd_tokenizer_free(tok);
}

/* A tiny v3 geometry on the 8k test tokenizer: local + global layer, q/k 16
 * vs v 8, conv taps 3, one engram site with seed stride 3, Monarch 64. */
static int tiny_v3(nd_config *c)
{
    nd_config_defaults(c);
    c->generation = 3;
    c->vocab_size = 8192; c->d_model = 64; c->num_heads = 4; c->num_kv_heads = 2; c->qk_head_dim = 16;
    c->v_head_dim = 8; c->num_layers = 2; c->max_seq_len = 512; c->engram_heads = 2; c->engram_seed_heads = 3;
    c->engram_slots = 256; c->engram_layers[0] = 0; c->num_sites = 1; c->global_mask = 1ull << 1;
    c->sliding_window = 32; c->qkv_conv_taps = 3; c->contrastive_dim = 16;
    return nd_config_derive(c, "tiny v3", NULL);
}

/* Mean loss over the rows idx[0..n) (the validation set), forward only. */
static double mean_loss(nd_train_model *m, const nd_dataset *ds, const int *idx, int n)
{
    int longest = 0;
    for (int i = 0; i < n; i++) longest = ds->ex[idx[i]].len > longest ? ds->ex[idx[i]].len : longest;
    int T = nd_bucket_len(longest, 512);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n * T), *tg = malloc(sizeof(int32_t) * (size_t)n * T);
    nd_make_batch(ds, idx, n, n, T, 0, ids, tg);
    int cnt = 0;
    double l = nd_train_step_grad(m, ids, tg, n, T, 0, &cnt);
    free(ids);
    free(tg);
    return cnt ? l / cnt : NAN;
}

static void test_lora_finetune_v3(void)
{
    const char *path = "build-tmp-test-train-v3.jsonl";
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    static const char *rooms[8] = {"kitchen", "bedroom", "hallway", "garage", "office", "porch", "attic", "den"};
    static const char *doors[4] = {"front", "back", "garage", "side"};
    char oa[2048];
    openai_tools(oa, sizeof oa);
    int rows = 0;
    for (int i = 0; i < 24; i++, rows++) {
        int on = i % 2, lights = i % 3 != 2;
        const char *room = rooms[i % 8], *door = doors[i % 4];
        if (i % 4 == 3) { /* every fourth row in the platform chat format */
            if (lights)
                fprintf(f, "{\"messages\":[{\"role\":\"user\",\"content\":\"turn %s the %s lights\"},{\"role\":"
                        "\"assistant\",\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"set_lights\","
                        "\"arguments\":\"{\\\"room\\\":\\\"%s\\\",\\\"on\\\":%s}\"}}]}],\"tools\":%s}\n",
                        on ? "on" : "off", room, room, on ? "true" : "false", oa);
            else
                fprintf(f, "{\"messages\":[{\"role\":\"user\",\"content\":\"lock the %s door\"},{\"role\":"
                        "\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"lock_door\",\"arguments\":"
                        "{\"door\":\"%s\"}}}]}],\"tools\":%s}\n", door, door, oa);
        } else if (lights) {
            fprintf(f, "{\"query\":\"turn %s the %s lights\",\"tools\":%s,\"answers\":[{\"name\":\"set_lights\","
                    "\"arguments\":{\"room\":\"%s\",\"on\":%s}}]}\n", on ? "on" : "off", room, TOOLS, room,
                    on ? "true" : "false");
        } else {
            fprintf(f, "{\"query\":\"lock the %s door\",\"tools\":%s,\"answers\":[{\"name\":\"lock_door\","
                    "\"arguments\":{\"door\":\"%s\"}}]}\n", door, TOOLS, door);
        }
    }
    fclose(f);
    nd_tokenizer *tok = NULL;
    needle_error err;
    CHECK(nd_tokenizer_load_spm(GOLDEN "tok8k.model", &tok, &err) == 0);
    nd_dataset ds;
    FILE *sink = fopen("/dev/null", "w");
    int rc = nd_dataset_load_jsonl_layout(path, tok, NEEDLE_LAYOUT_2_0_15, 512, sink, &ds, &err);
    if (sink) fclose(sink);
    CHECKF(rc == 0 && ds.n == rows && ds.malformed == 0, "%s (%d of %d rows)", rc ? err.message : "", ds.n, rows);
    if (rc) { nd_tokenizer_free(tok); return; }

    nd_config cfg;
    CHECK(tiny_v3(&cfg) == 0);
    nd_train_model m;
    CHECK(nd_train_model_create(&m, &cfg, &err) == 0);
    nd_train_model_init_reference(&m, 17);
    enum { VAL = 4 };
    int val_idx[VAL];
    for (int i = 0; i < VAL; i++) val_idx[i] = ds.n - VAL + i;
    nd_trainer_opts o;
    nd_trainer_opts_default(&o);
    o.batch_size = 4;
    o.max_len = 512;
    o.val_tail = VAL;
    o.seed = 3;
    o.bucket = ND_BUCKET_GLOBAL; /* one power-of-two length >= 128, as the reference */
    nd_trainer_result res;
    /* 1. a short full fine-tune makes the random model a base worth adapting
     * (with E ~ N(0, 0.02) frozen, the logits of a random model can hardly move);
     * it must keep the Monarch permutations (constants) as they were */
    CHECK(nd_train_enable_full(&m, &err) == 0);
    float p1[64];
    memcpy(p1, nd_train_param(&m, ND_P_HADA_P1), sizeof p1);
    o.epochs = 3;
    o.lr = 1e-2;
    rc = nd_trainer_run(&m, &ds, 0, &o, &res, &err);
    CHECKF(rc == 0, "%s", rc ? err.message : "");
    printf("  v3 full: %d steps, train loss %.3f -> %.3f (%.1f s)\n", res.steps, res.first_loss, res.last_loss,
           res.seconds);
    CHECKF(res.last_loss < res.first_loss - 1.0, "full: train loss %g -> %g", res.first_loss, res.last_loss);
    CHECK(!memcmp(p1, nd_train_param(&m, ND_P_HADA_P1), sizeof p1));
    free(m.grads);
    m.grads = NULL;
    m.full = 0;
    /* 2. LoRA with the reference's v3 recipe: rank 16, alpha 32 */
    CHECK(nd_train_lora_create(&m, 16, 32.0f, 5, &err) == 0);
    CHECK(fabsf(m.lora_scale - 2.0f) < 1e-7f);
    int train_idx[64], n_train = ds.n - VAL;
    for (int i = 0; i < n_train; i++) train_idx[i] = i;
    double val0 = mean_loss(&m, &ds, val_idx, VAL), train0 = mean_loss(&m, &ds, train_idx, n_train);
    o.epochs = 6;
    o.lr = 1e-2;
    rc = nd_trainer_run(&m, &ds, 0, &o, &res, &err);
    CHECKF(rc == 0, "%s", rc ? err.message : "");
    double val1 = mean_loss(&m, &ds, val_idx, VAL), train1 = mean_loss(&m, &ds, train_idx, n_train);
    printf("  v3 LoRA: %d steps, seq %d, train loss %.3f -> %.3f, validation %.3f -> %.3f (%.1f s)\n", res.steps,
           res.seq_len, train0, train1, val0, val1, res.seconds);
    CHECK(res.n_val == VAL && res.n_train == rows - VAL && (res.seq_len == 128 || res.seq_len == 256));
    CHECKF(train1 < train0 - 0.1, "train loss %g -> %g", train0, train1);
    CHECKF(val1 < val0 - 0.1, "validation loss %g -> %g", val0, val1);
    nd_train_model_free(&m);
    nd_dataset_free(&ds);
    nd_tokenizer_free(tok);
    remove(path);
}

int main(void)
{
    RUN(test_chat_format_equals_local_row);
    RUN(test_lora_finetune_v3);
    return check_summary();
}
