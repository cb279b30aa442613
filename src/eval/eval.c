/* eval.c - score a model on a JSONL test set (see eval.h). */
#include "eval/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grammar/grammar.h"
#include "core/error.h"
#include "core/file.h"

/* ---- scoring ---------------------------------------------------------------- */

static const nd_json *call_name(const nd_json *call)
{
    const nd_json *n = call && call->type == ND_JSON_OBJECT ? nd_json_get(call, "name") : NULL;
    return n && n->type == ND_JSON_STRING ? n : NULL;
}

static const nd_json *call_args(const nd_json *call)
{
    const nd_json *a = call && call->type == ND_JSON_OBJECT ? nd_json_get(call, "arguments") : NULL;
    return a && a->type == ND_JSON_OBJECT ? a : NULL;
}

static int same_string(const nd_json *a, const nd_json *b)
{
    return a && b && a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

/* Greedy multiset matching: every gold item takes the first unused pred item
 * it equals.  With equality an equivalence relation, greedy finds the maximum
 * matching, so the count is order-independent. */
static size_t match_calls(const nd_json *pred, const nd_json *gold, int names_only, unsigned char *used)
{
    size_t hits = 0;
    memset(used, 0, pred->count);
    for (size_t g = 0; g < gold->count; g++)
        for (size_t p = 0; p < pred->count; p++) {
            if (used[p] || !same_string(call_name(&pred->items[p]), call_name(&gold->items[g]))) continue;
            if (!names_only) {
                const nd_json *pa = call_args(&pred->items[p]), *ga = call_args(&gold->items[g]);
                if (!pa || !ga || !nd_json_equal(pa, ga)) continue;
            }
            used[p] = 1;
            hits++;
            break;
        }
    return hits;
}

static size_t count_triples(const nd_json *calls)
{
    size_t n = 0;
    for (size_t i = 0; i < calls->count; i++) {
        const nd_json *a = call_args(&calls->items[i]);
        n += a ? a->count : 0;
    }
    return n;
}

/* Matched (name, key, value) triples between pred and gold (multisets). */
static size_t match_triples(const nd_json *pred, const nd_json *gold)
{
    size_t np = count_triples(pred), hits = 0;
    unsigned char *used = calloc(np ? np : 1, 1);
    if (!used) return 0;
    for (size_t g = 0; g < gold->count; g++) {
        const nd_json *ga = call_args(&gold->items[g]), *gn = call_name(&gold->items[g]);
        for (size_t gk = 0; ga && gk < ga->count; gk++) {
            size_t slot = 0;
            int found = 0;
            for (size_t p = 0; p < pred->count && !found; p++) {
                const nd_json *pa = call_args(&pred->items[p]);
                int same_tool = same_string(call_name(&pred->items[p]), gn);
                for (size_t pk = 0; pa && pk < pa->count; pk++, slot++) {
                    if (found || used[slot] || !same_tool) continue;
                    if (pa->key_lens[pk] != ga->key_lens[gk] || memcmp(pa->keys[pk], ga->keys[gk], pa->key_lens[pk]))
                        continue;
                    if (!nd_json_equal(&pa->items[pk], &ga->items[gk])) continue;
                    used[slot] = 1;
                    found = 1;
                }
            }
            hits += (size_t)found;
        }
    }
    free(used);
    return hits;
}

/* The calls written compactly must be a complete sentence of the tools' grammar. */
static int schema_valid(const nd_json *pred, const nd_json *tools)
{
    nd_grammar *g = NULL;
    needle_error e;
    if (!tools || nd_grammar_compile(tools, &g, &e)) return 0;
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, pred, 1);
    int ok = 0;
    nd_grammar_state *st = malloc(sizeof *st);
    if (st && !b.oom) {
        nd_grammar_start(g, st);
        ok = nd_grammar_advance(g, st, b.data, b.len) == 0 && nd_grammar_complete(g, st);
    }
    free(st);
    nd_buf_free(&b);
    nd_grammar_free(g);
    return ok;
}

int nd_eval_score(const nd_json *pred, const nd_json *gold, const nd_json *tools, int success, nd_eval_result *r)
{
    static const nd_json empty = {.type = ND_JSON_ARRAY};
    if (!pred || pred->type != ND_JSON_ARRAY) {
        pred = &empty;
        success = 0;
    }
    r->rows++;
    int offtopic = gold->count == 0;
    if (offtopic) {
        r->off_topic++;
        if (pred->count == 0 && success) r->refusal_ok++;
    } else {
        r->on_topic++;
        if (pred->count == 0) r->false_refusals++;
    }
    unsigned char *used = malloc(pred->count ? pred->count : 1);
    int names = 0, exact = 0;
    if (used && pred->count == gold->count) {
        names = match_calls(pred, gold, 1, used) == gold->count;
        exact = names && match_calls(pred, gold, 0, used) == gold->count;
    }
    free(used);
    if (!success) names = exact = 0;
    r->name_ok += names;
    r->exact_ok += exact;
    r->arg_pred += (long)count_triples(pred);
    r->arg_gold += (long)count_triples(gold);
    r->arg_tp += (long)match_triples(pred, gold);
    r->schema_valid += success && schema_valid(pred, tools);
    return exact;
}

/* ---- one row through the session API ------------------------------------------ */

/* A field that is JSON, or a string holding JSON (as published datasets store it). */
static int json_field(const nd_json *row, const char *key, const char *alt, const char *where, nd_json **owned,
                      const nd_json **out, needle_error *err)
{
    const nd_json *v = nd_json_get(row, key);
    if (!v && alt) v = nd_json_get(row, alt);
    *owned = NULL;
    if (!v) return nd_errorf(err, NEEDLE_EFORMAT, "%s: field \"%s\" missing", where, key);
    if (v->type == ND_JSON_STRING) {
        needle_error e2;
        if (nd_json_parse(v->str, v->len, NULL, owned, &e2))
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: field \"%s\" is a string but not JSON (%s)", where, key,
                             e2.message);
        v = *owned;
    }
    if (v->type != ND_JSON_ARRAY) return nd_errorf(err, NEEDLE_EFORMAT, "%s: field \"%s\" is not an array", where, key);
    *out = v;
    return 0;
}

static int check_gold(const nd_json *gold, const char *where, needle_error *err)
{
    for (size_t i = 0; i < gold->count; i++)
        if (!call_name(&gold->items[i]) || !call_args(&gold->items[i]))
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: answer %zu is not {\"name\": string, \"arguments\": object}",
                             where, i);
    return 0;
}

static void show_failure(const nd_eval_opts *o, nd_eval_result *r, const char *where, const char *query,
                         const char *envelope, const nd_json *gold)
{
    if (!o->report || r->failures_shown >= o->show_failures) return;
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, gold, 0);
    fprintf(o->report, "%s: wrong: query %s\n  expected %s\n  got      %s\n", where, query, b.oom ? "?" : b.data,
            envelope ? envelope : "(no envelope)");
    nd_buf_free(&b);
    r->failures_shown++;
}

int nd_eval_row(needle_model *m, const char *line, size_t len, const char *where, const nd_eval_opts *o,
                nd_eval_result *r, needle_error *err)
{
    nd_json *row = NULL, *tools_owned = NULL, *gold_owned = NULL, *env = NULL, *tools_parsed = NULL;
    const nd_json *tools = NULL, *gold = NULL;
    needle_session *s = NULL;
    char *envelope = NULL;
    nd_buf tb;
    nd_buf_init(&tb);
    needle_error e2;
    int rc = nd_json_parse(line, len, NULL, &row, &e2);
    if (rc) rc = nd_errorf(err, NEEDLE_EJSON, "%s: %s", where, e2.message);
    else if (row->type != ND_JSON_OBJECT) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: the row is not an object", where);
    const nd_json *q = rc ? NULL : nd_json_get(row, "query");
    const nd_json *sys = rc ? NULL : nd_json_get(row, "system");
    if (!rc && (!q || q->type != ND_JSON_STRING))
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"query\" missing or not a string", where);
    if (!rc && strlen(q->str) != q->len) /* a \u0000 would silently cut the query */
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"query\" contains a NUL character (\\u0000) at byte %zu", where,
                       strlen(q->str));
    if (!rc && sys && sys->type != ND_JSON_STRING && sys->type != ND_JSON_NULL)
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"system\" is not a string", where);
    if (!rc && sys && sys->type == ND_JSON_STRING && strlen(sys->str) != sys->len)
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"system\" contains a NUL character (\\u0000) at byte %zu", where,
                       strlen(sys->str));
    if (!rc) rc = json_field(row, "answers", "function_calls", where, &gold_owned, &gold, err);
    if (!rc) rc = check_gold(gold, where, err);
    int row_tools = !rc && (o->tools_from_data == 1 || (o->tools_from_data == 2 && nd_json_get(row, "tools")));
    if (row_tools) {
        rc = json_field(row, "tools", NULL, where, &tools_owned, &tools, err);
        if (!rc) nd_json_write(&tb, tools, 1);
        if (!rc && tb.oom) rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    } else if (!rc) {
        if (!o->tools_json) rc = nd_errorf(err, NEEDLE_EINVAL, "eval: no tools given and --tools-from-data not set");
        else if (nd_json_parse(o->tools_json, strlen(o->tools_json), NULL, &tools_parsed, &e2))
            rc = nd_errorf(err, NEEDLE_EJSON, "eval: the tools: %s", e2.message);
        else tools = tools_parsed;
    }
    if (rc) goto done;

    needle_session_options so;
    memset(&so, 0, sizeof so);
    so.system = sys && sys->type == ND_JSON_STRING ? sys->str : NULL;
    so.tools_json = row_tools ? tb.data : o->tools_json;
    so.max_new_tokens = o->max_new_tokens;
    so.grounded_decoding = o->grounded_decoding;
    so.split_requests = o->split_requests;
    so.ask_again = o->ask_again;
    so.strict = o->strict;
    if (needle_session_open(m, &so, &s, &e2)) {
        /* tools the session refuses (bad JSON, a schema the grammar cannot
         * enforce) make the row unusable, not the model wrong */
        rc = nd_errorf(err, e2.code == NEEDLE_ENOMEM ? NEEDLE_ENOMEM : NEEDLE_EFORMAT, "%s: %s", where, e2.message);
        goto done;
    }
    const nd_json *calls = NULL;
    int success = 0;
    int sent = needle_session_send(s, q->str, &envelope, &e2);
    if (sent == NEEDLE_ELIMIT && !envelope) {
        /* a request longer than the model's context is refused before the
         * model runs: the row cannot be asked, it is not the model's miss */
        rc = nd_errorf(err, NEEDLE_ELIMIT, "%s: %s", where, e2.message);
        goto done;
    }
    if (sent == 0 && envelope &&
        nd_json_parse(envelope, strlen(envelope), NULL, &env, &e2) == 0 && env->type == ND_JSON_OBJECT) {
        const nd_json *ok = nd_json_get(env, "success"), *tps = nd_json_get(env, "decode_tps");
        success = ok && ok->type == ND_JSON_TRUE;
        calls = nd_json_get(env, "function_calls");
        if (tps && tps->type == ND_JSON_NUMBER && isfinite(tps->num)) {
            r->tps_sum += tps->num;
            r->tps_n++;
        }
    } else {
        r->errors++;
    }
    if (!nd_eval_score(calls, gold, tools, success, r)) show_failure(o, r, where, q->str, envelope, gold);

done:
    needle_free(envelope);
    needle_session_close(s);
    nd_json_free(env);
    nd_json_free(tools_parsed);
    nd_json_free(tools_owned);
    nd_json_free(gold_owned);
    nd_json_free(row);
    nd_buf_free(&tb);
    return rc;
}

int nd_eval_file(needle_model *m, const char *path, const nd_eval_opts *o, nd_eval_result *r, needle_error *err)
{
    /* a regular file only: a FIFO or device would block or never end */
    int fd = nd_open_regular(path, err);
    if (fd < 0) return NEEDLE_EIO;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return nd_errorf(err, NEEDLE_EIO, "%s: cannot open", path);
    }
    char *line = NULL, where[1200];
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    int rc = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        if (n == 0) continue;
        r->lines++;
        snprintf(where, sizeof where, "%s:%ld", path, lineno);
        needle_error e2 = {0, ""};
        int x = nd_eval_row(m, line, (size_t)n, where, o, r, &e2);
        if (x == NEEDLE_EFORMAT || x == NEEDLE_EJSON || x == NEEDLE_EUTF8 || x == NEEDLE_ELIMIT) {
            r->malformed++;
            /* messages start with "FILE:LINE: "; print "FILE:LINE: skipped: why" */
            size_t wl = strlen(where);
            const char *why = e2.message;
            if (strncmp(why, where, wl) == 0 && why[wl] == ':' && why[wl + 1] == ' ') why += wl + 2;
            if (o->report) fprintf(o->report, "%s: skipped: %s\n", where, why);
        } else if (x) {
            rc = nd_errorf(err, x, "%s", e2.message);
            break;
        }
    }
    if (!rc && ferror(f)) rc = nd_errorf(err, NEEDLE_EIO, "%s: read error after line %ld", path, lineno);
    free(line);
    fclose(f);
    return rc;
}

static void rate(nd_buf *b, const char *key, double num, double den)
{
    if (den > 0) nd_buf_printf(b, ",\"%s\":%.4f", key, num / den);
    else nd_buf_printf(b, ",\"%s\":null", key);
}

void nd_eval_write_json(nd_buf *b, const nd_eval_result *r)
{
    nd_buf_printf(b, "{\"rows\":%d,\"malformed\":%d,\"errors\":%d,\"on_topic\":%d,\"off_topic\":%d", r->rows,
                  r->malformed, r->errors, r->on_topic, r->off_topic);
    rate(b, "tool_name_accuracy", r->name_ok, r->rows);
    rate(b, "exact_call_accuracy", r->exact_ok, r->rows);
    double p = r->arg_pred ? (double)r->arg_tp / (double)r->arg_pred : 0.0;
    double rc = r->arg_gold ? (double)r->arg_tp / (double)r->arg_gold : 0.0;
    rate(b, "argument_precision", (double)r->arg_tp, (double)r->arg_pred);
    rate(b, "argument_recall", (double)r->arg_tp, (double)r->arg_gold);
    if (r->arg_pred + r->arg_gold > 0) nd_buf_printf(b, ",\"argument_f1\":%.4f", p + rc > 0 ? 2 * p * rc / (p + rc) : 0.0);
    else nd_buf_printf(b, ",\"argument_f1\":null");
    rate(b, "refusal_accuracy", r->refusal_ok, r->off_topic);
    rate(b, "false_refusal_rate", r->false_refusals, r->on_topic);
    rate(b, "schema_valid_rate", r->schema_valid, r->rows);
    if (r->tps_n) nd_buf_printf(b, ",\"mean_decode_tps\":%.1f}", r->tps_sum / r->tps_n);
    else nd_buf_printf(b, ",\"mean_decode_tps\":null}");
}
