/* server.h - `needle serve`: an OpenAI-compatible HTTP server over one model.
 *
 * Built only when GNU libmicrohttpd is present (the Makefile defines
 * ND_WITH_SERVER and links these objects into build/needle, never into
 * libneedle).  The pieces, one file each:
 *   http.c           the libmicrohttpd daemon: routing, bodies, auth, limits
 *   admission.c      --parallel decode slots and the bounded queue behind them
 *   chat.c           POST /v1/chat/completions (OpenAI <-> needle sessions)
 *   session_cache.c  KV reuse: sessions kept by (settings, message history)
 *   embeddings.c     POST /v1/embeddings
 *   assets.c         the playground page compiled into the binary
 *   reply.c          JSON bodies, OpenAI-style error objects
 */
#ifndef ND_SERVER_H
#define ND_SERVER_H

#include <stddef.h>

#include "needle.h"

typedef struct nd_server_config {
    needle_model *model;      /* opened by the caller, shared by every session */
    const char *model_id;     /* the name /v1/models reports ("needle-default") */
    const char *tools_json;   /* needle-form tools for requests without `tools`; may be NULL */
    const char *host;         /* IPv4 address to bind; "localhost" means 127.0.0.1 */
    int port;                 /* 0: any free port (the chosen one is printed) */
    int parallel;             /* decodes at once */
    int queue;                /* requests waiting for a decode slot before 503 */
    const char *api_key;      /* NULL: no auth; else `Authorization: Bearer KEY` required */
    const char *static_dir;   /* NULL: the compiled-in playground; else files from DIR */
    size_t max_body;          /* request body limit in bytes (413 beyond) */
    int max_messages;         /* per request (400 beyond) */
    int max_tokens;           /* the largest max_tokens a request may ask for */
    int cache_sessions;       /* conversations kept for KV reuse */
    int timeout_s;            /* idle connection timeout (slow clients) */
} nd_server_config;

/* Serve until SIGINT or SIGTERM.  Prints "needle serve: listening on
 * http://HOST:PORT" to stdout once ready.  0, or 1 with a message on stderr. */
int nd_server_run(const nd_server_config *cfg);

#endif
