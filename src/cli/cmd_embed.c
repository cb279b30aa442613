/* cmd_embed.c - `needle embed`: a text's embedding from the model's head.
 *
 *   needle embed [--model F] [--tokenizer TOK.model] [--layers N] [TEXT|-]
 *
 * Prints the embedding as one JSON array (dim floats): needle_model_embed over [BOS] + enc(text)
 * (the first max_seq_len tokens), pooled by the contrastive head of a
 * Needle 2 model or the embedding head of a Needle 3 model, L2-normalised. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/buf.h"
#include "needle.h"

static int usage(void)
{
    fprintf(stderr, "usage: needle embed [--model FILE] [--tokenizer TOK.model] [--layers N] [--threads N] [--acts a8|float]\n"
                    "                    [TEXT|-]\n"
                    "Prints a JSON array: the model's L2-normalised embedding of [BOS] + enc(TEXT)\n"
                    "(Needle 2: the contrastive head; Needle 3: the embedding head).  No TEXT or \"-\": stdin.\n");
    return 2;
}

int cmd_embed(int argc, char **argv)
{
    const char *text = NULL, *v;
    int layers = 0;
    cli_common c;
    cli_common_init(&c, CLI_MODEL | CLI_TOKENIZER | CLI_THREADS | CLI_ACTS);
    for (int i = 1; i < argc; i++) {
        int bad = 0, shared;
        if ((shared = cli_common_parse(&c, "embed", argc, argv, &i)) != 0) bad = shared < 0;
        else if ((v = cli_flag_value(argc, argv, &i, "--layers"))) bad = cli_int("embed", "--layers", v, 1, 64, &layers);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(), 0;
        else if (!text && (argv[i][0] != '-' || !strcmp(argv[i], "-"))) text = argv[i];
        else {
            fprintf(stderr, "needle embed: unknown option or argument '%s'\n", argv[i]);
            return usage();
        }
        if (bad) return 2;
    }
    nd_buf in;
    nd_buf_init(&in);
    if (!text || !strcmp(text, "-")) {
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) nd_buf_append(&in, chunk, n);
        nd_buf_putc(&in, '\0');
        if (in.oom) return cli_fail("embed", "out of memory reading stdin");
        text = in.data;
    }
    char *owned = NULL;
    const char *model = cli_model_path(&c, "embed", &owned);
    if (!model) {
        nd_buf_free(&in);
        return 1;
    }
    needle_model_options mo = {.threads = c.threads, .layers = layers, .acts = c.acts};
    needle_model *m = NULL;
    needle_error err = {0};
    int status = 1;
    float *out = NULL;
    if (needle_model_open(model, c.tokenizer, &mo, &m, &err) == 0) {
        int dim = needle_model_embed_dim(m);
        out = malloc(sizeof(float) * (size_t)(dim > 0 ? dim : 1));
        if (dim <= 0) snprintf(err.message, sizeof err.message, "%s: the model has no embedding head", model);
        else if (!out) snprintf(err.message, sizeof err.message, "out of memory");
        else if (needle_model_embed(m, text, out, dim, &err) == 0) {
            printf("[");
            for (int i = 0; i < dim; i++) printf("%s%.9g", i ? "," : "", out[i]);
            printf("]\n");
            status = 0;
        }
    }
    if (status) fprintf(stderr, "needle embed: %s\n", err.message);
    free(out);
    needle_model_close(m);
    free(owned);
    nd_buf_free(&in);
    return status;
}
