/* cmd_train_heads.c - `needle train-heads`: calibrate the confidence head and
 * train the contrastive (tool retrieval) head on a frozen checkpoint.
 *
 *   needle train-heads --model CKPT.safetensors --tokenizer TOK.model DATA.jsonl --out OUT.safetensors
 *                      [--epochs N] [--lr X] [--batch N] [--holdout F] [--max-rows N]
 *                      [--max-new-tokens N] [--max-cell-mb N] [--seed N] [--only confidence|contrastive]
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "needle.h"
#include "train/heads_train.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle train-heads --model CKPT.safetensors --tokenizer TOK.model DATA.jsonl --out OUT.safetensors\n"
            "                          [--epochs N] [--lr X] [--batch N] [--holdout F] [--max-rows N]\n"
            "                          [--max-new-tokens N] [--max-cell-mb N] [--seed N] [--only confidence|contrastive]\n"
            "The body stays frozen.  The confidence head learns whether the agent's call list for each row is\n"
            "exactly right (logistic loss); the contrastive head learns to rank each query's tool first among\n"
            "the batch's tools (InfoNCE, learned temperature).  Prints the losses and the expected calibration\n"
            "error (10 bins) on held-out rows before and after, then writes OUT with the new heads.\n"
            "On a Needle 3 checkpoint: the embedding head instead, with a pairwise sigmoid loss (its learned\n"
            "temperature and bias); the router head is copied unchanged (no training signal is defined).\n");
}

int cmd_train_heads(int argc, char **argv)
{
    const char *data = NULL, *out = NULL, *v;
    cli_common c;
    cli_common_init(&c, CLI_MODEL | CLI_TOKENIZER | CLI_SEED);
    nd_heads_train_options o;
    memset(&o, 0, sizeof o);
    o.log = stderr;
    for (int i = 1; i < argc; i++) {
        int bad = 0, shared;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if ((shared = cli_common_parse(&c, "train-heads", argc, argv, &i)) != 0) {
            bad = shared < 0;
        } else if ((v = cli_flag_value(argc, argv, &i, "--out"))) {
            out = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--epochs"))) {
            bad = cli_int("train-heads", "--epochs", v, 1, 100000, &o.epochs);
        } else if ((v = cli_flag_value(argc, argv, &i, "--lr"))) {
            bad = cli_double("train-heads", "--lr", v, 1e-9, 10, &o.lr);
        } else if ((v = cli_flag_value(argc, argv, &i, "--batch"))) {
            bad = cli_int("train-heads", "--batch", v, 2, 65536, &o.batch);
        } else if ((v = cli_flag_value(argc, argv, &i, "--holdout"))) {
            bad = cli_double("train-heads", "--holdout", v, 0.01, 0.9, &o.holdout);
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-rows"))) {
            bad = cli_int("train-heads", "--max-rows", v, 1, 1000000000, &o.max_rows);
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-new-tokens"))) {
            bad = cli_int("train-heads", "--max-new-tokens", v, 1, 1 << 20, &o.max_new_tokens);
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-cell-mb"))) {
            int mb = 0;
            bad = cli_int("train-heads", "--max-cell-mb", v, 1, 1 << 24, &mb);
            o.max_cell_mb = (size_t)mb;
        } else if ((v = cli_flag_value(argc, argv, &i, "--only"))) {
            if (!strcmp(v, "confidence")) o.skip_contrastive = 1;
            else if (!strcmp(v, "contrastive")) o.skip_confidence = 1;
            else {
                fprintf(stderr, "needle train-heads: --only must be confidence or contrastive (got '%s')\n", v);
                bad = 1;
            }
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "needle train-heads: unknown option '%s' (or missing value)\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!data) {
            data = argv[i];
        } else {
            fprintf(stderr, "needle train-heads: one DATA file expected, got '%s' and '%s'\n", data, argv[i]);
            return 2;
        }
        if (bad) return 2;
    }
    const char *model = c.model, *tok = c.tokenizer;
    if (c.have_seed) o.seed = c.seed;
    if (!model || !data || !out) {
        fprintf(stderr, "needle train-heads: missing %s\n", !model ? "--model" : !data ? "the DATA.jsonl argument" : "--out");
        usage(stderr);
        return 2;
    }
    nd_heads_report r;
    needle_error err = {0};
    if (nd_heads_train(model, tok, data, out, &o, &r, &err)) return cli_fail("train-heads", err.message);
    printf("{\"rows\":%d,\"failed_turns\":%d,\n", r.rows, r.failed_turns);
    printf(" \"confidence\":{\"train\":%d,\"held_out\":%d,\"correct\":%d,\"loss_before\":%.6f,\"loss_after\":%.6f,"
           "\"held_loss_before\":%.6f,\"held_loss_after\":%.6f,\"ece_before\":%.6f,\"ece_after\":%.6f,"
           "\"envelope_ece_before\":%.6f,\"envelope_ece_after\":%.6f},\n",
           r.conf_train, r.conf_held, r.conf_correct, r.conf_loss_before, r.conf_loss_after, r.held_loss_before,
           r.held_loss_after, r.ece_before, r.ece_after, r.env_ece_before, r.env_ece_after);
    printf(" \"contrastive\":{\"train\":%d,\"held_out\":%d,\"tools\":%d,\"loss_before\":%.6f,\"loss_after\":%.6f,"
           "\"held_top1_before\":%.4f,\"held_top1_after\":%.4f},\n",
           r.con_train, r.con_held, r.con_tools, r.con_loss_before, r.con_loss_after, r.con_top1_before,
           r.con_top1_after);
    printf(" \"out\":\"%s\"}\n", out);
    return 0;
}
