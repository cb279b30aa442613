/* cmd_serve.c - `needle serve`: an OpenAI-compatible tool-calling server.
 *
 *   needle serve [--model F] [--tools F.json] [--host 127.0.0.1] [--port 8080] [--parallel N]
 *                [--queue N] [--api-key K] [--static DIR] [--threads N] [--window W]
 *                [--max-body BYTES] [--max-messages N] [--max-tokens N] [--cache N] [--timeout S]
 *
 * The server itself lives in src/server/ and is linked only when GNU
 * libmicrohttpd was found at build time (ND_WITH_SERVER); otherwise this
 * command says how to get it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/error.h"
#include "core/file.h"
#include "needle.h"
#ifdef ND_WITH_SERVER
#include "server/server.h"
#endif

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle serve [--model FILE] [--tools FILE.json] [--host 127.0.0.1] [--port 8080]\n"
            "                    [--parallel N] [--queue N] [--api-key KEY] [--static DIR] [--threads N]\n"
            "                    [--window W] [--max-body BYTES] [--max-messages N] [--max-tokens N]\n"
            "                    [--cache N] [--timeout SECONDS]\n"
            "Serve the model over HTTP, OpenAI style: POST /v1/chat/completions (tools, tool_choice,\n"
            "stream), POST /v1/embeddings, GET /v1/models, GET /health, and a playground page at /.\n"
            "--tools: the tools used when a request sends none (default models/tools.json).\n"
            "--parallel N decodes at once (default 2), --queue N more wait (default 16), then 503.\n"
            "--api-key KEY (or $NEEDLE_API_KEY): /v1/ requires 'Authorization: Bearer KEY'.\n"
            "--port 0 picks a free port; the address is printed once the server listens.\n"
            "Limits: --max-body (default 1048576 bytes, 413 beyond), --max-messages (256),\n"
            "--max-tokens (1024), --cache conversations kept for KV reuse (32), --timeout idle seconds (30).\n");
}

int cmd_serve(int argc, char **argv)
{
#ifndef ND_WITH_SERVER
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            break;
        }
    fprintf(stderr, "needle serve: this build has no HTTP server; install GNU libmicrohttpd "
                    "(Debian: apt-get install libmicrohttpd-dev) and run make again\n");
    return 1;
#else
    const char *model = NULL, *tools_path = NULL, *v;
    nd_server_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.host = "127.0.0.1";
    cfg.port = 8080;
    cfg.parallel = 2;
    cfg.queue = 16;
    cfg.max_body = 1 << 20;
    cfg.max_messages = 256;
    cfg.max_tokens = 1024;
    cfg.cache_sessions = 32;
    cfg.timeout_s = 30;
    cfg.api_key = getenv("NEEDLE_API_KEY");
    if (cfg.api_key && !*cfg.api_key) cfg.api_key = NULL;
    needle_model_options mo;
    memset(&mo, 0, sizeof mo);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int bad = 0, n = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((v = cli_flag_value(argc, argv, &i, "--model"))) {
            model = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--tools"))) {
            tools_path = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--host"))) {
            cfg.host = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--port"))) {
            bad = cli_int("serve", a, v, 0, 65535, &cfg.port);
        } else if ((v = cli_flag_value(argc, argv, &i, "--parallel"))) {
            bad = cli_int("serve", a, v, 1, 256, &cfg.parallel);
        } else if ((v = cli_flag_value(argc, argv, &i, "--queue"))) {
            bad = cli_int("serve", a, v, 0, 4096, &cfg.queue);
        } else if ((v = cli_flag_value(argc, argv, &i, "--api-key"))) {
            cfg.api_key = *v ? v : NULL;
        } else if ((v = cli_flag_value(argc, argv, &i, "--static"))) {
            cfg.static_dir = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--threads"))) {
            bad = cli_int("serve", a, v, 1, 1024, &mo.threads);
        } else if ((v = cli_flag_value(argc, argv, &i, "--window"))) {
            bad = cli_int("serve", a, v, 1, 1 << 22, &mo.kv_window);
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-body"))) {
            bad = cli_int("serve", a, v, 1024, 1 << 30, &n);
            cfg.max_body = (size_t)n;
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-messages"))) {
            bad = cli_int("serve", a, v, 1, 1 << 20, &cfg.max_messages);
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-tokens"))) {
            bad = cli_int("serve", a, v, 1, 1 << 20, &cfg.max_tokens);
        } else if ((v = cli_flag_value(argc, argv, &i, "--cache"))) {
            bad = cli_int("serve", a, v, 0, 4096, &cfg.cache_sessions);
        } else if ((v = cli_flag_value(argc, argv, &i, "--timeout"))) {
            bad = cli_int("serve", a, v, 1, 3600, &cfg.timeout_s);
        } else {
            fprintf(stderr, "needle serve: unknown option '%s' (or missing value)\n", a);
            usage(stderr);
            return 2;
        }
        if (bad) return 2; /* cli_int said why */
    }
    char *model_default = NULL, *tools_default = NULL, *tools_json = NULL;
    if (!model) {
        cli_common c; /* --model not given: $NEEDLE_MODEL, else the bundled model, as every command */
        cli_common_init(&c, 0);
        if (!(model = cli_model_path(&c, "serve", &model_default))) return 2;
    }
    if (!tools_path) tools_path = tools_default = cli_default_file("tools.json");
    needle_error err = {0};
    needle_model *m = NULL;
    int status = 1;
    if (tools_path && cli_read_tools(tools_path, &tools_json, &err)) {
        cli_fail("serve", err.message);
        goto out;
    }
    if (tools_json) { /* refuse a bad --tools file now, not at the first request */
        needle_session *probe = NULL;
        needle_session_options so;
        memset(&so, 0, sizeof so);
        so.tools_json = tools_json;
        if (needle_model_open(model, NULL, &mo, &m, &err) || needle_session_open(m, &so, &probe, &err)) {
            cli_fail("serve", err.message);
            goto out;
        }
        needle_session_close(probe);
    } else if (needle_model_open(model, NULL, &mo, &m, &err)) {
        cli_fail("serve", err.message);
        goto out;
    }
    /* the model's name: the file name without directory and extension */
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    char id[256];
    snprintf(id, sizeof id, "%s", base);
    char *dot = strrchr(id, '.');
    if (dot && dot != id) *dot = '\0';
    cfg.model = m;
    cfg.model_id = id;
    cfg.tools_json = tools_json;
    if (strcmp(cfg.host, "127.0.0.1") && strcmp(cfg.host, "localhost") && !cfg.api_key)
        fprintf(stderr, "needle serve: warning: listening on %s without --api-key: anyone who can reach it may use it\n",
                cfg.host);
    status = nd_server_run(&cfg);
out:
    needle_model_close(m);
    free(tools_json);
    free(model_default);
    free(tools_default);
    return status;
#endif
}
