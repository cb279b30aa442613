/* token_mask.c - vocabulary byte trie and the allowed-token mask walk. */
#include "grammar/token_mask.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct trie_node {
    uint32_t first_child; /* children are contiguous, sorted by byte */
    uint16_t n_children;
    uint8_t byte;         /* the edge byte leading here */
    uint8_t pad;
    uint32_t tok_start;   /* ids of tokens ending here: ids[tok_start .. +tok_count) */
    uint32_t tok_count;
} trie_node;

struct nd_token_trie {
    trie_node *nodes;
    size_t n_nodes;
    int *ids;
    size_t n_ids;
    int vocab_size;
    size_t max_len;
};

typedef struct tok_ref {
    const unsigned char *b;
    size_t len;
    int id;
} tok_ref;

static int cmp_tok(const void *x, const void *y)
{
    const tok_ref *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->b, b->b, n);
    if (c) return c;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->id - b->id;
}

int nd_token_trie_build(const int *ids, const char *const *bytes, const size_t *lens, size_t n, int vocab_size,
                        nd_token_trie **out, needle_error *err)
{
    *out = NULL;
    if (vocab_size <= 0) return nd_errorf(err, NEEDLE_EINVAL, "token trie: vocabulary size %d", vocab_size);
    tok_ref *toks = malloc((n ? n : 1) * sizeof *toks);
    nd_token_trie *t = calloc(1, sizeof *t);
    /* each token adds at most len nodes; the root is one more */
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) cap += lens[i];
    if (!toks || !t) goto oom;
    t->vocab_size = vocab_size;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab_size) {
            free(toks);
            free(t);
            return nd_errorf(err, NEEDLE_EINVAL, "token trie: token id %d out of range [0,%d)", ids[i], vocab_size);
        }
        if (lens[i] == 0) continue;
        toks[m++] = (tok_ref){(const unsigned char *)bytes[i], lens[i], ids[i]};
        if (lens[i] > t->max_len) t->max_len = lens[i];
    }
    qsort(toks, m, sizeof *toks, cmp_tok);
    t->nodes = calloc(cap, sizeof *t->nodes);
    t->ids = malloc((m ? m : 1) * sizeof *t->ids);
    /* per node while building: its token range and depth */
    size_t *lo = malloc(cap * sizeof *lo), *hi = malloc(cap * sizeof *hi), *dep = malloc(cap * sizeof *dep);
    if (!t->nodes || !t->ids || !lo || !hi || !dep) {
        free(lo); free(hi); free(dep);
        goto oom;
    }
    t->n_nodes = 1;
    lo[0] = 0;
    hi[0] = m;
    dep[0] = 0;
    /* breadth-first: a node's children are allocated together, so they are contiguous */
    for (size_t q = 0; q < t->n_nodes; q++) {
        size_t a = lo[q], b = hi[q], d = dep[q];
        trie_node *nd = &t->nodes[q];
        nd->tok_start = (uint32_t)t->n_ids;
        while (a < b && toks[a].len == d) t->ids[t->n_ids++] = toks[a++].id;
        nd->tok_count = (uint32_t)(t->n_ids - nd->tok_start);
        nd->first_child = (uint32_t)t->n_nodes;
        while (a < b) {
            size_t e = a;
            unsigned char c = toks[a].b[d];
            while (e < b && toks[e].b[d] == c) e++;
            size_t k = t->n_nodes++;
            t->nodes[k].byte = c;
            lo[k] = a;
            hi[k] = e;
            dep[k] = d + 1;
            t->nodes[q].n_children++;
            a = e;
        }
    }
    free(lo); free(hi); free(dep);
    free(toks);
    *out = t;
    return 0;
oom:
    free(toks);
    if (t) {
        free(t->nodes);
        free(t->ids);
        free(t);
    }
    return nd_errorf(err, NEEDLE_ENOMEM, "token trie: out of memory");
}

void nd_token_trie_free(nd_token_trie *t)
{
    if (!t) return;
    free(t->nodes);
    free(t->ids);
    free(t);
}

int nd_token_trie_vocab_size(const nd_token_trie *t) { return t->vocab_size; }
size_t nd_token_trie_node_count(const nd_token_trie *t) { return t->n_nodes; }
size_t nd_token_mask_words(const nd_token_trie *t) { return ((size_t)t->vocab_size + 31) / 32; }

typedef struct walker {
    const nd_grammar *g;
    const nd_token_trie *t;
    nd_grammar_state *states; /* one per trie depth */
    uint32_t *mask;
    int count;
} walker;

static void walk(walker *w, uint32_t node, size_t depth)
{
    const trie_node *nd = &w->t->nodes[node];
    for (uint32_t k = 0; k < nd->n_children; k++) {
        uint32_t ci = nd->first_child + k;
        const trie_node *ch = &w->t->nodes[ci];
        if (nd_grammar_step(w->g, &w->states[depth], &w->states[depth + 1], ch->byte) < 0) continue;
        for (uint32_t i = 0; i < ch->tok_count; i++) {
            int id = w->t->ids[ch->tok_start + i];
            w->mask[id / 32] |= 1u << (id % 32);
            w->count++;
        }
        if (ch->n_children) walk(w, ci, depth + 1);
    }
}

static int mask_with(const nd_grammar *g, const nd_grammar_state *s, const nd_token_trie *trie, uint32_t *bitmask,
                     nd_grammar_state *scratch)
{
    memset(bitmask, 0, nd_token_mask_words(trie) * sizeof *bitmask);
    walker w = {g, trie, scratch, bitmask, 0};
    nd_grammar_state_copy(&scratch[0], s);
    walk(&w, 0, 0);
    return w.count;
}

int nd_token_mask(const nd_grammar *g, const nd_grammar_state *s, const nd_token_trie *trie, uint32_t *bitmask)
{
    nd_grammar_state *scratch = malloc((trie->max_len + 1) * sizeof *scratch);
    if (!scratch) return NEEDLE_ENOMEM;
    int n = mask_with(g, s, trie, bitmask, scratch);
    free(scratch);
    return n;
}

/* ------------------------------------------------------------ cache */

typedef struct cache_entry {
    uint8_t *key; /* NULL: empty */
    size_t key_len;
    uint64_t hash, stamp;
    uint32_t *mask;
} cache_entry;

struct nd_mask_cache {
    const nd_grammar *g;
    const nd_token_trie *t;
    cache_entry *entries;
    int cap; /* power of two */
    uint64_t clock, hits, misses;
    uint32_t copy_gen;        /* the grammar's copy generation the entries were made under */
    nd_grammar_state *scratch;
    uint8_t *keybuf;
};

int nd_mask_cache_new(const nd_grammar *g, const nd_token_trie *trie, int capacity, nd_mask_cache **out,
                      needle_error *err)
{
    *out = NULL;
    int cap = 4;
    while (cap < capacity && cap < (1 << 16)) cap *= 2;
    nd_mask_cache *c = calloc(1, sizeof *c);
    if (!c) return nd_errorf(err, NEEDLE_ENOMEM, "mask cache: out of memory");
    c->g = g;
    c->t = trie;
    c->copy_gen = nd_grammar_copy_generation(g);
    c->cap = cap;
    c->entries = calloc((size_t)cap, sizeof *c->entries);
    c->scratch = malloc((trie->max_len + 1) * sizeof *c->scratch);
    c->keybuf = malloc(sizeof(nd_grammar_state) + 16);
    if (!c->entries || !c->scratch || !c->keybuf) {
        nd_mask_cache_free(c);
        return nd_errorf(err, NEEDLE_ENOMEM, "mask cache: out of memory");
    }
    *out = c;
    return 0;
}

void nd_mask_cache_free(nd_mask_cache *c)
{
    if (!c) return;
    if (c->entries)
        for (int i = 0; i < c->cap; i++) {
            free(c->entries[i].key);
            free(c->entries[i].mask);
        }
    free(c->entries);
    free(c->scratch);
    free(c->keybuf);
    free(c);
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* A new copy source gives the same state bytes another meaning: forget them all. */
static void forget_entries(nd_mask_cache *c)
{
    for (int i = 0; i < c->cap; i++) {
        free(c->entries[i].key);
        c->entries[i].key = NULL;
        c->entries[i].key_len = 0;
        c->entries[i].stamp = 0;
    }
    c->copy_gen = nd_grammar_copy_generation(c->g);
}

const uint32_t *nd_mask_cache_get(nd_mask_cache *c, const nd_grammar_state *s)
{
    if (c->copy_gen != nd_grammar_copy_generation(c->g)) forget_entries(c);
    size_t kl = nd_grammar_state_key(s, c->keybuf);
    uint64_t h = fnv(c->keybuf, kl);
    /* two-way set: slot h and its neighbour; replace the least recently used */
    int i0 = (int)(h & (uint64_t)(c->cap - 1)), i1 = (i0 + 1) & (c->cap - 1);
    int slots[2] = {i0, i1};
    c->clock++;
    for (int k = 0; k < 2; k++) {
        cache_entry *e = &c->entries[slots[k]];
        if (e->key && e->hash == h && e->key_len == kl && memcmp(e->key, c->keybuf, kl) == 0) {
            e->stamp = c->clock;
            c->hits++;
            return e->mask;
        }
    }
    c->misses++;
    cache_entry *e = &c->entries[i0];
    if (c->entries[i1].stamp < e->stamp) e = &c->entries[i1];
    uint8_t *key = malloc(kl);
    uint32_t *mask = e->mask ? e->mask : malloc(nd_token_mask_words(c->t) * sizeof *mask);
    if (!key || !mask) {
        free(key);
        if (!e->mask) free(mask);
        return NULL;
    }
    free(e->key);
    memcpy(key, c->keybuf, kl);
    e->key = key;
    e->key_len = kl;
    e->hash = h;
    e->stamp = c->clock;
    e->mask = mask;
    mask_with(c->g, s, c->t, mask, c->scratch);
    return mask;
}

void nd_mask_cache_stats(const nd_mask_cache *c, uint64_t *hits, uint64_t *misses)
{
    *hits = c->hits;
    *misses = c->misses;
}
