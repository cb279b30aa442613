/* cmd_finetune.c - `needle finetune`: the flags of needle_finetune (LoRA by
 * default, or full), then the fine-tuned model scored on a test split. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/error.h"
#include "eval/eval.h"
#include "needle.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle finetune DATA --checkpoint BASE --out OUT.safetensors\n"
            "         [--full] [--tokenizer TOK.model] [--epochs auto|N] [--lr auto|X] [--batch-size 16]\n"
            "         [--val FILE] [--val-split 0.1] [--eval-every auto|N] [--patience 3] [--keep-last]\n"
            "         [--test FILE] [--lora-rank 16] [--lora-alpha 32] [--max-len 1024] [--seed 0] [--threads N]\n"
            "         [--log-every 10] [--bucket global|batch] [--bucket-window 50] [--plot loss.svg]\n"
            "         [--layout auto|2.0.8|2.0.15] [--qat-bits auto|none|2|4] [--decision-weight 1]\n"
            "         [--save-every N] [--state-file OUT.state] [--resume STATE] [--stop-after N]\n"
            "DATA is a JSONL file of rows {query, tools, answers|function_calls, reasoning?, system?, turns?},\n"
            "or a directory written by `needle generate-data` (DIR/train.jsonl; DIR/val.jsonl is the\n"
            "validation set and DIR/test.jsonl the test set unless --val / --test say otherwise).\n"
            "BASE is a .safetensors checkpoint or a .cact (dequantised, with a warning: prefer the float\n"
            "checkpoint, e.g. models/needle-default.safetensors).  LoRA on q,k,v,gate,out of every layer\n"
            "(base frozen) writes the adapter (`<param>.lora_A` (L,in,r) / `.lora_B` (L,r,out); a Needle 3 base:\n"
            "the reference's layout, `lora/<param path>/A` / `/B`); --full trains every parameter (heads\n"
            "excepted) and writes the whole checkpoint (Needle 3: in the reference's checkpoint layout).\n"
            "  --epochs auto     (default) about 300 steps: 1 to 20 epochs by the data's size\n"
            "  --lr auto         (default) 5e-4 with --full, 2e-3 for LoRA (warmup 5%%, cosine)\n"
            "  --eval-every N    validation loss every N steps as well as after each epoch (auto: ~10 a run)\n"
            "  --patience N      stop after N validations without a better loss (default 3; 0: never)\n"
            "  --keep-last       write the last weights (default: those of the best validation loss)\n"
            "  --test FILE       after training, score the result on FILE (as `needle eval`) and print a\n"
            "                    table; LoRA adapters are scored merged and built at 4 bits\n"
            "  --bucket global   (default, SPEC) every batch padded to one power of two >= 128 for the run\n"
            "  --bucket batch    each batch padded to the power of two >= 16 fitting its longest row; rows of\n"
            "                    similar length are grouped (sorted within windows of --bucket-window batches,\n"
            "                    0 = no grouping), then the batch order is shuffled (deterministic per seed)\n"
            "  --save-every N    every N steps write the whole training state atomically to --state-file\n"
            "                    (default OUT.state); --resume STATE continues such a run bit for bit (its\n"
            "                    options are taken from the state)\n"
            "  --stop-after N    stop after N steps in total (with --save-every: a planned interruption)\n"
            "  --plot FILE.svg   write the training and validation loss curves (updated every epoch)\n"
            "  --layout L        the chat layout rows are rendered in (default auto = what `needle run` uses for\n"
            "                    this model: 2.0.8 for Needle 2; 2.0.15 renders as cactus-needle 2.0.15 does)\n"
            "  --seed N          drives the LoRA initialisation, the validation split and the epoch order\n"
            "  --qat-bits M      LoRA under the export's numerics (default auto): the merged weights through CQ\n"
            "                    with a straight-through estimator at the config's weight_bits map (auto; else 4)\n"
            "                    or at 2/4 bits, activations through the A8 deploy path; none = full precision.\n"
            "                    The adapter records it (qat_bits, qat_bits_map, seed) and `needle build --lora`\n"
            "                    deploys that scheme, refusing a --bits that differs.  With --full: float\n"
            "                    unless 2 or 4 is given; then a float master is trained through CQ at that\n"
            "                    width + A8 (build the checkpoint at the same --bits)\n"
            "  --decision-weight W  scale the loss gradient of each answer's first token (right after\n"
            "                    <tool_call>: call or no call) by W; 1 (default) is plain cross-entropy\n");
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static void print_rate(const char *what, int num, int den, const char *note)
{
    if (den > 0) printf("  %-16s %6.1f%%  (%d of %d%s)\n", what, 100.0 * num / den, num, den, note);
    else printf("  %-16s      -   (no rows)\n", what);
}

/* Score `model` on the test rows and print the table. */
static int score_test(const char *model, const char *tokenizer, const char *test, int threads, int layout)
{
    needle_error err = {0, ""};
    needle_model_options mo;
    memset(&mo, 0, sizeof mo);
    mo.threads = threads;
    mo.layout = layout; /* scored in the layout it was trained in */
    needle_model *m = NULL;
    nd_eval_opts o;
    memset(&o, 0, sizeof o);
    o.tools_from_data = 1;
    o.report = stderr;
    nd_eval_result r;
    memset(&r, 0, sizeof r);
    if (needle_model_open(model, tokenizer, &mo, &m, &err) || nd_eval_file(m, test, &o, &r, &err)) {
        fprintf(stderr, "needle finetune: scoring %s on %s: %s\n", model, test, err.message);
        needle_model_close(m);
        return 1;
    }
    needle_model_close(m);
    printf("%s on %s (%d rows, as `needle eval`):\n", model, test, r.rows);
    print_rate("exact call", r.exact_ok, r.rows, "");
    print_rate("tool name", r.name_ok, r.rows, "");
    double p = r.arg_pred ? (double)r.arg_tp / (double)r.arg_pred : 0, q = r.arg_gold ? (double)r.arg_tp / (double)r.arg_gold : 0;
    printf("  %-16s %6.3f   (precision %.3f, recall %.3f)\n", "argument F1", p + q > 0 ? 2 * p * q / (p + q) : 0.0, p, q);
    print_rate("refusal", r.refusal_ok, r.off_topic, ", rows expecting no call");
    print_rate("false refusal", r.false_refusals, r.on_topic, ", rows expecting calls");
    print_rate("schema-valid", r.schema_valid, r.rows, "");
    return 0;
}

int cmd_finetune(int argc, char **argv)
{
    const char *data = NULL, *v, *test = NULL;
    needle_finetune_options o;
    needle_finetune_options_default(&o);
    const char *C = "finetune";
    cli_common c;
    cli_common_init(&c, CLI_TOKENIZER | CLI_THREADS | CLI_SEED | CLI_LAYOUT);
    for (int i = 1; i < argc; i++) {
        int bad = 0, shared;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if ((shared = cli_common_parse(&c, C, argc, argv, &i)) != 0) bad = shared < 0;
        else if (!strcmp(argv[i], "--full")) o.full = 1;
        else if (!strcmp(argv[i], "--keep-last")) o.keep_last = 1;
        else if ((v = cli_flag_value(argc, argv, &i, "--checkpoint"))) o.checkpoint_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--out"))) o.out_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--val"))) o.val_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--test"))) test = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--epochs")))
            bad = strcmp(v, "auto") ? cli_int(C, "--epochs", v, 1, 1000000, &o.epochs) : (o.epochs = 0);
        else if ((v = cli_flag_value(argc, argv, &i, "--lr")))
            bad = strcmp(v, "auto") ? cli_double(C, "--lr", v, 1e-12, 10.0, &o.lr) : (o.lr = 0, 0);
        else if ((v = cli_flag_value(argc, argv, &i, "--eval-every")))
            bad = strcmp(v, "auto") ? cli_int(C, "--eval-every", v, 1, 1 << 30, &o.eval_every) : (o.eval_every = 0);
        else if ((v = cli_flag_value(argc, argv, &i, "--patience"))) bad = cli_int(C, "--patience", v, 0, 1 << 20, &o.patience);
        else if ((v = cli_flag_value(argc, argv, &i, "--batch-size")))
            bad = cli_int(C, "--batch-size", v, 1, 65536, &o.batch_size);
        else if ((v = cli_flag_value(argc, argv, &i, "--lora-rank"))) bad = cli_int(C, "--lora-rank", v, 1, 4096, &o.lora_rank);
        else if ((v = cli_flag_value(argc, argv, &i, "--lora-alpha")))
            bad = cli_double(C, "--lora-alpha", v, 1e-6, 1e6, &o.lora_alpha);
        else if ((v = cli_flag_value(argc, argv, &i, "--max-len"))) bad = cli_int(C, "--max-len", v, 2, 1 << 20, &o.max_len);
        else if ((v = cli_flag_value(argc, argv, &i, "--val-split")))
            bad = cli_double(C, "--val-split", v, 0.0, 0.99, &o.val_split);
        else if ((v = cli_flag_value(argc, argv, &i, "--log-every"))) bad = cli_int(C, "--log-every", v, 0, 1 << 30, &o.log_every);
        else if ((v = cli_flag_value(argc, argv, &i, "--bucket-window")))
            bad = cli_int(C, "--bucket-window", v, 0, 1 << 20, &o.bucket_window);
        else if ((v = cli_flag_value(argc, argv, &i, "--bucket"))) {
            if (!strcmp(v, "global")) o.bucket_batch = 0;
            else if (!strcmp(v, "batch")) o.bucket_batch = 1;
            else return cli_fail(C, "--bucket must be global or batch");
        } else if ((v = cli_flag_value(argc, argv, &i, "--save-every")))
            bad = cli_int(C, "--save-every", v, 0, 1 << 30, &o.save_every);
        else if ((v = cli_flag_value(argc, argv, &i, "--state-file"))) o.state_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--resume"))) o.resume_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--stop-after")))
            bad = cli_int(C, "--stop-after", v, 0, 1 << 30, &o.stop_after);
        else if ((v = cli_flag_value(argc, argv, &i, "--plot"))) o.plot_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--qat-bits"))) o.qat_bits = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--decision-weight")))
            bad = cli_double(C, "--decision-weight", v, 0.0, 1000.0, &o.decision_weight);
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
    if (!data || !o.checkpoint_path || !o.out_path) {
        fprintf(stderr, "needle finetune: missing %s\n",
                !data ? "the DATA argument" : !o.checkpoint_path ? "--checkpoint" : "--out");
        usage(stderr);
        return 2;
    }
    o.threads = c.threads;
    o.layout = c.layout;
    if (c.have_seed) o.seed = c.seed;
    /* a generate-data directory: its train, val and test files */
    char train_p[4200], val_p[4200], test_p[4200];
    if (is_dir(data)) {
        snprintf(train_p, sizeof train_p, "%s/train.jsonl", data);
        snprintf(val_p, sizeof val_p, "%s/val.jsonl", data);
        snprintf(test_p, sizeof test_p, "%s/test.jsonl", data);
        if (!is_file(train_p)) {
            fprintf(stderr, "needle finetune: %s is a directory without train.jsonl\n", data);
            return 1;
        }
        data = train_p;
        if (!o.val_path && is_file(val_p)) o.val_path = val_p;
        if (!test && is_file(test_p)) test = test_p;
    }
    o.data_path = data;
    /* the default tokenizer is found from the executable, so finetune works from any directory */
    char *tok_default = NULL;
    o.tokenizer_path = c.tokenizer;
    if (!o.tokenizer_path) {
        o.tokenizer_path = tok_default = cli_repo_file("tests/golden/tok8k.model");
        if (!o.tokenizer_path) return cli_fail(C, "no tokenizer: pass --tokenizer TOK.model (the default "
                                                  "tests/golden/tok8k.model is not next to this needle)");
    }
    needle_error err = {0, ""};
    needle_finetune_result res;
    int status = needle_finetune(&o, &res, &err) ? 1 : 0;
    if (status) fprintf(stderr, "needle finetune: %s\n", err.message);
    else {
        if (!o.keep_last && res.best_val_loss == res.best_val_loss /* not NAN: there was a validation */ &&
            (res.early_stopped || res.best_step != res.steps))
            fprintf(stderr, "  the output holds the weights of step %d (best validation loss %.4f)\n", res.best_step,
                    res.best_val_loss);
        if (test) {
            fflush(stderr);
            if (o.full) status = score_test(o.out_path, o.tokenizer_path, test, o.threads, o.layout);
            else { /* an adapter: merged into its base and built at 4 bits, as it would ship */
                char merged[4200];
                snprintf(merged, sizeof merged, "%s.eval.cact", o.out_path);
                needle_build_options b = {o.checkpoint_path, o.tokenizer_path, "4", NULL, o.out_path, merged, 0, 1};
                if (needle_build(&b, &err)) {
                    fprintf(stderr, "needle finetune: building %s to score it: %s\n", merged, err.message);
                    status = 1;
                } else {
                    status = score_test(merged, NULL, test, o.threads, o.layout);
                    unlink(merged);
                }
            }
        }
    }
    free(tok_default);
    return status;
}
