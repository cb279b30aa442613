/* session_cache.c - conversations kept between stateless requests.
 *
 * A session is stored under the hash of everything that shaped its KV cache:
 * the request settings (tools, system, tool_choice, sampling, max_tokens)
 * followed by each message of the conversation so far, ending with the
 * assistant message the server generated.  A later request that repeats that
 * history and adds one new turn (a user message, or the tool results for the
 * last calls) computes the same hash over its prefix and takes the session
 * out, so only the new turn is evaluated.  Taking removes the entry: two
 * requests never share a session, and a second request with the same history
 * simply starts a fresh one.  Least recently stored entries are evicted. */
#include <stdlib.h>

#include "server/server_internal.h"

typedef struct entry {
    uint64_t key;
    uint64_t stamp; /* 0: empty slot */
    needle_session *s;
} entry;

struct nd_session_cache {
    pthread_mutex_t mu;
    entry *e;
    int cap;
    uint64_t clock;
    long hits, misses;
};

nd_session_cache *nd_session_cache_new(int capacity)
{
    nd_session_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cap = capacity > 0 ? capacity : 0;
    if (c->cap && !(c->e = calloc((size_t)c->cap, sizeof *c->e))) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void nd_session_cache_free(nd_session_cache *c)
{
    if (!c) return;
    for (int i = 0; i < c->cap; i++)
        if (c->e[i].stamp) needle_session_close(c->e[i].s);
    pthread_mutex_destroy(&c->mu);
    free(c->e);
    free(c);
}

needle_session *nd_session_cache_take(nd_session_cache *c, uint64_t key)
{
    needle_session *s = NULL;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->cap; i++) {
        if (c->e[i].stamp && c->e[i].key == key) {
            s = c->e[i].s;
            c->e[i].stamp = 0;
            c->e[i].s = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return s;
}

void nd_session_cache_put(nd_session_cache *c, uint64_t key, needle_session *s)
{
    needle_session *evicted = NULL;
    pthread_mutex_lock(&c->mu);
    /* the same history (a newer session replaces it), else a free slot, else the oldest */
    int slot = -1;
    for (int i = 0; i < c->cap && slot < 0; i++)
        if (c->e[i].stamp && c->e[i].key == key) slot = i;
    for (int i = 0; i < c->cap && slot < 0; i++)
        if (!c->e[i].stamp) slot = i;
    if (slot < 0)
        for (int i = 0; i < c->cap; i++)
            if (slot < 0 || c->e[i].stamp < c->e[slot].stamp) slot = i;
    if (slot >= 0) {
        if (c->e[slot].stamp) evicted = c->e[slot].s;
        c->e[slot].key = key;
        c->e[slot].s = s;
        c->e[slot].stamp = ++c->clock;
    } else {
        evicted = s; /* capacity 0: nothing is kept */
    }
    pthread_mutex_unlock(&c->mu);
    needle_session_close(evicted); /* outside the lock: freeing a KV cache takes a moment */
}

void nd_session_cache_count(nd_session_cache *c, int hit)
{
    pthread_mutex_lock(&c->mu);
    if (hit) c->hits++;
    else c->misses++;
    pthread_mutex_unlock(&c->mu);
}

void nd_session_cache_stats(nd_session_cache *c, int *size, long *hits, long *misses)
{
    pthread_mutex_lock(&c->mu);
    int n = 0;
    for (int i = 0; i < c->cap; i++) n += c->e[i].stamp != 0;
    *size = n;
    *hits = c->hits;
    *misses = c->misses;
    pthread_mutex_unlock(&c->mu);
}
