/* cmd_logits.c - `needle logits`: run the forward pass on ids, print logits as JSON.
 *
 * Uses the session API exactly as generation does: the ids are prefilled as
 * one chunk, or with --decode-from K the first K are prefilled and the rest
 * fed one token at a time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "model/model.h"

static int usage(void)
{
    fprintf(stderr, "usage: needle logits --model FILE --ids 2,17,99,... [--positions 0,5,9] [--window W --sinks S]\n"
                    "                     [--float] [--kv-bits 32|8] [--decode-from K] [--threads N]\n"
                    "Prints {\"positions\",\"logits\" (full rows at positions, default the last),\n"
                    "\"argmax\" and \"logsumexp\" (every position)}.\n");
    return 2;
}

int cmd_logits(int argc, char **argv)
{
    const char *model = NULL, *ids_s = NULL, *pos_s = NULL, *v;
    int kv_bits = 0, window = 0, sinks = 0, dequant = 0, decode_from = -1, threads = 0;
    for (int i = 1; i < argc; i++) {
        if ((v = cli_flag_value(argc, argv, &i, "--model"))) model = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--ids"))) ids_s = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--positions"))) pos_s = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--window"))) window = atoi(v);
        else if ((v = cli_flag_value(argc, argv, &i, "--kv-bits"))) kv_bits = atoi(v);
        else if ((v = cli_flag_value(argc, argv, &i, "--sinks"))) sinks = atoi(v);
        else if ((v = cli_flag_value(argc, argv, &i, "--decode-from"))) decode_from = atoi(v);
        else if ((v = cli_flag_value(argc, argv, &i, "--threads"))) threads = atoi(v);
        else if (!strcmp(argv[i], "--float")) dequant = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(); return 0; }
        else return usage();
    }
    if (!model || !ids_s || window < 0 || sinks < 0) return usage();
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
    nd_model_options mo = {.threads = threads, .dequantize = dequant};
    nd_model *m = NULL;
    nd_state *s = NULL;
    int status = 1;
    float *lg = NULL;
    uint8_t *want = NULL;
    if (nd_model_open(model, &mo, &m, &err)) goto done;
    nd_state_options so = {.window = window, .sinks = sinks, .kv_bits = kv_bits};
    if (nd_state_create(m, &so, &s, &err)) goto done;
    int V = m->weights.cfg.vocab_size;
    lg = malloc(sizeof(float) * (size_t)T * (size_t)V);
    want = malloc((size_t)T);
    if (!lg || !want) { snprintf(err.message, sizeof err.message, "out of memory"); goto done; }
    memset(want, 1, (size_t)T);
    if (decode_from > 0 && nd_state_eval(s, ids, decode_from, want, lg, NULL, &err)) goto done;
    for (int t = decode_from; t < T; t++)
        if (nd_state_eval(s, ids + t, 1, want, lg + (size_t)t * V, NULL, &err)) goto done;

    printf("{\"positions\":[");
    for (int i = 0; i < np; i++) printf("%s%d", i ? "," : "", pos[i]);
    printf("],\"logits\":[");
    for (int i = 0; i < np; i++) {
        const float *row = lg + (size_t)pos[i] * V;
        printf("%s[", i ? "," : "");
        for (int k = 0; k < V; k++) printf("%s%.9g", k ? "," : "", row[k]);
        printf("]");
    }
    printf("],\"argmax\":[");
    for (int t = 0; t < T; t++) {
        const float *row = lg + (size_t)t * V;
        int best = 0;
        for (int k = 1; k < V; k++)
            if (row[k] > row[best]) best = k;
        printf("%s%d", t ? "," : "", best);
    }
    printf("],\"logsumexp\":[");
    for (int t = 0; t < T; t++) {
        const float *row = lg + (size_t)t * V;
        float mx = row[0];
        for (int k = 1; k < V; k++) mx = fmaxf(mx, row[k]);
        double sum = 0.0;
        for (int k = 0; k < V; k++) sum += exp((double)row[k] - mx);
        printf("%s%.9g", t ? "," : "", mx + log(sum));
    }
    printf("]}\n");
    status = 0;
done:
    if (status) fprintf(stderr, "needle logits: %s\n", err.message);
    free(lg);
    free(want);
    free(ids);
    free(pos);
    nd_state_free(s);
    nd_model_free(m);
    return status;
}
