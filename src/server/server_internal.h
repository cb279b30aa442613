/* server_internal.h - what the server's files share (not part of any API). */
#ifndef ND_SERVER_INTERNAL_H
#define ND_SERVER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "needle.h"
#include "server/server.h"

/* ---- a response to send (reply.c) ---- */
typedef struct nd_reply {
    int status;
    const char *content_type; /* static string */
    char *body;               /* heap, may be NULL for an empty body */
    size_t len;
    int retry_after;          /* seconds for a Retry-After header; 0: none */
    int drop;                 /* the client is gone: close without answering */
} nd_reply;

/* Take b's bytes as the body (b is left empty). */
void nd_reply_take(nd_reply *r, int status, const char *content_type, nd_buf *b);
/* An OpenAI-style error object {"error":{"message","type","param","code"}}. */
void nd_reply_error(nd_reply *r, int status, const char *type, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* 400 invalid_request_error with a message. */
#define nd_reply_bad(r, ...) nd_reply_error((r), 400, "invalid_request_error", NULL, __VA_ARGS__)

/* ---- --parallel slots and the bounded queue (admission.c) ---- */
typedef struct nd_admission {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int parallel, queue;  /* limits */
    int active, waiting;  /* now */
    long admitted, rejected, cancelled; /* counters for /health */
} nd_admission;

/* Is the client still there?  1 when it has gone. */
typedef int (*nd_gone_fn)(void *ctx);

enum { ND_ADMIT_OK = 0, ND_ADMIT_FULL = 1, ND_ADMIT_GONE = 2 };
void nd_admission_init(nd_admission *a, int parallel, int queue);
void nd_admission_destroy(nd_admission *a);
/* Wait for a decode slot: OK (call nd_admission_leave later), FULL (the queue
 * is full: answer 503) or GONE (the client disconnected while waiting). */
int nd_admission_enter(nd_admission *a, nd_gone_fn gone, void *gone_ctx);
void nd_admission_leave(nd_admission *a);
/* Count a request dropped after admission because its client hung up. */
void nd_admission_count_cancel(nd_admission *a);

/* ---- conversations kept for KV reuse (session_cache.c) ---- */
typedef struct nd_session_cache nd_session_cache;
nd_session_cache *nd_session_cache_new(int capacity);
void nd_session_cache_free(nd_session_cache *c);
/* Remove and return the session whose conversation hash is `key`, or NULL. */
needle_session *nd_session_cache_take(nd_session_cache *c, uint64_t key);
/* Keep s under `key` (evicting and closing the least recently used one). */
void nd_session_cache_put(nd_session_cache *c, uint64_t key, needle_session *s);
void nd_session_cache_stats(nd_session_cache *c, int *size, long *hits, long *misses);
void nd_session_cache_count(nd_session_cache *c, int hit);

/* 64-bit FNV-1a, continued from h (start with ND_HASH_SEED). */
#define ND_HASH_SEED 0xcbf29ce484222325ull
uint64_t nd_hash_bytes(uint64_t h, const void *p, size_t n);
uint64_t nd_hash_str(uint64_t h, const char *s); /* includes a terminator byte */

/* ---- the running server ---- */
typedef struct nd_server {
    const nd_server_config *cfg;
    nd_admission adm;
    nd_session_cache *cache;
    pthread_mutex_t mu; /* guards the counters below */
    uint64_t next_id;
    long requests, errors;
} nd_server;

/* One request as the handlers see it. */
typedef struct nd_request {
    nd_server *srv;
    const char *body;
    size_t len;
    nd_gone_fn gone;
    void *gone_ctx;
} nd_request;

void nd_chat_completions(const nd_request *rq, nd_reply *r);
void nd_embeddings(const nd_request *rq, nd_reply *r);

/* A static file of the playground: NULL when there is no such file. */
int nd_asset_find(const char *path, const char **data, size_t *len, const char **content_type);
/* A file under --static DIR (only plain names: letters, digits, '.', '-', '_'). */
int nd_static_read(const char *dir, const char *path, char **data, size_t *len, const char **content_type);

/* A fresh id suffix (hex) for completions and tool calls. */
uint64_t nd_server_next_id(nd_server *srv);
/* Resident memory of this process in MiB (/proc/self/statm). */
double nd_rss_mb(void);

#endif
