/* cmd_build.c - `needle build`: quantise a checkpoint into a .cact deploy file.
 *
 *   needle build CHECKPOINT --tokenizer TOK.model [--bits 2|3|4|1.58 | --bits-map SPEC]
 *                [--kv-window W] [--lora ADAPTER.safetensors] --out FILE.cact
 *
 * CHECKPOINT is a .safetensors (or an existing .cact, re-quantised; its own
 * tokenizer is reused when --tokenizer is absent).  Widths come from --bits,
 * --bits-map, the checkpoint config's weight_bits, or 4, in that order.
 * The work itself is nd_cact_write, which takes any float nd_weights, so a
 * LoRA-merged model goes through the same call: --lora folds an adapter from
 * `needle finetune` into the float weights first (train/merge.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/error.h"
#include "model/cact/cact.h"
#include "model/model.h"
#include "io/spm_model.h"
#include "model/bits_map.h"
#include "model/weights.h"
#include "quant/cq.h"
#include "text/tokenizer.h"
#include "needle.h"
#include "train/merge.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle build CHECKPOINT --tokenizer TOK.model [--bits 2|3|4|1.58 | --bits-map SPEC]\n"
            "                    [--kv-window W] [--lora ADAPTER.safetensors] [--layers N] --out FILE.cact\n"
            "Quantise CHECKPOINT (.safetensors, or a .cact to re-quantise) with CQ and write a .cact deploy file.\n"
            "  --bits B         one width for every matrix (default: the config's weight_bits, else 4)\n"
            "  --bits-map SPEC  per-tensor widths, e.g. default=4,embedding=3,attn.v_proj=2 (widths 2,3,4,1.58;\n"
            "                   keys: embedding, attn.{q,k,v,gate,out}_proj, mhc_phi_{pre,post,res},\n"
            "                   engramS.{tables,key_proj,value_proj}; longest prefix wins)\n"
            "  --kv-window W    the KV window stored in the header (default: the config's, else the budget)\n"
            "  --lora ADAPTER   merge a LoRA adapter (W += alpha/r * A B on q,k,v,gate,out) into the float\n"
            "                   checkpoint before quantising (Needle 3: ours or the reference's, lora/<path>/A|B;\n"
            "                   the confidence head is dropped); its recorded base checksum must match.  An adapter\n"
            "                   trained with --qat-bits is exported at the scheme it recorded, and a --bits or\n"
            "                   --bits-map that would deploy other numerics is refused\n"
            "  --layers N       Needle 3: write ladder rung N (2..L): layers sorted(bisection order[:N]) renumbered,\n"
            "                   with their engram sites, global flags and head rows\n");
}

static int fail_err(const needle_error *err) { return cli_fail("build", err->message); }

/* The tokenizer must build (the same rules run applies), fit the network's
 * vocabulary and hold the chat markers the layout needs. */
static int check_tokenizer(const nd_vocab *v, int vocab_size, const char *where, needle_error *err)
{
    nd_tokenizer *t = NULL;
    int rc = nd_tokenizer_create(v, &t, err);
    if (rc) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return nd_errorf(err, rc, "%s: %s", where, why);
    }
    int n = nd_tokenizer_size(t);
    if (n > vocab_size) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: %d pieces, more than the network's vocabulary of %d",
                                       where, n, vocab_size);
    static const char *const markers[] = {"<|im_start|>", "<|im_end|>", "<tools>", "</tools>", "<think>",
                                          "</think>", "<tool_call>", "</tool_call>", NULL};
    for (int i = 0; !rc && markers[i]; i++) {
        int id = nd_tokenizer_piece_id(t, markers[i], strlen(markers[i]));
        if (id < 0 || nd_tokenizer_type(t, id) != ND_PIECE_MARKER)
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: the chat marker %s is missing (not a Needle vocabulary)", where,
                           markers[i]);
    }
    nd_tokenizer_free(t);
    return rc;
}

int cmd_build(int argc, char **argv)
{
    const char *ckpt = NULL, *tok = NULL, *bits = NULL, *bits_map = NULL, *kv = NULL, *out = NULL, *lora = NULL;
    const char *layers_arg = NULL;
    cli_common c;
    cli_common_init(&c, CLI_TOKENIZER);
    for (int i = 1; i < argc; i++) {
        const char *v;
        int shared;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if ((shared = cli_common_parse(&c, "build", argc, argv, &i)) != 0) {
            if (shared < 0) return 2;
            tok = c.tokenizer;
        } else if ((v = cli_flag_value(argc, argv, &i, "--bits-map"))) bits_map = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--bits"))) bits = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--kv-window"))) kv = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--out"))) out = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--lora"))) lora = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--layers"))) layers_arg = v;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "needle build: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!ckpt) ckpt = argv[i];
        else {
            fprintf(stderr, "needle build: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!ckpt || !out) {
        usage(stderr);
        return 2;
    }
    if (bits && bits_map) {
        fprintf(stderr, "needle build: give --bits or --bits-map, not both\n");
        return 2;
    }
    /* a QAT adapter fixes the numerics: its scheme is exported, and a --bits
     * or --bits-map that would deploy others is refused (SPEC 12) */
    char scheme[256] = "";
    if (lora) {
        needle_error e;
        if (nd_lora_deploy_scheme(lora, bits, bits_map, scheme, sizeof scheme, &e)) return fail_err(&e);
        if (scheme[0]) {
            printf("  %-10s%s  from the adapter's QAT metadata\n", "scheme", scheme);
            bits = NULL;
            bits_map = scheme;
        }
    }
    char spec[64] = "";
    if (bits) {
        if (nd_bits_parse_width(bits, (int)strlen(bits)) < 0) {
            fprintf(stderr, "needle build: --bits must be 2, 3, 4 or 1.58 (got '%s')\n", bits);
            return 2;
        }
        snprintf(spec, sizeof spec, "default=%s", bits);
        bits_map = spec;
    }
    int layers = 0;
    if (layers_arg && cli_int("build", "--layers", layers_arg, 2, 64, &layers)) return 2;
    long kv_window = -1;
    if (kv) {
        int w = 0;
        if (cli_int("build", "--kv-window", kv, 1, 1 << 24, &w)) return 2;
        kv_window = w;
    }

    needle_error err;
    nd_weights w;
    if (nd_weights_load(ckpt, &w, &err)) return fail_err(&err);
    if (kv_window > 0) {
        if (kv_window > w.cfg.max_seq_len) {
            fprintf(stderr, "needle build: --kv-window %ld exceeds max_seq_len %d\n", kv_window, w.cfg.max_seq_len);
            nd_weights_free(&w);
            return 2;
        }
        w.cfg.kv_window = (int)kv_window;
    }
    printf("  %-10s%s  d=%d  %d layers  vocab %d%s\n", "loaded", ckpt, w.cfg.d_model, w.cfg.num_layers,
           w.cfg.vocab_size, w.contrastive.present || w.confidence.present ? "  with heads" : "");
    if (lora) {
        if (nd_lora_merge(&w, lora, ckpt, &err)) {
            nd_weights_free(&w);
            return fail_err(&err);
        }
        printf("  %-10s%s  into q,k,v,gate,out of %d layers\n", "merged", lora, w.cfg.num_layers);
        /* as the reference's build: a Needle 3 confidence head is not trained with the adapter,
         * so a LoRA build leaves it out (confidence then reports none) */
        if (nd_config_generation(&w.cfg) == 3 && w.confidence.present) {
            w.confidence.present = 0;
            printf("  %-10sthe confidence head (not trained with the adapter)\n", "dropped");
        }
    }
    float *rung_block = NULL; /* the rung's head rows; freed after writing */
    if (layers && layers != w.cfg.num_layers) {
        /* the reference's rung: 2 <= N < L (N = L is the model itself) */
        if (nd_config_generation(&w.cfg) != 3 || layers > w.cfg.num_layers) {
            fprintf(stderr, "needle build: --layers %d: %s\n", layers,
                    nd_config_generation(&w.cfg) != 3 ? "ladder rungs are a Needle 3 feature (this is a Needle 2 model)"
                                                      : "more than the model's layers");
            nd_weights_free(&w);
            return 2;
        }
        int from = w.cfg.num_layers;
        if (nd_weights_ladder(NULL, &w, layers, &rung_block, &err)) {
            nd_weights_free(&w);
            return fail_err(&err);
        }
        printf("  %-10s%d of %d layers (ladder rung)\n", "depth", layers, from);
    }

    nd_vocab v;
    int rc;
    if (tok) rc = nd_vocab_load_spm_file(tok, &v, &err);
    else if (w.tokenizer_blob) rc = nd_vocab_from_blob(w.tokenizer_blob, w.tokenizer_blob_size, ckpt, &v, &err);
    else rc = nd_errorf(&err, NEEDLE_EINVAL, "--tokenizer TOK.model is required for %s", ckpt);
    if (rc) {
        free(rung_block);
        nd_weights_free(&w);
        return fail_err(&err);
    }
    /* the checks `run` makes, here, naming the tokenizer: never write a model run would refuse */
    rc = check_tokenizer(&v, w.cfg.vocab_size, tok ? tok : ckpt, &err);
    if (rc) {
        free(rung_block);
        nd_vocab_free(&v);
        nd_weights_free(&w);
        return fail_err(&err);
    }
    printf("  %-10s%s  %d pieces\n", "tokenizer", tok ? tok : "(from the checkpoint)", v.n_pieces);
    const char *shown_map = bits_map && *bits_map ? bits_map : w.cfg.weight_bits[0] ? w.cfg.weight_bits : "default=4";
    printf("  %-10s%s  kv window %d\n", "quantise", shown_map, nd_config_effective_window(&w.cfg));
    fflush(stdout);

    nd_cact_write_stats st;
    rc = nd_cact_write(out, &w, &v, bits_map, &st, &err);
    free(rung_block);
    int act_bits = w.cfg.act_bits;
    nd_vocab_free(&v);
    nd_weights_free(&w);
    if (rc) return fail_err(&err);
    /* open it as `run` does; a file run cannot use is removed, not left behind */
    needle_model *check = NULL;
    if (needle_model_open(out, NULL, NULL, &check, &err)) {
        remove(out);
        fprintf(stderr, "needle build: the written model does not open (removed %s): %s\n", out, err.message);
        return 1;
    }
    needle_model_close(check);
    printf("  %-10s%s  %.2f MB  %d tensors  W%sA%d\n", "wrote", out, (double)st.bytes / 1e6, st.tensors,
           nd_cq_bits_name(st.default_bits), act_bits);
    return 0;
}
