/* cmd_logits.c - `needle logits`: run the forward pass on ids, print logits as JSON.
 *
 * Uses the session API exactly as generation does: the ids are prefilled (as
 * one chunk up to 512 ids, in 512-id chunks beyond), or with --decode-from K
 * the first K are prefilled and the rest fed one token at a time.  Memory is
 * 512 x V floats plus the asked rows, whatever the number of ids. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/error.h"
#include "model/heads.h"
#include "model/model.h"
#include "model/params.h"

static int usage(void)
{
    fprintf(stderr, "usage: needle logits --model FILE --ids 2,17,99,... [--positions 0,5,9] [--window W --sinks S]\n"
                    "                     [--float] [--acts a8|float] [--kv-bits 32|8] [--decode-from K] [--threads N]\n"
                    "                     [--heads] [--layers N]\n"
                    "Prints {\"positions\",\"logits\" (full rows at positions, default the last),\n"
                    "\"argmax\" and \"logsumexp\" (every position)}; --heads adds \"heads\": the heads the file\n"
                    "has over all the ids (embedding, confidence_logit, router_logits; null when absent).\n"
                    "--layers N runs ladder rung N of an unsliced Needle 3 file.\n");
    return 2;
}

/* Prefill at most this many positions per call: the logits buffer is CHUNK x V
 * floats whatever the number of ids (inputs up to CHUNK ids are one prefill). */
#define CHUNK 512

/* What the output needs from one position's row: its argmax and logsumexp, and
 * the whole row only when the position was asked for. */
static void take_row(const float *row, int V, int t, const int *pos, int np, float *asked, int *amax, double *lse)
{
    int best = 0;
    float mx = row[0];
    for (int k = 1; k < V; k++)
        if (row[k] > row[best]) best = k;
    mx = row[best];
    double sum = 0.0;
    for (int k = 0; k < V; k++) sum += exp((double)row[k] - mx);
    amax[t] = best;
    lse[t] = mx + log(sum);
    for (int i = 0; i < np; i++)
        if (pos[i] == t) memcpy(asked + (size_t)i * V, row, sizeof(float) * (size_t)V);
}

static void print_floats(const char *name, const float *v, int n)
{
    printf(",\"%s\":[", name);
    for (int i = 0; i < n; i++) printf("%s%.9g", i ? "," : "", v[i]);
    printf("]");
}

/* The heads over all the ids (one fresh prefill that keeps the cells). */
static int print_heads(const nd_model *m, nd_state *s, const int *ids, int T, needle_error *err)
{
    const nd_weights *w = &m->weights;
    int L = w->cfg.num_layers, d = w->cfg.d_model, rc = 0;
    size_t n_cells = (size_t)T * (size_t)(L + 1);
    float *cells = malloc(sizeof(float) * n_cells * (size_t)d), *last = malloc(sizeof(float) * (size_t)w->cfg.vocab_size);
    float out[4096];
    if (!cells || !last) rc = nd_errorf(err, NEEDLE_ENOMEM, "out of memory");
    nd_state_reset(s);
    if (!rc) rc = nd_state_eval(s, ids, T, NULL, last, cells, err);
    if (!rc) {
        printf(",\"generation\":%d,\"heads\":{", nd_config_generation(&w->cfg));
        if (w->contrastive.present && w->contrastive.out_dim <= 4096 &&
            !(rc = nd_head_contrastive(m, cells, (int)n_cells, out, err))) {
            printf("\"embedding\":[");
            for (int i = 0; i < w->contrastive.out_dim; i++) printf("%s%.9g", i ? "," : "", out[i]);
            printf("]");
        } else {
            printf("\"embedding\":null");
        }
        if (!rc && w->confidence.present && !(rc = nd_head_confidence(m, cells, (int)n_cells, out, err)))
            printf(",\"confidence_logit\":%.9g", out[0]);
        else printf(",\"confidence_logit\":null");
        if (!rc && w->router.present && !(rc = nd_head_router(m, cells, (int)n_cells, out, err))) {
            print_floats("router_logits", out, 3);
            if (w->router.calibration) print_floats("router_calibration", w->router.calibration, 3);
        } else {
            printf(",\"router_logits\":null");
        }
        printf("}");
    }
    free(cells);
    free(last);
    return rc;
}

int cmd_logits(int argc, char **argv)
{
    const char *ids_s = NULL, *pos_s = NULL, *v;
    int sinks = 0, dequant = 0, decode_from = -1, heads = 0, layers = 0;
    cli_common c;
    cli_common_init(&c, CLI_MODEL | CLI_THREADS | CLI_WINDOW | CLI_KV_BITS | CLI_ACTS);
    for (int i = 1; i < argc; i++) {
        int bad = 0, shared;
        if ((shared = cli_common_parse(&c, "logits", argc, argv, &i)) != 0) bad = shared < 0;
        else if ((v = cli_flag_value(argc, argv, &i, "--ids"))) ids_s = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--positions"))) pos_s = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--sinks"))) bad = cli_int("logits", "--sinks", v, 0, CLI_MAX_WINDOW, &sinks);
        else if ((v = cli_flag_value(argc, argv, &i, "--decode-from")))
            bad = cli_int("logits", "--decode-from", v, 0, 1 << 24, &decode_from);
        else if ((v = cli_flag_value(argc, argv, &i, "--layers")))
            bad = cli_int("logits", "--layers", v, 1, 64, &layers);
        else if (!strcmp(argv[i], "--float")) dequant = 1;
        else if (!strcmp(argv[i], "--heads")) heads = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(); return 0; }
        else {
            fprintf(stderr, "needle logits: unknown option or argument '%s'\n", argv[i]);
            return usage();
        }
        if (bad) return 2;
    }
    const char *model = c.model;
    if (!model || !ids_s) {
        fprintf(stderr, "needle logits: missing %s\n", !model ? "--model" : "--ids");
        return usage();
    }
    int *ids = NULL, *pos = NULL;
    int T = cli_parse_int_list(ids_s, &ids);
    if (T <= 0) { free(ids); return cli_fail("logits", "--ids must be a non-empty list of integers"); }
    int np = 1;
    if (pos_s) {
        np = cli_parse_int_list(pos_s, &pos);
        if (np <= 0) { free(ids); free(pos); return cli_fail("logits", "--positions must be a list of integers"); }
        for (int i = 0; i < np; i++)
            if (pos[i] < 0 || pos[i] >= T) {
                free(ids); free(pos);
                return cli_fail("logits", "a --positions entry is outside the ids");
            }
    } else {
        pos = malloc(sizeof(int));
        if (!pos) { free(ids); return cli_fail("logits", "out of memory"); }
        pos[0] = T - 1;
    }
    if (decode_from < 0 || decode_from > T) decode_from = T;

    needle_error err = {0};
    nd_model_options mo = {.threads = c.threads, .dequantize = dequant, .layers = layers, .acts = c.acts};
    nd_model *m = NULL;
    nd_state *s = NULL;
    int status = 1;
    float *chunk = NULL, *asked = NULL;
    int *amax = NULL;
    double *lse = NULL;
    uint8_t want[CHUNK];
    memset(want, 1, sizeof want);
    if (nd_model_open(model, &mo, &m, &err)) goto done;
    nd_state_options so = {.window = c.window, .sinks = sinks, .kv_bits = c.kv_bits};
    if (so.window > m->weights.cfg.max_seq_len) {
        snprintf(err.message, sizeof err.message, "--window %d is larger than the model's max_seq_len %d", so.window,
                 m->weights.cfg.max_seq_len);
        goto done;
    }
    if (nd_state_create(m, &so, &s, &err)) goto done;
    /* rows are vocab_size apart; Needle 3's out_vocab scores only the first W */
    int V = m->weights.cfg.vocab_size, W = nd_config_logit_width(&m->weights.cfg);
    chunk = malloc(sizeof(float) * (size_t)CHUNK * (size_t)V);
    asked = malloc(sizeof(float) * (size_t)np * (size_t)V);
    amax = malloc(sizeof(int) * (size_t)T);
    lse = malloc(sizeof(double) * (size_t)T);
    if (!chunk || !asked || !amax || !lse) { snprintf(err.message, sizeof err.message, "out of memory"); goto done; }
    for (int at = 0; at < decode_from; at += CHUNK) {
        int n = decode_from - at < CHUNK ? decode_from - at : CHUNK;
        if (nd_state_eval(s, ids + at, n, want, chunk, NULL, &err)) goto done;
        for (int k = 0; k < n; k++) take_row(chunk + (size_t)k * V, W, at + k, pos, np, asked, amax, lse);
    }
    for (int t = decode_from; t < T; t++) {
        if (nd_state_eval(s, ids + t, 1, want, chunk, NULL, &err)) goto done;
        take_row(chunk, W, t, pos, np, asked, amax, lse);
    }

    printf("{\"positions\":[");
    for (int i = 0; i < np; i++) printf("%s%d", i ? "," : "", pos[i]);
    printf("],\"logits\":[");
    for (int i = 0; i < np; i++) {
        const float *row = asked + (size_t)i * W;
        printf("%s[", i ? "," : "");
        for (int k = 0; k < W; k++) printf("%s%.9g", k ? "," : "", row[k]);
        printf("]");
    }
    printf("],\"argmax\":[");
    for (int t = 0; t < T; t++) printf("%s%d", t ? "," : "", amax[t]);
    printf("],\"logsumexp\":[");
    for (int t = 0; t < T; t++) printf("%s%.9g", t ? "," : "", lse[t]);
    printf("]");
    if (heads && print_heads(m, s, ids, T, &err)) goto done;
    printf("}\n");
    status = 0;
done:
    if (status) fprintf(stderr, "needle logits: %s\n", err.message);
    free(chunk);
    free(asked);
    free(amax);
    free(lse);
    free(ids);
    free(pos);
    nd_state_free(s);
    nd_model_free(m);
    return status;
}
