/* copy_source.c - sorted word-start suffixes of a copy source (see copy_source.h). */
#include "grammar/copy_source.h"

#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "needle.h"

/* The byte that stands for a cut-out character: no code point the grammar
 * steps with maps to it, so no copy crosses it. */
#define SEP 0x00
/* At most this many word starts: the interval's ends fit 16 bits each. */
#define MAX_WORDS 65535u

struct nd_copy_source {
    uint8_t *text;   /* the source, cut-out characters as SEP */
    uint32_t n;
    uint32_t *sa;    /* word-start positions, sorted as suffixes of text */
    uint32_t n_sa;
    uint8_t *end_ok; /* [q]: a copy text[p..q) may end at q (q in 0..n) */
    uint8_t *reach;  /* [q]: some q' >= q with end_ok[q'] and no SEP in text[q..q') */
};

static int word_byte(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

/* A copy starts at a word, or at a sign that leads one ("+44 20 ...", "#3", "@sam", "$20", "(0)"). */
static int start_byte(uint8_t c) { return word_byte(c) || c == '+' || c == '#' || c == '@' || c == '$' || c == '('; }

/* Is the code point one a JSON string must escape (never copied)? */
static int cut_out(uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\'; }



/* ------------------------------------------------------------ building */

static int cmp_suffix(const nd_copy_source *c, uint32_t x, uint32_t y)
{
    uint32_t nx = c->n - x, ny = c->n - y, m = nx < ny ? nx : ny;
    int r = memcmp(c->text + x, c->text + y, m);
    if (r) return r;
    return nx < ny ? -1 : nx > ny ? 1 : 0;
}

/* Merge sort of the word starts (qsort has no context argument in C11). */
static void sort_suffixes(const nd_copy_source *c, uint32_t *v, uint32_t *tmp, uint32_t n)
{
    if (n < 2) return;
    uint32_t h = n / 2;
    sort_suffixes(c, v, tmp, h);
    sort_suffixes(c, v + h, tmp, n - h);
    uint32_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp_suffix(c, v[i], v[j]) <= 0 ? v[i++] : v[j++];
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

int nd_copy_source_build(const char *text, size_t len, nd_copy_source **out)
{
    *out = NULL;
    const unsigned char *t = (const unsigned char *)text;
    if (len > ND_COPY_MAX_BYTES) { /* keep the most recent text, from a character start */
        t += len - ND_COPY_MAX_BYTES;
        len = ND_COPY_MAX_BYTES;
        while (len && (*t & 0xC0) == 0x80) { t++; len--; }
    }
    nd_copy_source *c = calloc(1, sizeof *c);
    if (!c) return NEEDLE_ENOMEM;
    c->text = malloc(len + 1);
    c->end_ok = calloc(len + 1, 1);
    c->reach = calloc(len + 1, 1);
    /* one word start per byte at most: a run of signs ("@@@", "$$") starts at every sign */
    c->sa = malloc((len + 1) * sizeof *c->sa);
    uint32_t *tmp = malloc((len + 1) * sizeof *tmp);
    if (!c->text || !c->end_ok || !c->reach || !c->sa || !tmp) {
        free(tmp);
        nd_copy_source_free(c);
        return NEEDLE_ENOMEM;
    }
    /* the text with cut-out characters and invalid bytes as SEP */
    uint32_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t k = nd_utf8_valid_len(t + i, len - i);
        uint32_t cp = 0;
        if (k) nd_utf8_decode(t + i, k, &cp);
        if (!k || cut_out(cp)) {
            c->text[n++] = SEP;
            i += k ? k : 1;
            continue;
        }
        for (size_t j = 0; j < k; j++) c->text[n++] = t[i + j];
        i += k;
    }
    c->n = n;
    /* word starts */
    for (uint32_t p = 0; p < n && c->n_sa < MAX_WORDS; p++)
        if (start_byte(c->text[p]) && (p == 0 || !word_byte(c->text[p - 1]))) c->sa[c->n_sa++] = p;
    /* ends: after a word character or . ! ? ) ', before a non-word byte or the end */
    for (uint32_t q = 1; q <= n; q++) {
        uint8_t last = c->text[q - 1];
        int last_ok = word_byte(last) || last == '.' || last == '!' || last == '?' || last == ')' || last == '\'';
        c->end_ok[q] = last_ok && (q == n || !word_byte(c->text[q]));
    }
    c->reach[n] = c->end_ok[n];
    for (uint32_t q = n; q-- > 0;) c->reach[q] = c->end_ok[q] || (c->text[q] != SEP && c->reach[q + 1]);
    sort_suffixes(c, c->sa, tmp, c->n_sa);
    free(tmp);
    if (c->n_sa == 0) {
        nd_copy_source_free(c);
        return 0;
    }
    *out = c;
    return 0;
}

void nd_copy_source_free(nd_copy_source *c)
{
    if (!c) return;
    free(c->text);
    free(c->sa);
    free(c->end_ok);
    free(c->reach);
    free(c);
}

uint32_t nd_copy_word_count(const nd_copy_source *c) { return c ? c->n_sa : 0; }

/* ------------------------------------------------------------ running */

/* The state: a = lo | (n_sa - hi) << 16 (so the start state is 0), b = depth. */
static void unpack(const nd_copy_source *c, uint32_t a, uint32_t *lo, uint32_t *hi)
{
    *lo = a & 0xFFFF;
    *hi = c->n_sa - (a >> 16);
}

static uint32_t pack(const nd_copy_source *c, uint32_t lo, uint32_t hi) { return lo | ((c->n_sa - hi) << 16); }

/* The byte at depth d of suffix sa[i], or -1 past the end. */
static int byte_at(const nd_copy_source *c, uint32_t i, uint32_t d)
{
    uint32_t q = c->sa[i] + d;
    return q < c->n ? c->text[q] : -1;
}

/* Narrow [lo, hi) (all sharing d bytes) to the suffixes whose byte d is x. */
static void narrow(const nd_copy_source *c, uint32_t *lo, uint32_t *hi, uint32_t d, int x)
{
    uint32_t a = *lo, b = *hi;
    while (a < b) { /* first with byte >= x */
        uint32_t m = a + (b - a) / 2;
        if (byte_at(c, m, d) < x) a = m + 1;
        else b = m;
    }
    uint32_t first = a;
    b = *hi;
    while (a < b) { /* first with byte > x */
        uint32_t m = a + (b - a) / 2;
        if (byte_at(c, m, d) <= x) a = m + 1;
        else b = m;
    }
    *lo = first;
    *hi = a;
}

/* Some suffix of [lo, hi) can still end at a word end past depth d. */
static int any_reach(const nd_copy_source *c, uint32_t lo, uint32_t hi, uint32_t d)
{
    for (uint32_t i = lo; i < hi; i++)
        if (c->reach[c->sa[i] + d]) return 1;
    return 0;
}

int nd_copy_step(const nd_copy_source *c, uint32_t *a, uint32_t *b, uint32_t cp)
{
    if (cp > 0x10FFFF || cut_out(cp) || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    uint32_t lo, hi, d = *b;
    unpack(c, *a, &lo, &hi);
    char enc[4];
    size_t k = nd_utf8_encode(cp, enc);
    for (size_t j = 0; j < k && lo < hi; j++) narrow(c, &lo, &hi, d + (uint32_t)j, (uint8_t)enc[j]);
    if (lo >= hi || !any_reach(c, lo, hi, d + (uint32_t)k)) return -1;
    *a = pack(c, lo, hi);
    *b = d + (uint32_t)k;
    return 0;
}

int nd_copy_can_end(const nd_copy_source *c, uint32_t a, uint32_t b)
{
    if (b == 0) return 0;
    uint32_t lo, hi;
    unpack(c, a, &lo, &hi);
    for (uint32_t i = lo; i < hi; i++)
        if (c->end_ok[c->sa[i] + b]) return 1;
    return 0;
}

/* Groups of [lo, hi) by the byte at depth d: is there a code point in
 * [rlo, rhi] whose encoding continues here (bits v so far, `remaining`
 * continuation bytes to go) to a state that can still reach a word end? */
static int cont_viable(const nd_copy_source *c, uint32_t lo, uint32_t hi, uint32_t d, uint32_t v, int remaining,
                       uint32_t rlo, uint32_t rhi)
{
    if (remaining == 0) return v >= rlo && v <= rhi && any_reach(c, lo, hi, d);
    for (uint32_t i = lo; i < hi;) {
        int x = byte_at(c, i, d);
        uint32_t glo = i, ghi = hi;
        narrow(c, &glo, &ghi, d, x);
        i = ghi;
        if (x < 0 || (x & 0xC0) != 0x80) continue;
        uint32_t w = (v << 6) | ((uint32_t)x & 0x3F);
        int sh = 6 * (remaining - 1);
        uint32_t wlo = w << sh, whi = wlo | ((1u << sh) - 1);
        if (whi < rlo || wlo > rhi) continue;
        if (cont_viable(c, glo, ghi, d + 1, w, remaining - 1, rlo, rhi)) return 1;
    }
    return 0;
}

int nd_copy_range_viable(const nd_copy_source *c, uint32_t a, uint32_t b, uint32_t rlo, uint32_t rhi)
{
    if (rlo > rhi) return 0;
    uint32_t lo, hi, d = b;
    unpack(c, a, &lo, &hi);
    for (uint32_t i = lo; i < hi;) {
        int x = byte_at(c, i, d);
        uint32_t glo = i, ghi = hi;
        narrow(c, &glo, &ghi, d, x);
        i = ghi;
        if (x <= SEP) continue; /* the end of the text, or a cut-out character */
        if (x < 0x80) {
            if ((uint32_t)x >= rlo && (uint32_t)x <= rhi && any_reach(c, glo, ghi, d + 1)) return 1;
            continue;
        }
        if (x < 0xC2) continue; /* a continuation byte: not at a character start */
        int total = nd_utf8_seq_len((uint8_t)x);
        uint32_t v = (uint32_t)x & (total == 2 ? 0x1F : total == 3 ? 0x0F : 0x07);
        int sh = 6 * (total - 1);
        uint32_t vlo = v << sh, vhi = vlo | ((1u << sh) - 1);
        if (vhi < rlo || vlo > rhi) continue;
        if (cont_viable(c, glo, ghi, d + 1, v, total - 1, rlo, rhi)) return 1;
    }
    return 0;
}
