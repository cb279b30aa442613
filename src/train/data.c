/* data.c - JSONL fine-tuning rows to ids and loss masks. */
#include "train/data.h"

#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "grammar/grammar.h"
#include "text/chat.h"

/* A field that is JSON, or a string holding JSON: write it compact, ASCII-escaped when ascii. */
static int compact_json_field(const nd_json *v, const char *field, const char *where, int ascii, nd_buf *out,
                              needle_error *err)
{
    if (v->type == ND_JSON_STRING) {
        nd_json *inner = NULL;
        int rc = nd_json_parse(v->str, v->len, NULL, &inner, err);
        if (rc) return nd_errorf(err, NEEDLE_EJSON, "%s: field \"%s\" is a string but not JSON", where, field);
        nd_json_write(out, inner, ascii);
        nd_json_free(inner);
    } else {
        nd_json_write(out, v, ascii);
    }
    return out->oom ? nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where) : 0;
}

/* The last tools text and its compiled grammar: consecutive rows usually share
 * one tool list, so each distinct list is compiled once per run of rows. */
typedef struct tools_cache {
    char *text;
    nd_grammar *g;
} tools_cache;

static void tools_cache_free(tools_cache *c)
{
    free(c->text);
    nd_grammar_free(c->g);
    memset(c, 0, sizeof *c);
}

/* Write obj with the keys its schema declares first, in the declared order,
 * then any others: JSON objects are unordered, the grammar is not. */
static void write_in_schema_order(nd_buf *b, const nd_json *obj, const nd_json *schema)
{
    const nd_json *props = schema ? nd_json_get(schema, "properties") : NULL;
    if (!obj || obj->type != ND_JSON_OBJECT || !props || props->type != ND_JSON_OBJECT) {
        nd_json_write(b, obj, 1);
        return;
    }
    int first = 1;
    nd_buf_putc(b, '{');
    /* the declared keys in the schema's order, then undeclared ones in their own */
    for (size_t k = 0; k < props->count; k++) {
        const nd_json *v = nd_json_get(obj, props->keys[k]);
        if (!v) continue;
        if (!first) nd_buf_putc(b, ',');
        first = 0;
        nd_json_write_string(b, props->keys[k], props->key_lens[k], 1);
        nd_buf_putc(b, ':');
        write_in_schema_order(b, v, &props->items[k]);
    }
    for (size_t i = 0; i < obj->count; i++) {
        if (nd_json_get(props, obj->keys[i])) continue;
        if (!first) nd_buf_putc(b, ',');
        first = 0;
        nd_json_write_string(b, obj->keys[i], obj->key_lens[i], 1);
        nd_buf_putc(b, ':');
        nd_json_write(b, &obj->items[i], 1);
    }
    nd_buf_putc(b, '}');
}

/* Every answer must call a declared tool with arguments its schema accepts:
 * training on anything else teaches calls the engine's grammar would refuse. */
static int check_answers(const nd_buf *tools, const nd_buf *answers, const char *where, tools_cache *cache,
                         needle_error *err)
{
    nd_json *tj = NULL, *aj = NULL;
    int rc = 0;
    if (nd_json_parse(tools->data, tools->len, NULL, &tj, err) || tj->type != ND_JSON_ARRAY)
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"tools\" is not a JSON array", where);
    else if (nd_json_parse(answers->data, answers->len, NULL, &aj, err) || aj->type != ND_JSON_ARRAY)
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"answers\" is not a JSON array", where);
    for (size_t i = 0; !rc && i < aj->count; i++) {
        const nd_json *name = nd_json_get(&aj->items[i], "name");
        if (!name || name->type != ND_JSON_STRING) {
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: answers[%zu] has no \"name\" string", where, i);
            break;
        }
        int declared = 0;
        for (size_t k = 0; k < tj->count && !declared; k++) {
            const nd_json *tn = nd_json_get(&tj->items[k], "name");
            declared = tn && tn->type == ND_JSON_STRING && tn->len == name->len && !memcmp(tn->str, name->str, tn->len);
        }
        if (!declared)
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: answers[%zu] calls \"%.80s\", which \"tools\" does not declare",
                           where, i, name->str);
    }
    nd_grammar *g = NULL;
    if (!rc && cache && cache->text && !strcmp(cache->text, tools->data)) g = cache->g;
    if (!rc && !g) {
        needle_error ge = {0};
        if (nd_grammar_compile(tj, &g, &ge))
            rc = nd_errorf(err, NEEDLE_ESCHEMA, "%s: the row's tools cannot be compiled: %s", where, ge.message);
        else if (cache) {
            tools_cache_free(cache);
            cache->text = strdup(tools->data);
            cache->g = g;
            if (!cache->text) { nd_grammar_free(g); memset(cache, 0, sizeof *cache); g = NULL;
                                rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where); }
        }
    }
    /* the calls written compactly as the engine generates them: name first, then the
     * arguments with their keys in each schema's declared order */
    nd_buf canon;
    nd_buf_init(&canon);
    nd_buf_putc(&canon, '[');
    for (size_t i = 0; !rc && i < aj->count; i++) {
        const nd_json *name = nd_json_get(&aj->items[i], "name"), *args = nd_json_get(&aj->items[i], "arguments");
        const nd_json *params = NULL;
        for (size_t k = 0; k < tj->count && !params; k++) {
            const nd_json *tn = nd_json_get(&tj->items[k], "name");
            if (tn && tn->type == ND_JSON_STRING && tn->len == name->len && !memcmp(tn->str, name->str, tn->len))
                params = nd_json_get(&tj->items[k], "parameters");
        }
        nd_buf_puts(&canon, i ? ",{\"name\":" : "{\"name\":");
        nd_json_write_string(&canon, name->str, name->len, 1);
        if (args) {
            nd_buf_puts(&canon, ",\"arguments\":");
            write_in_schema_order(&canon, args, params);
        }
        nd_buf_putc(&canon, '}');
    }
    nd_buf_putc(&canon, ']');
    if (!rc && canon.oom) rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    if (!rc) {
        nd_grammar_state *st = malloc(sizeof *st);
        if (!st) rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
        else {
            nd_grammar_start(g, st);
            if (nd_grammar_advance(g, st, canon.data, canon.len) != 0 || !nd_grammar_complete(g, st))
                rc = nd_errorf(err, NEEDLE_ESCHEMA, "%s: \"answers\" do not match the tools' schemas: %.200s", where,
                               answers->data);
            free(st);
        }
        if (!cache) nd_grammar_free(g);
    }
    nd_buf_free(&canon);
    nd_json_free(tj);
    nd_json_free(aj);
    return rc;
}

static const char *opt_string(const nd_json *obj, const char *key, int *bad)
{
    const nd_json *v = nd_json_get(obj, key);
    if (!v || v->type == ND_JSON_NULL) return "";
    if (v->type != ND_JSON_STRING) { *bad = 1; return ""; }
    if (strlen(v->str) != v->len) { *bad = 2; return ""; } /* a \u0000 would silently cut the text */
    return v->str;
}

/* Push `n` copies of value onto mask (the loss mask of ids appended since). */
static int mask_fill(nd_ids *mask, size_t upto, int value, const char *where, needle_error *err)
{
    while (mask->len < upto)
        if (nd_ids_push(mask, value)) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    return 0;
}

/* The later turns of a multi-turn row (`turns`: [{tool_result | user, answers, reasoning?}, ...]),
 * appended in the layout the session uses (text/chat.h "Multi-turn"): turn 1's EOS is dropped
 * (a session never feeds it), each tool result or user text is a segment outside the loss, each
 * answer is a target inside it, and the row ends with EOS.  The target ids are those
 * nd_chat_build_ids gives a target (encoded on its own, so they do not depend on the prompt). */
static int append_turns(const nd_json *turns, const char *where, nd_tokenizer *tok, int layout, const nd_buf *tools,
                        tools_cache *cache, nd_ids *ids, nd_ids *mask, needle_error *err)
{
    if (turns->type != ND_JSON_ARRAY) return nd_errorf(err, NEEDLE_EFORMAT, "%s: \"turns\" is not an array", where);
    if (turns->count == 0) return 0;
    ids->len--; /* the EOS after turn 1 */
    mask->len--;
    int rc = 0;
    nd_ids tids, tmask;
    nd_ids_init(&tids);
    nd_ids_init(&tmask);
    for (size_t i = 0; i < turns->count && !rc; i++) {
        const nd_json *t = &turns->items[i];
        char tw[4300];
        snprintf(tw, sizeof tw, "%s: turns[%zu]", where, i);
        const nd_json *res = t->type == ND_JSON_OBJECT ? nd_json_get(t, "tool_result") : NULL;
        const nd_json *user = t->type == ND_JSON_OBJECT ? nd_json_get(t, "user") : NULL;
        const nd_json *a = t->type == ND_JSON_OBJECT ? nd_json_get(t, "answers") : NULL;
        if (t->type == ND_JSON_OBJECT && !a) a = nd_json_get(t, "function_calls");
        int bad = 0;
        const char *reasoning = t->type == ND_JSON_OBJECT ? opt_string(t, "reasoning", &bad) : "";
        if (t->type != ND_JSON_OBJECT) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: not an object", tw);
        else if (!res == !user) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: needs exactly one of \"tool_result\" and \"user\"", tw);
        else if (user && (user->type != ND_JSON_STRING || strlen(user->str) != user->len))
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"user\" must be a string", tw);
        else if (!a) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"answers\" missing", tw);
        else if (bad) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"reasoning\" must be a string", tw);
        if (rc) break;
        nd_buf seg, answers;
        nd_buf_init(&seg);
        nd_buf_init(&answers);
        if (res) { /* the result re-serialised compactly, as the session does */
            nd_json_write(&seg, res, nd_chat_json_ascii(layout));
            rc = seg.oom ? nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", tw)
                         : nd_chat_append_tool_result(tok, seg.data, ids, err);
        } else { /* a further user turn, encoded exactly as the session encodes it */
            nd_buf_puts(&seg, "\n<|im_start|>user\n");
            nd_buf_append(&seg, user->str, user->len);
            nd_buf_puts(&seg, "<|im_end|>\n<|im_start|>assistant\n");
            rc = seg.oom ? nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", tw)
                         : nd_tokenizer_encode(tok, seg.data, seg.len, ids, err);
        }
        if (!rc) rc = mask_fill(mask, ids->len, 0, tw, err);
        if (!rc) rc = compact_json_field(a, "answers", tw, nd_chat_json_ascii(layout), &answers, err);
        if (!rc) rc = check_answers(tools, &answers, tw, cache, err);
        size_t start = 0;
        if (!rc) {
            nd_chat_example ce = {layout, "", "[]", "", reasoning, answers.data};
            rc = nd_chat_build_ids(tok, &ce, &tids, &tmask, &start, err);
        }
        for (size_t k = start; !rc && k + 1 < tids.len; k++) /* the target, without its EOS */
            if (nd_ids_push(ids, tids.data[k]) || nd_ids_push(mask, 1))
                rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", tw);
        nd_buf_free(&seg);
        nd_buf_free(&answers);
    }
    if (!rc && (nd_ids_push(ids, nd_tokenizer_eos(tok)) || nd_ids_push(mask, 1)))
        rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    nd_ids_free(&tids);
    nd_ids_free(&tmask);
    return rc;
}

/* The platform chat format (SPEC-needle3 section 3: `messages` with an
 * optional system turn, one user turn and one assistant turn holding OpenAI
 * `tool_calls`; OpenAI-form `tools`) rewritten as a local row {query, tools,
 * answers, system?} in out.  Returns 0, or an error naming the problem. */
static int chat_row_to_local(const nd_json *row, const char *where, nd_buf *out, needle_error *err)
{
    const nd_json *msgs = nd_json_get(row, "messages"), *user = NULL, *asst = NULL, *sys = NULL;
    if (msgs->type != ND_JSON_ARRAY) return nd_errorf(err, NEEDLE_EFORMAT, "%s: \"messages\" is not an array", where);
    int turns = 0;
    for (size_t i = 0; i < msgs->count; i++) {
        const nd_json *m = &msgs->items[i], *role = m->type == ND_JSON_OBJECT ? nd_json_get(m, "role") : NULL;
        if (!role || role->type != ND_JSON_STRING)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: messages[%zu] has no \"role\" string", where, i);
        if (!strcmp(role->str, "system")) {
            if (!sys) sys = m;
            continue;
        }
        if (turns == 0 && !strcmp(role->str, "user")) user = m;
        else if (turns == 1 && !strcmp(role->str, "assistant")) asst = m;
        turns++;
    }
    if (turns != 2 || !user || !asst)
        return nd_errorf(err, NEEDLE_EFORMAT,
                         "%s: \"messages\" must hold one user turn then one assistant turn (besides a system turn)",
                         where);
    const nd_json *q = nd_json_get(user, "content");
    if (q && q->type != ND_JSON_STRING && q->type != ND_JSON_NULL)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: the user turn's \"content\" is not a string", where);
    nd_buf_puts(out, "{\"query\":");
    if (q && q->type == ND_JSON_STRING) nd_json_write_string(out, q->str, q->len, 0);
    else nd_buf_puts(out, "\"\"");
    /* OpenAI tools {"type":"function","function":{...}} -> the function object */
    nd_buf_puts(out, ",\"tools\":[");
    const nd_json *tools = nd_json_get(row, "tools");
    if (tools && tools->type != ND_JSON_ARRAY && tools->type != ND_JSON_NULL)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: \"tools\" is not an array", where);
    for (size_t i = 0; tools && tools->type == ND_JSON_ARRAY && i < tools->count; i++) {
        const nd_json *t = &tools->items[i], *fn = t->type == ND_JSON_OBJECT ? nd_json_get(t, "function") : NULL;
        if (i) nd_buf_putc(out, ',');
        nd_json_write(out, fn ? fn : t, 0);
    }
    nd_buf_puts(out, "],\"answers\":[");
    const nd_json *calls = nd_json_get(asst, "tool_calls");
    if (calls && calls->type != ND_JSON_ARRAY && calls->type != ND_JSON_NULL)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: the assistant turn's \"tool_calls\" is not an array", where);
    for (size_t i = 0; calls && calls->type == ND_JSON_ARRAY && i < calls->count; i++) {
        const nd_json *c = &calls->items[i];
        const nd_json *fn = c->type == ND_JSON_OBJECT ? nd_json_get(c, "function") : NULL;
        if (!fn || fn->type != ND_JSON_OBJECT) fn = c;
        const nd_json *name = fn->type == ND_JSON_OBJECT ? nd_json_get(fn, "name") : NULL;
        if (!name || name->type != ND_JSON_STRING)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tool_calls[%zu] has no function \"name\" string", where, i);
        nd_buf_puts(out, i ? ",{\"name\":" : "{\"name\":");
        nd_json_write_string(out, name->str, name->len, 0);
        nd_buf_puts(out, ",\"arguments\":");
        /* arguments: an object, or (OpenAI) a string holding one; empty = {} */
        const nd_json *args = nd_json_get(fn, "arguments");
        size_t k = 0;
        if (args && args->type == ND_JSON_STRING)
            while (k < args->len && strchr(" \t\r\n", args->str[k])) k++;
        if (!args || args->type == ND_JSON_NULL || (args->type == ND_JSON_STRING && k == args->len)) {
            nd_buf_puts(out, "{}");
        } else if (args->type == ND_JSON_STRING) {
            nd_json *inner = NULL;
            if (nd_json_parse(args->str, args->len, NULL, &inner, NULL))
                return nd_errorf(err, NEEDLE_EFORMAT, "%s: tool_calls[%zu] \"arguments\" is a string but not JSON",
                                 where, i);
            nd_json_write(out, inner, 0);
            nd_json_free(inner);
        } else {
            nd_json_write(out, args, 0);
        }
        nd_buf_putc(out, '}');
    }
    nd_buf_putc(out, ']');
    const nd_json *sc = sys ? nd_json_get(sys, "content") : NULL;
    if (sc && sc->type == ND_JSON_STRING && sc->len) {
        nd_buf_puts(out, ",\"system\":");
        nd_json_write_string(out, sc->str, sc->len, 0);
    }
    nd_buf_putc(out, '}');
    return out->oom ? nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where) : 0;
}

static int example_from_line(const char *line, size_t len, const char *where, nd_tokenizer *tok, int layout,
                             tools_cache *cache, nd_example *ex, needle_error *err)
{
    memset(ex, 0, sizeof *ex);
    nd_json *row = NULL;
    int rc = nd_json_parse(line, len, NULL, &row, err);
    if (rc) return rc;
    if (row->type == ND_JSON_OBJECT && nd_json_get(row, "messages") && !nd_json_get(row, "query")) {
        /* the platform chat format: rewritten as a local row, then read as one */
        nd_buf local;
        nd_buf_init(&local);
        rc = chat_row_to_local(row, where, &local, err);
        nd_json_free(row);
        if (!rc) rc = example_from_line(local.data, local.len, where, tok, layout, cache, ex, err);
        nd_buf_free(&local);
        return rc;
    }
    nd_buf tools, answers;
    nd_buf_init(&tools);
    nd_buf_init(&answers);
    nd_ids ids, mask;
    nd_ids_init(&ids);
    nd_ids_init(&mask);
    const nd_json *q = nd_json_get(row, "query"), *t = nd_json_get(row, "tools");
    const nd_json *a = nd_json_get(row, "answers");
    if (!a) a = nd_json_get(row, "function_calls");
    int bad = 0;
    const char *reasoning = opt_string(row, "reasoning", &bad), *system = opt_string(row, "system", &bad);
    if (row->type != ND_JSON_OBJECT) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: the row is not a JSON object", where);
    else if (!q || q->type != ND_JSON_STRING)
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"query\" missing or not a string", where);
    else if (strlen(q->str) != q->len)
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"query\" contains a NUL character (\\u0000) at byte %zu", where,
                       strlen(q->str));
    else if (!t) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"tools\" missing", where);
    else if (!a) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"answers\" (or \"function_calls\") missing", where);
    else if (bad == 2) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"reasoning\"/\"system\" contains a NUL character (\\u0000)", where);
    else if (bad) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: \"reasoning\"/\"system\" must be strings", where);
    int ascii = nd_chat_json_ascii(layout);
    if (!rc) rc = compact_json_field(t, "tools", where, ascii, &tools, err);
    if (!rc) rc = compact_json_field(a, "answers", where, ascii, &answers, err);
    if (!rc) rc = check_answers(&tools, &answers, where, cache, err);
    if (!rc) {
        nd_chat_example ce = {layout, system, tools.data, q->str, reasoning, answers.data};
        rc = nd_chat_build_ids(tok, &ce, &ids, &mask, NULL, err);
    }
    const nd_json *turns = row->type == ND_JSON_OBJECT ? nd_json_get(row, "turns") : NULL;
    if (!rc && turns && turns->type != ND_JSON_NULL) rc = append_turns(turns, where, tok, layout, &tools, cache, &ids, &mask, err);
    if (!rc && ids.len > (size_t)1 << 24) rc = nd_errorf(err, NEEDLE_ELIMIT, "%s: row too long", where);
    if (!rc) {
        ex->len = (int)ids.len;
        ex->ids = malloc(sizeof(int32_t) * ids.len);
        ex->mask = malloc(ids.len);
        if (!ex->ids || !ex->mask) rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
        for (size_t i = 0; !rc && i < ids.len; i++) {
            ex->ids[i] = ids.data[i];
            ex->mask[i] = mask.data[i] ? 1 : 0;
        }
        if (rc) { free(ex->ids); free(ex->mask); memset(ex, 0, sizeof *ex); }
    }
    nd_ids_free(&ids);
    nd_ids_free(&mask);
    nd_buf_free(&tools);
    nd_buf_free(&answers);
    nd_json_free(row);
    return rc;
}

int nd_example_from_json_line(const char *line, size_t len, const char *where, nd_tokenizer *tok, nd_example *ex,
                              needle_error *err)
{
    return example_from_line(line, len, where, tok, NEEDLE_LAYOUT_2_0_8, NULL, ex, err);
}

int nd_example_from_json_line_layout(const char *line, size_t len, const char *where, nd_tokenizer *tok, int layout,
                                     nd_example *ex, needle_error *err)
{
    return example_from_line(line, len, where, tok, layout, NULL, ex, err);
}

static int push_example(nd_dataset *ds, const nd_example *ex)
{
    if (ds->n == ds->cap) {
        int cap = ds->cap ? ds->cap * 2 : 64;
        nd_example *p = realloc(ds->ex, sizeof *p * (size_t)cap);
        if (!p) return NEEDLE_ENOMEM;
        ds->ex = p;
        ds->cap = cap;
    }
    ds->ex[ds->n++] = *ex;
    return 0;
}

int nd_dataset_load_jsonl(const char *path, nd_tokenizer *tok, int max_len, FILE *report, nd_dataset *ds,
                          needle_error *err)
{
    return nd_dataset_load_jsonl_layout(path, tok, NEEDLE_LAYOUT_2_0_8, max_len, report, ds, err);
}

int nd_dataset_load_jsonl_layout(const char *path, nd_tokenizer *tok, int layout, int max_len, FILE *report,
                                 nd_dataset *ds, needle_error *err)
{
    memset(ds, 0, sizeof *ds);
    char *text = NULL;
    size_t len = 0;
    int rc = nd_read_file_max(path, ND_LIMIT_DATA_BYTES, "JSONL dataset", &text, &len, err);
    if (rc) return rc;
    tools_cache cache = {0};
    size_t at = 0;
    int line_no = 0;
    while (at < len) {
        size_t end = at;
        while (end < len && text[end] != '\n') end++;
        line_no++;
        size_t n = end - at;
        if (n && text[at + n - 1] == '\r') n--;
        int blank = 1;
        for (size_t i = 0; i < n && blank; i++) blank = text[at + i] == ' ' || text[at + i] == '\t';
        if (!blank) {
            ds->lines++;
            char where[4200];
            snprintf(where, sizeof where, "%s:%d", path, line_no);
            nd_example ex;
            needle_error e2;
            int r = example_from_line(text + at, n, where, tok, layout, &cache, &ex, &e2);
            if (r == NEEDLE_ENOMEM) { rc = nd_errorf(err, r, "%s", e2.message); break; }
            if (r) {
                ds->malformed++;
                /* messages start with "PATH:LINE: "; print "PATH:LINE: skipped: why" once */
                size_t wl = strlen(where);
                const char *why = e2.message;
                if (!strncmp(why, where, wl) && why[wl] == ':' && why[wl + 1] == ' ') why += wl + 2;
                if (report) fprintf(report, "%s: skipped: %s\n", where, why);
            } else if (ex.len > max_len) {
                ds->too_long++;
                /* never truncated: a cut row loses its answer tokens and trains on nothing */
                if (report)
                    fprintf(report, "%s: skipped: %d tokens after tokenisation, more than the %d allowed "
                                    "(--max-len, capped at the model's max_seq_len)\n",
                            where, ex.len, max_len);
                free(ex.ids);
                free(ex.mask);
            } else if (push_example(ds, &ex)) {
                free(ex.ids);
                free(ex.mask);
                rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
                break;
            } else if (ex.len > ds->max_len_seen) {
                ds->max_len_seen = ex.len;
            }
        }
        at = end + 1;
    }
    free(text);
    tools_cache_free(&cache);
    if (!rc && ds->n == 0) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: no usable rows (%d lines, %d malformed)", path,
                                          ds->lines, ds->malformed);
    if (rc) nd_dataset_free(ds);
    return rc;
}

void nd_dataset_free(nd_dataset *ds)
{
    for (int i = 0; i < ds->n; i++) {
        free(ds->ex[i].ids);
        free(ds->ex[i].mask);
    }
    free(ds->ex);
    memset(ds, 0, sizeof *ds);
}

int nd_bucket_len(int longest, int max_len) { return nd_bucket_len_min(longest, 128, max_len); }

int nd_bucket_len_min(int longest, int min_len, int max_len)
{
    int t = min_len > 0 ? min_len : 1;
    while (t < longest && t < (1 << 30)) t <<= 1;
    return t < max_len ? t : max_len;
}

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint64_t nd_dataset_fingerprint(const nd_dataset *ds)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv_bytes(h, &ds->n, sizeof ds->n);
    for (int i = 0; i < ds->n; i++) {
        const nd_example *ex = &ds->ex[i];
        h = fnv_bytes(h, &ex->len, sizeof ex->len);
        h = fnv_bytes(h, ex->ids, sizeof(int32_t) * (size_t)ex->len);
        h = fnv_bytes(h, ex->mask, (size_t)ex->len);
    }
    return h;
}

long nd_make_batch(const nd_dataset *ds, const int *idx, int n, int B, int T, int pad_id, int32_t *ids,
                   int32_t *targets)
{
    long real = 0;
    for (int b = 0; b < B; b++) {
        const nd_example *ex = b < n ? &ds->ex[idx[b]] : NULL;
        int len = ex ? (ex->len < T ? ex->len : T) : 0;
        real += len;
        for (int t = 0; t < T; t++) {
            ids[(size_t)b * T + t] = t < len ? ex->ids[t] : pad_id;
            targets[(size_t)b * T + t] = t + 1 < len && ex->mask[t + 1] ? ex->ids[t + 1] : -1;
        }
    }
    return real;
}
