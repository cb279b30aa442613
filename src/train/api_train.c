/* api_train.c - the public training and export calls (include/needle.h):
 * needle_finetune and needle_build do what `needle finetune` and `needle build`
 * do, from an options struct instead of argv, so bindings (the Python package)
 * train and export in-process.  The work is the same library calls the CLI
 * makes (trainer.h, train_ckpt.h, merge.h, nd_cact_write); progress lines are
 * the CLI's, on the same streams. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file_kind.h"
#include "core/threadpool.h"
#include "model/cact/cact.h"
#include "io/safetensors.h"
#include "io/spm_model.h"
#include "model/bits_map.h"
#include "model/weights.h"
#include "needle.h"
#include "quant/cq.h"
#include "text/tokenizer.h"
#include "text/chat.h"
#include "train/data.h"
#include "train/merge.h"
#include "train/qat.h"
#include "train/train_ckpt.h"
#include "train/trainer.h"

/* A vocabulary from a SentencePiece .model or from the blob inside a .cact
 * (told apart by the file's first bytes, not its name). */
static int load_vocab(const char *path, nd_vocab *v, needle_error *err)
{
    memset(v, 0, sizeof *v);
    FILE *f = fopen(path, "rb");
    if (!f) return nd_errorf(err, NEEDLE_EIO, "%s: cannot open the tokenizer", path);
    uint8_t head[64];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (!nd_cact_sniff(head, n)) return nd_vocab_load_spm_file(path, v, err);
    nd_weights w;
    int rc = nd_weights_load_cact(path, &w, err);
    if (rc) return rc;
    if (w.tokenizer_blob && w.tokenizer_blob_size)
        rc = nd_vocab_from_blob(w.tokenizer_blob, w.tokenizer_blob_size, path, v, err);
    else rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: this .cact holds no tokenizer", path);
    nd_weights_free(&w);
    return rc;
}

void needle_finetune_options_default(needle_finetune_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    nd_trainer_opts t;
    nd_trainer_opts_default(&t);
    o->epochs = 0; /* automatic */
    o->batch_size = t.batch_size;
    o->max_len = t.max_len;
    o->log_every = t.log_every;
    o->lr = 0; /* automatic */
    o->patience = 3;
    o->val_split = t.val_split;
    o->seed = t.seed;
    o->bucket_batch = t.bucket == ND_BUCKET_BATCH;
    o->bucket_window = t.bucket_window;
    o->lora_rank = 16;
    o->lora_alpha = 32;
}

/* The trainer's options from the public ones; with resume_path, the saved
 * state's recorded options (and mode) replace the caller's, as the CLI's
 * --resume makes them the defaults. */
static int trainer_options(const needle_finetune_options *p, nd_trainer_opts *o, int *full, int *rank, double *alpha,
                           needle_error *err)
{
    nd_trainer_opts_default(o);
    o->epochs = p->epochs;
    o->batch_size = p->batch_size;
    o->max_len = p->max_len;
    o->log_every = p->log_every;
    o->lr = p->lr;
    o->val_split = p->val_split;
    o->seed = p->seed;
    o->bucket = p->bucket_batch ? ND_BUCKET_BATCH : ND_BUCKET_GLOBAL;
    o->bucket_window = p->bucket_window;
    o->decision_weight = p->decision_weight;
    *full = p->full != 0;
    *rank = p->lora_rank;
    *alpha = p->lora_alpha;
    if (p->resume_path) {
        nd_safetensors st;
        int rc = nd_st_open(p->resume_path, &st, err);
        if (rc) return rc;
        const char *desc = nd_st_meta(&st, "options");
        rc = desc ? nd_trainer_parse_description(desc, o, full, rank, alpha, err)
                      : nd_errorf(err, NEEDLE_EFORMAT, "%s: not a training state (no \"options\")", p->resume_path);
        nd_st_close(&st);
        if (rc) return rc;
        o->resume_path = p->resume_path;
    }
    o->save_every = p->save_every;
    o->save_path = p->state_path;
    o->stop_after = p->stop_after;
    o->plot_path = p->plot_path;
    o->progress = p->quiet ? NULL : stderr;
    o->eval_every = p->eval_every;
    o->patience = p->patience;
    o->keep_best = !p->keep_last;
    if (!p->resume_path && o->lr == 0) o->lr = *full ? 5e-4 : 2e-3; /* automatic (docs/fine-tuning) */
    if (o->epochs < 0 || p->eval_every < 0 || p->patience < 0 || o->batch_size < 1 || o->max_len < 2 || !(o->val_split >= 0 && o->val_split < 1) ||
        !(o->lr > 0) || (!*full && (*rank < 1 || !(*alpha > 0))) || o->bucket_window < 0 || o->save_every < 0 ||
        o->stop_after < 0 || o->log_every < 0 || p->threads < 0 || !(o->decision_weight >= 0 && o->decision_weight <= 1000))
        return nd_errorf(err, NEEDLE_EINVAL,
                         "finetune: an option is out of range (epochs >= 0, batch_size >= 1; max_len >= 2; 0 <= "
                         "val_split < 1; lr >= 0; lora_rank >= 1; lora_alpha > 0; counts >= 0; 0 <= decision_weight "
                         "<= 1000)");
    return 0;
}

/* The automatic choices for a dataset of n_train rows: about 300 optimiser
 * steps (small data sees more epochs, up to 20; large data at least one),
 * and a validation about ten times a run (at least every 10 steps). */
#define ND_AUTO_STEPS 300
static void automatic_schedule(nd_trainer_opts *o, int n_train)
{
    int B = o->batch_size < n_train ? o->batch_size : n_train;
    int per_epoch = (n_train + B - 1) / (B > 0 ? B : 1);
    if (per_epoch < 1) per_epoch = 1;
    if (o->epochs == 0) {
        o->epochs = (ND_AUTO_STEPS + per_epoch - 1) / per_epoch;
        if (o->epochs > 20) o->epochs = 20;
        if (o->epochs < 1) o->epochs = 1;
    }
    if (o->eval_every == 0) {
        int total = per_epoch * o->epochs;
        o->eval_every = total / 10 > 10 ? total / 10 : 10;
    }
}

/* Move every row of src to the end of dst (src is left empty). */
static int append_rows(nd_dataset *dst, nd_dataset *src, needle_error *err)
{
    if (dst->n + src->n > dst->cap) {
        nd_example *p = realloc(dst->ex, sizeof *p * (size_t)(dst->n + src->n));
        if (!p) return nd_errorf(err, NEEDLE_ENOMEM, "finetune: out of memory");
        dst->ex = p;
        dst->cap = dst->n + src->n;
    }
    memcpy(dst->ex + dst->n, src->ex, sizeof *src->ex * (size_t)src->n);
    dst->n += src->n;
    if (src->max_len_seen > dst->max_len_seen) dst->max_len_seen = src->max_len_seen;
    free(src->ex);
    memset(src, 0, sizeof *src);
    return 0;
}

int needle_finetune(const needle_finetune_options *p, needle_finetune_result *res, needle_error *err)
{
    if (res) memset(res, 0, sizeof *res);
    if (!p) return nd_errorf(err, NEEDLE_EINVAL, "finetune: NULL options");
    if (!p->data_path || !p->checkpoint_path || !p->out_path || !p->tokenizer_path)
        return nd_errorf(err, NEEDLE_EINVAL, "finetune: data_path, checkpoint_path, out_path and tokenizer_path "
                                             "are required");
    nd_trainer_opts o;
    int full, rank;
    double alpha;
    int rc = trainer_options(p, &o, &full, &rank, &alpha, err);
    if (rc) return rc;
    char *state_default = NULL;
    if (o.save_every > 0 && !o.save_path) {
        size_t n = strlen(p->out_path) + sizeof ".state";
        if (!(state_default = malloc(n))) return nd_errorf(err, NEEDLE_ENOMEM, "finetune: out of memory");
        snprintf(state_default, n, "%s.state", p->out_path);
        o.save_path = state_default;
    }
    FILE *log = p->quiet ? NULL : stderr;

    nd_vocab v;
    nd_tokenizer *tok = NULL;
    nd_train_model m;
    nd_dataset ds;
    nd_threadpool *pool = NULL;
    int have_model = 0, have_data = 0, ignored = 0;
    rc = load_vocab(p->tokenizer_path, &v, err);
    if (rc) goto done;
    rc = nd_tokenizer_create(&v, &tok, err);
    nd_vocab_free(&v);
    if (rc) goto done;
    if ((rc = nd_train_model_load(&m, p->checkpoint_path, &ignored, err))) goto done;
    have_model = 1;
    if (log && nd_file_kind_of_path(p->checkpoint_path) == ND_KIND_CACT)
        fprintf(log, "  warning: %s is a quantised deploy file: training starts from its dequantised weights "
                     "(a float checkpoint such as models/needle-default.safetensors loses nothing)\n",
                p->checkpoint_path);
    if (o.max_len > m.cfg.max_seq_len) o.max_len = m.cfg.max_seq_len; /* longer rows are skipped, never cut */
    if (ignored && log)
        fprintf(log, "  %d checkpoint tensors not used by the forward pass are not trained%s\n", ignored,
                full ? " and not written" : "");
    if (p->layout < NEEDLE_LAYOUT_AUTO || p->layout > NEEDLE_LAYOUT_2_0_15) {
        rc = nd_errorf(err, NEEDLE_EINVAL, "finetune: layout %d is not a NEEDLE_LAYOUT_* value", p->layout);
        goto done;
    }
    m.source_path = p->checkpoint_path; /* a Needle 3 adapter names its base */
    /* the layout the model's generation is run in (Needle 3: the reference's v3 training layout) */
    int layout = nd_chat_layout_resolve(p->layout, nd_config_generation(&m.cfg));
    if ((rc = nd_dataset_load_jsonl_layout(p->data_path, tok, layout, o.max_len, log, &ds, err))) goto done;
    have_data = 1;
    if (log)
        fprintf(log, "  %s: %d rows used of %d (%d malformed, %d longer than %d tokens)\n", p->data_path, ds.n,
                ds.lines, ds.malformed, ds.too_long, o.max_len);
    /* the cut is not random: long rows are the ones with calls (two calls, a tool result), so a
     * large cut teaches refusing (docs/generate-data.md, "Rows that fit the model's context") */
    if (log && ds.too_long * 20 > ds.lines)
        fprintf(log, "  warning: %d of %d rows are longer than %d tokens and are not trained on; long rows are "
                     "usually the ones with calls (two calls, tool results), so the rest can teach refusing (make "
                     "rows that fit: needle generate-data --max-tokens %d)\n",
                ds.too_long, ds.lines, o.max_len, o.max_len);
    if (p->val_path) {
        nd_dataset vs;
        if ((rc = nd_dataset_load_jsonl_layout(p->val_path, tok, layout, o.max_len, log, &vs, err))) goto done;
        if (log)
            fprintf(log, "  %s: %d validation rows used of %d (%d malformed, %d longer than %d tokens)\n", p->val_path,
                    vs.n, vs.lines, vs.malformed, vs.too_long, o.max_len);
        o.val_tail = vs.n;
        rc = append_rows(&ds, &vs, err);
        nd_dataset_free(&vs);
        if (rc) goto done;
    }
    {
        int n_val = o.val_tail > 0 ? o.val_tail : (int)(ds.n * o.val_split);
        int auto_epochs = o.epochs == 0;
        automatic_schedule(&o, ds.n - n_val > 0 ? ds.n - n_val : 1);
        if (log)
            fprintf(log, "  %s, lr %g%s, %d epoch%s%s, validation every %d steps%s\n", full ? "full" : "LoRA", o.lr,
                    p->lr == 0 && !p->resume_path ? " (automatic)" : "", o.epochs, o.epochs == 1 ? "" : "s",
                    auto_epochs ? " (automatic)" : "", o.eval_every,
                    o.patience > 0 ? ", early stopping on validation loss" : "");
    }
    if ((rc = nd_threadpool_create(p->threads, &pool, err))) goto done;
    m.pool = pool;
    rc = full ? nd_train_enable_full(&m, err) : nd_train_lora_create(&m, rank, (float)alpha, o.seed, err);
    if (rc) goto done;
    int qat_bits = 0, qat_map = 0;
    if (nd_qat_parse_mode(p->qat_bits, &m.cfg, &qat_bits, &qat_map)) {
        rc = nd_errorf(err, NEEDLE_EINVAL, "finetune: qat_bits must be auto, none, 2 or 4 (got '%s')", p->qat_bits);
        goto done;
    }
    /* full fine-tuning runs in full precision unless asked for a width (auto keeps it float) */
    int full_qat = full && qat_bits;
    if (full && !full_qat) qat_map = 0;
    if (full_qat && (p->save_every > 0 || p->resume_path)) {
        rc = nd_errorf(err, NEEDLE_EUNSUPPORTED, "finetune: --full --qat-bits %s cannot save or resume a training "
                       "state yet (drop --save-every / --resume, or --qat-bits)", p->qat_bits);
        goto done;
    }
    if ((qat_bits || qat_map) && (rc = nd_qat_enable(&m, qat_bits, err))) goto done;
    m.decision_weight = (float)o.decision_weight;
    m.decision_token = nd_tokenizer_piece_id(tok, "<tool_call>", strlen("<tool_call>"));
    nd_trainer_result r;
    if ((rc = nd_trainer_run(&m, &ds, nd_tokenizer_pad(tok), &o, &r, err))) goto done;
    if (full_qat) nd_qat_free(&m); /* the checkpoint holds the master's float weights */
    rc = full ? nd_train_save_full(&m, p->out_path, err) : nd_train_save_lora(&m, p->out_path, err);
    if (rc) goto done;
    if (log) {
        fprintf(log, "  %d steps in %.1f s (%.0f tok/s); loss %.4f -> %.4f; wrote %s %s\n", r.steps, r.seconds,
                r.tokens_per_s, r.first_loss, r.last_loss, full ? "checkpoint" : "adapter", p->out_path);
        if (r.stopped) fprintf(log, "  stopped early by stop_after (the output holds the weights at that step)\n");
        fflush(log);
    }
    if (res) {
        res->rows = ds.n;
        res->steps = r.steps;
        res->stopped = r.stopped;
        res->first_loss = r.first_loss;
        res->last_loss = r.last_loss;
        res->last_val_loss = r.last_val_loss;
        res->seconds = r.seconds;
        res->tokens_per_s = r.tokens_per_s;
        res->epochs = o.epochs;
        res->best_step = r.best_step;
        res->early_stopped = r.early_stopped;
        res->best_val_loss = r.best_val_loss;
        res->lr = o.lr;
    }
done:
    if (have_data) nd_dataset_free(&ds);
    if (have_model) nd_train_model_free(&m);
    nd_threadpool_free(pool);
    nd_tokenizer_free(tok);
    free(state_default);
    return rc;
}

int needle_build(const needle_build_options *p, needle_error *err)
{
    if (!p) return nd_errorf(err, NEEDLE_EINVAL, "build: NULL options");
    if (!p->checkpoint_path || !p->out_path)
        return nd_errorf(err, NEEDLE_EINVAL, "build: checkpoint_path and out_path are required");
    if (p->bits && p->bits_map) return nd_errorf(err, NEEDLE_EINVAL, "build: give bits or bits_map, not both");
    if (p->kv_window < 0) return nd_errorf(err, NEEDLE_EINVAL, "build: kv_window %d must be >= 0", p->kv_window);
    char spec[64] = "", scheme[256] = "";
    const char *bits_map = p->bits_map, *bits = p->bits;
    /* a QAT adapter fixes the numerics (SPEC 12), as in `needle build --lora` */
    if (p->lora_path) {
        int rc = nd_lora_deploy_scheme(p->lora_path, p->bits, p->bits_map, scheme, sizeof scheme, err);
        if (rc) return rc;
        if (scheme[0]) {
            bits = NULL;
            bits_map = scheme;
        }
    }
    if (bits) {
        if (nd_bits_parse_width(bits, (int)strlen(bits)) < 0)
            return nd_errorf(err, NEEDLE_EINVAL, "build: bits must be 2, 3, 4 or 1.58 (got '%s')", bits);
        snprintf(spec, sizeof spec, "default=%s", bits);
        bits_map = spec;
    }
    FILE *log = p->quiet ? NULL : stdout;

    nd_weights w;
    int rc = nd_weights_load(p->checkpoint_path, &w, err);
    if (rc) return rc;
    if (p->kv_window > 0) {
        if (p->kv_window > w.cfg.max_seq_len) {
            rc = nd_errorf(err, NEEDLE_EINVAL, "build: kv_window %d exceeds max_seq_len %d", p->kv_window,
                           w.cfg.max_seq_len);
            nd_weights_free(&w);
            return rc;
        }
        w.cfg.kv_window = p->kv_window;
    }
    if (log)
        fprintf(log, "  %-10s%s  d=%d  %d layers  vocab %d%s\n", "loaded", p->checkpoint_path, w.cfg.d_model,
                w.cfg.num_layers, w.cfg.vocab_size, w.contrastive.present || w.confidence.present ? "  with heads" : "");
    if (p->lora_path) {
        if ((rc = nd_lora_merge(&w, p->lora_path, p->checkpoint_path, err))) {
            nd_weights_free(&w);
            return rc;
        }
        if (log) fprintf(log, "  %-10s%s  into q,k,v,gate,out of %d layers\n", "merged", p->lora_path, w.cfg.num_layers);
        /* as `needle build --lora`: a Needle 3 confidence head was not trained with the adapter */
        if (nd_config_generation(&w.cfg) == 3) w.confidence.present = 0;
    }
    nd_vocab v;
    if (p->tokenizer_path) rc = load_vocab(p->tokenizer_path, &v, err);
    else if (w.tokenizer_blob)
        rc = nd_vocab_from_blob(w.tokenizer_blob, w.tokenizer_blob_size, p->checkpoint_path, &v, err);
    else rc = nd_errorf(err, NEEDLE_EINVAL, "build: %s holds no tokenizer: give tokenizer_path", p->checkpoint_path);
    if (rc) {
        nd_weights_free(&w);
        return rc;
    }
    const char *shown = bits_map && *bits_map ? bits_map : w.cfg.weight_bits[0] ? w.cfg.weight_bits : "default=4";
    if (log) {
        fprintf(log, "  %-10s%s  %d pieces\n", "tokenizer", p->tokenizer_path ? p->tokenizer_path : "(from the checkpoint)",
                v.n_pieces);
        fprintf(log, "  %-10s%s  kv window %d\n", "quantise", shown, nd_config_effective_window(&w.cfg));
        fflush(log);
    }
    nd_cact_write_stats st;
    rc = nd_cact_write(p->out_path, &w, &v, bits_map, &st, err);
    int act_bits = w.cfg.act_bits;
    nd_vocab_free(&v);
    nd_weights_free(&w);
    if (!rc && log) {
        fprintf(log, "  %-10s%s  %.2f MB  %d tensors  W%sA%d\n", "wrote", p->out_path, (double)st.bytes / 1e6, st.tensors,
                nd_cq_bits_name(st.default_bits), act_bits);
        fflush(log);
    }
    return rc;
}
