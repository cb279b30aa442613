/* said_choice.c - an optional choice the request names, added to the call (said_choice.h). */
#include "agent/said_choice.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>

#include "agent/grounding.h"
#include "agent/repair.h"
#include "agent/said_number.h"

/* Words as compared here: runs of ASCII letters and digits and of non-ASCII
 * bytes, ASCII letters lowered ("Fan on HIGH," -> fan on high). */
typedef struct {
    char *low; /* the text lowered, word breaks as written */
    size_t len;
} words;

static int word_byte(unsigned char c) { return c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'); }

static int words_of(words *w, const char *s, size_t n)
{
    w->low = malloc(n + 1);
    if (!w->low) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        w->low[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    w->low[n] = 0;
    w->len = n;
    return 0;
}

/* Does phrase (lowered, words separated by any non-word bytes) occur in text
 * as whole words, each pair of its words separated in the text by non-word
 * bytes only? */
static int says(const words *text, const words *phrase)
{
    /* the phrase's words, in order */
    const char *p = phrase->low, *end = phrase->low + phrase->len;
    while (p < end && !word_byte((unsigned char)*p)) p++;
    if (p >= end) return 0;
    for (size_t at = 0; at < text->len; at++) {
        if (at > 0 && word_byte((unsigned char)text->low[at - 1])) continue; /* not a word start */
        size_t t = at;
        const char *q = p;
        int ok = 1;
        while (ok && q < end) {
            while (q < end && word_byte((unsigned char)*q)) {
                if (t >= text->len || text->low[t] != *q) { ok = 0; break; }
                t++, q++;
            }
            if (!ok) break;
            if (t < text->len && word_byte((unsigned char)text->low[t])) { ok = 0; break; } /* word goes on */
            while (q < end && !word_byte((unsigned char)*q)) q++;
            if (q < end) { /* the next word: skip the text's separators */
                if (t >= text->len || word_byte((unsigned char)text->low[t])) { ok = 0; break; }
                while (t < text->len && !word_byte((unsigned char)text->low[t])) t++;
            }
        }
        if (ok) return 1;
    }
    return 0;
}

static int says_value(const words *text, const char *value, size_t n)
{
    words v;
    if (words_of(&v, value, n)) return -1;
    int r = says(text, &v);
    free(v.low);
    return r;
}

/* Is a one-word value said in its "-ing" form: "heating" for heat,
 * "cooling" for cool, "charging" for charge? */
static int says_ing_form(const words *text, const char *value, size_t n)
{
    char form[40];
    if (n < 3 || n + 3 >= sizeof form) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((value[i] | 32) >= 'a' && (value[i] | 32) <= 'z')) return 0;
    size_t stem = (value[n - 1] | 32) == 'e' ? n - 1 : n;
    memcpy(form, value, stem);
    memcpy(form + stem, "ing", 4);
    return says_value(text, form, stem + 3);
}

/* Is `value` said inside one of the call's string values (top level or array items)? */
static int inside_call_values(const nd_json *args, const char *value, size_t n)
{
    for (size_t k = 0; k < args->count; k++) {
        const nd_json *v = &args->items[k];
        size_t m = v->type == ND_JSON_ARRAY ? v->count : 1;
        for (size_t i = 0; i < m; i++) {
            const nd_json *s = v->type == ND_JSON_ARRAY ? &v->items[i] : v;
            if (s->type != ND_JSON_STRING) continue;
            words w;
            if (words_of(&w, s->str, s->len)) return -1;
            int r = says_value(&w, value, n);
            free(w.low);
            if (r) return r;
        }
    }
    return 0;
}

static int says_currency(const words *text, const char *code, size_t n);

/* The one value of a string enum the request says, or NULL (none, several,
 * or not a plain string enum).  A currency code is also said by its symbol or
 * name ("$42.99" says USD).  *err on out of memory. */
static const nd_json *said_value(const nd_json *schema, const words *request, int *err)
{
    const nd_json *t = nd_json_get(schema, "type"), *e = nd_json_get(schema, "enum");
    if (!t || t->type != ND_JSON_STRING || strcmp(t->str, "string") || !e || e->type != ND_JSON_ARRAY ||
        nd_json_get(schema, "pattern") || nd_json_get(schema, "format"))
        return NULL;
    const nd_json *found = NULL;
    for (size_t i = 0; i < e->count; i++) {
        const nd_json *v = &e->items[i];
        if (v->type != ND_JSON_STRING || memchr(v->str, 0, v->len)) continue;
        int r = says_value(request, v->str, v->len);
        if (r == 0) r = says_ing_form(request, v->str, v->len);
        if (r == 0) r = says_currency(request, v->str, v->len);
        if (r < 0) { *err = 1; return NULL; }
        if (r && found) return NULL; /* two values said: no choice */
        if (r) found = v;
    }
    return found;
}

int nd_add_said_choices(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    nd_one_call c;
    if (!request || !nd_repair_one_call(calls, tools, &c)) return 0;
    nd_json *args = c.args;
    const nd_json *params = c.params, *props = c.props;
    words req;
    if (words_of(&req, request, strlen(request))) return -1;
    int added = 0, err = 0;
    for (size_t k = 0; k < props->count && !err; k++) {
        const char *key = props->keys[k];
        if (memchr(key, 0, props->key_lens[k]) || nd_json_get(args, key) || nd_schema_required(params, key)) continue;
        const nd_json *v = said_value(&props->items[k], &req, &err);
        if (!v) continue;
        int inside = inside_call_values(args, v->str, v->len);
        if (inside < 0) err = 1;
        if (inside) continue;
        if (nd_json_object_add_string(args, key, v->str)) {
            err = 1;
            break;
        }
        nd_repair_note(paths, n_paths, c.tool, key);
        added++;
    }
    free(req.low);
    return err || paths->oom ? -1 : added;
}

/* ------------------------------------------------------------------ choices nobody asked for */

/* Does the lowered request hold needle as a word: no letter right before it
 * (unless it starts with a symbol) and none right after it but a plural "s"? */
static int has_at_word(const words *text, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= text->len; i++) {
        if (memcmp(text->low + i, needle, n) != 0) continue;
        size_t end = i + n;
        if (end < text->len && text->low[end] == 's') end++; /* a plural: "dollars" */
        int letter_after = end < text->len && text->low[end] >= 'a' && text->low[end] <= 'z';
        int symbol_first = !((needle[0] >= 'a' && needle[0] <= 'z'));
        int letter_before = i > 0 && text->low[i - 1] >= 'a' && text->low[i - 1] <= 'z';
        if (!letter_after && (symbol_first || !letter_before)) return 1;
    }
    return 0;
}

/* F or C as a temperature unit: after a digit (spaces allowed), after ° or º, or after "degree(s) ". */
static int says_temperature_unit(const words *text, char unit)
{
    for (size_t i = 0; i < text->len; i++) {
        if (text->low[i] != unit || (i + 1 < text->len && word_byte((unsigned char)text->low[i + 1]))) continue;
        size_t j = i;
        while (j > 0 && text->low[j - 1] == ' ') j--;
        if (j > 0 && text->low[j - 1] >= '0' && text->low[j - 1] <= '9') return 1;
        if (j >= 2 && (unsigned char)text->low[j - 2] == 0xC2 &&
            ((unsigned char)text->low[j - 1] == 0xB0 || (unsigned char)text->low[j - 1] == 0xBA))
            return 1;
        if ((j >= 6 && !memcmp(text->low + j - 6, "degree", 6)) || (j >= 7 && !memcmp(text->low + j - 7, "degrees", 7)))
            return 1;
    }
    return 0;
}

/* Is a currency code said by its symbol or name? */
static int says_currency(const words *text, const char *code, size_t n)
{
    static const char *const NAMES[][5] = {
        {"usd", "$", "dollar", "buck", NULL},      {"eur", "\xE2\x82\xAC", "euro", NULL, NULL},
        {"gbp", "\xC2\xA3", "pound", "quid", NULL}, {"jpy", "\xC2\xA5", "yen", NULL, NULL},
        {"cad", "ca$", "c$", "canadian dollar", NULL}};
    if (n != 3) return 0;
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        if (strncasecmp(code, NAMES[i][0], 3) != 0) continue;
        for (int k = 1; k < 5 && NAMES[i][k]; k++)
            if (has_at_word(text, NAMES[i][k])) return 1;
    }
    return 0;
}

/* Is the value said, generously (said_choice.h)?  -1 out of memory. */
static int says_generously(const words *text, const char *value, size_t n)
{
    int r = says_value(text, value, n);
    if (r) return r;
    r = says_ing_form(text, value, n);
    if (r) return r;
    char form[40];
    int plain = n >= 3 && n + 3 < sizeof form;
    for (size_t i = 0; plain && i < n; i++) plain = (value[i] | 32) >= 'a' && (value[i] | 32) <= 'z';
    if (plain) {
        static const char *const ENDINGS[] = {"s", "ed", "d", NULL};
        for (const char *const *e = ENDINGS; *e; e++) {
            memcpy(form, value, n);
            memcpy(form + n, *e, strlen(*e) + 1);
            if ((r = says_value(text, form, n + strlen(*e))) != 0) return r;
        }
    }
    if (n == 10 && !strncasecmp(value, "fahrenheit", n)) return says_temperature_unit(text, 'f');
    if (n == 7 && !strncasecmp(value, "celsius", n)) return says_temperature_unit(text, 'c');
    return says_currency(text, value, n);
}

/* Drop the unsaid optional choices of one call (nd_drop_unsaid_choices). */
static int drop_unsaid_in(nd_one_call c, const words *req)
{
    int dropped = 0;
    for (size_t k = 0; k < c.args->count;) {
        const nd_json *v = &c.args->items[k], *schema = nd_json_get(c.props, c.args->keys[k]);
        const nd_json *t = schema ? nd_json_get(schema, "type") : NULL, *e = schema ? nd_json_get(schema, "enum") : NULL;
        int choice = v->type == ND_JSON_STRING && !memchr(v->str, 0, v->len) && t && t->type == ND_JSON_STRING &&
                     !strcmp(t->str, "string") && e && !nd_schema_required(c.params, c.args->keys[k]);
        int said = choice ? says_generously(req, v->str, v->len) : 1;
        if (said < 0) return -1;
        if (!said) {
            nd_json_object_remove(c.args, k);
            dropped++;
        } else {
            k++;
        }
    }
    return dropped;
}

int nd_drop_unsaid_choices(nd_json *calls, const nd_json *tools, const char *request)
{
    if (!request || !calls || calls->type != ND_JSON_ARRAY) return 0;
    words req;
    if (words_of(&req, request, strlen(request))) return -1;
    int dropped = 0;
    for (size_t i = 0; i < calls->count && dropped >= 0; i++) {
        nd_one_call c;
        if (!nd_repair_call_at(calls, i, tools, &c)) continue;
        int d = drop_unsaid_in(c, &req);
        dropped = d < 0 ? -1 : dropped + d;
    }
    free(req.low);
    return dropped;
}

int nd_choice_said(const char *request, const char *value, size_t n)
{
    words req;
    if (!request || words_of(&req, request, strlen(request))) return -1;
    int r = says_generously(&req, value, n);
    free(req.low);
    return r;
}

/* ------------------------------------------------------------------ a choice outside the enum */

/* Words next to a choice's name that name no choice: function words, and the
 * verbs and adjectives people put before "mode" ("the same mode", "change
 * mode", "normal mode").  Its own list: the grounding checks' function words
 * answer another question (does a value carry anything?). */
static const char *const NOT_A_CHOICE[] = {
    "the", "a", "an", "my", "our", "your", "his", "her", "their", "its", "this", "that", "these", "those", "to",
    "of", "for", "and", "or", "in", "on", "at", "by", "with", "from", "into", "is", "are", "be", "it", "me", "i",
    "you", "we", "please", "pls", "same", "current", "normal", "default", "usual", "previous", "other", "new",
    "which", "what", "any", "some", "every", "each", "right", "correct", "then", "so", "off", "up", "down",
    "set", "change", "switch", "put", "turn", "use", "make", "get", "start", "choose", "pick", "select", NULL};

/* Is w (lowered) a value of the enum, a word of one, or a stem of one ("heating" for "heat")? */
static int near_enum_value(const nd_json *e, const char *w)
{
    char vw[16][16];
    size_t wl = strlen(w);
    for (size_t i = 0; i < e->count; i++) {
        if (e->items[i].type != ND_JSON_STRING || memchr(e->items[i].str, 0, e->items[i].len)) continue;
        int n = nd_lower_words(e->items[i].str, vw, NULL, 16);
        for (int k = 0; k < n; k++) {
            size_t vl = strlen(vw[k]), m = vl < wl ? vl : wl;
            if (!strcmp(vw[k], w) || (m >= 3 && !strncmp(vw[k], w, m))) return 1;
        }
    }
    return 0;
}

int nd_choice_outside(nd_json *calls, const nd_json *tools, const char *request, char *outside, size_t outside_size)
{
    nd_one_call c;
    if (outside_size) outside[0] = '\0';
    if (!request || !nd_repair_one_call(calls, tools, &c) || !c.props || c.props->type != ND_JSON_OBJECT) return 0;
    char (*w)[16] = malloc(sizeof(char[16]) * 256);
    if (!w) return -1;
    int n = nd_lower_words(request, w, NULL, 256), found = 0;
    for (size_t k = 0; k < c.props->count && !found; k++) {
        const nd_json *schema = &c.props->items[k], *e = nd_json_get(schema, "enum");
        const char *key = c.props->keys[k];
        if (!e || e->type != ND_JSON_ARRAY || memchr(key, 0, c.props->key_lens[k])) continue;
        const nd_json *have = nd_json_get(c.args, key);
        if (have && have->type == ND_JSON_STRING && nd_choice_said(request, have->str, have->len) > 0) continue;
        char kw[16][16];
        int nk = nd_lower_words(key, kw, NULL, 16);
        for (int j = 0; j < nk && !found; j++) {
            if (strlen(kw[j]) < 4) continue;
            for (int i = 0; i < n && !found; i++) {
                if (strcmp(w[i], kw[j])) continue;
                int cand = i > 0 && !nd_word_listed(w[i - 1], NOT_A_CHOICE) ? i - 1 : -1;
                if (cand < 0 && i + 1 < n && !nd_word_listed(w[i + 1], NOT_A_CHOICE)) cand = i + 1;
                if (cand < 0) continue;
                const char *x = w[cand];
                if (strlen(x) < 3 || near_enum_value(e, x)) continue;
                int of_key = 0;
                for (int o = 0; o < nk; o++) of_key |= !strcmp(kw[o], x);
                if (of_key || strstr(c.tool, x)) continue;
                found = 1;
                snprintf(outside, outside_size, "%s.%s", c.tool, key);
            }
        }
    }
    free(w);
    return found;
}

/* ------------------------------------------------------------------ a currency the enum lacks */

/* ISO 4217 codes people write (enough to tell a code from any other
 * three-capital word, and to recognise an enum of codes). */
static const char *const CURRENCY_CODES[] = {
    "USD", "EUR", "GBP", "JPY", "CAD", "AUD", "NZD", "CHF", "CNY", "RMB", "HKD", "SGD", "INR", "KRW", "SEK",
    "NOK", "DKK", "PLN", "CZK", "HUF", "RON", "BGN", "TRY", "RUB", "UAH", "ILS", "AED", "SAR", "QAR", "EGP",
    "ZAR", "NGN", "KES", "GHS", "MAD", "BRL", "MXN", "ARS", "CLP", "COP", "PEN", "THB", "VND", "IDR", "MYR",
    "PHP", "PKR", "BDT", "TWD", "ISK", NULL};

/* Currencies named by a symbol or a word, and their codes. */
static const char *const CURRENCY_NAMES[][2] = {
    {"\xE2\x82\xB9", "INR"}, {"rupee", "INR"},  {"\xE2\x82\xA9", "KRW"}, {"\xE2\x82\xBD", "RUB"}, {"ruble", "RUB"},
    {"rouble", "RUB"},       {"\xE2\x82\xBA", "TRY"}, {"lira", "TRY"}, {"\xE2\x82\xAA", "ILS"}, {"shekel", "ILS"},
    {"\xE2\x82\xB1", "PHP"}, {"\xE2\x82\xAB", "VND"}, {"\xE2\x82\xB4", "UAH"}, {"\xE2\x82\xA6", "NGN"},
    {"\xE0\xB8\xBF", "THB"}, {"baht", "THB"}, {"franc", "CHF"}, {"yuan", "CNY"}, {"renminbi", "CNY"},
    {"zloty", "PLN"},        {"forint", "HUF"}, {"dirham", "AED"}, {"riyal", "SAR"}, {"ringgit", "MYR"},
    {"rupiah", "IDR"},       {"r$", "BRL"}, {"reais", "BRL"}, {"krona", "SEK"}, {"kronor", "SEK"},
    {"krone", "NOK"},        {"peso", "MXN"}, {NULL, NULL}};

/* The listed code s[0, n) is, or NULL. */
static const char *currency_code(const char *s, size_t n)
{
    if (n != 3) return NULL;
    for (const char *const *c = CURRENCY_CODES; *c; c++)
        if (!memcmp(*c, s, 3)) return *c;
    return NULL;
}

/* Does the enum hold code[0..3)? */
static int enum_has(const nd_json *e, const char *code)
{
    for (size_t i = 0; i < e->count; i++)
        if (e->items[i].type == ND_JSON_STRING && e->items[i].len == 3 && !memcmp(e->items[i].str, code, 3)) return 1;
    return 0;
}

/* Is the enum one of currency codes: every value three capitals, at least two of them known codes? */
static int currency_enum(const nd_json *e)
{
    int known = 0;
    for (size_t i = 0; i < e->count; i++) {
        const nd_json *v = &e->items[i];
        if (v->type != ND_JSON_STRING || v->len != 3) return 0;
        for (int k = 0; k < 3; k++)
            if (v->str[k] < 'A' || v->str[k] > 'Z') return 0;
        known += currency_code(v->str, 3) != NULL;
    }
    return known >= 2;
}

/* The code of a currency the request names that the enum lacks, or NULL:
 * a known code written in capitals as a word of its own ("45 CHF"), or a
 * symbol or name ("₹500", "200 rupees"; no names that are also common words,
 * such as "real" or "rand"). */
static const char *unlisted_currency(const char *request, const nd_json *e)
{
    size_t len = strlen(request);
    for (size_t i = 0; i + 3 <= len; i++) {
        int before = i > 0 && ((request[i - 1] >= 'A' && request[i - 1] <= 'Z') || (request[i - 1] >= 'a' && request[i - 1] <= 'z'));
        int after = i + 3 < len && ((request[i + 3] >= 'A' && request[i + 3] <= 'Z') || (request[i + 3] >= 'a' && request[i + 3] <= 'z'));
        const char *code = before || after ? NULL : currency_code(request + i, 3);
        if (code && !enum_has(e, code)) return code;
    }
    words req;
    if (words_of(&req, request, len)) return NULL;
    const char *found = NULL;
    for (int k = 0; CURRENCY_NAMES[k][0] && !found; k++)
        if (!enum_has(e, CURRENCY_NAMES[k][1]) && has_at_word(&req, CURRENCY_NAMES[k][0])) found = CURRENCY_NAMES[k][1];
    free(req.low);
    return found;
}

int nd_currency_outside(nd_json *calls, const nd_json *tools, const char *request, char *outside, size_t outside_size)
{
    nd_one_call c;
    if (outside_size) outside[0] = '\0';
    if (!request || !nd_repair_one_call(calls, tools, &c) || !c.props || c.props->type != ND_JSON_OBJECT) return 0;
    for (size_t k = 0; k < c.props->count; k++) {
        const nd_json *e = nd_json_get(&c.props->items[k], "enum");
        if (!e || e->type != ND_JSON_ARRAY || !currency_enum(e) || memchr(c.props->keys[k], 0, c.props->key_lens[k]))
            continue;
        if (unlisted_currency(request, e)) {
            snprintf(outside, outside_size, "%s.%s", c.tool, c.props->keys[k]);
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ a bent value that ends as said */

/* Is v one of the n numbers? */
static int among(double v, const double *x, int n)
{
    for (int i = 0; i < n; i++)
        if (x[i] == v) return 1;
    return 0;
}

/* How many top-level argument values of the turn's calls equal v (numbers
 * by value, strings by bytes)? */
static int uses_of(const nd_json *calls, const nd_json *v)
{
    int n = 0;
    for (size_t c = 0; c < calls->count; c++) {
        const nd_json *args = nd_json_get(&calls->items[c], "arguments");
        for (size_t k = 0; args && args->type == ND_JSON_OBJECT && k < args->count; k++) {
            const nd_json *a = &args->items[k];
            if (a->type != v->type) continue;
            if (a->type == ND_JSON_NUMBER && a->num == v->num) n++;
            if (a->type == ND_JSON_STRING && a->len == v->len && !memcmp(a->str, v->str, v->len)) n++;
        }
    }
    return n;
}

int nd_bent_value_said(const nd_json *calls, const nd_json *tools, const char *request, const char *path)
{
    const char *dot = path ? strchr(path, '.') : NULL;
    if (!request || !dot || !calls || calls->type != ND_JSON_ARRAY) return 0;
    size_t tool_len = (size_t)(dot - path);
    const char *key = dot + 1, *tool = NULL;
    const nd_json *value = NULL;
    for (size_t c = 0; c < calls->count; c++) {
        const nd_json *name = nd_json_get(&calls->items[c], "name");
        const nd_json *args = nd_json_get(&calls->items[c], "arguments");
        if (!name || name->type != ND_JSON_STRING || name->len != tool_len || memcmp(name->str, path, tool_len)) continue;
        const nd_json *v = args && args->type == ND_JSON_OBJECT ? nd_json_get(args, key) : NULL;
        if (!v) continue;
        if (value) return 0; /* two calls bear it: which one was bent is not known */
        value = v;
        tool = name->str;
    }
    if (!value || uses_of(calls, value) != 1) return 0;
    if (value->type == ND_JSON_NUMBER) {
        /* "minus 20": the model reached for the sign, and the 20 said is not the value asked for */
        words req;
        if (words_of(&req, request, strlen(request))) return 0;
        int sign = has_at_word(&req, "minus") || has_at_word(&req, "negative");
        free(req.low);
        if (sign) return 0;
        double said[64];
        int n = nd_numbers_said(request, said, 64);
        return among(value->num, said, n);
    }
    if (value->type != ND_JSON_STRING || memchr(value->str, 0, value->len)) return 0;
    const nd_json *params = nd_tool_parameters(tools, tool);
    const nd_json *props = params ? nd_json_get(params, "properties") : NULL;
    const nd_json *schema = props ? nd_json_get(props, key) : NULL;
    if (!schema || !nd_json_get(schema, "enum")) return 0; /* only a choice is said as itself */
    return nd_choice_said(request, value->str, value->len) > 0;
}

/* ------------------------------------------------------------------ a choice in the wrong argument */

/* The value of the enum e (or of e's array items) equal to s[0, n) with ASCII case ignored, or NULL. */
static const nd_json *enum_value_like(const nd_json *schema, const char *s, size_t n, int *array)
{
    const nd_json *t = nd_json_get(schema, "type");
    *array = t && t->type == ND_JSON_STRING && !strcmp(t->str, "array");
    const nd_json *e = nd_json_get(*array ? nd_json_get(schema, "items") : schema, "enum");
    for (size_t i = 0; e && e->type == ND_JSON_ARRAY && i < e->count; i++) {
        const nd_json *v = &e->items[i];
        if (v->type == ND_JSON_STRING && v->len == n && !memchr(v->str, 0, n) && !strncasecmp(v->str, s, n)) return v;
    }
    return NULL;
}

int nd_move_misplaced_choices(nd_json *calls, const nd_json *tools, nd_buf *paths, int *n_paths)
{
    int moved = 0;
    for (size_t c = 0; calls && calls->type == ND_JSON_ARRAY && c < calls->count; c++) {
        nd_one_call one;
        if (!nd_repair_call_at(calls, c, tools, &one)) continue;
        for (size_t k = 0; k < one.args->count;) {
            const char *key = one.args->keys[k];
            const nd_json *v = &one.args->items[k];
            int moved_here = 0;
            if (v->type != ND_JSON_STRING || memchr(key, 0, one.args->key_lens[k]) || nd_schema_required(one.params, key) ||
                !nd_free_string_schema(nd_json_get(one.props, key))) {
                k++;
                continue;
            }
            for (size_t p = 0; p < one.props->count && !moved_here; p++) {
                const char *other = one.props->keys[p];
                int array = 0;
                const nd_json *choice = enum_value_like(&one.props->items[p], v->str, v->len, &array);
                if (!choice || !strcmp(other, key) || memchr(other, 0, one.props->key_lens[p]) || nd_json_get(one.args, other))
                    continue;
                nd_buf text;
                nd_buf_init(&text);
                if (array) nd_buf_putc(&text, '[');
                nd_json_write(&text, choice, 0);
                if (array) nd_buf_putc(&text, ']');
                /* (other is a key of the tool's schema: changing the call's arguments leaves it be) */
                int rc = text.oom ? -1 : nd_object_put_json(one.args, other, text.data, text.len);
                nd_buf_free(&text);
                if (rc) return -1;
                nd_json_object_remove(one.args, k); /* the other member was appended after it */
                nd_repair_note(paths, n_paths, one.tool, other);
                moved++;
                moved_here = 1; /* member k is the next one now */
            }
            if (!moved_here) k++;
        }
    }
    return paths->oom ? -1 : moved;
}
