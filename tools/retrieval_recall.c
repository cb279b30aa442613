/* retrieval_recall.c - top-k tool-retrieval recall of a model's contrastive head.
 *
 *   retrieval_recall --model M [--tokenizer TOK.model] --tools CATALOGUE.json --queries ROWS.jsonl
 *                    [--k 5] [--threads N] [--max-rows N] [--misses]
 *
 * The catalogue is embedded exactly as a session does it (nd_retriever_build:
 * each tool's compact JSON, no index file), and each query as the session's
 * retrieval does (nd_retrieval_embed_text of the user's text).  ROWS.jsonl are
 * fine-tuning rows (tools/gen_data.py): a row with at least one answer counts
 * when its first call's tool is in the catalogue; off-topic rows and rows whose
 * tool is not catalogued are skipped (and counted).  For each counted row the
 * rank of the right tool among all catalogue tools is taken (ties go to the
 * lower catalogue index, as nd_retrieval_top_k breaks them), and the row is a
 * top-1 / top-k hit when that rank is 1 / <= k.  "all_calls_topk" asks the
 * same of every catalogued tool of a row's calls.  As a cross-check the top-k
 * set of the runtime's own nd_retrieval_top_k is compared with the ranks; any
 * disagreement is reported ("topk_mismatch") and makes the exit status 1.
 *
 * Output: one JSON object on stdout.  --misses prints, per top-1 miss, the
 * query, the right tool and the tool ranked first, to stderr.
 * Why a C tool: it runs the very code `needle run` uses to choose the five
 * tools, so the numbers are those of the shipped engine, not of a re-implementation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/retrieval.h"
#include "agent/session.h"
#include "core/file.h"
#include "core/json.h"
#include "needle.h"

static void usage(void)
{
    fprintf(stderr, "usage: retrieval_recall --model M [--tokenizer TOK.model] --tools CATALOGUE.json "
                    "--queries ROWS.jsonl [--k 5] [--threads N] [--max-rows N] [--misses]\n");
}

/* Index of the catalogue tool named name, or -1. */
static int tool_index_of(const nd_json *tools, const char *name)
{
    for (size_t i = 0; i < tools->count; i++) {
        const nd_json *n = nd_json_get(&tools->items[i], "name");
        if (n && n->type == ND_JSON_STRING && !strcmp(n->str, name)) return (int)i;
    }
    return -1;
}

static const char *tool_name(const nd_json *tools, int i)
{
    const nd_json *n = nd_json_get(&tools->items[i], "name");
    return n && n->type == ND_JSON_STRING ? n->str : "?";
}

/* 1-based rank of tool t: tools scoring higher, or equal with a lower index, come first. */
static int rank_of(const float *score, int n, int t)
{
    int r = 1;
    for (int i = 0; i < n; i++)
        if (score[i] > score[t] || (score[i] == score[t] && i < t)) r++;
    return r;
}

typedef struct counts {
    int rows, counted, skipped_offtopic, skipped_uncatalogued, bad_rows;
    int top1, topk, all_calls_topk, mismatch;
    double rank_sum;
} counts;

/* Score one row; 0, or -1 on a model error (message in err). */
static int score_row(const needle_model *m, const nd_retriever *r, const nd_json *tools, const nd_json *row, int k,
                     int misses, float *q, float *score, int *sel, counts *c, needle_error *err)
{
    const nd_json *query = nd_json_get(row, "query"), *ans = nd_json_get(row, "answers");
    if (!query || query->type != ND_JSON_STRING || !ans || ans->type != ND_JSON_ARRAY) {
        c->bad_rows++;
        return 0;
    }
    if (ans->count == 0) {
        c->skipped_offtopic++;
        return 0;
    }
    const nd_json *first = nd_json_get(&ans->items[0], "name");
    int t = first && first->type == ND_JSON_STRING ? tool_index_of(tools, first->str) : -1;
    if (t < 0) {
        c->skipped_uncatalogued++;
        return 0;
    }
    if (nd_retrieval_embed_text(m->net, m->tok, query->str, q, err)) return -1;
    for (int i = 0; i < r->n_tools; i++) {
        double s = 0.0;
        for (int j = 0; j < r->dim; j++) s += (double)r->emb[(size_t)i * r->dim + j] * q[j];
        score[i] = (float)s;
    }
    int rank = rank_of(score, r->n_tools, t);
    c->counted++;
    c->rank_sum += rank;
    c->top1 += rank == 1;
    c->topk += rank <= k;
    int all = 1;
    for (size_t a = 0; a < ans->count; a++) {
        const nd_json *n = nd_json_get(&ans->items[a], "name");
        int ti = n && n->type == ND_JSON_STRING ? tool_index_of(tools, n->str) : -1;
        if (ti >= 0 && rank_of(score, r->n_tools, ti) > k) all = 0;
    }
    c->all_calls_topk += all;
    /* the runtime's selection must agree with the ranks */
    int got = nd_retrieval_top_k(r->emb, r->n_tools, r->dim, q, k, sel), in_sel = 0;
    for (int i = 0; i < got; i++) in_sel |= sel[i] == t;
    if (in_sel != (rank <= k)) c->mismatch++;
    if (misses && rank != 1) {
        int best = 0;
        for (int i = 1; i < r->n_tools; i++)
            if (score[i] > score[best]) best = i;
        fprintf(stderr, "miss rank %2d  want %-18s got %-18s  %s\n", rank, tool_name(tools, t),
                tool_name(tools, best), query->str);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *tok = NULL, *tools_path = NULL, *rows_path = NULL;
    int k = ND_RETRIEVAL_TOP_K, threads = 1, max_rows = 0, misses = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--misses")) {
            misses = 1;
            continue;
        }
        if (!v) {
            usage();
            return 2;
        }
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--tokenizer")) tok = v;
        else if (!strcmp(a, "--tools")) tools_path = v;
        else if (!strcmp(a, "--queries")) rows_path = v;
        else if (!strcmp(a, "--k")) k = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--max-rows")) max_rows = atoi(v);
        else {
            usage();
            return 2;
        }
        i++;
    }
    if (!model || !tools_path || !rows_path || k < 1) {
        usage();
        return 2;
    }

    needle_error err = {0};
    needle_model *m = NULL;
    nd_json *tools = NULL;
    nd_retriever *r = NULL;
    char *tools_text = NULL, *rows_text = NULL;
    size_t tools_len = 0, rows_len = 0;
    float *q = NULL, *score = NULL;
    int *sel = NULL, status = 1;
    needle_model_options mo = {.threads = threads};
    if (needle_model_open(model, tok, &mo, &m, &err) || nd_read_file(tools_path, &tools_text, &tools_len, &err) ||
        nd_json_parse(tools_text, tools_len, tools_path, &tools, &err) ||
        nd_read_file(rows_path, &rows_text, &rows_len, &err))
        goto out;
    if (tools->type != ND_JSON_ARRAY || tools->count == 0) {
        snprintf(err.message, sizeof err.message, "%s: not a non-empty array of tools", tools_path);
        goto out;
    }
    if (nd_retriever_build(m->net, m->tok, tools, NULL, &r, &err)) goto out;
    q = malloc(sizeof(float) * (size_t)r->dim);
    score = malloc(sizeof(float) * (size_t)r->n_tools);
    sel = malloc(sizeof(int) * (size_t)(k < r->n_tools ? k : r->n_tools));
    if (!q || !score || !sel) {
        snprintf(err.message, sizeof err.message, "out of memory");
        goto out;
    }

    counts c;
    memset(&c, 0, sizeof c);
    int line_no = 0;
    for (char *p = rows_text; p < rows_text + rows_len && (max_rows <= 0 || c.rows < max_rows);) {
        char *nl = memchr(p, '\n', (size_t)(rows_text + rows_len - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(rows_text + rows_len - p);
        line_no++;
        if (ll > 0) {
            char where[400];
            snprintf(where, sizeof where, "%s:%d", rows_path, line_no);
            nd_json *row = NULL;
            needle_error e = {0};
            c.rows++;
            if (nd_json_parse(p, ll, where, &row, &e)) {
                c.bad_rows++;
            } else {
                int rc = score_row(m, r, tools, row, k, misses, q, score, sel, &c, &err);
                nd_json_free(row);
                if (rc) goto out;
            }
        }
        p += ll + 1;
    }
    double n = c.counted ? c.counted : 1;
    printf("{\"model\":\"%s\",\"catalogue\":%d,\"k\":%d,\"rows\":%d,\"counted\":%d,\"skipped_offtopic\":%d,"
           "\"skipped_uncatalogued\":%d,\"bad_rows\":%d,\"top1\":%.4f,\"top%d\":%.4f,\"all_calls_top%d\":%.4f,"
           "\"mean_rank\":%.3f,\"topk_mismatch\":%d}\n",
           model, r->n_tools, k, c.rows, c.counted, c.skipped_offtopic, c.skipped_uncatalogued, c.bad_rows,
           c.top1 / n, k, c.topk / n, k, c.all_calls_topk / n, c.rank_sum / n, c.mismatch);
    status = c.counted > 0 && c.mismatch == 0 ? 0 : 1;
out:
    if (status && err.message[0]) fprintf(stderr, "retrieval_recall: %s\n", err.message);
    free(q);
    free(score);
    free(sel);
    nd_retriever_free(r);
    nd_json_free(tools);
    free(tools_text);
    free(rows_text);
    if (m) needle_model_close(m);
    return status;
}
