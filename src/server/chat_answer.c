/* chat_answer.c - writing a turn as an OpenAI chat.completion, or as
 * server-sent chat.completion.chunk events, with Needle's extras in a
 * `needle` object. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "server/chat.h"

static void write_call(nd_buf *b, nd_server *srv, const nd_json *call, int index, int with_index)
{
    const nd_json *name = nd_json_get(call, "name"), *args = nd_json_get(call, "arguments");
    nd_buf_putc(b, '{');
    if (with_index) nd_buf_printf(b, "\"index\":%d,", index);
    nd_buf_printf(b, "\"id\":\"call_%016llx\",\"type\":\"function\",\"function\":{\"name\":",
                  (unsigned long long)nd_server_next_id(srv));
    nd_json_write_string(b, name && name->type == ND_JSON_STRING ? name->str : "", name ? name->len : 0, 0);
    nd_buf_puts(b, ",\"arguments\":");
    nd_buf a;
    nd_buf_init(&a);
    if (args) nd_json_write(&a, args, 0);
    else nd_buf_puts(&a, "{}");
    nd_json_write_string(b, a.data ? a.data : "", a.len, 0);
    nd_buf_free(&a);
    nd_buf_puts(b, "}}");
}

static void write_usage(nd_buf *b, const turn *t)
{
    nd_buf_printf(b, "{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}", t->prompt_tokens,
                  t->completion_tokens, t->prompt_tokens + t->completion_tokens);
}

static void put_num(nd_buf *b, double v)
{
    if (!isfinite(v)) nd_buf_puts(b, "null");
    else nd_buf_printf(b, "%.6g", v);
}

static void write_needle(nd_buf *b, const turn *t, const answer *a)
{
    nd_buf_puts(b, "{\"type\":");
    nd_json_write_string(b, t->type ? t->type : "respond", strlen(t->type ? t->type : "respond"), 0);
    nd_buf_puts(b, ",\"confidence\":");
    put_num(b, t->confidence);
    nd_buf_puts(b, ",\"reasoning\":");
    const char *rs = t->reasoning ? t->reasoning : "";
    nd_json_write_string(b, rs, strlen(rs), 0);
    nd_buf_puts(b, ",\"error\":");
    if (t->error) nd_json_write_string(b, t->error, strlen(t->error), 0);
    else nd_buf_puts(b, "null");
    /* the grounding checks and the calls the session withheld (docs/envelope.md), as the envelope has them */
    const nd_json *validation = t->env ? nd_json_get(t->env, "validation") : NULL;
    const nd_json *suppressed = t->env ? nd_json_get(t->env, "suppressed_calls") : NULL;
    nd_buf_puts(b, ",\"validation\":");
    if (validation) nd_json_write(b, validation, 0);
    else nd_buf_puts(b, "null");
    nd_buf_puts(b, ",\"suppressed_calls\":");
    if (suppressed) nd_json_write(b, suppressed, 0);
    else nd_buf_puts(b, "[]");
    nd_buf_printf(b, ",\"tool_choice_unmet\":%s,\"session\":\"%s\",\"router\":", a->unmet ? "true" : "false",
                  a->session);
    nd_buf_puts(b, a->router ? a->router : "null");
    nd_buf_puts(b, ",\"timings\":{\"queue_ms\":");
    put_num(b, a->queue_ms);
    nd_buf_puts(b, ",\"total_ms\":");
    put_num(b, a->total_ms);
    nd_buf_puts(b, ",\"prefill_tokens_per_s\":");
    put_num(b, t->prefill_tps);
    nd_buf_puts(b, ",\"decode_tokens_per_s\":");
    put_num(b, t->decode_tps);
    nd_buf_puts(b, "},\"peak_ram_mb\":");
    put_num(b, t->peak_ram_mb);
    nd_buf_puts(b, ",\"rss_mb\":");
    put_num(b, nd_rss_mb());
    nd_buf_putc(b, '}');
}

static void write_completion(nd_buf *b, nd_server *srv, const turn *t, const answer *a)
{
    nd_buf_printf(b, "{\"id\":\"%s\",\"object\":\"chat.completion\",\"created\":%ld,\"model\":", a->id, a->created);
    nd_json_write_string(b, a->model, strlen(a->model), 0);
    nd_buf_puts(b, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",");
    if (a->n_calls > 0) {
        nd_buf_puts(b, "\"content\":null,\"tool_calls\":[");
        for (int i = 0; i < a->n_calls; i++) {
            if (i) nd_buf_putc(b, ',');
            write_call(b, srv, &t->calls->items[i], i, 0);
        }
        nd_buf_putc(b, ']');
    } else {
        nd_buf_puts(b, "\"content\":\"\"");
    }
    nd_buf_printf(b, "},\"logprobs\":null,\"finish_reason\":\"%s\"}],\"usage\":", a->finish);
    write_usage(b, t);
    nd_buf_puts(b, ",\"needle\":");
    write_needle(b, t, a);
    nd_buf_puts(b, "}\n");
}

static void chunk_head(nd_buf *b, const answer *a)
{
    nd_buf_printf(b, "data: {\"id\":\"%s\",\"object\":\"chat.completion.chunk\",\"created\":%ld,\"model\":", a->id,
                  a->created);
    nd_json_write_string(b, a->model, strlen(a->model), 0);
}

/* The answer as server-sent events: the role, one chunk per call (its id,
 * name and whole arguments), the finish reason with the needle object, the
 * usage when asked, then [DONE].  The public session API returns a turn as a
 * whole, so the chunks are written when the turn is complete. */
static void write_stream(nd_buf *b, nd_server *srv, const turn *t, const answer *a, int include_usage)
{
    chunk_head(b, a);
    nd_buf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":");
    nd_buf_puts(b, a->n_calls > 0 ? "null" : "\"\"");
    nd_buf_puts(b, "},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    for (int i = 0; i < a->n_calls; i++) {
        chunk_head(b, a);
        nd_buf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[");
        write_call(b, srv, &t->calls->items[i], i, 1);
        nd_buf_puts(b, "]},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    }
    chunk_head(b, a);
    nd_buf_printf(b, ",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"%s\"}],\"needle\":",
                  a->finish);
    write_needle(b, t, a);
    nd_buf_puts(b, "}\n\n");
    if (include_usage) {
        chunk_head(b, a);
        nd_buf_puts(b, ",\"choices\":[],\"usage\":");
        write_usage(b, t);
        nd_buf_puts(b, "}\n\n");
    }
    nd_buf_puts(b, "data: [DONE]\n\n");
}

void chat_answer(nd_reply *r, nd_server *srv, const chat_req *q, const turn *t, answer *a)
{
    nd_buf b;
    nd_buf_init(&b);
    if (q->stream) {
        write_stream(&b, srv, t, a, q->include_usage);
        nd_reply_take(r, 200, "text/event-stream", &b);
    } else {
        write_completion(&b, srv, t, a);
        nd_reply_take(r, 200, "application/json", &b);
    }
}
