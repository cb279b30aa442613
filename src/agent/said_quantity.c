/* said_quantity.c - a duration or volume the request says, in the unit the argument takes (said_quantity.h). */
#include "agent/said_quantity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/grounding.h"
#include "agent/repair.h"
#include "agent/said_number.h"


/* A unit: its words, its kind ('t' duration, 'v' volume) and its size in the
 * kind's base unit (minutes, millilitres). */
typedef struct {
    const char *const *words;
    char kind;
    double base;
} unit;

static const char *const HOURS[] = {"hour", "hours", "hr", "hrs", NULL};
static const char *const MINUTES[] = {"minute", "minutes", "min", "mins", NULL};
static const char *const SECONDS[] = {"second", "seconds", "sec", "secs", NULL};
static const char *const LITRES[] = {"litre", "litres", "liter", "liters", "l", NULL};
static const char *const MILLILITRES[] = {"millilitre", "millilitres", "milliliter", "milliliters", "ml", NULL};
static const unit UNITS[] = {{HOURS, 't', 60}, {MINUTES, 't', 1}, {SECONDS, 't', 1.0 / 60},
                             {LITRES, 'v', 1000}, {MILLILITRES, 'v', 1}};
#define N_UNITS (int)(sizeof UNITS / sizeof UNITS[0])

static int unit_of(const char *w)
{
    for (int u = 0; u < N_UNITS; u++)
        for (const char *const *p = UNITS[u].words; *p; p++)
            if (!strcmp(*p, w)) return u;
    return -1;
}

/* A count at token i: digits, number words, "a"/"an"/"one" (1); -1 if none. */
static double count_at(const nd_tokens *t, int i, int *next)
{
    if (i >= t->n) return -1;
    if (!strcmp(t->w[i], "#")) {
        *next = i + 1;
        return t->num[i];
    }
    if (nd_token_is(t, i, "a") || nd_token_is(t, i, "an")) {
        if (nd_token_is(t, i + 1, "hundred")) return nd_number_in_words((char (*)[16])t->w, t->n, i, next);
        *next = i + 1;
        return 1;
    }
    return nd_number_in_words((char (*)[16])t->w, t->n, i, next);
}

/* A quantity starting at token i: its value in the unit's kind base and the kind. */
static int quantity_at(const nd_tokens *t, int i, double *value, char *kind, int *next)
{
    double factor = 1, add = 0;
    int j = i;
    /* "half a(n)", "a quarter of an", "three quarters of an" */
    if (nd_token_is(t, j, "half") && (nd_token_is(t, j + 1, "a") || nd_token_is(t, j + 1, "an"))) {
        factor = 0.5;
        j += 2;
    } else {
        int k = j;
        double q = -1;
        if (nd_token_is(t, j, "quarter")) {
            q = 1;
            k = j + 1;
        } else if (nd_token_is(t, j, "a") && nd_token_is(t, j + 1, "quarter")) {
            q = 1;
            k = j + 2;
        } else if (count_at(t, j, &k) > 0 && (nd_token_is(t, k, "quarters") || nd_token_is(t, k, "quarter"))) {
            q = count_at(t, j, &k);
            k++;
        }
        if (q > 0) { /* "of" and the article are optional: "a quarter litre" */
            if (nd_token_is(t, k, "of")) k++;
            if (nd_token_is(t, k, "a") || nd_token_is(t, k, "an")) k++;
            factor = q / 4;
            j = k;
        }
    }
    double n = 1;
    if (factor == 1) {
        int k;
        n = count_at(t, j, &k);
        if (n < 0) return 0;
        j = k;
        if (nd_token_is(t, j, "and") && nd_token_is(t, j + 1, "a") && nd_token_is(t, j + 2, "half")) { /* "2 and a half hours" */
            add = 0.5;
            j += 3;
        }
    }
    int u = j < t->n ? unit_of(t->w[j]) : -1;
    if (u < 0) return 0;
    j++;
    if (add == 0 && factor == 1 && nd_token_is(t, j, "and") && nd_token_is(t, j + 1, "a") && nd_token_is(t, j + 2, "half")) { /* "an hour and a half" */
        add = 0.5;
        j += 3;
    }
    *value = (n + add) * factor * UNITS[u].base;
    *kind = UNITS[u].kind;
    *next = j;
    return 1;
}

int nd_quantities_said(const char *request, char kind, double *out, int cap)
{
    if (!request) return 0;
    nd_tokens *t = malloc(sizeof *t);
    if (!t) return 0;
    nd_tokenize(request, t);
    int k = 0;
    for (int i = 0; i < t->n && k < cap;) {
        double v;
        char kd;
        int next;
        if (quantity_at(t, i, &v, &kd, &next)) {
            if (!kind || kd == kind) out[k++] = v;
            i = next;
        } else {
            i++;
        }
    }
    free(t);
    return k;
}

/* The unit an argument takes: a unit word among the words of its key, else of its description; -1 if none. */
static int argument_unit(const char *key, const nd_json *schema)
{
    const char *texts[2] = {key, NULL};
    const nd_json *d = schema ? nd_json_get(schema, "description") : NULL;
    if (d && d->type == ND_JSON_STRING) texts[1] = d->str;
    for (int s = 0; s < 2; s++) {
        if (!texts[s]) continue;
        char w[64][16];
        int n = nd_lower_words(texts[s], w, NULL, 64), found = -1;
        for (int i = 0; i < n; i++) {
            int u = unit_of(w[i]);
            if (u >= 0 && found >= 0 && u != found) return -1; /* two units named */
            if (u >= 0) found = u;
        }
        if (found >= 0) return found;
    }
    return -1;
}

int nd_fix_said_quantity(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths,
                         char *outside, size_t outside_size)
{
    if (outside_size) outside[0] = 0;
    nd_one_call c;
    if (!request || !nd_repair_one_call(calls, tools, &c)) return 0;
    nd_json *args = c.args;
    /* the number arguments with a unit, and how many take each kind */
    int units[64], per_kind_t = 0, per_kind_v = 0;
    size_t m = args->count < 64 ? args->count : 64;
    for (size_t k = 0; k < m; k++) {
        const nd_json *schema = nd_json_get(c.props, args->keys[k]);
        units[k] = args->items[k].type == ND_JSON_NUMBER ? argument_unit(args->keys[k], schema) : -1;
        if (units[k] >= 0) *(UNITS[units[k]].kind == 't' ? &per_kind_t : &per_kind_v) += 1;
    }
    int changed = 0;
    for (size_t k = 0; k < m; k++) {
        if (units[k] < 0) continue;
        char kind = UNITS[units[k]].kind;
        if ((kind == 't' ? per_kind_t : per_kind_v) != 1) continue;
        double said[8];
        if (nd_quantities_said(request, kind, said, 8) != 1) continue;
        double v = said[0] / UNITS[units[k]].base; /* in the argument's unit */
        if (fabs(v - round(v)) < 1e-9) v = round(v);
        nd_json *slot = &args->items[k];
        if (slot->num == v) continue;
        int bounds_only;
        if (!nd_schema_takes_number(nd_json_get(c.props, args->keys[k]), v, &bounds_only)) {
            if (bounds_only && outside_size) snprintf(outside, outside_size, "%s.%s", c.tool, args->keys[k]);
            continue; /* (90 seconds in whole minutes, an enum: left alone) */
        }
        if (nd_json_set_number_value(slot, v)) return -1;
        nd_repair_note(paths, n_paths, c.tool, args->keys[k]);
        changed++;
    }
    return paths->oom ? -1 : changed;
}
