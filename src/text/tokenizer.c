/* tokenizer.c - SentencePiece-exact BPE encoding and decoding.
 *
 * The merge loop follows SentencePiece's bpe_model.cc in behaviour (not in
 * code): symbols form a doubly linked list over the normalised text; every
 * adjacent pair whose concatenation is a mergeable piece goes into a max-heap
 * keyed by (score, -left index); a popped pair is applied only if both sides
 * are still alive and unchanged (their byte lengths still add up to the
 * stored size), after which the two new neighbouring pairs are pushed.
 * Symbols only grow, so a stale heap entry always fails that size test.
 */
#include "text/tokenizer.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "core/utf8.h"

/* The longest text one encode call accepts: keeps every index in int32 with
 * room for the 3x growth of spaces into U+2581. */
#define ND_TOK_MAX_TEXT ((size_t)1 << 28)

static const char kSpace[] = "\xe2\x96\x81"; /* U+2581, SentencePiece's visible space */

/* ---- small shared pieces ---- */

void nd_ids_init(nd_ids *v) { memset(v, 0, sizeof *v); }
void nd_ids_free(nd_ids *v)
{
    free(v->data);
    memset(v, 0, sizeof *v);
}
int nd_ids_push(nd_ids *v, int id)
{
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int *d = realloc(v->data, cap * sizeof *d);
        if (!d) return NEEDLE_ENOMEM;
        v->data = d;
        v->cap = cap;
    }
    v->data[v->len++] = id;
    return 0;
}


/* ---- the tokenizer ---- */

typedef struct hslot {
    uint32_t hash;
    int32_t id; /* -1: empty */
} hslot;

struct nd_tokenizer {
    int n, pad, eos, bos, unk;
    int add_dummy_prefix, byte_fallback;
    char *arena;       /* every piece text then every decoded byte string, NUL-separated */
    size_t *piece_off; /* into arena */
    int *piece_len;
    size_t *bytes_off; /* decoded bytes, into arena */
    int *bytes_len;
    uint8_t *starts_space;
    uint8_t *mergeable; /* 1: BPE merges may produce this piece (normal or marker) */
    float *scores;
    uint8_t *types;
    hslot *slots;
    uint32_t mask;
    int max_merge_len; /* longest mergeable piece: longer concatenations need no lookup */
    int byte_id[256];  /* id of <0xHH>, or -1 */
    int n_markers;
    int *markers;             /* marker ids, longest text first */
    uint8_t marker_first[256]; /* 1: some marker starts with this byte */
    pthread_mutex_t lock;      /* guards `scratch` and `tmp` for nd_tokenizer_encode */
    nd_tok_scratch scratch;
    nd_ids tmp;
};

typedef struct tok_sym {
    int32_t start, len; /* byte range in the normalised text; len 0 = merged away */
    int32_t prev, next; /* -1 at the ends */
    int32_t frozen;     /* markers never merge */
    int32_t plain;      /* holds untrusted text: may never become a marker */
} tok_sym;

typedef struct tok_pair {
    float score;
    int32_t left, right, size;
} tok_pair;

static inline uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a, then a final avalanche for the mask */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

static inline int lookup(const nd_tokenizer *t, const char *s, size_t n, uint32_t h)
{
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        const hslot *sl = &t->slots[i];
        if (sl->id < 0) return -1;
        if (sl->hash == h && (size_t)t->piece_len[sl->id] == n && memcmp(t->arena + t->piece_off[sl->id], s, n) == 0)
            return sl->id;
    }
}

int nd_tokenizer_piece_id(const nd_tokenizer *t, const char *piece, size_t len)
{
    return lookup(t, piece, len, hash_bytes(piece, len));
}

void nd_tok_scratch_init(nd_tok_scratch *s) { memset(s, 0, sizeof *s); }
void nd_tok_scratch_free(nd_tok_scratch *s)
{
    free(s->norm);
    free(s->syms);
    free(s->heap);
    free(s->cat);
    free(s->plain);
    free(s->norm_plain);
    memset(s, 0, sizeof *s);
}

void nd_tokenizer_free(nd_tokenizer *t)
{
    if (!t) return;
    free(t->arena);
    free(t->piece_off);
    free(t->piece_len);
    free(t->bytes_off);
    free(t->bytes_len);
    free(t->starts_space);
    free(t->mergeable);
    free(t->scores);
    free(t->types);
    free(t->slots);
    free(t->markers);
    pthread_mutex_destroy(&t->lock);
    nd_tok_scratch_free(&t->scratch);
    nd_ids_free(&t->tmp);
    free(t);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Sort marker ids by text length, longest first (insertion sort: ten items). */
static void sort_markers(nd_tokenizer *t)
{
    for (int i = 1; i < t->n_markers; i++) {
        int id = t->markers[i], j = i;
        while (j > 0 && t->piece_len[t->markers[j - 1]] < t->piece_len[id]) {
            t->markers[j] = t->markers[j - 1];
            j--;
        }
        t->markers[j] = id;
    }
}

int nd_tokenizer_create(const nd_vocab *v, nd_tokenizer **out, needle_error *err)
{
    *out = NULL;
    if (!v || v->n_pieces <= 0 || !v->pieces || !v->piece_lens || !v->scores || !v->types)
        return nd_errorf(err, NEEDLE_EINVAL, "tokenizer: empty vocabulary");
    int n = v->n_pieces;
    if (v->unk_id < 0 || v->unk_id >= n)
        return nd_errorf(err, NEEDLE_EINVAL, "tokenizer: unk_id %d outside the vocabulary of %d", v->unk_id, n);
    nd_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return nd_errorf(err, NEEDLE_ENOMEM, "tokenizer: out of memory");
    pthread_mutex_init(&t->lock, NULL);
    t->n = n;
    t->pad = v->pad_id, t->eos = v->eos_id, t->bos = v->bos_id, t->unk = v->unk_id;
    t->add_dummy_prefix = v->add_dummy_prefix ? 1 : 0;
    t->byte_fallback = v->byte_fallback ? 1 : 0;

    size_t arena = 0;
    for (int i = 0; i < n; i++) {
        if (v->piece_lens[i] <= 0 || !v->pieces[i]) {
            nd_tokenizer_free(t);
            return nd_errorf(err, NEEDLE_EINVAL, "tokenizer: piece %d is empty", i);
        }
        arena += 2 * ((size_t)v->piece_lens[i] + 1); /* raw text + decoded bytes (never longer) */
    }
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)n) slots <<= 1;
    t->arena = malloc(arena);
    t->piece_off = malloc(sizeof(size_t) * (size_t)n);
    t->piece_len = malloc(sizeof(int) * (size_t)n);
    t->bytes_off = malloc(sizeof(size_t) * (size_t)n);
    t->bytes_len = malloc(sizeof(int) * (size_t)n);
    t->starts_space = calloc((size_t)n, 1);
    t->mergeable = calloc((size_t)n, 1);
    t->scores = malloc(sizeof(float) * (size_t)n);
    t->types = malloc((size_t)n);
    t->slots = malloc(sizeof(hslot) * slots);
    t->markers = malloc(sizeof(int) * (size_t)n);
    if (!t->arena || !t->piece_off || !t->piece_len || !t->bytes_off || !t->bytes_len || !t->starts_space ||
        !t->mergeable || !t->scores || !t->types || !t->slots || !t->markers) {
        nd_tokenizer_free(t);
        return nd_errorf(err, NEEDLE_ENOMEM, "tokenizer: out of memory for %d pieces", n);
    }
    memset(t->slots, 0xff, sizeof(hslot) * slots); /* id -1 everywhere */
    t->mask = slots - 1;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;

    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const char *p = v->pieces[i];
        int len = v->piece_lens[i];
        uint8_t type = v->types[i];
        t->types[i] = type;
        t->scores[i] = v->scores[i];
        t->piece_off[i] = off;
        t->piece_len[i] = len;
        memcpy(t->arena + off, p, (size_t)len);
        t->arena[off + (size_t)len] = '\0';
        off += (size_t)len + 1;

        uint32_t h = hash_bytes(p, (size_t)len);
        if (lookup(t, p, (size_t)len, h) >= 0) {
            int first = lookup(t, p, (size_t)len, h);
            nd_tokenizer_free(t);
            return nd_errorf(err, NEEDLE_EFORMAT, "tokenizer: piece %d duplicates piece %d", i, first);
        }
        for (uint32_t s = h & t->mask;; s = (s + 1) & t->mask)
            if (t->slots[s].id < 0) {
                t->slots[s].hash = h;
                t->slots[s].id = i;
                break;
            }

        /* What the token decodes to. */
        char *dst = t->arena + off;
        int dlen = 0;
        if (type == ND_PIECE_NORMAL || type == ND_PIECE_MARKER) {
            t->mergeable[i] = 1;
            if (len > t->max_merge_len) t->max_merge_len = len;
            if (type == ND_PIECE_MARKER) {
                memcpy(dst, p, (size_t)len);
                dlen = len;
                t->markers[t->n_markers++] = i;
                t->marker_first[(unsigned char)p[0]] = 1;
            } else {
                t->starts_space[i] = len >= 3 && memcmp(p, kSpace, 3) == 0;
                for (int k = 0; k < len;) {
                    if (k + 3 <= len && memcmp(p + k, kSpace, 3) == 0) {
                        dst[dlen++] = ' ';
                        k += 3;
                    } else {
                        dst[dlen++] = p[k++];
                    }
                }
            }
        } else if (type == ND_PIECE_BYTE) {
            int hi = len == 6 ? hexval(p[3]) : -1, lo = len == 6 ? hexval(p[4]) : -1;
            if (len != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>' || hi < 0 || lo < 0) {
                nd_tokenizer_free(t);
                return nd_errorf(err, NEEDLE_EFORMAT, "tokenizer: byte piece %d '%s' is not of the form <0xHH>", i, p);
            }
            int b = hi * 16 + lo;
            if (t->byte_id[b] < 0) t->byte_id[b] = i;
            dst[0] = (char)b;
            dlen = 1;
        }
        t->bytes_off[i] = off;
        t->bytes_len[i] = dlen;
        dst[dlen] = '\0';
        off += (size_t)dlen + 1;
    }
    sort_markers(t);
    *out = t;
    return 0;
}

int nd_tokenizer_load_spm(const char *path, nd_tokenizer **out, needle_error *err)
{
    nd_vocab v;
    *out = NULL;
    int rc = nd_vocab_load_spm_file(path, &v, err);
    if (rc) return rc;
    rc = nd_tokenizer_create(&v, out, err);
    nd_vocab_free(&v);
    if (rc && err && strncmp(err->message, path, strlen(path)) != 0) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        nd_errorf(err, rc, "%s: %s", path, why);
    }
    return rc;
}

/* ---- encoding ---- */

static inline int pair_before(const tok_pair *a, const tok_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(tok_pair *h, size_t *n, tok_pair p)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_before(&p, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = p;
}

static tok_pair heap_pop(tok_pair *h, size_t *n)
{
    tok_pair top = h[0], last = h[--(*n)];
    size_t i = 0, count = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= count) break;
        if (c + 1 < count && pair_before(&h[c + 1], &h[c])) c++;
        if (!pair_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (count) h[i] = last;
    return top;
}

/* Push the pair (l, r) if their concatenation is a piece merges may produce. */
static inline void try_pair(const nd_tokenizer *t, const char *norm, const tok_sym *sy, int l, int r, tok_pair *heap,
                            size_t *hn)
{
    if (l < 0 || r < 0 || sy[l].frozen || sy[r].frozen) return;
    int size = sy[l].len + sy[r].len;
    if (size > t->max_merge_len) return;
    const char *s = norm + sy[l].start;
    int id = lookup(t, s, (size_t)size, hash_bytes(s, (size_t)size));
    if (id < 0 || !t->mergeable[id]) return;
    if ((sy[l].plain || sy[r].plain) && t->types[id] == ND_PIECE_MARKER) return; /* untrusted text stays text */
    tok_pair p = {t->scores[id], l, r, size};
    heap_push(heap, hn, p);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (*cap >= need) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return NEEDLE_ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

/* The id a final symbol maps to when it is itself a piece (-1 otherwise). */
static int emit_symbol(const nd_tokenizer *t, const char *s, int len, int plain, nd_ids *out, int *prev_unk)
{
    int id = lookup(t, s, (size_t)len, hash_bytes(s, (size_t)len));
    if (id >= 0 && plain && t->types[id] == ND_PIECE_MARKER) id = -1; /* untrusted text: bytes, never a marker */
    if (id >= 0 && id != t->unk) {
        *prev_unk = 0;
        return nd_ids_push(out, id);
    }
    if (t->byte_fallback) {
        *prev_unk = 0;
        for (int k = 0; k < len; k++) {
            int b = t->byte_id[(unsigned char)s[k]];
            if (nd_ids_push(out, b >= 0 ? b : t->unk)) return NEEDLE_ENOMEM;
        }
        return 0;
    }
    /* Without byte fallback SentencePiece folds a run of unknown symbols
     * into one <unk>. */
    if (*prev_unk) return 0;
    *prev_unk = 1;
    return nd_ids_push(out, t->unk);
}

/* Encode text; plain (NULL: none) flags the bytes of untrusted text, where
 * markers are neither matched nor produced by merges. */
static int encode_impl(const nd_tokenizer *t, nd_tok_scratch *s, const char *text, size_t len, const uint8_t *plain,
                       nd_ids *out, needle_error *err)
{
    size_t bad = nd_utf8_first_invalid(text, len);
    if (bad != len) return nd_errorf(err, NEEDLE_EUTF8, "tokenizer: input is not valid UTF-8 at byte %zu", bad);
    if (len == 0) return 0;
    if (len > ND_TOK_MAX_TEXT)
        return nd_errorf(err, NEEDLE_ELIMIT, "tokenizer: input of %zu bytes exceeds the limit of %zu", len,
                         ND_TOK_MAX_TEXT);

    /* Normalise: dummy prefix, spaces -> U+2581.  At most 3 bytes per input byte + 3. */
    size_t max_norm = 3 * len + 3, max_syms = len + 1;
    if (grow((void **)&s->norm, &s->norm_cap, max_norm, 1) || grow(&s->syms, &s->syms_cap, max_syms, sizeof(tok_sym)) ||
        grow(&s->heap, &s->heap_cap, 3 * max_syms, sizeof(tok_pair)))
        return nd_errorf(err, NEEDLE_ENOMEM, "tokenizer: out of memory for %zu bytes of input", len);
    if (plain && grow((void **)&s->norm_plain, &s->norm_plain_cap, max_norm, 1))
        return nd_errorf(err, NEEDLE_ENOMEM, "tokenizer: out of memory for %zu bytes of input", len);
    char *norm = s->norm;
    uint8_t *np = plain ? s->norm_plain : NULL;
    size_t nl = 0;
    if (t->add_dummy_prefix) {
        memcpy(norm, kSpace, 3), nl = 3;
        if (np) memset(np, 0, 3);
    }
    for (size_t i = 0; i < len; i++) {
        size_t at = nl;
        if (text[i] == ' ') memcpy(norm + nl, kSpace, 3), nl += 3;
        else norm[nl++] = text[i];
        if (np) memset(np + at, plain[i], nl - at);
    }

    /* Initial symbols: a whole marker where one starts (longest first), else one character. */
    tok_sym *sy = s->syms;
    int ns = 0;
    for (size_t pos = 0; pos < nl;) {
        int sl = 0, frozen = 0;
        if (t->marker_first[(unsigned char)norm[pos]]) {
            for (int m = 0; m < t->n_markers; m++) {
                int id = t->markers[m], ml = t->piece_len[id];
                if ((size_t)ml <= nl - pos && memcmp(norm + pos, t->arena + t->piece_off[id], (size_t)ml) == 0 &&
                    !(np && memchr(np + pos, 1, (size_t)ml))) {
                    sl = ml, frozen = 1;
                    break;
                }
            }
        }
        if (!sl) sl = nd_utf8_seq_len((unsigned char)norm[pos]);
        int sym_plain = 0;
        for (int k = 0; np && k < sl && pos + (size_t)k < nl; k++) sym_plain |= np[pos + (size_t)k];
        sy[ns].plain = sym_plain;
        sy[ns].start = (int32_t)pos;
        sy[ns].len = sl;
        sy[ns].prev = ns - 1;
        sy[ns].next = ns + 1;
        sy[ns].frozen = frozen;
        ns++;
        pos += (size_t)sl;
    }
    sy[ns - 1].next = -1;

    tok_pair *heap = s->heap;
    size_t hn = 0;
    for (int i = 1; i < ns; i++) try_pair(t, norm, sy, i - 1, i, heap, &hn);
    while (hn) {
        tok_pair top = heap_pop(heap, &hn);
        tok_sym *l = &sy[top.left], *r = &sy[top.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.size) continue; /* stale */
        l->len += r->len;
        l->plain |= r->plain;
        l->next = r->next;
        if (r->next >= 0) sy[r->next].prev = top.left;
        r->len = 0;
        try_pair(t, norm, sy, l->prev, top.left, heap, &hn);
        try_pair(t, norm, sy, top.left, l->next, heap, &hn);
    }

    size_t start_len = out->len;
    int prev_unk = 0;
    for (int i = 0; i >= 0; i = sy[i].next) {
        if (emit_symbol(t, norm + sy[i].start, sy[i].len, sy[i].plain, out, &prev_unk)) {
            out->len = start_len;
            return nd_errorf(err, NEEDLE_ENOMEM, "tokenizer: out of memory for the output ids");
        }
    }
    return 0;
}

int nd_tokenizer_encode_scratch(const nd_tokenizer *t, nd_tok_scratch *s, const char *text, size_t len, nd_ids *out,
                                needle_error *err)
{
    return encode_impl(t, s, text, len, NULL, out, err);
}

int nd_tokenizer_encode_spans(nd_tokenizer *t, const nd_tok_span *spans, size_t n_spans, nd_ids *out,
                              needle_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < n_spans; i++) {
        if (spans[i].len > ND_TOK_MAX_TEXT || total > ND_TOK_MAX_TEXT)
            return nd_errorf(err, NEEDLE_ELIMIT, "tokenizer: input exceeds the limit of %zu bytes", (size_t)ND_TOK_MAX_TEXT);
        total += spans[i].len;
    }
    pthread_mutex_lock(&t->lock);
    nd_tok_scratch *s = &t->scratch;
    int rc = 0;
    if (grow((void **)&s->cat, &s->cat_cap, total + 1, 1) || grow((void **)&s->plain, &s->plain_cap, total + 1, 1)) {
        rc = nd_errorf(err, NEEDLE_ENOMEM, "tokenizer: out of memory for %zu bytes of input", total);
    } else {
        size_t at = 0;
        for (size_t i = 0; i < n_spans; i++) {
            if (spans[i].len) memcpy(s->cat + at, spans[i].text, spans[i].len);
            memset(s->plain + at, spans[i].plain ? 1 : 0, spans[i].len);
            at += spans[i].len;
        }
        rc = encode_impl(t, s, s->cat, total, s->plain, out, err);
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int nd_tokenizer_encode(nd_tokenizer *t, const char *text, size_t len, nd_ids *out, needle_error *err)
{
    pthread_mutex_lock(&t->lock);
    int rc = nd_tokenizer_encode_scratch(t, &t->scratch, text, len, out, err);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int nd_tokenizer_encode_into(nd_tokenizer *t, const char *text, size_t len, int *ids, int cap, int *n,
                             needle_error *err)
{
    *n = 0;
    pthread_mutex_lock(&t->lock);
    t->tmp.len = 0;
    int rc = nd_tokenizer_encode_scratch(t, &t->scratch, text, len, &t->tmp, err);
    if (rc == 0) {
        if (t->tmp.len > (size_t)INT32_MAX) {
            rc = nd_errorf(err, NEEDLE_ELIMIT, "tokenizer: %zu ids do not fit an int count", t->tmp.len);
        } else {
            *n = (int)t->tmp.len;
            if (cap < *n) {
                rc = nd_errorf(err, NEEDLE_ETOOSMALL, "tokenizer: %d ids do not fit a buffer of %d", *n, cap);
            } else if (*n) {
                memcpy(ids, t->tmp.data, sizeof(int) * (size_t)*n);
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

/* ---- decoding and lookups ---- */

int nd_tokenizer_decode_stream(const nd_tokenizer *t, const int *ids, size_t n, int *at_start, nd_buf *out,
                               needle_error *err)
{
    for (size_t i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= t->n)
            return nd_errorf(err, NEEDLE_EINVAL, "tokenizer: id %d at position %zu is outside the vocabulary of %d", id,
                             i, t->n);
        uint8_t type = t->types[id];
        if (type == ND_PIECE_CONTROL || type == ND_PIECE_UNKNOWN) continue;
        const char *b = t->arena + t->bytes_off[id];
        size_t bl = (size_t)t->bytes_len[id];
        if (*at_start && t->starts_space[id] && t->add_dummy_prefix) b++, bl--;
        nd_buf_append(out, b, bl);
        *at_start = 0;
    }
    if (out->oom) return nd_errorf(err, NEEDLE_ENOMEM, "tokenizer: out of memory while decoding");
    return 0;
}

int nd_tokenizer_decode(const nd_tokenizer *t, const int *ids, size_t n, nd_buf *out, needle_error *err)
{
    int at_start = 1;
    return nd_tokenizer_decode_stream(t, ids, n, &at_start, out, err);
}

int nd_tokenizer_size(const nd_tokenizer *t) { return t->n; }
int nd_tokenizer_bos(const nd_tokenizer *t) { return t->bos; }
int nd_tokenizer_eos(const nd_tokenizer *t) { return t->eos; }
int nd_tokenizer_pad(const nd_tokenizer *t) { return t->pad; }
int nd_tokenizer_unk(const nd_tokenizer *t) { return t->unk; }

int nd_tokenizer_type(const nd_tokenizer *t, int id) { return id < 0 || id >= t->n ? -1 : t->types[id]; }

const char *nd_tokenizer_piece(const nd_tokenizer *t, int id, int *len)
{
    if (id < 0 || id >= t->n) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->piece_len[id];
    return t->arena + t->piece_off[id];
}

const char *nd_tokenizer_token_bytes(const nd_tokenizer *t, int id, int *len)
{
    if (id < 0 || id >= t->n || t->types[id] == ND_PIECE_CONTROL || t->types[id] == ND_PIECE_UNKNOWN) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->bytes_len[id];
    return t->arena + t->bytes_off[id];
}

int nd_tokenizer_token_starts_with_space(const nd_tokenizer *t, int id)
{
    return id >= 0 && id < t->n && t->starts_space[id];
}
