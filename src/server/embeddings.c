/* embeddings.c - POST /v1/embeddings: the model's text embedding
 * (needle_model_embed: the contrastive head, L2-normalised).
 * `input` is a string or an array of strings; encoding_format "float" (the
 * default) or "base64" (little-endian float32, what the openai Python client
 * asks for by default). */
#include <stdlib.h>
#include <string.h>

#include "agent/session.h"
#include "core/json.h"
#include "server/server_internal.h"
#include "text/tokenizer.h"

#define MAX_INPUTS 256

static void put_base64(nd_buf *b, const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n) v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        char q[4] = {tab[(v >> 18) & 63], tab[(v >> 12) & 63], i + 1 < n ? tab[(v >> 6) & 63] : '=',
                     i + 2 < n ? tab[v & 63] : '='};
        nd_buf_append(b, q, 4);
    }
}

void nd_embeddings(const nd_request *rq, nd_reply *r)
{
    nd_server *srv = rq->srv;
    needle_model *m = srv->cfg->model;
    int dim = needle_model_embed_dim(m);
    if (dim <= 0) {
        nd_reply_error(r, 400, "invalid_request_error", "model_not_supported", "this model has no embedding head");
        return;
    }
    nd_json *root = NULL;
    needle_error e;
    if (nd_json_parse(rq->body, rq->len, NULL, &root, &e) != 0) {
        nd_reply_bad(r, "the request body is not valid JSON: %s", e.message);
        return;
    }
    const nd_json *input = nd_json_get(root, "input"), *fmt = nd_json_get(root, "encoding_format");
    int base64 = 0;
    float *vec = NULL;
    nd_buf b;
    nd_buf_init(&b);
    size_t n = 0;
    if (root->type != ND_JSON_OBJECT) {
        nd_reply_bad(r, "the request body must be a JSON object");
        goto out;
    }
    if (fmt && fmt->type != ND_JSON_NULL) {
        if (fmt->type != ND_JSON_STRING || (strcmp(fmt->str, "float") && strcmp(fmt->str, "base64"))) {
            nd_reply_bad(r, "encoding_format: must be \"float\" or \"base64\"");
            goto out;
        }
        base64 = !strcmp(fmt->str, "base64");
    }
    if (input && input->type == ND_JSON_STRING) n = 1;
    else if (input && input->type == ND_JSON_ARRAY && input->count > 0) n = input->count;
    else {
        nd_reply_bad(r, "input: required, a string or a non-empty array of strings");
        goto out;
    }
    if (n > MAX_INPUTS) {
        nd_reply_bad(r, "input: %zu strings, more than this server's limit of %d", n, MAX_INPUTS);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const nd_json *s = input->type == ND_JSON_STRING ? input : &input->items[i];
        if (s->type != ND_JSON_STRING || strlen(s->str) != s->len) {
            nd_reply_bad(r, "input[%zu]: must be a string without NUL characters (token arrays are not supported)", i);
            goto out;
        }
    }
    if (!(vec = malloc(sizeof(float) * (size_t)dim))) {
        nd_reply_error(r, 500, "server_error", NULL, "out of memory");
        goto out;
    }
    int adm = nd_admission_enter(&srv->adm, rq->gone, rq->gone_ctx);
    if (adm == ND_ADMIT_GONE) {
        r->drop = 1;
        goto out;
    }
    if (adm == ND_ADMIT_FULL) {
        nd_reply_error(r, 503, "server_error", "overloaded", "the server is busy; retry after a second");
        r->retry_after = 1;
        goto out;
    }
    long tokens = 0;
    nd_buf_puts(&b, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < n; i++) {
        const nd_json *s = input->type == ND_JSON_STRING ? input : &input->items[i];
        if (needle_model_embed(m, s->str, vec, dim, &e) != 0) {
            nd_admission_leave(&srv->adm);
            nd_reply_error(r, e.code == NEEDLE_EUTF8 || e.code == NEEDLE_EINVAL ? 400 : 500,
                           e.code == NEEDLE_EUTF8 || e.code == NEEDLE_EINVAL ? "invalid_request_error" : "server_error",
                           NULL, "input[%zu]: %s", i, e.message);
            goto out;
        }
        nd_ids ids;
        nd_ids_init(&ids);
        if (nd_tokenizer_encode(m->tok, s->str, s->len, &ids, &e) == 0) tokens += (long)ids.len + 1; /* + BOS */
        nd_ids_free(&ids);
        nd_buf_printf(&b, "%s{\"object\":\"embedding\",\"index\":%zu,\"embedding\":", i ? "," : "", i);
        if (base64) {
            nd_buf_putc(&b, '"');
            put_base64(&b, (const unsigned char *)vec, sizeof(float) * (size_t)dim); /* x86/arm: little-endian */
            nd_buf_putc(&b, '"');
        } else {
            nd_buf_putc(&b, '[');
            for (int k = 0; k < dim; k++) nd_buf_printf(&b, k ? ",%.9g" : "%.9g", (double)vec[k]);
            nd_buf_putc(&b, ']');
        }
        nd_buf_putc(&b, '}');
    }
    nd_admission_leave(&srv->adm);
    nd_buf_puts(&b, "],\"model\":");
    nd_json_write_string(&b, srv->cfg->model_id, strlen(srv->cfg->model_id), 0);
    nd_buf_printf(&b, ",\"usage\":{\"prompt_tokens\":%ld,\"total_tokens\":%ld}}\n", tokens, tokens);
    nd_reply_take(r, 200, "application/json", &b);
out:
    nd_buf_free(&b);
    free(vec);
    nd_json_free(root);
}
