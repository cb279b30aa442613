/* http.c - the HTTP side of `needle serve`, on GNU libmicrohttpd.
 *
 * libmicrohttpd parses HTTP (chunked bodies, keep-alive, pipelining, header
 * limits, timeouts) so this file only routes.  Each connection has its own
 * thread (MHD_USE_THREAD_PER_CONNECTION): a handler may block while it waits
 * for a decode slot, and the number of decodes at once is bounded by the
 * admission gate, not by the thread count.  Routes:
 *   GET  /health                 liveness and counters (no key needed)
 *   GET  /v1/models[/ID]         the one model served
 *   POST /v1/chat/completions    chat.c
 *   POST /v1/embeddings          embeddings.c
 *   GET  /playground/tools.json  the --tools file in OpenAI form (the page's demo tools)
 *   GET  /, /app.js, /style.css  the playground (assets.c, or --static DIR)
 */
#include <arpa/inet.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "server/server_internal.h"

#if MHD_VERSION < 0x00097002
typedef int mhd_result; /* before 0.9.71 handlers returned int */
#else
typedef enum MHD_Result mhd_result;
#endif

typedef struct conn_state {
    nd_buf body;
    size_t seen;  /* body bytes received, kept or not */
    int too_large;
} conn_state;

typedef struct http_ctx {
    nd_server *srv;
    char *tools_openai; /* GET /playground/tools.json */
} http_ctx;

uint64_t nd_server_next_id(nd_server *srv)
{
    pthread_mutex_lock(&srv->mu);
    uint64_t x = ++srv->next_id;
    pthread_mutex_unlock(&srv->mu);
    /* splitmix64: ids look random but never repeat within a run */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The peer closed its side (or reset): poll says so without reading. */
static int client_gone(void *ctx)
{
    struct MHD_Connection *c = ctx;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return 1;
    char byte;
    return (p.revents & POLLIN) && recv(ci->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static mhd_result send_reply(struct MHD_Connection *c, nd_reply *r)
{
    if (r->drop) {
        free(r->body);
        return MHD_NO; /* closes the connection */
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(r->len, r->body ? r->body : (char *)"",
                                                                 r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(r->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", r->content_type ? r->content_type : "application/json");
    if (r->content_type && !strncmp(r->content_type, "text/event-stream", 17))
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    if (r->retry_after > 0) {
        char s[16];
        snprintf(s, sizeof s, "%d", r->retry_after);
        MHD_add_response_header(resp, "Retry-After", s);
    }
    mhd_result rc = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static mhd_result send_static(struct MHD_Connection *c, const char *data, size_t len, const char *type, int owned)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, owned ? MHD_RESPMEM_MUST_FREE
                                                                                          : MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", type);
    mhd_result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* Constant-time comparison of the bearer token with the key. */
static int key_ok(const char *header, const char *key)
{
    if (!header || strncmp(header, "Bearer ", 7) != 0) return 0;
    const char *got = header + 7;
    size_t a = strlen(got), b = strlen(key);
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < a ? got[i] : 0);
    return diff == 0;
}

static void health(nd_server *srv, nd_reply *r)
{
    int cached;
    long hits, misses;
    nd_session_cache_stats(srv->cache, &cached, &hits, &misses);
    pthread_mutex_lock(&srv->adm.mu);
    int active = srv->adm.active, waiting = srv->adm.waiting;
    long admitted = srv->adm.admitted, rejected = srv->adm.rejected, cancelled = srv->adm.cancelled;
    pthread_mutex_unlock(&srv->adm.mu);
    pthread_mutex_lock(&srv->mu);
    long requests = srv->requests;
    pthread_mutex_unlock(&srv->mu);
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_puts(&b, "{\"status\":\"ok\",\"model\":");
    nd_json_write_string(&b, srv->cfg->model_id, strlen(srv->cfg->model_id), 0);
    nd_buf_printf(&b,
                  ",\"parallel\":%d,\"queue\":%d,\"active\":%d,\"queued\":%d,\"requests\":%ld,\"admitted\":%ld,"
                  "\"rejected\":%ld,\"cancelled\":%ld,\"sessions_cached\":%d,\"cache_hits\":%ld,\"cache_misses\":%ld,"
                  "\"rss_mb\":%.1f}\n",
                  srv->adm.parallel, srv->adm.queue, active, waiting, requests, admitted, rejected, cancelled, cached,
                  hits, misses, nd_rss_mb());
    nd_reply_take(r, 200, "application/json", &b);
}

static void model_object(nd_buf *b, nd_server *srv)
{
    nd_buf_puts(b, "{\"id\":");
    nd_json_write_string(b, srv->cfg->model_id, strlen(srv->cfg->model_id), 0);
    nd_buf_printf(b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"needle\",\"embedding_dim\":%d}",
                  needle_model_embed_dim(srv->cfg->model));
}

static mhd_result route(http_ctx *hc, struct MHD_Connection *c, const char *url, const char *method, conn_state *st)
{
    nd_server *srv = hc->srv;
    nd_reply r = {0};
    int is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), is_post = !strcmp(method, "POST");
    pthread_mutex_lock(&srv->mu);
    srv->requests++;
    pthread_mutex_unlock(&srv->mu);

    if (st->too_large) {
        nd_reply_error(&r, 413, "invalid_request_error", "request_too_large",
                       "the request body has %zu bytes, more than this server's limit of %zu", st->seen,
                       srv->cfg->max_body);
        return send_reply(c, &r);
    }
    if (!strcmp(url, "/health")) {
        if (is_get) health(srv, &r);
        else nd_reply_error(&r, 405, "invalid_request_error", NULL, "%s /health: use GET", method);
        return send_reply(c, &r);
    }
    if (!strncmp(url, "/v1/", 4)) {
        if (srv->cfg->api_key &&
            !key_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"), srv->cfg->api_key)) {
            nd_reply_error(&r, 401, "invalid_request_error", "invalid_api_key",
                           "missing or incorrect API key: send 'Authorization: Bearer KEY'");
            return send_reply(c, &r);
        }
        nd_request rq = {srv, st->body.data ? st->body.data : "", st->body.len, client_gone, c};
        if (!strcmp(url, "/v1/chat/completions") && is_post) nd_chat_completions(&rq, &r);
        else if (!strcmp(url, "/v1/embeddings") && is_post) nd_embeddings(&rq, &r);
        else if (!strcmp(url, "/v1/models") && is_get) {
            nd_buf b;
            nd_buf_init(&b);
            nd_buf_puts(&b, "{\"object\":\"list\",\"data\":[");
            model_object(&b, srv);
            nd_buf_puts(&b, "]}\n");
            nd_reply_take(&r, 200, "application/json", &b);
        } else if (!strncmp(url, "/v1/models/", 11) && is_get) {
            if (strcmp(url + 11, srv->cfg->model_id) != 0) {
                nd_reply_error(&r, 404, "invalid_request_error", "model_not_found", "no model '%s' here (this server has '%s')",
                               url + 11, srv->cfg->model_id);
            } else {
                nd_buf b;
                nd_buf_init(&b);
                model_object(&b, srv);
                nd_buf_putc(&b, '\n');
                nd_reply_take(&r, 200, "application/json", &b);
            }
        } else if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/v1/embeddings") ||
                   !strcmp(url, "/v1/models")) {
            nd_reply_error(&r, 405, "invalid_request_error", NULL, "%s %s: wrong method", method, url);
        } else {
            nd_reply_error(&r, 404, "invalid_request_error", "unknown_url", "unknown endpoint %s %s", method, url);
        }
        return send_reply(c, &r);
    }
    if (is_get && !strcmp(url, "/playground/tools.json"))
        return send_static(c, hc->tools_openai, strlen(hc->tools_openai), "application/json", 0);
    if (is_get) {
        const char *data, *type;
        size_t len;
        char *owned = NULL;
        if (srv->cfg->static_dir) {
            if (nd_static_read(srv->cfg->static_dir, url, &owned, &len, &type)) return send_static(c, owned, len, type, 1);
        } else if (nd_asset_find(url, &data, &len, &type)) {
            return send_static(c, data, len, type, 0);
        }
    }
    nd_reply_error(&r, 404, "invalid_request_error", "unknown_url", "unknown endpoint %s %s", method, url);
    return send_reply(c, &r);
}

static mhd_result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    http_ctx *hc = cls;
    size_t max = hc->srv->cfg->max_body;
    size_t hard = max * 8; /* past this an oversized body is not even drained: the connection is closed */
    conn_state *st = *con_cls;
    if (!st) {
        if (!(st = calloc(1, sizeof *st))) return MHD_NO;
        nd_buf_init(&st->body);
        *con_cls = st;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            unsigned long long n = strtoull(cl, NULL, 10);
            if (n > max) st->too_large = 1;
            if (n > hard) { /* answer now; MHD closes the connection instead of reading the body */
                st->seen = (size_t)n;
                return route(hc, c, url, method, st);
            }
        }
        return MHD_YES;
    }
    if (*upload_size > 0) {
        st->seen += *upload_size;
        if (st->too_large || st->body.len + *upload_size > max) {
            st->too_large = 1;
            nd_buf_free(&st->body);
            nd_buf_init(&st->body);
            if (st->seen > hard) return MHD_NO;
        } else {
            nd_buf_append(&st->body, upload_data, *upload_size);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return route(hc, c, url, method, st);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    conn_state *st = *con_cls;
    if (!st) return;
    nd_buf_free(&st->body);
    free(st);
    *con_cls = NULL;
}

/* The server's needle-form tools as OpenAI tools, for the playground. */
static char *tools_as_openai(const char *tools_json)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_json *t = NULL;
    needle_error e;
    nd_buf_putc(&b, '[');
    if (tools_json && nd_json_parse(tools_json, strlen(tools_json), NULL, &t, &e) == 0 && t->type == ND_JSON_ARRAY) {
        for (size_t i = 0; i < t->count; i++) {
            if (i) nd_buf_putc(&b, ',');
            nd_buf_puts(&b, "{\"type\":\"function\",\"function\":");
            nd_json_write(&b, &t->items[i], 0);
            nd_buf_putc(&b, '}');
        }
    }
    nd_json_free(t);
    nd_buf_puts(&b, "]");
    return b.oom ? (nd_buf_free(&b), NULL) : nd_buf_take(&b);
}

int nd_server_run(const nd_server_config *cfg)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    const char *host = !strcmp(cfg->host, "localhost") ? "127.0.0.1" : cfg->host;
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "needle serve: --host '%s' is not an IPv4 address\n", cfg->host);
        return 1;
    }
    nd_server srv;
    memset(&srv, 0, sizeof srv);
    srv.cfg = cfg;
    srv.next_id = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid(); /* ids differ between runs */
    pthread_mutex_init(&srv.mu, NULL);
    nd_admission_init(&srv.adm, cfg->parallel, cfg->queue);
    srv.cache = nd_session_cache_new(cfg->cache_sessions);
    http_ctx hc = {&srv, tools_as_openai(cfg->tools_json)};
    int status = 1;
    struct MHD_Daemon *d = NULL;
    if (!srv.cache || !hc.tools_openai) {
        fprintf(stderr, "needle serve: out of memory\n");
        goto out;
    }
    /* SIGINT/SIGTERM are taken by sigwait below: block them before any thread starts */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
#ifdef __GLIBC__
    /* Sessions come and go with multi-MiB KV caches, on many connection
     * threads.  A fixed mmap threshold returns each freed cache to the system
     * (glibc's adaptive threshold would move them into the heap, where they
     * fragment), and few arenas keep per-thread free lists from piling up:
     * resident memory then follows the sessions alive, not the traffic seen. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_ARENA_MAX, 2);
#endif
    unsigned conn_limit = (unsigned)(cfg->parallel + cfg->queue + 128);
    d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_request,
                         &hc, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_TIMEOUT,
                         (unsigned)cfg->timeout_s, MHD_OPTION_CONNECTION_LIMIT, conn_limit,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "needle serve: cannot listen on %s:%d (in use, or not an address of this machine)\n",
                cfg->host, cfg->port);
        goto out;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("needle serve: listening on http://%s:%u (model %s, %d parallel, queue %d%s)\n", host,
           di ? (unsigned)di->port : (unsigned)cfg->port, cfg->model_id, srv.adm.parallel, srv.adm.queue,
           cfg->api_key ? ", API key required" : "");
    fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    printf("needle serve: stopping (signal %d)\n", sig);
    fflush(stdout);
    status = 0;
out:
    if (d) MHD_stop_daemon(d); /* waits for the connection threads */
    nd_session_cache_free(srv.cache);
    nd_admission_destroy(&srv.adm);
    pthread_mutex_destroy(&srv.mu);
    free(hc.tools_openai);
    return status;
}
