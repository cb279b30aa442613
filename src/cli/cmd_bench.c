/* cmd_bench.c - `needle bench`: load time, prefill and decode speed, peak memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/threadpool.h"
#include "model/model.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU time of the whole process (every thread), so rates can be normalised on
 * a machine other jobs share: tokens per CPU-second do not depend on how much
 * of the machine this run got. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}

static int usage(void)
{
    fprintf(stderr, "usage: needle bench [--model FILE] [--prompt-tokens N (512)] [--gen-tokens M (128)] [--threads T]\n"
                    "                    [--window W] [--kv-bits 32|8] [--acts a8|float] [--float]\n");
    return 2;
}

int cmd_bench(int argc, char **argv)
{
    const char *v;
    int n_prompt = 512, n_gen = 128, dequant = 0;
    cli_common c;
    cli_common_init(&c, CLI_MODEL | CLI_THREADS | CLI_WINDOW | CLI_KV_BITS | CLI_ACTS);
    for (int i = 1; i < argc; i++) {
        int bad = 0, shared;
        if ((shared = cli_common_parse(&c, "bench", argc, argv, &i)) != 0) bad = shared < 0;
        else if ((v = cli_flag_value(argc, argv, &i, "--prompt-tokens")))
            bad = cli_int("bench", "--prompt-tokens", v, 1, 1 << 20, &n_prompt);
        else if ((v = cli_flag_value(argc, argv, &i, "--gen-tokens")))
            bad = cli_int("bench", "--gen-tokens", v, 0, 1 << 20, &n_gen);
        else if (!strcmp(argv[i], "--float")) dequant = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(); return 0; }
        else {
            fprintf(stderr, "needle bench: unknown option or argument '%s'\n", argv[i]);
            return usage();
        }
        if (bad) return 2;
    }
    char *model_default = NULL;
    const char *model = cli_model_path(&c, "bench", &model_default);
    if (!model) return 2;
    int threads = c.threads, kv_bits = c.kv_bits, window = c.window;

    needle_error err = {0};
    nd_model *m = NULL;
    nd_state *s = NULL;
    float *lg = NULL;
    int *ids = NULL, status = 1;
    double rss_before = peak_rss_mb();
    double t0 = now_ms();
    nd_model_options mo = {.threads = threads, .dequantize = dequant, .acts = c.acts};
    if (nd_model_open(model, &mo, &m, &err)) goto done;
    double load_ms = now_ms() - t0;
    nd_state_options so = {.window = window, .kv_bits = kv_bits};
    if (so.window > m->weights.cfg.max_seq_len) {
        snprintf(err.message, sizeof err.message, "--window %d is larger than the model's max_seq_len %d", so.window,
                 m->weights.cfg.max_seq_len);
        goto done;
    }
    if (nd_state_create(m, &so, &s, &err)) goto done;
    int V = m->weights.cfg.vocab_size;
    lg = malloc(sizeof(float) * (size_t)V);
    ids = malloc(sizeof(int) * (size_t)n_prompt);
    if (!lg || !ids) { snprintf(err.message, sizeof err.message, "out of memory"); goto done; }
    /* a fixed pseudo-random prompt of ordinary pieces (ids past the 14 specials) */
    uint32_t x = 12345;
    for (int i = 0; i < n_prompt; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = 14 + (int)((x >> 8) % (uint32_t)(V > 14 ? V - 14 : 1));
    }

    /* first token: a short prompt (32 tokens) from an empty session */
    int short_n = n_prompt < 32 ? n_prompt : 32;
    t0 = now_ms();
    if (nd_state_eval(s, ids, short_n, NULL, lg, NULL, &err)) goto done;
    double first_ms = now_ms() - t0;
    nd_state_reset(s);

    t0 = now_ms();
    double c0 = cpu_ms();
    if (nd_state_eval(s, ids, n_prompt, NULL, lg, NULL, &err)) goto done;
    double prefill_ms = now_ms() - t0, prefill_cpu = cpu_ms() - c0;

    t0 = now_ms();
    c0 = cpu_ms();
    for (int i = 0; i < n_gen; i++) {
        int best = 0;
        for (int k = 1; k < V; k++)
            if (lg[k] > lg[best]) best = k;
        if (nd_state_eval(s, &best, 1, NULL, lg, NULL, &err)) goto done;
    }
    double decode_ms = now_ms() - t0, decode_cpu = cpu_ms() - c0;

    struct stat st;
    double file_mb = stat(model, &st) == 0 ? st.st_size / 1048576.0 : 0.0;
    printf("{\"model\":\"%s\",\"file_mb\":%.2f,\"load_ms\":%.1f,\"first_token_ms\":%.2f,\"prompt_tokens\":%d,"
           "\"prefill_ms\":%.1f,\"prefill_tps\":%.1f,\"gen_tokens\":%d,\"decode_ms\":%.1f,\"decode_tps\":%.1f,"
           "\"prefill_cpu_ms\":%.1f,\"decode_cpu_ms\":%.1f,\"prefill_tok_per_cpu_s\":%.1f,\"decode_tok_per_cpu_s\":%.1f,"
           "\"peak_rss_mb\":%.1f,\"rss_before_load_mb\":%.1f,\"session_mb\":%.2f,\"window\":%d,\"threads\":%d,"
           "\"backend\":\"%s\",\"kv_bits\":%d,\"float_path\":%s}\n",
           model, file_mb, load_ms, first_ms, n_prompt, prefill_ms, n_prompt / (prefill_ms / 1e3), n_gen, decode_ms,
           n_gen ? n_gen / (decode_ms / 1e3) : 0.0, prefill_cpu, decode_cpu, n_prompt / (prefill_cpu / 1e3),
           n_gen ? n_gen / (decode_cpu / 1e3) : 0.0, peak_rss_mb(), rss_before, nd_state_bytes(s) / 1048576.0,
           nd_state_window(s), nd_threadpool_threads(m->pool), m->be->name, kv_bits ? kv_bits : 32, dequant ? "true" : "false");
    status = 0;
done:
    if (status) fprintf(stderr, "needle bench: %s\n", err.message);
    free(lg);
    free(ids);
    nd_state_free(s);
    nd_model_free(m);
    free(model_default);
    return status;
}
