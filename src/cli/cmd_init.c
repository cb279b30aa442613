/* cmd_init.c - `needle init`: write a reference-initialised checkpoint. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/error.h"
#include "core/file.h"
#include "model/config.h"
#include "model/init.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle init [--preset base|tiny|needle3|needle3-tiny] [--config FILE.json] [--set key=value ...]\n"
            "                   [--seed N] --out FILE.safetensors\n\n"
            "Write a randomly initialised Needle checkpoint (reference initialisation).\n"
            "  --preset NAME   base: the released geometry (d=512, 8/4 heads, 27 layers; default)\n"
            "                  tiny: the geometry of tests/golden/tiny.safetensors (d=128, 4 layers)\n"
            "                  needle3: Needle 3, the reference's default geometry (d=768, 20 layers)\n"
            "                  needle3-tiny: Needle 3, the geometry of tests/golden/needle3/n3_tiny (d=128, 5 layers)\n"
            "                  (Needle 3 checkpoints are written in the reference's layout and metadata)\n"
            "  --config FILE   start from a config JSON instead of a preset\n"
            "  --set k=v       override one config field, e.g. num_layers=6, engram_layers=1,4,\n"
            "                  rope_theta=1e4 (repeatable; applied in order)\n"
            "  --seed N        random seed (default 0); the same seed gives the same file\n"
            "  --out FILE      the .safetensors file to write (atomically)\n");
}

int cmd_init(int argc, char **argv)
{
    const char *preset = NULL, *config_path = NULL, *out = NULL, *v;
    unsigned long long seed = 0;
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    int nsets = 0;
    if (!sets) return cli_fail("init", "out of memory");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            free(sets);
            return 0;
        }
        if ((v = cli_flag_value(argc, argv, &i, "--preset"))) preset = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--config"))) config_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--set"))) sets[nsets++] = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--out"))) out = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--seed"))) {
            uint64_t s64 = 0;
            if (cli_u64("init", "--seed", v, &s64)) {
                free(sets);
                return 2;
            }
            seed = s64;
        } else {
            fprintf(stderr, "needle init: unknown or incomplete option \"%s\"\n", argv[i]);
            usage(stderr);
            free(sets);
            return 2;
        }
    }
    if (!out || (preset && config_path)) {
        fprintf(stderr, "needle init: %s\n", !out ? "--out FILE is required" : "give --preset or --config, not both");
        usage(stderr);
        free(sets);
        return 2;
    }

    needle_error err;
    nd_error_clear(&err);
    nd_config cfg;
    int rc;
    if (config_path) {
        char *text = NULL;
        size_t len = 0;
        rc = nd_read_file_max(config_path, ND_LIMIT_CONFIG_BYTES, "model config", &text, &len, &err);
        if (!rc) rc = nd_config_from_json(&cfg, text, len, config_path, &err);
        free(text);
    } else {
        rc = nd_config_preset(&cfg, preset ? preset : "base", &err);
    }
    for (int i = 0; !rc && i < nsets; i++) rc = nd_config_set(&cfg, sets[i], &err);
    if (!rc) rc = nd_config_derive(&cfg, "config", &err);
    free(sets);
    if (rc) return cli_fail("init", err.message);

    nd_param_set ps;
    rc = nd_init_params(&cfg, (uint64_t)seed, &ps, &err);
    if (!rc) rc = nd_param_set_write(&ps, &cfg, out, &err);
    size_t params = ps.total;
    nd_param_set_free(&ps);
    if (rc) return cli_fail("init", err.message);

    struct stat st;
    double mb = stat(out, &st) == 0 ? (double)st.st_size / 1e6 : 0.0;
    printf("wrote %s: %zu parameters (%.2fM), %.1f MB, d_model %d, %d layers, %d/%d heads, kv window %d, seed %llu\n",
           out, params, (double)params / 1e6, mb, cfg.d_model, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads,
           nd_config_effective_window(&cfg), seed);
    return 0;
}
