/* said_unit.c - the temperature unit a number's symbol names (said_unit.h). */
#include "agent/said_unit.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/grounding.h"
#include "agent/repair.h"
#include "agent/said_number.h"

#define MAX_SAID 32

enum { UNIT_F = 1, UNIT_C = 2 };

typedef struct {
    double value;
    int unit;
} number_unit;

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word_byte(unsigned char c) { return c >= 0x80 || is_digit((char)c) || ((c | 32) >= 'a' && (c | 32) <= 'z'); }

/* Does the word w (ASCII case ignored) stand whole at s? */
static int word_here(const char *s, const char *w)
{
    size_t n = strlen(w);
    return !strncasecmp(s, w, n) && !is_word_byte((unsigned char)s[n]);
}

static const char *skip_spaces(const char *s)
{
    while (*s == ' ') s++;
    return s;
}

/* The unit named right after a number that ends at s: 0 when none. */
static int unit_after(const char *s)
{
    s = skip_spaces(s);
    if ((unsigned char)s[0] == 0xC2 && ((unsigned char)s[1] == 0xB0 || (unsigned char)s[1] == 0xBA)) /* ° º */
        s = skip_spaces(s + 2);
    else {
        static const char *const DEGREES[] = {"degrees", "degree", "deg", NULL};
        for (const char *const *d = DEGREES; *d; d++)
            if (word_here(s, *d)) {
                s = skip_spaces(s + strlen(*d));
                break;
            }
    }
    if (word_here(s, "f") || word_here(s, "fahrenheit")) return UNIT_F;
    if (word_here(s, "c") || word_here(s, "celsius") || word_here(s, "centigrade")) return UNIT_C;
    return 0;
}

/* The numbers said with a unit right after them; how many. */
static int numbers_with_units(const char *request, number_unit *out, int cap)
{
    int n = 0;
    for (size_t i = 0; request[i] && n < cap; i++) {
        if (!is_digit(request[i]) || (i > 0 && (is_word_byte((unsigned char)request[i - 1]) || request[i - 1] == '.')))
            continue;
        /* digits [. digits], read as strtod reads the call's number */
        size_t k = i;
        while (is_digit(request[k])) k++;
        if (request[k] == '.' && is_digit(request[k + 1]))
            for (k++; is_digit(request[k]);) k++;
        char digits[40];
        if (k - i >= sizeof digits) {
            i = k - 1;
            continue;
        }
        memcpy(digits, request + i, k - i);
        digits[k - i] = 0;
        double v = strtod(digits, NULL);
        int unit = unit_after(request + k);
        if (unit) {
            out[n].value = v;
            out[n].unit = unit;
            n++;
        }
        i = k - 1;
    }
    /* and in words: "sixty-eight point five degrees F" */
    nd_word_number words[16];
    int nw = nd_word_numbers(request, words, 16);
    for (int w = 0; w < nw && n < cap; w++) {
        int unit = unit_after(request + words[w].end);
        if (unit && !words[w].after_minus) {
            out[n].value = words[w].value;
            out[n].unit = unit;
            n++;
        }
    }
    return n;
}

/* The units the call's top-level number arguments are said with (bits). */
static int call_units(const nd_json *args, const number_unit *said, int n_said)
{
    int units = 0;
    for (size_t k = 0; k < args->count; k++) {
        const nd_json *v = &args->items[k];
        if (v->type != ND_JSON_NUMBER) continue;
        for (int s = 0; s < n_said; s++)
            if (said[s].value == v->num) units |= said[s].unit;
    }
    return units;
}

/* The schema's enum value spelling unit (ASCII case ignored), or NULL. */
static const nd_json *unit_value(const nd_json *schema, int unit)
{
    const nd_json *t = nd_json_get(schema, "type"), *e = nd_json_get(schema, "enum");
    if (!t || t->type != ND_JSON_STRING || strcmp(t->str, "string") || !e || e->type != ND_JSON_ARRAY) return NULL;
    const char *name = unit == UNIT_F ? "fahrenheit" : "celsius";
    for (size_t i = 0; i < e->count; i++)
        if (e->items[i].type == ND_JSON_STRING && e->items[i].len == strlen(name) && !strncasecmp(e->items[i].str, name, strlen(name)))
            return &e->items[i];
    return NULL;
}

static int set_string(nd_json *args, const char *key, const nd_json *value)
{
    nd_buf text;
    nd_buf_init(&text);
    nd_json_write_string(&text, value->str, value->len, 0);
    int rc = text.oom ? -1 : nd_object_put_json(args, key, text.data, text.len);
    nd_buf_free(&text);
    return rc;
}

int nd_fix_said_units(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    if (!request || !tools || !calls || calls->type != ND_JSON_ARRAY) return 0;
    number_unit said[MAX_SAID];
    int n_said = numbers_with_units(request, said, MAX_SAID);
    if (n_said == 0) return 0;
    int changed = 0;
    for (size_t c = 0; c < calls->count; c++) {
        const nd_json *name = nd_json_get(&calls->items[c], "name");
        nd_json *args = (nd_json *)nd_json_get(&calls->items[c], "arguments");
        if (!name || name->type != ND_JSON_STRING || !args || args->type != ND_JSON_OBJECT) continue;
        const nd_json *params = nd_tool_parameters(tools, name->str);
        const nd_json *props = params ? nd_json_get(params, "properties") : NULL;
        int unit = call_units(args, said, n_said);
        if (!props || props->type != ND_JSON_OBJECT || (unit != UNIT_F && unit != UNIT_C)) continue;
        for (size_t k = 0; k < props->count; k++) {
            const char *key = props->keys[k];
            const nd_json *value = unit_value(&props->items[k], unit), *have = nd_json_get(args, key);
            if (!value || memchr(key, 0, props->key_lens[k]) || (have && nd_json_equal(have, value))) continue;
            if (set_string(args, key, value)) return -1;
            nd_repair_note(paths, n_paths, name->str, key);
            changed++;
        }
    }
    return paths->oom ? -1 : changed;
}
