/* test_finetune_workflow.c - what `needle finetune` needs for the
 * generate-data workflow: a .cact as the starting checkpoint (dequantised),
 * multi-turn `turns` rows, automatic epochs, validation from a file, the best
 * weights kept, early stopping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "needle.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "train/data.h"
#include "train/train_ckpt.h"

#define CKPT "tests/golden/tiny.safetensors"
#define CACT "tests/golden/tiny_w4.cact"
#define TOK "tests/golden/tok8k.model"

static const char *tmp_path(const char *name)
{
    static char buf[6][256];
    static int i;
    char *p = buf[i++ % 6];
    snprintf(p, 256, "build-tmp-ft-workflow-%d-%s", (int)getpid(), name);
    return p;
}

/* The .cact's dequantised weights are the checkpoint's up to 4-bit error,
 * tensor by tensor in the checkpoint layout (a transposed kernel would not be). */
static void test_cact_checkpoint_is_dequantised(void)
{
    nd_train_model a, b;
    needle_error err = {0, ""};
    int ignored = 0;
    if (nd_train_model_load(&a, CKPT, &ignored, &err)) { CHECKF(0, "%s", err.message); return; }
    if (nd_train_model_load(&b, CACT, &ignored, &err)) {
        CHECKF(0, "%s", err.message);
        nd_train_model_free(&a);
        return;
    }
    CHECK(ignored == 0 && a.n_tensors == b.n_tensors);
    for (int i = 0; i < a.n_tensors && i < b.n_tensors; i++) {
        const nd_tensor_info *t = &a.tensors[i];
        CHECK(!strcmp(t->name, b.tensors[i].name) && t->count == b.tensors[i].count);
        if (t->role < 0) continue; /* heads: the golden .cact may lack them */
        double amax = 0, dmax = 0, err2 = 0, sig2 = 0;
        for (size_t k = 0; k < t->count; k++) {
            double x = a.params[t->offset + k], y = b.params[t->offset + k];
            amax = fabs(x) > amax ? fabs(x) : amax;
            dmax = fabs(x - y) > dmax ? fabs(x - y) : dmax;
            err2 += (x - y) * (x - y);
            sig2 += x * x;
        }
        int matrix = t->param->kind == ND_KIND_MATRIX;
        /* vectors are FP16 in a .cact; matrices 4-bit: relative RMS error well under 1 */
        if (matrix) CHECKF(sig2 == 0 || sqrt(err2 / sig2) < 0.35, "%s: relative error %g", t->name, sqrt(err2 / sig2));
        else CHECKF(dmax <= 2e-3 * amax + 1e-6, "%s: max diff %g of %g", t->name, dmax, amax);
    }
    nd_train_model_free(&a);
    nd_train_model_free(&b);
}

static const char *TOOLS = "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":"
                           "{\"type\":\"string\"},\"on\":{\"type\":\"boolean\"}}}}]";

/* A multi-turn row: turn 1, then a tool result (outside the loss) and the
 * final answer (inside it), then a user turn and its call; one EOS at the end. */
static void test_turns_rows(void)
{
    nd_tokenizer *tok = NULL;
    needle_error err = {0, ""};
    if (nd_tokenizer_load_spm(TOK, &tok, &err)) { CHECKF(0, "%s", err.message); return; }
    char row[2048];
    snprintf(row, sizeof row,
             "{\"query\":\"kitchen off\",\"tools\":%s,\"answers\":[{\"name\":\"set_lights\",\"arguments\":{\"room\":"
             "\"kitchen\",\"on\":false}}],\"turns\":[{\"tool_result\":{\"status\": \"ok\"},\"answers\":[],\"reasoning\":"
             "\"Done.\"},{\"user\":\"and the hall\",\"answers\":[{\"name\":\"set_lights\",\"arguments\":{\"room\":"
             "\"hall\",\"on\":false}}]}]}",
             TOOLS);
    nd_example ex;
    CHECKF(nd_example_from_json_line(row, strlen(row), "row", tok, &ex, &err) == 0, "%s", err.message);
    /* the same conversation built from the layout's pieces */
    nd_ids ids, mask, t2, m2, t3, m3;
    nd_ids_init(&ids); nd_ids_init(&mask); nd_ids_init(&t2); nd_ids_init(&m2); nd_ids_init(&t3); nd_ids_init(&m3);
    nd_chat_example e1 = {0, "", TOOLS, "kitchen off", "",
                          "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"on\":false}}]"};
    CHECK(nd_chat_build_ids(tok, &e1, &ids, &mask, NULL, &err) == 0);
    ids.len--; /* no EOS inside a conversation */
    mask.len--;
    size_t seg1 = ids.len;
    CHECK(nd_chat_append_tool_result(tok, "{\"status\":\"ok\"}", &ids, &err) == 0);
    size_t seg1_end = ids.len;
    size_t p2 = 0, p3 = 0;
    nd_chat_example e2 = {0, "", "[]", "", "Done.", "[]"};
    CHECK(nd_chat_build_ids(tok, &e2, &t2, &m2, &p2, &err) == 0);
    const char *user = "\n<|im_start|>user\nand the hall<|im_end|>\n<|im_start|>assistant\n";
    nd_chat_example e3 = {0, "", "[]", "", "", "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hall\",\"on\":false}}]"};
    CHECK(nd_chat_build_ids(tok, &e3, &t3, &m3, &p3, &err) == 0);
    size_t n_target2 = t2.len - p2 - 1, n_target3 = t3.len - p3 - 1;
    nd_ids useg;
    nd_ids_init(&useg);
    CHECK(nd_tokenizer_encode(tok, user, strlen(user), &useg, &err) == 0);
    size_t want_len = seg1_end + n_target2 + useg.len + n_target3 + 1;
    CHECKF(ex.len == (int)want_len, "len %d, want %zu", ex.len, want_len);
    if (ex.len == (int)want_len) {
        int same = 1, mask_ok = 1;
        for (size_t i = 0; i < seg1_end; i++) same &= ex.ids[i] == ids.data[i];
        for (size_t i = 0; i < n_target2; i++) same &= ex.ids[seg1_end + i] == t2.data[p2 + i];
        size_t u0 = seg1_end + n_target2;
        for (size_t i = 0; i < useg.len; i++) same &= ex.ids[u0 + i] == useg.data[i];
        for (size_t i = 0; i < n_target3; i++) same &= ex.ids[u0 + useg.len + i] == t3.data[p3 + i];
        same &= ex.ids[ex.len - 1] == nd_tokenizer_eos(tok);
        CHECK(same);
        /* the loss covers the three targets and the final EOS, nothing the user or a tool said */
        for (size_t i = 0; i < seg1; i++) mask_ok &= ex.mask[i] == (mask.data[i] != 0);
        for (size_t i = seg1; i < seg1_end; i++) mask_ok &= ex.mask[i] == 0;
        for (size_t i = 0; i < n_target2; i++) mask_ok &= ex.mask[seg1_end + i] == 1;
        for (size_t i = 0; i < useg.len; i++) mask_ok &= ex.mask[u0 + i] == 0;
        for (size_t i = u0 + useg.len; i < (size_t)ex.len; i++) mask_ok &= ex.mask[i] == 1;
        CHECK(mask_ok);
    }
    free(ex.ids);
    free(ex.mask);
    /* malformed turns are refused with the place */
    const char *bad[] = {
        "{\"query\":\"q\",\"tools\":%s,\"answers\":[],\"turns\":{}}",
        "{\"query\":\"q\",\"tools\":%s,\"answers\":[],\"turns\":[{\"answers\":[]}]}",
        "{\"query\":\"q\",\"tools\":%s,\"answers\":[],\"turns\":[{\"user\":\"x\",\"tool_result\":1,\"answers\":[]}]}",
        "{\"query\":\"q\",\"tools\":%s,\"answers\":[],\"turns\":[{\"user\":\"x\"}]}",
        ("{\"query\":\"q\",\"tools\":%s,\"answers\":[],\"turns\":[{\"user\":\"x\",\"answers\":[{\"name\":\"nope\","
         "\"arguments\":{}}]}]}"),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(row, sizeof row, bad[i], TOOLS);
        int rc = nd_example_from_json_line(row, strlen(row), "row", tok, &ex, &err);
        CHECKF(rc != 0 && strstr(err.message, "row"), "bad[%zu]: rc %d", i, rc);
        if (!rc) { free(ex.ids); free(ex.mask); }
    }
    nd_ids_free(&ids); nd_ids_free(&mask); nd_ids_free(&t2); nd_ids_free(&m2); nd_ids_free(&t3); nd_ids_free(&m3);
    nd_ids_free(&useg);
    nd_tokenizer_free(tok);
}

static const char *write_rows(const char *name, int n, int offset)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "w");
    static const char *rooms[] = {"kitchen", "hall", "attic", "garage", "porch", "study", "cellar", "den"};
    for (int i = 0; i < n; i++)
        fprintf(f, "{\"query\":\"%s %s\",\"tools\":%s,\"answers\":[{\"name\":\"set_lights\",\"arguments\":"
                   "{\"room\":\"%s\",\"on\":%s}}]}\n",
                rooms[(i + offset) % 8], (i + offset) % 2 ? "on" : "off", TOOLS, rooms[(i + offset) % 8],
                (i + offset) % 2 ? "true" : "false");
    fclose(f);
    return path;
}

static int same_file(const char *a, const char *b)
{
    FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
    int same = x && y;
    while (same) {
        int c = fgetc(x), d = fgetc(y);
        same = c == d;
        if (c == EOF || d == EOF) break;
    }
    if (x) fclose(x);
    if (y) fclose(y);
    return same;
}

static void base_options(needle_finetune_options *o, const char *rows, const char *out)
{
    needle_finetune_options_default(o);
    o->data_path = rows;
    o->checkpoint_path = CKPT;
    o->out_path = out;
    o->tokenizer_path = TOK;
    o->batch_size = 4;
    o->max_len = 80; /* every row here fits (a longer one would be skipped and the step counts fail); the
                       * padded length is what a step costs, and these tests run under qemu too */
    o->lora_rank = 2;
    o->threads = 1;
    o->quiet = 1;
}

/* Automatic epochs: about 300 steps, at most 20 epochs; a .cact base works. */
static void test_automatic_epochs_and_cact_base(void)
{
    const char *rows = write_rows("auto.jsonl", 8, 0), *out = tmp_path("auto.safetensors");
    needle_finetune_options o;
    base_options(&o, rows, out);
    o.val_split = 0;
    o.stop_after = 1;
    o.checkpoint_path = CACT;
    needle_finetune_result r;
    needle_error err = {0, ""};
    CHECKF(needle_finetune(&o, &r, &err) == 0, "%s", err.message);
    CHECK(r.epochs == 20 && r.steps == 1 && r.lr > 1.99e-3 && r.lr < 2.01e-3); /* 2 steps an epoch: capped at 20 */
    remove(rows);
    remove(out);
    remove(tmp_path("auto.safetensors.state"));
}

/* The weights returned are those of the best validation: the same bytes as a
 * run stopped at that step; a separate validation file is used as given.
 * 6 training rows in batches of 2 (3 steps an epoch, 12 steps) and 2 held-out validation rows
 * (rooms the training rows never name, so the validation loss turns up after a few steps at
 * this lr): the same checks as with more rows at a third of the cost. */
static void test_best_weights_kept_and_early_stopping(void)
{
    const char *rows = write_rows("train.jsonl", 6, 0), *val = write_rows("val.jsonl", 2, 6);
    const char *best = tmp_path("best.safetensors"), *at = tmp_path("at.safetensors");
    needle_finetune_options o;
    base_options(&o, rows, best);
    o.val_path = val;
    o.epochs = 4;
    o.eval_every = 1;
    o.patience = 0;
    o.batch_size = 2;
    o.lr = 0.05; /* large: the validation loss does not fall all the way */
    o.full = 1;
    needle_finetune_result r;
    needle_error err = {0, ""};
    CHECKF(needle_finetune(&o, &r, &err) == 0, "%s", err.message);
    CHECK(r.steps == 12 && !r.early_stopped && r.best_step >= 1 && r.best_step <= 12 && isfinite(r.best_val_loss));
    CHECKF(r.best_step < 12, "best step %d: pick a setting whose last step is not the best", r.best_step);
    o.out_path = at;
    o.keep_last = 1;
    o.stop_after = r.best_step;
    needle_finetune_result r2;
    CHECKF(needle_finetune(&o, &r2, &err) == 0, "%s", err.message);
    CHECK(r2.steps == r.best_step && same_file(best, at));
    /* patience 1: the first validation without a better loss ends the run */
    o.out_path = best;
    o.keep_last = 0;
    o.stop_after = 0;
    o.patience = 1;
    needle_finetune_result r3;
    CHECKF(needle_finetune(&o, &r3, &err) == 0, "%s", err.message);
    CHECK(r3.early_stopped && r3.steps == r3.best_step + 1 && r3.steps < 12);
    remove(rows);
    remove(val);
    remove(best);
    remove(at);
}

int main(void)
{
    RUN(test_cact_checkpoint_is_dequantised);
    RUN(test_turns_rows);
    RUN(test_automatic_epochs_and_cact_base);
    RUN(test_best_weights_kept_and_early_stopping);
    return check_summary();
}
