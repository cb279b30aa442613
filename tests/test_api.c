/* test_api.c - the public API as a user sees it (only include/needle.h):
 * models from files and from memory, many sessions on many threads, and the
 * released engine's four compatibility calls with their error values. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "needle.h"

#define MODEL "tests/golden/tiny_w4.cact"
#define MIXED "tests/golden/tiny_mixed.cact"

static const char *TOOLS =
    "[{\"name\":\"set_lights\",\"description\":\"Turn lights on or off\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"room\":{\"enum\":[\"kitchen\",\"hall\"]},\"on\":{\"type\":\"boolean\"}},"
    "\"required\":[\"room\",\"on\"]}},{\"name\":\"timer\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"minutes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":90}},\"required\":[\"minutes\"]}}]";

static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* The envelope minus its timing fields (which differ run to run). */
static char *strip_timing(const char *env)
{
    const char *cut = strstr(env, ",\"prefill_tps\"");
    size_t n = cut ? (size_t)(cut - env) : strlen(env);
    char *s = malloc(n + 1);
    memcpy(s, env, n);
    s[n] = '\0';
    return s;
}

static const char *QUERIES[] = {"turn on the kitchen lights", "set a timer for ten minutes", "hall lights off"};

/* Three turns (query, a tool result, another query); the envelopes without timing. */
static int conversation(needle_model *m, char *out[3])
{
    needle_session_options so = {.tools_json = TOOLS, .max_new_tokens = 400};
    needle_session *s = NULL;
    needle_error err;
    if (needle_session_open(m, &so, &s, &err)) return -1;
    int rc = 0;
    for (int t = 0; t < 3 && !rc; t++) {
        char *env = NULL;
        rc = t == 1 ? needle_session_tool_result(s, "{\"ok\":true}", &env, &err)
                    : needle_session_send(s, QUERIES[t], &env, &err);
        if (!rc) {
            out[t] = strip_timing(env);
            needle_free(env);
        }
    }
    needle_session_close(s);
    return rc;
}

static void test_file_and_memory_agree(void)
{
    needle_model_options mo = {.threads = 1};
    needle_model *a = NULL, *b = NULL;
    needle_error err = {0};
    CHECKF(needle_model_open(MODEL, NULL, &mo, &a, &err) == 0, "%s", err.message);
    size_t n = 0;
    char *blob = read_all(MODEL, &n);
    CHECK(blob != NULL);
    if (blob) CHECKF(needle_model_open_memory(blob, n, &mo, &b, &err) == 0, "%s", err.message);
    free(blob); /* the model keeps its own copy */
    const char *why = NULL;
    if (a) CHECK(strcmp(needle_model_backend(a, &why), "none") != 0 && why != NULL);
    char *ea[3] = {0}, *eb[3] = {0};
    if (a && b) {
        CHECK(conversation(a, ea) == 0);
        CHECK(conversation(b, eb) == 0);
        for (int t = 0; t < 3; t++) CHECKF(ea[t] && eb[t] && !strcmp(ea[t], eb[t]), "turn %d differs", t);
        CHECK(ea[0] && strstr(ea[0], "\"success\":true"));
    }
    for (int t = 0; t < 3; t++) {
        free(ea[t]);
        free(eb[t]);
    }
    needle_model_close(a);
    needle_model_close(b);
}

typedef struct job {
    needle_model *m;
    char *env[3];
    int rc;
} job;

static void *run_job(void *p)
{
    job *j = p;
    j->rc = conversation(j->m, j->env);
    return NULL;
}

/* Sessions on two models, eight threads at once: every conversation equals
 * the one computed alone (greedy decoding is deterministic). */
static void test_many_sessions_threads(void)
{
    needle_model_options mo = {.threads = 1};
    needle_model *m[2] = {NULL, NULL};
    needle_error err = {0};
    CHECKF(needle_model_open(MODEL, NULL, &mo, &m[0], &err) == 0, "%s", err.message);
    CHECKF(needle_model_open(MIXED, NULL, &mo, &m[1], &err) == 0, "%s", err.message);
    if (!m[0] || !m[1]) {
        needle_model_close(m[0]);
        needle_model_close(m[1]);
        return;
    }
    char *ref[2][3] = {{0}};
    for (int k = 0; k < 2; k++) CHECK(conversation(m[k], ref[k]) == 0);
    enum { N = 8 };
    job jobs[N];
    pthread_t th[N];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < N; i++) {
        jobs[i].m = m[i % 2];
        CHECK(pthread_create(&th[i], NULL, run_job, &jobs[i]) == 0);
    }
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        CHECK(jobs[i].rc == 0);
        for (int t = 0; t < 3; t++) {
            CHECKF(jobs[i].env[t] && ref[i % 2][t] && !strcmp(jobs[i].env[t], ref[i % 2][t]), "job %d turn %d", i, t);
            free(jobs[i].env[t]);
        }
    }
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 3; t++) free(ref[k][t]);
    needle_model_close(m[0]);
    needle_model_close(m[1]);
}

static void test_open_errors(void)
{
    needle_model *m = NULL;
    needle_error err = {0};
    CHECK(needle_model_open("tests/golden/does-not-exist.cact", NULL, NULL, &m, &err) == NEEDLE_EIO && !m);
    CHECK(strstr(err.message, "does-not-exist") != NULL);
    char junk[300];
    memset(junk, 0x5A, sizeof junk);
    CHECK(needle_model_open_memory(junk, sizeof junk, NULL, &m, &err) == NEEDLE_EFORMAT && !m);
    CHECK(needle_model_open_memory(NULL, 0, NULL, &m, &err) == NEEDLE_EINVAL && !m);
    needle_model_options bad = {.kv_window = -3};
    CHECK(needle_model_open(MODEL, NULL, &bad, &m, &err) == NEEDLE_EINVAL && !m);
    CHECK(needle_session_open(NULL, NULL, NULL, &err) == NEEDLE_EINVAL);
    /* every code is distinct and named */
    int codes[] = {NEEDLE_EJSON, NEEDLE_ESCHEMA, NEEDLE_EUTF8, NEEDLE_ETOOSMALL, NEEDLE_ESTATE, NEEDLE_ELIMIT};
    for (int i = 0; i < 6; i++) {
        CHECK(codes[i] < 0);
        for (int k = 0; k < i; k++) CHECK(codes[i] != codes[k]);
        CHECK(strncmp(needle_strerror(codes[i]), "NEEDLE_E", 8) == 0);
    }
}

/* A full-precision checkpoint needs a SentencePiece tokenizer beside it. */
static void test_checkpoint_with_tokenizer(void)
{
    needle_model_options mo = {.threads = 1};
    needle_model *m = NULL;
    needle_error err = {0};
    CHECK(needle_model_open("tests/golden/tiny.safetensors", NULL, &mo, &m, &err) == NEEDLE_EINVAL && !m);
    CHECK(strstr(err.message, "tokenizer") != NULL);
    CHECKF(needle_model_open("tests/golden/tiny.safetensors", "tests/golden/tok8k.model", &mo, &m, &err) == 0, "%s",
           err.message);
    char *env[3] = {0};
    if (m) {
        CHECK(conversation(m, env) == 0);
        CHECK(env[0] && strstr(env[0], "\"success\":true"));
    }
    for (int t = 0; t < 3; t++) free(env[t]);
    needle_model_close(m);
}

/* The released engine's interface: load, init, complete, reset, load again. */
static void test_compat_layer(void)
{
    char out[8192];
    setenv("NEEDLE_MODEL", "tests/golden/does-not-exist.cact", 1);
    CHECK(needle_complete("hi", 64, out, sizeof out) == NEEDLE_ESTATE); /* before init */
    CHECK(needle_init(NULL, TOOLS, NULL) < 0);                         /* no model anywhere */
    unsetenv("NEEDLE_MODEL");
    size_t n = 0;
    char *blob = read_all(MODEL, &n);
    CHECK(blob != NULL);
    if (!blob) return;
    CHECK(needle_load(blob, 17) < 0); /* a truncated file */
    CHECK(needle_load(blob, n) == 0);
    CHECK(needle_init("date: 2025-05-01", "[{\"name\":", NULL) == NEEDLE_EJSON);
    CHECK(needle_init("date: 2025-05-01", "[{\"name\":\"x\",\"parameters\":{\"anyOf\":7}}]", NULL) ==
          NEEDLE_ESCHEMA);
    CHECK(needle_init("date: 2025-05-01", TOOLS, NULL) == 0);
    int len = needle_complete("turn on the kitchen lights", 400, out, sizeof out);
    CHECKF(len > 0 && (size_t)len == strlen(out), "len %d", len);
    CHECK(strncmp(out, "{\"type\":", 8) == 0 && out[len - 1] == '}');
    char *first = strip_timing(out);
    CHECK(needle_complete("caf\xC3", 400, out, sizeof out) == NEEDLE_EUTF8);
    char tiny[16];
    CHECK(needle_complete("hall lights off", 400, tiny, sizeof tiny) == NEEDLE_ETOOSMALL && tiny[0] == '\0');
    CHECK(needle_complete("x", 400, NULL, 0) == NEEDLE_EINVAL);
    needle_reset();
    len = needle_complete("turn on the kitchen lights", 400, out, sizeof out);
    CHECK(len > 0);
    char *again = strip_timing(out);
    CHECK(!strcmp(first, again)); /* reset: the same first turn again */
    free(first);
    free(again);
    /* a second load replaces the first; init opens a session on it */
    CHECK(needle_load(blob, n) == 0);
    CHECK(needle_complete("hi", 64, out, sizeof out) == NEEDLE_ESTATE);
    CHECK(needle_init(NULL, NULL, NULL) == 0);
    CHECK(needle_complete("hi", 400, out, sizeof out) > 0 && strstr(out, "\"type\":\"respond\""));
    free(blob);
}

/* Embeddings through the public API: the bundled model's contrastive head
 * gives unit vectors, the same text the same bits, other texts other vectors,
 * and a wrong width is refused. */
static void test_embed(void)
{
    needle_model *m = NULL;
    needle_error err;
    CHECKF(needle_model_open("models/needle-default.cact", NULL, NULL, &m, &err) == 0, "%s", err.message);
    if (!m) return;
    int dim = needle_model_embed_dim(m);
    CHECK(dim > 0);
    float *a = calloc((size_t)dim, sizeof(float)), *b = calloc((size_t)dim, sizeof(float)),
          *c = calloc((size_t)dim, sizeof(float));
    CHECKF(needle_model_embed(m, "turn off the kitchen lights", a, dim, &err) == 0, "%s", err.message);
    CHECK(needle_model_embed(m, "turn off the kitchen lights", b, dim, &err) == 0);
    CHECK(needle_model_embed(m, "what is the weather in Lagos", c, dim, &err) == 0);
    double norm = 0, diff = 0;
    for (int i = 0; i < dim; i++) norm += (double)a[i] * a[i], diff += fabs((double)a[i] - c[i]);
    CHECKF(fabs(norm - 1.0) < 1e-4, "norm^2 %g", norm);
    CHECK(memcmp(a, b, sizeof(float) * (size_t)dim) == 0);
    CHECK(diff > 1e-3);
    CHECK(needle_model_embed(m, "x", a, dim + 1, &err) == NEEDLE_EINVAL && strstr(err.message, "embed"));
    CHECK(needle_model_embed(m, NULL, a, dim, &err) == NEEDLE_EINVAL);
    free(a);
    free(b);
    free(c);
    needle_model_close(m);
}

int main(void)
{
    /* the compatibility layer has no options: keep its model on one thread,
     * spinning workers only slow a busy test machine down */
    setenv("NEEDLE_THREADS", "1", 1);
    RUN(test_open_errors);
    RUN(test_file_and_memory_agree);
    RUN(test_many_sessions_threads);
    RUN(test_checkpoint_with_tokenizer);
    RUN(test_compat_layer);
    RUN(test_embed);
    return check_summary();
}
