/* test_tool_index.c - the persistent tool-embedding index.
 *
 * The file format (round trip, and refusal of every truncation, bit flip,
 * bad header field and non-finite value without crashing), and the session's
 * use of it: a matching file loads without running the model (0 tools
 * embedded, the same embeddings), a changed schema re-embeds exactly that
 * tool, a corrupt / truncated / foreign file is rebuilt with a warning, an
 * unwritable path is only a warning, and needle_init honours the path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/retrieval.h"
#include "agent/session.h"
#include "agent/tool_index.h"
#include "check.h"
#include "tool_catalogue.h"
#include "core/json.h"
#include "needle.h"

#define MODEL "tests/golden/tiny_w4.cact"
#define OTHER "tests/golden/tiny_mixed.cact"
/* 12 tools: over the 5 a session shows without retrieval, so every session embeds its catalogue;
 * the index's properties do not depend on the count, and each embedding is a forward pass (this
 * test embeds the catalogue about ten times), so a small one keeps it cheap under qemu-aarch64. */
#define N_CATALOGUE 12
#define CHANGED 7 /* the tool whose schema the re-embedding check edits */

static char dir[] = "/tmp/needle_toolindex_XXXXXX";
static char *catalogue;

static void path_in_dir(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static uint8_t *read_bytes(const char *path, size_t *n)
{
    char *text = NULL;
    needle_error err = {0};
    if (nd_read_file(path, &text, n, &err) != 0) return NULL;
    return (uint8_t *)text;
}

/* ------------------------------------------------------------------ the format */

static void test_round_trip(void)
{
    nd_tool_index ix;
    nd_tool_index_init(&ix, 0x1234567890abcdefull, 3);
    float a[3] = {1, -2, 0.5f}, b[3] = {0, 0, 1e-30f};
    needle_error err = {0};
    CHECK(nd_tool_index_add(&ix, 7, a, &err) == 0);
    CHECK(nd_tool_index_add(&ix, 99, b, &err) == 0);
    char path[256];
    path_in_dir(path, sizeof path, "rt.idx");
    CHECKF(nd_tool_index_write(path, &ix, &err) == 0, "%s", err.message);
    size_t n = 0;
    uint8_t *bytes = read_bytes(path, &n);
    CHECKF(n == 32 + 2 * (8 + 12) + 8, "size %zu", n);
    CHECK(bytes && !memcmp(bytes, "NDTOOLIX", 8));
    nd_tool_index got;
    CHECKF(nd_tool_index_read(path, &got, &err) == 0, "%s", err.message);
    CHECK(got.model_fp == 0x1234567890abcdefull && got.dim == 3 && got.n == 2);
    const float *e = nd_tool_index_find(&got, 99);
    CHECK(e && e[2] == 1e-30f && e[0] == 0);
    CHECK(nd_tool_index_find(&got, 8) == NULL);
    nd_tool_index_free(&got);
    nd_tool_index_free(&ix);
    free(bytes);
}

/* Every prefix, every single-bit flip and bad header fields are refused. */
static void test_damaged_files_refused(void)
{
    nd_tool_index ix;
    nd_tool_index_init(&ix, 42, 4);
    float a[4] = {1, 2, 3, 4};
    needle_error err = {0};
    for (int i = 0; i < 3; i++) nd_tool_index_add(&ix, (uint64_t)i, a, &err);
    char path[256];
    path_in_dir(path, sizeof path, "dmg.idx");
    CHECK(nd_tool_index_write(path, &ix, &err) == 0);
    nd_tool_index_free(&ix);
    size_t n = 0;
    uint8_t *good = read_bytes(path, &n);
    if (!good) return;
    nd_tool_index got;
    CHECK(nd_tool_index_parse(good, n, "good", &got, &err) == 0);
    nd_tool_index_free(&got);
    int accepted = 0;
    for (size_t len = 0; len < n; len++) {
        if (nd_tool_index_parse(good, len, "cut", &got, &err) == 0) {
            accepted++;
            nd_tool_index_free(&got);
        } else {
            CHECK(err.code == NEEDLE_EFORMAT);
        }
    }
    CHECKF(accepted == 0, "%d truncations accepted", accepted);
    uint8_t *bad = malloc(n + 16);
    for (size_t byte = 0; byte < n; byte++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, good, n);
            bad[byte] ^= (uint8_t)(1u << bit);
            if (nd_tool_index_parse(bad, n, "flip", &got, &err) == 0) {
                accepted++;
                nd_tool_index_free(&got);
            }
        }
    CHECKF(accepted == 0, "%d bit flips accepted", accepted);
    /* an extended file */
    memcpy(bad, good, n);
    memset(bad + n, 0, 16);
    CHECK(nd_tool_index_parse(bad, n + 16, "long", &got, &err) == NEEDLE_EFORMAT);
    CHECK(strstr(err.message, "long:") == err.message);
    free(bad);
    free(good);
}

/* A well-formed file with a NaN inside (valid checksum) is refused too. */
static void test_non_finite_refused(void)
{
    nd_tool_index ix;
    nd_tool_index_init(&ix, 1, 2);
    float a[2] = {NAN, 1};
    needle_error err = {0};
    CHECK(nd_tool_index_add(&ix, 5, a, &err) == 0);
    char path[256];
    path_in_dir(path, sizeof path, "nan.idx");
    CHECK(nd_tool_index_write(path, &ix, &err) == 0);
    nd_tool_index_free(&ix);
    nd_tool_index got;
    CHECK(nd_tool_index_read(path, &got, &err) == NEEDLE_EFORMAT);
    CHECKF(strstr(err.message, "non-finite") != NULL, "%s", err.message);
}

/* ------------------------------------------------------------------ sessions */

static needle_model *open_model(const char *path)
{
    needle_model_options mo = {.threads = 1};
    needle_model *m = NULL;
    needle_error err = {0};
    CHECKF(needle_model_open(path, NULL, &mo, &m, &err) == 0, "%s", err.message);
    return m;
}

static needle_session *open_session(needle_model *m, const char *tools, const char *index)
{
    needle_session_options so = {.tools_json = tools, .tool_index_path = index, .max_new_tokens = 400};
    needle_session *s = NULL;
    needle_error err = {0};
    CHECKF(needle_session_open(m, &so, &s, &err) == 0, "%s", err.message);
    return s;
}

static int index_entries(const char *path)
{
    nd_tool_index got;
    needle_error err = {0};
    if (nd_tool_index_read(path, &got, &err) != 0) return -1;
    int n = got.n;
    nd_tool_index_free(&got);
    return n;
}

static void test_persist_reload_and_reembed(void)
{
    char path[256];
    path_in_dir(path, sizeof path, "tools.idx");
    unlink(path);
    needle_model *m = open_model(MODEL);
    if (!m) return;
    needle_session *s1 = open_session(m, catalogue, path);
    if (!s1) goto out;
    CHECK(s1->retr->embedded == N_CATALOGUE && s1->retr->index_written && !s1->retr->warning[0]);
    CHECK(index_entries(path) == N_CATALOGUE);
    struct stat st1, st2;
    CHECK(stat(path, &st1) == 0);

    /* a matching file: nothing embedded, nothing rewritten, the same vectors */
    needle_session *s2 = open_session(m, catalogue, path);
    if (s2) {
        CHECKF(s2->retr->embedded == 0, "embedded %d", s2->retr->embedded);
        CHECK(!s2->retr->index_written && !s2->retr->warning[0]);
        CHECK(!memcmp(s1->retr->emb, s2->retr->emb, sizeof(float) * N_CATALOGUE * (size_t)s1->retr->dim));
        /* and the same answer */
        char *e1 = NULL, *e2 = NULL;
        needle_error err = {0};
        CHECK(needle_session_send(s1, "turn off the hallway light", &e1, &err) == 0);
        CHECK(needle_session_send(s2, "turn off the hallway light", &e2, &err) == 0);
        CHECK(e1 && e2 && !memcmp(s1->selected, s2->selected, sizeof s1->selected));
        free(e1);
        free(e2);
        needle_session_close(s2);
    }
    CHECK(stat(path, &st2) == 0 && st2.st_mtime == st1.st_mtime && st2.st_size == st1.st_size);

    /* one schema changed: only it is embedded again; the old entry stays for the old tool set */
    char *changed = tool_catalogue_load(N_CATALOGUE, CHANGED);
    CHECK(changed != NULL);
    needle_session *s3 = changed ? open_session(m, changed, path) : NULL;
    if (s3) {
        CHECKF(s3->retr->embedded == 1, "embedded %d", s3->retr->embedded);
        CHECK(index_entries(path) == N_CATALOGUE + 1);
        for (int i = 0; i < N_CATALOGUE; i++) {
            int same = !memcmp(s1->retr->emb + (size_t)i * s1->retr->dim, s3->retr->emb + (size_t)i * s3->retr->dim,
                               sizeof(float) * (size_t)s1->retr->dim);
            CHECKF(same == (i != CHANGED), "tool %d same=%d", i, same);
        }
        needle_session_close(s3);
    }
    /* and back to the original set: everything is in the file */
    needle_session *s4 = open_session(m, catalogue, path);
    if (s4) CHECK(s4->retr->embedded == 0);
    needle_session_close(s4);
    free(changed);
    needle_session_close(s1);
out:
    needle_model_close(m);
}

static void expect_rebuilt(needle_model *m, const char *path, const char *why)
{
    needle_session *s = open_session(m, catalogue, path);
    if (!s) return;
    CHECKF(s->retr->embedded == N_CATALOGUE, "%s: embedded %d", why, s->retr->embedded);
    CHECKF(s->retr->warning[0] && strstr(s->retr->warning, "rebuilt"), "%s: warning '%s'", why, s->retr->warning);
    CHECKF(s->retr->index_written && index_entries(path) == N_CATALOGUE, "%s: not rewritten", why);
    char *env = NULL;
    needle_error err = {0};
    CHECKF(needle_session_send(s, "what's on my calendar", &env, &err) == 0, "%s", err.message);
    free(env);
    needle_session_close(s);
}

static void test_corrupt_truncated_foreign_rebuilt(void)
{
    char path[256];
    path_in_dir(path, sizeof path, "bad.idx");
    needle_model *m = open_model(MODEL);
    if (!m) return;
    unlink(path);
    needle_session_close(open_session(m, catalogue, path));
    size_t n = 0;
    uint8_t *good = read_bytes(path, &n);
    CHECK(good && n > 100);
    if (!good) goto out;

    write_bytes(path, "this is not an index at all, just some text\n", 44);
    expect_rebuilt(m, path, "garbage");
    write_bytes(path, good, n / 2);
    expect_rebuilt(m, path, "truncated");
    write_bytes(path, good, 0);
    expect_rebuilt(m, path, "empty");
    good[n / 3] ^= 0x10;
    write_bytes(path, good, n);
    expect_rebuilt(m, path, "flipped");

    /* an index written for another model (same width, other weights) */
    needle_model *other = open_model(OTHER);
    if (other) {
        CHECK(nd_retrieval_model_fingerprint(other->net, other->tok) != nd_retrieval_model_fingerprint(m->net, m->tok));
        unlink(path);
        needle_session_close(open_session(other, catalogue, path));
        needle_session *s = open_session(m, catalogue, path);
        if (s) {
            CHECKF(strstr(s->retr->warning, "another model") != NULL, "'%s'", s->retr->warning);
            CHECK(s->retr->embedded == N_CATALOGUE);
            needle_session_close(s);
        }
        needle_model_close(other);
    }
out:
    free(good);
    needle_model_close(m);
}

static void test_fingerprint_stable(void)
{
    needle_model *a = open_model(MODEL), *b = open_model(MODEL);
    if (a && b) CHECK(nd_retrieval_model_fingerprint(a->net, a->tok) == nd_retrieval_model_fingerprint(b->net, b->tok));
    needle_model_close(a);
    needle_model_close(b);
}

static void test_unwritable_index_is_a_warning(void)
{
    needle_model *m = open_model(MODEL);
    if (!m) return;
    char path[256];
    path_in_dir(path, sizeof path, "no/such/dir/tools.idx");
    needle_session *s = open_session(m, catalogue, path);
    if (s) {
        CHECK(s->retr->embedded == N_CATALOGUE && !s->retr->index_written);
        CHECKF(strstr(s->retr->warning, "not saved") != NULL, "'%s'", s->retr->warning);
        needle_session_close(s);
    }
    needle_model_close(m);
}

/* The released interface: needle_init's third argument. */
static void test_needle_init_uses_the_index(void)
{
    size_t n = 0;
    uint8_t *blob = read_bytes(MODEL, &n);
    CHECK(blob != NULL);
    if (!blob) return;
    char path[256];
    path_in_dir(path, sizeof path, "compat.idx");
    unlink(path);
    CHECK(needle_load((const char *)blob, n) == 0);
    CHECK(needle_init(NULL, catalogue, path) == 0);
    CHECK(index_entries(path) == N_CATALOGUE);
    char out[8192];
    CHECK(needle_complete("set a timer for ten minutes", 0, out, sizeof out) > 0);
    CHECK(needle_init(NULL, catalogue, path) == 0);
    free(blob);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    catalogue = tool_catalogue_load(N_CATALOGUE, -1);
    if (!catalogue) {
        fprintf(stderr, "  FAIL: could not write the tool catalogue with tools/gen_data.py\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_round_trip);
    RUN(test_damaged_files_refused);
    RUN(test_non_finite_refused);
    RUN(test_persist_reload_and_reembed);
    RUN(test_corrupt_truncated_foreign_rebuilt);
    RUN(test_fingerprint_stable);
    RUN(test_unwritable_index_is_a_warning);
    RUN(test_needle_init_uses_the_index);
    free(catalogue);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
