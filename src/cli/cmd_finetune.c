/* cmd_finetune.c - `needle finetune`: LoRA (default) or full fine-tuning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "io/safetensors.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "train/data.h"
#include "train/qat.h"
#include "train/train_ckpt.h"
#include "train/trainer.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle finetune DATA.jsonl --checkpoint BASE.safetensors --out OUT.safetensors\n"
            "         [--tokenizer TOK.model] [--epochs 3] [--batch-size 16] [--lr 1e-4]\n"
            "         [--lora-rank 16] [--lora-alpha 32] [--max-len 1024] [--val-split 0.1]\n"
            "         [--seed 0] [--threads N] [--log-every 10] [--full] [--layout auto|2.0.8|2.0.15]\n"
            "         [--qat-bits auto|none|2|4]\n"
            "         [--bucket global|batch] [--bucket-window 50] [--plot loss.svg]\n"
            "         [--save-every N] [--state-file OUT.state] [--resume STATE] [--stop-after N]\n"
            "LoRA on q,k,v,gate,out of every layer (base frozen); the adapter is written as\n"
            "`<param>.lora_A` (L,in,r) / `.lora_B` (L,r,out).  --full trains every parameter\n"
            "(heads excepted) and writes the whole checkpoint.  Rows are JSONL objects\n"
            "{query, tools, answers|function_calls, reasoning?, system?}.\n"
            "  --bucket global   (default, SPEC) every batch padded to one power of two >= 128 for the run\n"
            "  --bucket batch    each batch padded to the power of two >= 16 fitting its longest row; rows of\n"
            "                    similar length are grouped (sorted within windows of --bucket-window batches,\n"
            "                    0 = no grouping), then the batch order is shuffled (deterministic per seed)\n"
            "  --save-every N    every N steps write the whole training state atomically to --state-file\n"
            "                    (default OUT.state); --resume STATE continues such a run bit for bit (its\n"
            "                    options are taken from the state; conflicting flags are an error)\n"
            "  --stop-after N    stop after N steps in total (with --save-every: a planned interruption)\n"
            "  --plot FILE.svg   write the training and validation loss curves (updated every epoch)\n"
            "  --layout L        the chat layout rows are rendered in (default auto = what `needle run` uses for\n"
            "                    this model: 2.0.8 for Needle 2; 2.0.15 renders as cactus-needle 2.0.15 does)\n"
            "  --seed N          drives the LoRA initialisation, the validation split and the epoch order\n"
            "  --qat-bits M      LoRA under the export's numerics (default auto): the merged weights through CQ\n"
            "                    with a straight-through estimator at the config's weight_bits map (auto; else 4)\n"
            "                    or at 2/4 bits, activations through the A8 deploy path; none = full precision.\n"
            "                    The adapter records it (qat_bits, qat_bits_map, seed) and `needle build --lora`\n"
            "                    deploys that scheme, refusing a --bits that differs\n");
}

int cmd_finetune(int argc, char **argv)
{
    const char *data = NULL, *ckpt = NULL, *out = NULL, *tok_path = NULL, *v, *qat_mode = NULL;
    int full = 0, rank = 16, threads = 0;
    double alpha = 32;
    nd_trainer_opts o;
    nd_trainer_opts_default(&o);
    /* --resume first: the saved options become the defaults the flags then override */
    char state_default[4200] = "";
    for (int i = 1; i < argc; i++) {
        if ((v = cli_flag_value(argc, argv, &i, "--resume"))) {
            o.resume_path = v;
            needle_error e = {0, ""};
            nd_safetensors st;
            if (nd_st_open(v, &st, &e)) return cli_fail("finetune", e.message);
            const char *opts = nd_st_meta(&st, "options");
            int rc = opts ? nd_trainer_parse_description(opts, &o, &full, &rank, &alpha, &e)
                          : nd_errorf(&e, NEEDLE_EFORMAT, "%s: not a training state (no \"options\")", v);
            nd_st_close(&st);
            if (rc) return cli_fail("finetune", e.message);
        }
    }
    const char *C = "finetune";
    cli_common c;
    cli_common_init(&c, CLI_TOKENIZER | CLI_THREADS | CLI_SEED | CLI_LAYOUT);
    for (int i = 1; i < argc; i++) {
        int bad = 0, shared;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if ((shared = cli_common_parse(&c, C, argc, argv, &i)) != 0) bad = shared < 0;
        else if (!strcmp(argv[i], "--full")) full = 1;
        else if ((v = cli_flag_value(argc, argv, &i, "--checkpoint"))) ckpt = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--out"))) out = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--epochs"))) bad = cli_int(C, "--epochs", v, 1, 1000000, &o.epochs);
        else if ((v = cli_flag_value(argc, argv, &i, "--batch-size")))
            bad = cli_int(C, "--batch-size", v, 1, 65536, &o.batch_size);
        else if ((v = cli_flag_value(argc, argv, &i, "--lr"))) bad = cli_double(C, "--lr", v, 1e-12, 10.0, &o.lr);
        else if ((v = cli_flag_value(argc, argv, &i, "--lora-rank"))) bad = cli_int(C, "--lora-rank", v, 1, 4096, &rank);
        else if ((v = cli_flag_value(argc, argv, &i, "--lora-alpha")))
            bad = cli_double(C, "--lora-alpha", v, 1e-6, 1e6, &alpha);
        else if ((v = cli_flag_value(argc, argv, &i, "--max-len"))) bad = cli_int(C, "--max-len", v, 2, 1 << 20, &o.max_len);
        else if ((v = cli_flag_value(argc, argv, &i, "--val-split")))
            bad = cli_double(C, "--val-split", v, 0.0, 0.99, &o.val_split);
        else if ((v = cli_flag_value(argc, argv, &i, "--log-every"))) bad = cli_int(C, "--log-every", v, 0, 1 << 30, &o.log_every);
        else if ((v = cli_flag_value(argc, argv, &i, "--bucket-window")))
            bad = cli_int(C, "--bucket-window", v, 0, 1 << 20, &o.bucket_window);
        else if ((v = cli_flag_value(argc, argv, &i, "--bucket"))) {
            if (!strcmp(v, "global")) o.bucket = ND_BUCKET_GLOBAL;
            else if (!strcmp(v, "batch")) o.bucket = ND_BUCKET_BATCH;
            else return cli_fail("finetune", "--bucket must be global or batch");
        } else if ((v = cli_flag_value(argc, argv, &i, "--save-every")))
            bad = cli_int(C, "--save-every", v, 0, 1 << 30, &o.save_every);
        else if ((v = cli_flag_value(argc, argv, &i, "--state-file"))) o.save_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--resume"))) o.resume_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--stop-after")))
            bad = cli_int(C, "--stop-after", v, 0, 1 << 30, &o.stop_after);
        else if ((v = cli_flag_value(argc, argv, &i, "--plot"))) o.plot_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--qat-bits"))) qat_mode = v;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "needle finetune: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!data) data = argv[i];
        else {
            fprintf(stderr, "needle finetune: one DATA file expected, got '%s' and '%s'\n", data, argv[i]);
            return 2;
        }
        if (bad) return 2;
    }
    tok_path = c.tokenizer;
    threads = c.threads;
    if (c.have_seed) o.seed = c.seed;
    if (!data || !ckpt || !out) {
        fprintf(stderr, "needle finetune: missing %s\n", !data ? "the DATA.jsonl argument" : !ckpt ? "--checkpoint" : "--out");
        usage(stderr);
        return 2;
    }
    if (o.epochs < 1 || o.batch_size < 1 || o.max_len < 2 || o.val_split < 0 || o.val_split >= 1 || o.lr <= 0 ||
        (!full && (rank < 1 || alpha <= 0)) || o.bucket_window < 0 || o.save_every < 0 || o.stop_after < 0)
        return cli_fail("finetune", "an option is out of range (see --help)");
    /* the default tokenizer is found from the executable, so finetune works from any directory */
    char *tok_default = NULL;
    if (!tok_path) {
        tok_path = tok_default = cli_repo_file("tests/golden/tok8k.model");
        if (!tok_path) return cli_fail("finetune", "no tokenizer: pass --tokenizer TOK.model (the default "
                                                   "tests/golden/tok8k.model is not next to this needle)");
    }
    if (o.save_every > 0 && !o.save_path) {
        snprintf(state_default, sizeof state_default, "%s.state", out);
        o.save_path = state_default;
    }

    needle_error err = {0, ""};
    nd_tokenizer *tok = NULL;
    nd_train_model m;
    nd_dataset ds;
    nd_threadpool *pool = NULL;
    int status = 1, have_model = 0, have_data = 0;
    if (nd_tokenizer_load_spm(tok_path, &tok, &err)) goto fail;
    int ignored = 0;
    if (nd_train_model_load(&m, ckpt, &ignored, &err)) goto fail;
    have_model = 1;
    if (ignored) fprintf(stderr, "  %d checkpoint tensors not used by the forward pass are not trained%s\n", ignored,
                         full ? " and not written" : "");
    /* rows longer than the model can see are skipped (and reported), never cut */
    if (o.max_len > m.cfg.max_seq_len) o.max_len = m.cfg.max_seq_len;
    /* the rows are rendered in the layout the model will be run with (auto: as `needle run` resolves it) */
    int layout = nd_chat_layout_resolve(c.layout, 2);
    if (nd_dataset_load_jsonl_layout(data, tok, layout, o.max_len, stderr, &ds, &err)) goto fail;
    have_data = 1;
    fprintf(stderr, "  %s: %d rows used of %d (%d malformed or invalid, %d longer than %d tokens), layout %s\n", data,
            ds.n, ds.lines, ds.malformed, ds.too_long, o.max_len, nd_chat_layout_name(layout));
    if (nd_threadpool_create(threads, &pool, &err)) goto fail;
    m.pool = pool;
    if (full ? nd_train_enable_full(&m, &err) : nd_train_lora_create(&m, rank, (float)alpha, o.seed, &err)) goto fail;
    /* SPEC 12: LoRA trains under the numerics the export deploys unless --qat-bits none */
    int qat_bits = 0, qat_map = 0;
    if (nd_qat_parse_mode(qat_mode, &m.cfg, &qat_bits, &qat_map)) {
        nd_errorf(&err, NEEDLE_EINVAL, "--qat-bits must be auto, none, 2 or 4 (got '%s')", qat_mode);
        goto fail;
    }
    if (full && qat_mode && (!strcmp(qat_mode, "2") || !strcmp(qat_mode, "4"))) {
        nd_errorf(&err, NEEDLE_EINVAL, "--qat-bits %s needs LoRA: --full trains in full precision", qat_mode);
        goto fail;
    }
    if (!full && (qat_bits || qat_map) && nd_qat_enable(&m, qat_bits, &err)) goto fail;
    if (m.qat && m.qat->bits)
        fprintf(stderr, "  numerics: CQ W%d (straight-through) + A%d activations, as the export deploys\n", m.qat->bits,
                m.qat->act_bits);
    else if (m.qat)
        fprintf(stderr, "  numerics: CQ mixed[%s] (straight-through) + A%d activations, as the export deploys\n",
                m.qat->bits_map, m.qat->act_bits);
    else fprintf(stderr, "  numerics: full precision\n");
    o.progress = stderr;
    nd_trainer_result res;
    if (nd_trainer_run(&m, &ds, nd_tokenizer_pad(tok), &o, &res, &err)) goto fail;
    if (full ? nd_train_save_full(&m, out, &err) : nd_train_save_lora(&m, out, &err)) goto fail;
    fprintf(stderr, "  %d steps in %.1f s (%.0f tok/s, %.0f%% of computed positions are real tokens); loss %.4f -> %.4f; "
            "wrote %s %s\n", res.steps, res.seconds, res.tokens_per_s,
            res.padded_tokens ? 100.0 * (double)res.real_tokens / (double)res.padded_tokens : 0.0, res.first_loss,
            res.last_loss, full ? "checkpoint" : "adapter", out);
    if (res.stopped) fprintf(stderr, "  stopped early by --stop-after (the output holds the weights at that step)\n");
    status = 0;
fail:
    if (status) fprintf(stderr, "needle finetune: %s\n", err.message);
    if (have_data) nd_dataset_free(&ds);
    if (have_model) nd_train_model_free(&m);
    nd_threadpool_free(pool);
    nd_tokenizer_free(tok);
    free(tok_default);
    return status;
}
