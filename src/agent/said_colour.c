/* said_colour.c - a colour the tool's colour choices do not have (said_colour.h). */
#include "agent/said_colour.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/repair.h"
#include "agent/said_number.h"

#define MAX_WORDS 256

static const char *const BASIC[] = {"white", "black", "red", "orange", "yellow", "green", "blue", "purple", "pink",
                                    "brown", "grey", "gray", NULL};
static const char *const SHADES[] = {"gold", "golden", "silver", "turquoise", "maroon", "coral", "violet", "indigo",
                                     "magenta", "crimson", "scarlet", "teal", "lavender", "lilac", "beige", "navy",
                                     "burgundy", "amber", "khaki", "fuchsia", "aqua", "aquamarine", "mauve", "ochre",
                                     "peach", "mint", "lime", "olive", "emerald", "cerulean", "vermilion", "chartreuse",
                                     "periwinkle", "salmon", "ivory", "bronze", "copper", "plum", "cyan", "azure",
                                     "cobalt", "jade", "rose", "ruby", "sapphire", NULL};

static int colour_word(const char *w) { return nd_word_listed(w, BASIC) || nd_word_listed(w, SHADES); }

/* Does some value of the enum hold w as a whole word (case ignored)? */
static int enum_has_word(const nd_json *e, const char *w)
{
    char vw[16][16];
    for (size_t i = 0; i < e->count; i++) {
        if (e->items[i].type != ND_JSON_STRING || memchr(e->items[i].str, 0, e->items[i].len)) continue;
        int n = nd_lower_words(e->items[i].str, vw, NULL, 16);
        for (int k = 0; k < n; k++)
            if (!strcmp(vw[k], w)) return 1;
    }
    return 0;
}

/* Is the property a colour choice: an enum named for a colour, or one with two basic colours? */
static int colour_choice(const char *key, const nd_json *schema)
{
    const nd_json *e = schema ? nd_json_get(schema, "enum") : NULL;
    if (!e || e->type != ND_JSON_ARRAY) return 0;
    if (strstr(key, "color") || strstr(key, "colour") || strstr(key, "Color") || strstr(key, "Colour")) return 1;
    int basic = 0;
    for (const char *const *b = BASIC; *b; b++) basic += enum_has_word(e, *b);
    return basic >= 2;
}

/* Does some string value of the arguments hold w as a whole word? */
static int held_by_a_value(const nd_json *v, const char *w)
{
    if (v->type == ND_JSON_STRING) {
        if (memchr(v->str, 0, v->len)) return 0;
        char vw[32][16];
        int n = nd_lower_words(v->str, vw, NULL, 32);
        for (int k = 0; k < n; k++)
            if (!strcmp(vw[k], w)) return 1;
        return 0;
    }
    if (v->type == ND_JSON_ARRAY || v->type == ND_JSON_OBJECT)
        for (size_t i = 0; i < v->count; i++)
            if (held_by_a_value(&v->items[i], w)) return 1;
    return 0;
}

int nd_colour_outside(nd_json *calls, const nd_json *tools, const char *request, char *outside, size_t outside_size)
{
    nd_one_call c;
    if (outside_size) outside[0] = '\0';
    if (!request || !nd_repair_one_call(calls, tools, &c) || !c.props || c.props->type != ND_JSON_OBJECT) return 0;
    size_t key = c.props->count;
    for (size_t k = 0; k < c.props->count && key == c.props->count; k++)
        if (!memchr(c.props->keys[k], 0, c.props->key_lens[k]) && colour_choice(c.props->keys[k], &c.props->items[k]))
            key = k;
    if (key == c.props->count) return 0;
    const nd_json *e = nd_json_get(&c.props->items[key], "enum");
    char (*w)[16] = malloc(sizeof(char[16]) * MAX_WORDS);
    if (!w) return -1;
    int n = nd_lower_words(request, w, NULL, MAX_WORDS), found = 0;
    for (int i = 0; i < n && !found; i++) {
        if (!colour_word(w[i]) || enum_has_word(e, w[i])) continue;
        if (i + 1 < n && colour_word(w[i + 1]) && enum_has_word(e, w[i + 1])) continue; /* "lime green" */
        found = !held_by_a_value(c.args, w[i]);
    }
    free(w);
    if (found) snprintf(outside, outside_size, "%s.%s", c.tool, c.props->keys[key]);
    return found;
}
