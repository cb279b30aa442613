/* repeat_guard.c - cycle detection on the tail of the generated ids (see repeat_guard.h). */
#include "agent/repeat_guard.h"

#include <stdlib.h>
#include <string.h>

static int repeats_needed(int k) { return k == 1 ? 8 : k == 2 ? 4 : 3; }

int nd_repeat_next(const int32_t *ids, int n)
{
    for (int k = 1; k <= ND_REPEAT_MAX_CYCLE; k++) {
        int span = k * repeats_needed(k);
        if (span > n) continue;
        const int32_t *tail = ids + n - span;
        int cyclic = 1;
        for (int i = k; i < span && cyclic; i++) cyclic = tail[i] == tail[i - k];
        if (cyclic) return ids[n - k]; /* the cycle's next token */
    }
    return -1;
}

/* ---- repeated array items and calls ---------------------------------------- */

typedef struct { size_t start, end; } item_span;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int nd_repeat_item_cut(const char *text, size_t len, size_t *cut, char *closers, size_t cap)
{
    struct {
        char kind;          /* '[' or '{' */
        size_t elem_start;  /* arrays: where the current element starts */
        size_t sep;         /* arrays: the ',' before the current element (or the '[') */
        int first_span;     /* arrays: its completed elements are spans[first_span..n_spans) */
    } st[ND_REPEAT_MAX_DEPTH];
    int depth = 0, in_str = 0, esc = 0, n_spans = 0, cap_spans = 0, found = 0;
    item_span *spans = NULL;
    for (size_t i = 0; i < len && !found; i++) {
        char c = text[i];
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') { in_str = 1; continue; }
        if (c == '[' || c == '{') {
            if (depth == ND_REPEAT_MAX_DEPTH) break;
            st[depth].kind = c;
            st[depth].elem_start = i + 1;
            st[depth].sep = i;
            st[depth].first_span = n_spans;
            depth++;
            continue;
        }
        if (depth == 0 || st[depth - 1].kind != '[') {
            if (c == '}' && depth > 0) depth--;
            continue;
        }
        if (c != ',' && c != ']') continue;
        /* an element of the innermost array ends here */
        size_t a = st[depth - 1].elem_start, b = i;
        while (a < b && is_space(text[a])) a++;
        while (b > a && is_space(text[b - 1])) b--;
        if (b > a) {
            for (int k = st[depth - 1].first_span; k < n_spans && !found; k++)
                found = spans[k].end - spans[k].start == b - a && !memcmp(text + spans[k].start, text + a, b - a);
            if (found) {
                *cut = st[depth - 1].sep;
                size_t n = 0;
                for (int d = depth - 1; d >= 0 && n + 1 < cap; d--) closers[n++] = st[d].kind == '[' ? ']' : '}';
                if (cap) closers[n < cap ? n : cap - 1] = '\0';
                if (n + 1 >= cap && depth > (int)cap - 1) found = 0; /* closers did not fit */
                break;
            }
            if (n_spans == cap_spans) {
                int nc = cap_spans ? 2 * cap_spans : 16;
                item_span *p = realloc(spans, sizeof *p * (size_t)nc);
                if (!p) break;
                spans = p;
                cap_spans = nc;
            }
            spans[n_spans++] = (item_span){a, b};
        }
        if (c == ',') {
            st[depth - 1].sep = i;
            st[depth - 1].elem_start = i + 1;
        } else { /* ']': the array is done; its items are forgotten */
            n_spans = st[depth - 1].first_span;
            depth--;
        }
    }
    free(spans);
    return found;
}
