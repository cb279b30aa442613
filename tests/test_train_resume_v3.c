/* test_train_resume_v3.c - kill-and-resume of a Needle 3 run is bit exact,
 * as test_train_resume.c checks for Needle 2: a tiny v3 model (local and
 * global layers, qkv taps, Monarch MLP, one engram site) trained N steps
 * straight ends with the same bytes as one stopped after k steps and resumed
 * to N, for LoRA and for --full.  "The same bytes" is the whole training
 * state written at step N by both runs: trainable weights, AdamW moments and
 * step, the row order (data order) and the loss history. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/file.h"
#include "model/config.h"
#include "text/tokenizer.h"
#include "train/data.h"
#include "train/train_ckpt.h"
#include "train/train_model.h"
#include "train/trainer.h"

#define GOLDEN "tests/golden/"
#define DATA "build-tmp-test-resume-v3.jsonl"
#define STOP_STATE "build-tmp-test-resume-v3.stop"
#define END_REF "build-tmp-test-resume-v3.ref"
#define END_RESUMED "build-tmp-test-resume-v3.end"

#define ROWS 10

/* Ten short rows of varied length: 9 training rows, 3 batches of 4 an epoch
 * (the last one ragged), one validation row. */
static int write_data(void)
{
    FILE *f = fopen(DATA, "w");
    if (!f) return -1;
    for (int i = 0; i < ROWS; i++) {
        fprintf(f, "{\"query\":\"");
        for (int k = 0; k < 1 + (i * 7) % 13; k++) fprintf(f, "word%d ", (i + k) % 11);
        fprintf(f, "\",\"tools\":[{\"name\":\"f%d\",\"parameters\":{}}],\"answers\":[{\"name\":\"f%d\",\"arguments\":"
                   "{\"x\":%d}}]}\n", i % 3, i % 3, i);
    }
    fclose(f);
    return 0;
}

/* A tiny v3 geometry on the 8k test tokenizer (as test_train_v3.c, smaller). */
static int tiny_v3(nd_config *c)
{
    nd_config_defaults(c);
    c->generation = 3;
    c->vocab_size = 8192; c->d_model = 32; c->num_heads = 4; c->num_kv_heads = 2; c->qk_head_dim = 8;
    c->v_head_dim = 4; c->num_layers = 2; c->max_seq_len = 256; c->engram_heads = 2; c->engram_seed_heads = 3;
    c->engram_slots = 64; c->engram_layers[0] = 0; c->num_sites = 1; c->global_mask = 1ull << 1;
    c->sliding_window = 8; c->qkv_conv_taps = 3; c->contrastive_dim = 8;
    return nd_config_derive(c, "tiny v3", NULL);
}

static void base_opts(nd_trainer_opts *o)
{
    nd_trainer_opts_default(o);
    o->epochs = 2;
    o->batch_size = 4;
    o->max_len = 256;
    o->lr = 3e-3;
    o->seed = 5;
    o->val_tail = 1;
    o->bucket = ND_BUCKET_BATCH;
    o->bucket_window = 2;
}

/* One run from the same freshly initialised model; returns the trainer's rc.
 * other_start: the trainable weights start elsewhere (another LoRA start, for
 * --full another initialisation), which a resumed run must overwrite from
 * its state - so a resume that ignored the state could not pass. */
static int run(int full, const nd_dataset *ds, int pad, const nd_trainer_opts *o, int other_start,
               nd_trainer_result *res)
{
    nd_config cfg;
    nd_train_model m;
    needle_error err;
    int rc = tiny_v3(&cfg);
    if (!rc) rc = nd_train_model_create(&m, &cfg, &err);
    if (rc) {
        printf("  model: %s\n", err.message);
        return rc;
    }
    nd_train_model_init_reference(&m, full && other_start ? 18 : 17);
    rc = full ? nd_train_enable_full(&m, &err) : nd_train_lora_create(&m, 4, 8.0f, o->seed, &err);
    if (!rc && !full)
        for (size_t i = 0; i < m.n_lora; i++) /* B != 0 */
            m.lora[i] += 0.01f * (float)((i * (other_start ? 104729 : 7919)) % 13) - 0.06f;
    if (!rc) rc = nd_trainer_run(&m, ds, pad, o, res, &err);
    if (rc) printf("  run failed: %s\n", err.message);
    nd_train_model_free(&m);
    return rc;
}

static int same_file(const char *a, const char *b)
{
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    needle_error err;
    int same = nd_read_file(a, &x, &nx, &err) == 0 && nd_read_file(b, &y, &ny, &err) == 0 && nx == ny &&
               !memcmp(x, y, nx);
    free(x);
    free(y);
    return same;
}

static void check_resume(const nd_dataset *ds, int pad, int full, int stop)
{
    nd_trainer_opts o;
    nd_trainer_result ref, a, b;
    /* straight to the end, the state written at the last step */
    base_opts(&o);
    o.save_every = 6;
    o.save_path = END_REF;
    CHECK(run(full, ds, pad, &o, 0, &ref) == 0 && ref.steps == 6); /* 9 rows / 4 = 3 batches, 2 epochs */
    /* stopped after `stop` steps ... */
    base_opts(&o);
    o.save_every = stop;
    o.save_path = STOP_STATE;
    o.stop_after = stop;
    CHECK(run(full, ds, pad, &o, 0, &a) == 0 && a.stopped && a.steps == stop);
    CHECKF(!same_file(STOP_STATE, END_REF), "the state at step %d already equals the end state", stop);
    /* ... and resumed to the end */
    base_opts(&o);
    o.resume_path = STOP_STATE;
    o.save_every = 6;
    o.save_path = END_RESUMED;
    CHECK(run(full, ds, pad, &o, 1, &b) == 0 && !b.stopped && b.steps == ref.steps);
    CHECKF(same_file(END_RESUMED, END_REF), "v3 %s: resumed after %d steps, the end state differs from the "
           "uninterrupted run's", full ? "full" : "LoRA", stop);
    CHECKF(b.last_loss == ref.last_loss, "last loss %.9g resumed, %.9g straight", b.last_loss, ref.last_loss);
    remove(STOP_STATE);
    remove(END_REF);
    remove(END_RESUMED);
}

static void test_resume_v3_bit_identical(void)
{
    nd_tokenizer *tok = NULL;
    needle_error err;
    CHECK(write_data() == 0);
    CHECK(nd_tokenizer_load_spm(GOLDEN "tok8k.model", &tok, &err) == 0);
    if (!tok) return;
    nd_dataset ds;
    FILE *sink = fopen("/dev/null", "w");
    int rc = nd_dataset_load_jsonl_layout(DATA, tok, NEEDLE_LAYOUT_2_0_15, 256, sink, &ds, &err);
    if (sink) fclose(sink);
    CHECKF(rc == 0 && ds.n == ROWS, "%s", rc ? err.message : "rows missing");
    if (!rc) {
        int pad = nd_tokenizer_pad(tok);
        check_resume(&ds, pad, 0, 2); /* LoRA, mid-epoch */
        check_resume(&ds, pad, 0, 3); /* LoRA, at the end of the first epoch */
        check_resume(&ds, pad, 1, 4); /* full, mid-epoch of the second epoch */
        nd_dataset_free(&ds);
    }
    remove(DATA);
    nd_tokenizer_free(tok);
}

int main(void)
{
    RUN(test_resume_v3_bit_identical);
    return check_summary();
}
