/* said_flag.c - a yes/no setting the request names by its own name (said_flag.h). */
#include "agent/said_flag.h"

#include <stdlib.h>
#include <string.h>

#include "agent/repair.h"
#include "agent/said_number.h"

#define MAX_WORDS 256

typedef struct {
    char w[MAX_WORDS][16];
    int n;
    unsigned char taken[MAX_WORDS]; /* inside a string value the call already has */
} request_words;

/* The key as one lowered word of 4 to 15 ASCII letters, or 0. */
static int key_word(const char *key, size_t len, char out[16])
{
    if (len < 4 || len > 15) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = key[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
        if (c < 'a' || c > 'z') return 0;
        out[i] = c;
    }
    out[len] = 0;
    return 1;
}

static int same_word(const char *x, const char *w)
{
    size_t L = strlen(x), n = strlen(w);
    return (L == n && !memcmp(x, w, n)) || (L == n + 1 && x[n] == 's' && !memcmp(x, w, n));
}

/* Mark the request's words that spell one of the call's string values. */
static void mark_taken(request_words *r, const nd_json *args)
{
    memset(r->taken, 0, sizeof r->taken);
    for (size_t k = 0; k < args->count; k++) {
        const nd_json *v = &args->items[k];
        size_t m = v->type == ND_JSON_ARRAY ? v->count : 1;
        for (size_t i = 0; i < m; i++) {
            const nd_json *s = v->type == ND_JSON_ARRAY ? &v->items[i] : v;
            if (s->type != ND_JSON_STRING || memchr(s->str, 0, s->len)) continue;
            char sw[16][16];
            int n = nd_lower_words(s->str, sw, NULL, 16);
            if (n == 0 || n == 16) continue;
            for (int at = 0; at + n <= r->n; at++) {
                int j = 0;
                while (j < n && !strcmp(r->w[at + j], sw[j])) j++;
                if (j == n)
                    for (j = 0; j < n; j++) r->taken[at + j] = 1;
            }
        }
    }
}

static int negates(const char *w)
{
    static const char *const NEG[] = {"not", "no", "without", "never", "off", "dont", NULL};
    for (const char *const *n = NEG; *n; n++)
        if (!strcmp(w, *n)) return 1;
    size_t L = strlen(w);
    return L > 3 && !strcmp(w + L - 3, "n't");
}

/* The value the request gives the key: 1, 0, or -1 when it does not say the
 * key exactly once. */
static int said_value(const request_words *r, const char *key)
{
    int at = -1;
    for (int i = 0; i < r->n; i++) {
        if (r->taken[i] || !same_word(r->w[i], key)) continue;
        if (at >= 0) return -1;
        at = i;
    }
    if (at < 0) return -1;
    for (int i = at - 3 < 0 ? 0 : at - 3; i < at; i++)
        if (negates(r->w[i])) return 0;
    if (at + 1 < r->n) {
        const char *next = r->w[at + 1];
        if (!strcmp(next, "off") || !strcmp(next, "no") || !strcmp(next, "false")) return 0;
    }
    return 1;
}

static int is_boolean(const nd_json *schema)
{
    const nd_json *t = nd_json_get(schema, "type");
    return t && t->type == ND_JSON_STRING && !strcmp(t->str, "boolean") && !nd_json_get(schema, "enum") &&
           !nd_json_get(schema, "const");
}

int nd_fix_said_flags(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    nd_one_call c;
    if (!request || !nd_repair_one_call(calls, tools, &c)) return 0;
    request_words *r = malloc(sizeof *r);
    if (!r) return -1;
    r->n = nd_lower_words(request, r->w, NULL, MAX_WORDS);
    mark_taken(r, c.args);
    int changed = 0, err = 0;
    for (size_t k = 0; k < c.props->count && !err; k++) {
        char key[16];
        if (!is_boolean(&c.props->items[k]) || !key_word(c.props->keys[k], c.props->key_lens[k], key)) continue;
        int v = said_value(r, key);
        if (v < 0) continue;
        const nd_json *have = nd_json_get(c.args, c.props->keys[k]);
        if (have && have->type == (v ? ND_JSON_TRUE : ND_JSON_FALSE)) continue;
        if (nd_object_put_json(c.args, c.props->keys[k], v ? "true" : "false", v ? 4 : 5)) {
            err = 1;
            break;
        }
        nd_repair_note(paths, n_paths, c.tool, c.props->keys[k]);
        changed++;
    }
    free(r);
    return err || paths->oom ? -1 : changed;
}
