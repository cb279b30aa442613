/* grammar_sample.c - print random complete outputs of a tools grammar.
 *
 *   grammar_sample TOOLS.json SEED N [--value] [--tokens synthetic|VOCAB.tsv] [--bench] [--budget B]
 *
 * Each output is produced by repeatedly choosing uniformly among the bytes (or,
 * with --tokens, the vocabulary tokens) the grammar allows, until the output is
 * complete; one output per line.  Past `budget` bytes (default 300) closing
 * bytes " ] } are preferred so outputs stay short.  --value treats the file as
 * one JSON Schema and samples single values.  VOCAB.tsv lines are
 * "<id>\t<hex of the token's decoded bytes>".  --bench prints mask timing to stderr
 * (env GRAMMAR_SLOW=US also prints each state whose uncached mask took longer).
 * Exit status 0 when every output completed, 1 otherwise.  Used by
 * tests/python/test_grammar_property.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "grammar/schema.h"
#include "grammar/token_mask.h"
#include "core/file.h"
#include "core/json.h"

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

typedef struct vocab {
    int n;
    int *ids;
    char **bytes;
    size_t *lens;
} vocab;

static void vocab_add(vocab *v, const char *b, size_t n)
{
    v->ids = realloc(v->ids, (size_t)(v->n + 1) * sizeof *v->ids);
    v->bytes = realloc(v->bytes, (size_t)(v->n + 1) * sizeof *v->bytes);
    v->lens = realloc(v->lens, (size_t)(v->n + 1) * sizeof *v->lens);
    if (!v->ids || !v->bytes || !v->lens) exit(2);
    v->ids[v->n] = v->n;
    v->bytes[v->n] = malloc(n + 1);
    memcpy(v->bytes[v->n], b, n);
    v->lens[v->n] = n;
    v->n++;
}

static void synthetic_vocab(vocab *v)
{
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        vocab_add(v, &c, 1);
    }
    static const char *const multi[] = {
        "[{\"name\":\"", "\",\"arguments\":{", "{\"", "\":\"", "\",\"", "\":", "\"}", "}}", "}]", "},{", "\":[",
        "true", "false", "null", "12", "0.", "-1", "e+", "\\u00", "\\n", "\\\"", "ab", "abc", " the", " a", "--",
        "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "2024-", "01", ":00", "T1", "@", ".com", "\"]", "[\"",
        "\",", ",\"", "0,", "1]", "a\"", "\"a", NULL};
    for (int i = 0; multi[i]; i++) vocab_add(v, multi[i], strlen(multi[i]));
}

static int load_vocab_tsv(vocab *v, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int max_id = -1;
    while (fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        int id = atoi(line);
        char buf[2048];
        size_t n = 0;
        for (char *p = tab + 1; p[0] && p[1] && p[0] != '\n' && n < sizeof buf; p += 2) {
            unsigned x;
            if (sscanf(p, "%2x", &x) != 1) break;
            buf[n++] = (char)x;
        }
        if (id < v->n) continue; /* ids must increase */
        while (v->n < id) vocab_add(v, "", 0); /* excluded ids: empty, never allowed */
        vocab_add(v, buf, n);
        if (id > max_id) max_id = id;
    }
    fclose(f);
    return max_id + 1;
}

/* A shortest byte path from s to a complete state (breadth first over
 * distinct states), written to path; returns its length or -1.  Used past the
 * budget so outputs finish even when only rare bytes can end a value (e.g.
 * pattern "ab+$"). */
static int shortest_completion(const nd_grammar *g, const nd_grammar_state *s, char *path, int max_path)
{
    enum { MAXQ = 1024, MAXN = 1 << 17 };
    static nd_grammar_state q[2][MAXQ];
    static int qnode[2][MAXQ];
    static int parent[MAXN];
    static unsigned char via[MAXN];
    static uint64_t seen[1 << 18];
    static uint8_t key[sizeof(nd_grammar_state) + 16];
    memset(seen, 0, sizeof seen);
    int nn = 1, ncur = 1, c = 0, found = -1;
    nd_grammar_state_copy(&q[0][0], s);
    qnode[0][0] = 0;
    parent[0] = -1;
    for (int depth = 0; depth < max_path && ncur > 0 && found < 0; depth++) {
        int nnxt = 0;
        for (int i = 0; i < ncur && found < 0; i++) {
            /* past the first byte, ASCII without escapes suffices to finish any
             * value, and it keeps partial UTF-8/escape states from multiplying */
            int top = depth == 0 ? 256 : 128;
            for (int b = 0; b < top && nnxt < MAXQ && nn < MAXN; b++) {
                if (depth > 0 && b == '\\') continue;
                nd_grammar_state *t = &q[1 - c][nnxt];
                if (nd_grammar_step(g, &q[c][i], t, (unsigned char)b) < 0) continue;
                size_t kl = nd_grammar_state_key(t, key);
                uint64_t h = 1469598103934665603ull;
                for (size_t k = 0; k < kl; k++) h = (h ^ key[k]) * 1099511628211ull;
                h |= 1;
                size_t slot = h & ((1 << 18) - 1);
                int dup = 0;
                while (seen[slot]) {
                    if (seen[slot] == h) { dup = 1; break; }
                    slot = (slot + 1) & ((1 << 18) - 1);
                }
                if (dup) continue;
                seen[slot] = h;
                parent[nn] = qnode[c][i];
                via[nn] = (unsigned char)b;
                qnode[1 - c][nnxt++] = nn;
                if (nd_grammar_complete(g, t)) { found = nn++; break; }
                nn++;
            }
        }
        c = 1 - c;
        ncur = nnxt;
    }
    if (found < 0) return -1;
    int len = 0;
    for (int k = found; parent[k] >= 0; k = parent[k]) len++;
    int i = len;
    for (int k = found; parent[k] >= 0; k = parent[k]) path[--i] = (char)via[k];
    return len;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: grammar_sample TOOLS.json SEED N [--value] [--tokens synthetic|VOCAB.tsv] [--bench] [--budget B]\n");
        return 2;
    }
    const char *path = argv[1];
    rng_state = strtoull(argv[2], NULL, 10) * 2654435761ull + 88172645463325252ull;
    int count = atoi(argv[3]), value = 0, bench = 0;
    const char *tokens = NULL;
    size_t budget = 300;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--value")) value = 1;
        else if (!strcmp(argv[i], "--bench")) bench = 1;
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = argv[++i];
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget = (size_t)atol(argv[++i]);
    }
    needle_error err = {0};
    char *text;
    size_t len;
    nd_json *doc;
    nd_grammar *g;
    if (nd_read_file(path, &text, &len, &err) < 0 || nd_json_parse(text, len, path, &doc, &err) < 0) {
        fprintf(stderr, "grammar_sample: %s\n", err.message);
        return 2;
    }
    int rc = value ? nd_schema_compile_value(doc, "schema", &g, &err) : nd_grammar_compile(doc, &g, &err);
    if (rc < 0) {
        printf("ERROR %s %s\n", needle_strerror(rc), err.message);
        return 3;
    }
    vocab v = {0};
    nd_token_trie *trie = NULL;
    nd_mask_cache *cache = NULL;
    int vocab_size = 0;
    if (tokens) {
        if (!strcmp(tokens, "synthetic")) {
            synthetic_vocab(&v);
            vocab_size = v.n;
        } else {
            vocab_size = load_vocab_tsv(&v, tokens);
            if (vocab_size <= 0) { fprintf(stderr, "grammar_sample: cannot read %s\n", tokens); return 2; }
        }
        if (nd_token_trie_build(v.ids, (const char *const *)v.bytes, v.lens, (size_t)v.n, vocab_size, &trie, &err) < 0 ||
            nd_mask_cache_new(g, trie, 256, &cache, &err) < 0) {
            fprintf(stderr, "grammar_sample: %s\n", err.message);
            return 2;
        }
    }
    int all_ok = 1;
    double mask_total = 0, mask_max = 0, uncached_total = 0;
    long mask_steps = 0;
    int *allowed = malloc((size_t)(vocab_size > 256 ? vocab_size : 256) * sizeof *allowed);
    uint32_t *maskbuf = trie ? malloc(nd_token_mask_words(trie) * sizeof *maskbuf) : NULL;
    char *out = malloc(1 << 20);
    for (int k = 0; k < count; k++) {
        nd_grammar_state s;
        nd_grammar_start(g, &s);
        size_t n = 0;
        int ok = 0, bfs_failed = 0;
        while (n < (1 << 20) - 64) {
            int complete = nd_grammar_complete(g, &s);
            int na = 0;
            if (!trie) {
                uint32_t bits[8];
                nd_grammar_allowed_bytes(g, &s, bits);
                for (int b = 0; b < 256; b++)
                    if (bits[b / 32] >> (b % 32) & 1) allowed[na++] = b;
            } else {
                double t0 = now_us();
                const uint32_t *m = nd_mask_cache_get(cache, &s);
                double t1 = now_us();
                if (bench) {
                    nd_token_mask(g, &s, trie, maskbuf);
                    double dt = now_us() - t1;
                    uncached_total += dt;
                    if (getenv("GRAMMAR_SLOW") && dt > atof(getenv("GRAMMAR_SLOW")))
                        fprintf(stderr, "slow mask %.0f us after: %.*s\n", dt, (int)n, out);
                }
                mask_total += t1 - t0;
                if (t1 - t0 > mask_max) mask_max = t1 - t0;
                mask_steps++;
                for (int id = 0; id < vocab_size; id++)
                    if (m[id / 32] >> (id % 32) & 1) allowed[na++] = id;
            }
            /* stop at a complete output when nothing may follow, or at random */
            if (complete && (na == 0 || rnd() % 4 == 0)) { ok = 1; break; }
            if (na == 0) break; /* a dead end: the automaton promised this never happens */
            if (n > 2 * budget && !bfs_failed) { /* finish along a shortest completion */
                char path[512];
                int pl = shortest_completion(g, &s, path, (int)sizeof path);
                if (pl > 0 && nd_grammar_advance(g, &s, path, (size_t)pl) == 0) {
                    memcpy(out + n, path, (size_t)pl);
                    n += (size_t)pl;
                    continue;
                }
                bfs_failed = 1;
            }
            int pick = allowed[rnd() % (uint64_t)na];
            if (n > budget && rnd() % 2) { /* prefer closing bytes, '"' first; half the time pick freely */
                int best = -1;
                for (int pass = 0; pass < 2 && best < 0; pass++)
                    for (int i = 0; i < na && best < 0; i++) {
                        int id = allowed[i];
                        unsigned char c = trie ? (unsigned char)v.bytes[id][0] : (unsigned char)id;
                        size_t l = trie ? v.lens[id] : 1;
                        if (l == 1 && (pass == 0 ? c == '"' : (c == ']' || c == '}'))) best = id;
                    }
                if (best >= 0) pick = best;
            }
            const char *bytes;
            size_t bl;
            char one = (char)pick;
            if (trie) { bytes = v.bytes[pick]; bl = v.lens[pick]; }
            else { bytes = &one; bl = 1; }
            if (nd_grammar_advance(g, &s, bytes, bl) < 0) break;
            memcpy(out + n, bytes, bl);
            n += bl;
        }
        fwrite(out, 1, n, stdout);
        fputc('\n', stdout);
        if (!ok) {
            all_ok = 0;
            fprintf(stderr, "grammar_sample: output %d did not complete\n", k);
        }
    }
    if (bench && mask_steps) {
        uint64_t hits, misses;
        nd_mask_cache_stats(cache, &hits, &misses);
        fprintf(stderr, "mask steps=%ld cached_avg_us=%.1f cached_max_us=%.1f uncached_avg_us=%.1f hits=%llu misses=%llu trie_nodes=%zu\n",
                mask_steps, mask_total / mask_steps, mask_max, uncached_total / mask_steps, (unsigned long long)hits,
                (unsigned long long)misses, nd_token_trie_node_count(trie));
    }
    free(out);
    free(allowed);
    free(maskbuf);
    nd_mask_cache_free(cache);
    nd_token_trie_free(trie);
    for (int i = 0; i < v.n; i++) free(v.bytes[i]);
    free(v.bytes);
    free(v.ids);
    free(v.lens);
    nd_grammar_free(g);
    nd_json_free(doc);
    free(text);
    return all_ok ? 0 : 1;
}
