/* test_api_train.c - needle_finetune, needle_build and needle_session_turn
 * through the public header only (the calls the Python package makes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "needle.h"

#define CKPT "tests/golden/tiny.safetensors"
#define CACT "tests/golden/tiny_w4.cact"
#define TOK "tests/golden/tok8k.model"

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, 256, "build-tmp-api-train-%d-%s", (int)getpid(), name);
    return p;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static const char *write_rows(void)
{
    const char *path = tmp_path("rows.jsonl");
    FILE *f = fopen(path, "w");
    const char *tools = "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":"
                        "{\"room\":{\"type\":\"string\"},\"on\":{\"type\":\"boolean\"}}}}]";
    fprintf(f, "{\"query\":\"kitchen off\",\"tools\":%s,\"answers\":[{\"name\":\"set_lights\",\"arguments\":"
               "{\"room\":\"kitchen\",\"on\":false}}]}\n", tools);
    fprintf(f, "{\"query\":\"hall on\",\"tools\":%s,\"answers\":[{\"name\":\"set_lights\",\"arguments\":"
               "{\"room\":\"hall\",\"on\":true}}]}\n", tools);
    fprintf(f, "{\"query\":\"what time is it\",\"tools\":%s,\"answers\":[]}\n", tools);
    fclose(f);
    return path;
}

static void test_defaults_match_the_cli(void)
{
    needle_finetune_options o;
    needle_finetune_options_default(&o);
    /* epochs and lr 0: chosen automatically; early stopping with patience 3, the best weights kept */
    CHECK(o.epochs == 0 && o.batch_size == 16 && o.lora_rank == 16 && o.lora_alpha == 32 && o.max_len == 1024);
    CHECK(o.lr == 0 && o.val_split > 0.099 && o.val_split < 0.101 && !o.full);
    CHECK(o.patience == 3 && o.eval_every == 0 && !o.keep_last && !o.val_path);
    CHECK(!o.data_path && !o.checkpoint_path && !o.out_path && !o.resume_path);
}

static void test_finetune_then_build_with_the_adapter(void)
{
    const char *rows = write_rows(), *adapter = tmp_path("adapter.safetensors"), *cact = tmp_path("tuned.cact");
    needle_finetune_options o;
    needle_finetune_options_default(&o);
    o.data_path = rows;
    o.checkpoint_path = CKPT;
    o.out_path = adapter;
    o.tokenizer_path = CACT; /* the tokenizer inside a .cact */
    o.epochs = 1;
    o.batch_size = 2;
    o.max_len = 256;
    o.val_split = 0;
    o.lora_rank = 4;
    o.bucket_batch = 1;
    o.stop_after = 1;
    o.quiet = 1;
    needle_finetune_result r;
    needle_error err = {0, ""};
    CHECKF(needle_finetune(&o, &r, &err) == 0, "%s", err.message);
    CHECK(r.rows == 3 && r.steps == 1 && r.stopped == 1 && r.first_loss > 0);
    CHECK(file_size(adapter) > 0);

    needle_build_options b = {CKPT, TOK, "4", NULL, adapter, cact, 0, 1};
    CHECKF(needle_build(&b, &err) == 0, "%s", err.message);
    needle_model *m = NULL;
    CHECKF(needle_model_open(cact, NULL, NULL, &m, &err) == 0, "%s", err.message);
    needle_model_close(m);
    remove(rows);
    remove(adapter);
    remove(cact);
}

static void test_finetune_errors(void)
{
    needle_error err = {0, ""};
    CHECK(needle_finetune(NULL, NULL, &err) == NEEDLE_EINVAL);
    needle_finetune_options o;
    needle_finetune_options_default(&o);
    CHECK(needle_finetune(&o, NULL, &err) == NEEDLE_EINVAL && strstr(err.message, "required"));
    o.data_path = "tests/golden/no-such.jsonl";
    o.checkpoint_path = CKPT;
    o.out_path = tmp_path("never.safetensors");
    o.tokenizer_path = TOK;
    o.quiet = 1;
    CHECK(needle_finetune(&o, NULL, &err) == NEEDLE_EIO && strstr(err.message, "no-such.jsonl"));
    o.epochs = -1;
    CHECK(needle_finetune(&o, NULL, &err) == NEEDLE_EINVAL);
    o.epochs = 1;
    o.tokenizer_path = "tests/golden/no-such.model";
    CHECK(needle_finetune(&o, NULL, &err) == NEEDLE_EIO);
    o.tokenizer_path = "tests/golden/tiny.json"; /* neither a .model nor a .cact */
    CHECK(needle_finetune(&o, NULL, &err) < 0);
    CHECK(file_size(o.out_path) < 0);
}

static void test_build_errors(void)
{
    needle_error err = {0, ""};
    const char *out = tmp_path("never.cact");
    CHECK(needle_build(NULL, &err) == NEEDLE_EINVAL);
    needle_build_options b = {CKPT, TOK, "5", NULL, NULL, out, 0, 1};
    CHECK(needle_build(&b, &err) == NEEDLE_EINVAL && strstr(err.message, "bits"));
    b.bits = "4";
    b.bits_map = "default=4";
    CHECK(needle_build(&b, &err) == NEEDLE_EINVAL);
    b.bits_map = NULL;
    b.tokenizer_path = NULL; /* a .safetensors holds no tokenizer */
    CHECK(needle_build(&b, &err) == NEEDLE_EINVAL && strstr(err.message, "tokenizer"));
    b.tokenizer_path = TOK;
    b.kv_window = 1 << 30;
    CHECK(needle_build(&b, &err) == NEEDLE_EINVAL);
    b.kv_window = 0;
    b.lora_path = "tests/golden/no-such-adapter.safetensors";
    CHECK(needle_build(&b, &err) < 0);
    CHECK(file_size(out) < 0);
}

static void test_build_requantises_a_cact(void)
{
    needle_error err = {0, ""};
    const char *out = tmp_path("w3.cact");
    needle_build_options b = {CACT, NULL, "3", NULL, NULL, out, 0, 1};
    CHECKF(needle_build(&b, &err) == 0, "%s", err.message);
    CHECK(file_size(out) > 0 && file_size(out) < file_size(CACT));
    remove(out);
}

static void test_session_turn_budget(void)
{
    needle_error err = {0, ""};
    needle_model *m = NULL;
    CHECKF(needle_model_open(CACT, NULL, NULL, &m, &err) == 0, "%s", err.message);
    needle_session_options so;
    memset(&so, 0, sizeof so);
    so.tools_json = "[{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}}}}]";
    needle_session *s = NULL;
    CHECKF(needle_session_open(m, &so, &s, &err) == 0, "%s", err.message);
    char *env = NULL;
    CHECK(needle_session_turn(s, 0, "hello", 2, &env, &err) == 0 && env);
    CHECKF(env && strstr(env, "\"error_code\":-12"), "%s", env ? env : "(null)"); /* 2 tokens cannot finish */
    needle_free(env);
    env = NULL;
    CHECK(needle_session_turn(s, 2, "hello", 0, &env, &err) == NEEDLE_EINVAL && !env);
    CHECK(needle_session_turn(NULL, 0, "hello", 0, &env, &err) == NEEDLE_EINVAL);
    /* the failed turn ended the conversation: a tool result now has nothing to answer */
    int rc = needle_session_turn(s, 1, "{\"ok\":true}", 0, &env, &err);
    CHECKF(rc == NEEDLE_ESTATE && !env, "rc %d: %s", rc, err.message);
    CHECK(needle_session_turn(s, 0, "hello", 8, &env, &err) == 0 && env); /* a new conversation starts */
    needle_free(env);
    needle_session_close(s);
    needle_model_close(m);
}

int main(void)
{
    RUN(test_defaults_match_the_cli);
    RUN(test_finetune_then_build_with_the_adapter);
    RUN(test_finetune_errors);
    RUN(test_build_errors);
    RUN(test_build_requantises_a_cact);
    RUN(test_session_turn_budget);
    return check_summary();
}
