/* test_tokenizer.c - the SentencePiece reader, the .cact tokenizer blob, and
 * encode/decode against the SentencePiece library's own answers
 * (tests/golden/tokenizer_cases.json, and a few cases below that were read
 * off the real library by hand). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/buf.h"
#include "core/file.h"
#include "core/json.h"
#include "core/utf8.h"
#include "model/cact/cact.h"
#include "io/spm_model.h"
#include "text/tokenizer.h"

#define MODEL "tests/golden/tok8k.model"
#define CASES "tests/golden/tokenizer_cases.json"
#define CACT "tests/golden/tiny_w4.cact"

static nd_tokenizer *load_model(void)
{
    needle_error err = {0};
    nd_tokenizer *t = NULL;
    int rc = nd_tokenizer_load_spm(MODEL, &t, &err);
    CHECKF(rc == 0, "%s", err.message);
    return t;
}

/* Encode text and compare with the expected ids. */
static int encodes_to(nd_tokenizer *t, const char *text, size_t len, const int *want, size_t nwant)
{
    nd_ids ids;
    nd_ids_init(&ids);
    needle_error err = {0};
    int rc = nd_tokenizer_encode(t, text, len, &ids, &err);
    int ok = rc == 0 && ids.len == nwant && (nwant == 0 || memcmp(ids.data, want, nwant * sizeof(int)) == 0);
    if (!ok) {
        fprintf(stderr, "  encode(\"%.60s\") rc=%d got %zu ids:", text, rc, ids.len);
        for (size_t i = 0; i < ids.len && i < 24; i++) fprintf(stderr, " %d", ids.data[i]);
        fprintf(stderr, "\n");
    }
    nd_ids_free(&ids);
    return ok;
}

static int decodes_to(nd_tokenizer *t, const int *ids, size_t n, const char *want)
{
    nd_buf b;
    nd_buf_init(&b);
    needle_error err = {0};
    int rc = nd_tokenizer_decode(t, ids, n, &b, &err);
    int ok = rc == 0 && b.len == strlen(want) && memcmp(b.data ? b.data : "", want, b.len) == 0;
    if (!ok) fprintf(stderr, "  decode rc=%d got \"%s\" want \"%s\"\n", rc, b.data ? b.data : "", want);
    nd_buf_free(&b);
    return ok;
}

#define ENC(t, s, ...)                                                                  \
    do {                                                                                \
        static const int want_[] = {__VA_ARGS__};                                       \
        CHECK(encodes_to(t, s, sizeof(s) - 1, want_, sizeof want_ / sizeof want_[0])); \
    } while (0)
#define DEC(t, want, ...)                                                               \
    do {                                                                                \
        static const int ids_[] = {__VA_ARGS__};                                        \
        CHECK(decodes_to(t, ids_, sizeof ids_ / sizeof ids_[0], want));                 \
    } while (0)

static void test_spm_reader(void)
{
    nd_vocab v;
    needle_error err = {0};
    int rc = nd_vocab_load_spm_file(MODEL, &v, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    CHECK(v.n_pieces == 8192);
    CHECK(v.pad_id == 0 && v.eos_id == 1 && v.bos_id == 2 && v.unk_id == 3);
    CHECK(v.add_dummy_prefix == 1 && v.byte_fallback == 1);
    CHECK(v.types[0] == ND_PIECE_CONTROL && v.types[1] == ND_PIECE_CONTROL && v.types[2] == ND_PIECE_CONTROL);
    CHECK(v.types[3] == ND_PIECE_UNKNOWN);
    int markers = 0;
    for (int i = 0; i < v.n_pieces; i++) markers += v.types[i] == ND_PIECE_MARKER;
    CHECKF(markers == 10, "markers=%d", markers);
    for (int i = 4; i < 14; i++) CHECK(v.types[i] == ND_PIECE_MARKER);
    CHECK(strcmp(v.pieces[4], "<|im_start|>") == 0 && strcmp(v.pieces[13], "</tool_result>") == 0);
    CHECK(v.types[14] == ND_PIECE_BYTE && strcmp(v.pieces[14], "<0x00>") == 0);
    CHECK(v.types[269] == ND_PIECE_BYTE && strcmp(v.pieces[269], "<0xFF>") == 0);
    CHECK(v.types[270] == ND_PIECE_NORMAL && strcmp(v.pieces[270], "\xe2\x96\x81\xe2\x96\x81") == 0);
    CHECK(v.scores[271] == -1.0f); /* "de" */
    nd_vocab_free(&v);
}

/* The reference exporter's tokenizer blob (last record of a golden .cact)
 * must be byte-identical to ours, and must parse back to the same vocabulary. */
static void test_blob_matches_reference(void)
{
    nd_vocab v, w;
    needle_error err = {0};
    if (nd_vocab_load_spm_file(MODEL, &v, &err)) {
        CHECKF(0, "%s", err.message);
        return;
    }
    uint8_t *blob = NULL;
    size_t size = 0;
    int rc = nd_vocab_to_blob(&v, &blob, &size, &err);
    CHECKF(rc == 0, "%s", err.message);

    nd_cact_file f;
    rc = nd_cact_open(CACT, &f, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc == 0) {
        const nd_cact_record *r = &f.records[f.hdr.num_tensors - 1];
        CHECK(r->dtype == ND_CACT_RAW);
        CHECKF(r->nbytes == size, "reference blob %llu bytes, ours %zu", (unsigned long long)r->nbytes, size);
        CHECK(r->nbytes == size && memcmp(f.data + r->offset, blob, size) == 0);
        nd_cact_close(&f);
    }

    rc = nd_vocab_from_blob(blob, size, "blob", &w, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc == 0) {
        CHECK(w.n_pieces == v.n_pieces && w.pad_id == v.pad_id && w.eos_id == v.eos_id && w.bos_id == v.bos_id &&
              w.unk_id == v.unk_id && w.add_dummy_prefix == v.add_dummy_prefix && w.byte_fallback == v.byte_fallback);
        int same = 1;
        for (int i = 0; i < v.n_pieces && same; i++)
            same = v.piece_lens[i] == w.piece_lens[i] && memcmp(v.pieces[i], w.pieces[i], (size_t)v.piece_lens[i]) == 0 &&
                   memcmp(&v.scores[i], &w.scores[i], 4) == 0 && v.types[i] == w.types[i];
        CHECK(same);
        nd_vocab_free(&w);
    }
    /* Every truncation of the blob is an error, never a crash. */
    int all_fail = 1;
    for (size_t cut = 0; cut < size; cut += (cut < 4096 ? 1 : 997)) {
        nd_vocab x;
        if (nd_vocab_from_blob(blob, cut, "cut", &x, &err) == 0) {
            all_fail = 0;
            nd_vocab_free(&x);
        }
    }
    CHECK(all_fail);
    free(blob);
    nd_vocab_free(&v);
}

static void test_truncated_model_fails_cleanly(void)
{
    nd_mapping m;
    needle_error err = {0};
    if (nd_map_file(MODEL, &m, &err)) {
        CHECKF(0, "%s", err.message);
        return;
    }
    int all_fail = 1;
    for (size_t cut = 0; cut < m.size; cut += (cut < 2048 ? 1 : 1013)) {
        nd_vocab v;
        int rc = nd_vocab_from_spm(m.data, cut, "cut", &v, &err);
        if (rc == 0) {
            /* A cut exactly between pieces is a valid (shorter) model only if
             * the specs came first; SentencePiece writes pieces first, so any
             * cut drops the trainer spec and fails the BPE check. */
            all_fail = 0;
            nd_vocab_free(&v);
        } else {
            CHECK(err.message[0] != '\0');
        }
    }
    CHECK(all_fail);
    nd_unmap_file(&m);
}

/* The 428 answers of the SentencePiece library, from both vocab sources;
 * and decode(encode(x)) == x. */
static void run_golden(nd_tokenizer *t, const char *label)
{
    char *text = NULL;
    size_t len = 0;
    needle_error err = {0};
    if (nd_read_file(CASES, &text, &len, &err)) {
        CHECKF(0, "%s", err.message);
        return;
    }
    nd_json *root = NULL;
    int rc = nd_json_parse(text, len, CASES, &root, &err);
    CHECKF(rc == 0, "%s", err.message);
    free(text);
    if (rc) return;
    const nd_json *cases = nd_json_get(root, "cases");
    CHECK(cases && cases->type == ND_JSON_ARRAY && cases->count == 428);
    int mismatches = 0, roundtrip_bad = 0;
    nd_ids ids;
    nd_ids_init(&ids);
    nd_buf b;
    nd_buf_init(&b);
    for (size_t c = 0; cases && c < cases->count; c++) {
        const nd_json *tx = nd_json_get(&cases->items[c], "text"), *want = nd_json_get(&cases->items[c], "ids");
        if (!tx || !want || tx->type != ND_JSON_STRING || want->type != ND_JSON_ARRAY) {
            mismatches++;
            continue;
        }
        ids.len = 0;
        rc = nd_tokenizer_encode(t, tx->str, tx->len, &ids, &err);
        int ok = rc == 0 && ids.len == want->count;
        for (size_t i = 0; ok && i < ids.len; i++) ok = ids.data[i] == (int)want->items[i].num;
        if (!ok) {
            if (mismatches < 5) fprintf(stderr, "  %s: case %zu \"%.60s\" differs\n", label, c, tx->str);
            mismatches++;
        }
        nd_buf_reset(&b);
        rc = nd_tokenizer_decode(t, ids.data, ids.len, &b, &err);
        if (rc || b.len != tx->len || memcmp(b.data ? b.data : "", tx->str, tx->len) != 0) {
            if (roundtrip_bad < 5) fprintf(stderr, "  %s: case %zu does not round-trip\n", label, c);
            roundtrip_bad++;
        }
    }
    CHECKF(mismatches == 0, "%s: %d of 428 cases differ from SentencePiece", label, mismatches);
    CHECKF(roundtrip_bad == 0, "%s: %d cases do not round-trip", label, roundtrip_bad);
    nd_ids_free(&ids);
    nd_buf_free(&b);
    nd_json_free(root);
}

static void test_golden_cases_from_model(void)
{
    nd_tokenizer *t = load_model();
    if (!t) return;
    run_golden(t, "model");
    nd_tokenizer_free(t);
}

static void test_golden_cases_from_cact_blob(void)
{
    nd_cact_file f;
    needle_error err = {0};
    int rc = nd_cact_open(CACT, &f, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    const nd_cact_record *r = &f.records[f.hdr.num_tensors - 1];
    nd_vocab v;
    rc = nd_vocab_from_blob(f.data + r->offset, (size_t)r->nbytes, CACT, &v, &err);
    CHECKF(rc == 0, "%s", err.message);
    nd_cact_close(&f);
    if (rc) return;
    nd_tokenizer *t = NULL;
    rc = nd_tokenizer_create(&v, &t, &err);
    nd_vocab_free(&v); /* the tokenizer must not depend on the vocab afterwards */
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    run_golden(t, "cact blob");
    nd_tokenizer_free(t);
}

/* Answers read off the SentencePiece library (0.2.x) for tok8k.model. */
static void test_library_edge_cases(void)
{
    nd_tokenizer *t = load_model();
    if (!t) return;
    CHECK(encodes_to(t, "", 0, NULL, 0));
    ENC(t, " ", 270);
    ENC(t, "hello  world", 1286, 7796, 270, 5228);
    ENC(t, "<|im_start|>user\nhi", 8071, 4, 893, 24, 2189); /* a lone U+2581 before a leading marker */
    ENC(t, "a<|im_end|>b", 295, 5, 8088);                   /* no U+2581 inserted after a marker */
    ENC(t, "a<|im_end|> b", 295, 5, 340);
    ENC(t, "a <|im_end|>", 295, 8071, 5);
    ENC(t, "<<|im_end|>>", 419, 5, 8140);
    ENC(t, "<|im_end|", 419, 8157, 546, 8097, 624, 8157);   /* an incomplete marker is text */
    ENC(t, "\xf0\x9f\x98\x80", 8071, 254, 173, 166, 142);    /* 4-byte character by byte fallback */
    ENC(t, "\r\n", 8071, 27, 24);
    ENC(t, "x ", 1813, 8071);
    ENC(t, "\xe2\x96\x81", 270); /* a literal U+2581 is a space to SentencePiece */
    ENC(t, "<s>", 419, 8076, 8140); /* control piece texts are plain text */
    CHECK(encodes_to(t, "a\0b", 3, (const int[]){295, 14, 8088}, 3));
    nd_tokenizer_free(t);
}

static void test_decode_rules(void)
{
    nd_tokenizer *t = load_model();
    if (!t) return;
    DEC(t, "a", 2, 295);          /* BOS vanishes; the dummy-prefix space is dropped */
    DEC(t, " ", 8071, 8071);
    DEC(t, "\n a", 24, 295);      /* only the FIRST visible piece loses its space */
    DEC(t, "<|im_end|> a", 5, 295);
    DEC(t, " a", 2, 8071, 295);
    DEC(t, "<|im_start|> ", 4, 8071);
    DEC(t, "", 0, 1, 2);
    DEC(t, "", 3);                /* SPEC 6: unknown pieces vanish */
    DEC(t, "a", 3, 295);
    nd_buf b;
    nd_buf_init(&b);
    needle_error err = {0};
    CHECK(nd_tokenizer_decode(t, (const int[]){295, 8192}, 2, &b, &err) == NEEDLE_EINVAL);
    CHECK(strstr(err.message, "position 1") != NULL);
    CHECK(nd_tokenizer_decode(t, (const int[]){-1}, 1, &b, &err) == NEEDLE_EINVAL);
    /* Streaming in pieces gives the same text as one call. */
    nd_buf_reset(&b);
    int at_start = 1;
    const int ids[] = {2, 1286, 7796, 270, 5228};
    for (int i = 0; i < 5; i++) CHECK(nd_tokenizer_decode_stream(t, ids + i, 1, &at_start, &b, &err) == 0);
    CHECK(b.data && strcmp(b.data, "hello  world") == 0);
    nd_buf_free(&b);
    nd_tokenizer_free(t);
}

static void test_token_bytes_and_lookup(void)
{
    nd_tokenizer *t = load_model();
    if (!t) return;
    int len = -1;
    const char *s = nd_tokenizer_token_bytes(t, 270, &len);
    CHECK(s && len == 2 && memcmp(s, "  ", 2) == 0 && nd_tokenizer_token_starts_with_space(t, 270));
    s = nd_tokenizer_token_bytes(t, 24, &len);
    CHECK(s && len == 1 && s[0] == '\n' && !nd_tokenizer_token_starts_with_space(t, 24));
    s = nd_tokenizer_token_bytes(t, 14, &len);
    CHECK(s && len == 1 && s[0] == '\0');
    s = nd_tokenizer_token_bytes(t, 4, &len);
    CHECK(s && len == 12 && memcmp(s, "<|im_start|>", 12) == 0);
    s = nd_tokenizer_token_bytes(t, 271, &len);
    CHECK(s && len == 2 && memcmp(s, "de", 2) == 0 && !nd_tokenizer_token_starts_with_space(t, 271));
    CHECK(nd_tokenizer_token_bytes(t, 1, &len) == NULL && len == 0);
    CHECK(nd_tokenizer_token_bytes(t, 3, &len) == NULL && len == 0);
    CHECK(nd_tokenizer_token_bytes(t, 99999, &len) == NULL);
    CHECK(nd_tokenizer_piece_id(t, "<tools>", 7) == 8);
    CHECK(nd_tokenizer_piece_id(t, "de", 2) == 271);
    CHECK(nd_tokenizer_piece_id(t, "no such piece", 13) == -1);
    s = nd_tokenizer_piece(t, 269, &len);
    CHECK(s && len == 6 && strcmp(s, "<0xFF>") == 0);
    CHECK(nd_tokenizer_size(t) == 8192 && nd_tokenizer_bos(t) == 2 && nd_tokenizer_eos(t) == 1 &&
          nd_tokenizer_pad(t) == 0 && nd_tokenizer_unk(t) == 3);
    CHECK(nd_tokenizer_type(t, 5) == ND_PIECE_MARKER && nd_tokenizer_type(t, -3) == -1);
    nd_tokenizer_free(t);
}

static void test_invalid_utf8_is_an_error(void)
{
    nd_tokenizer *t = load_model();
    if (!t) return;
    static const char *bad[] = {"\xff", "ok\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ab\xe2\x96", "\x80x",
                                "\xf8\x88\x80\x80\x80"};
    nd_ids ids;
    nd_ids_init(&ids);
    nd_ids_push(&ids, 42);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        needle_error err = {0};
        int rc = nd_tokenizer_encode(t, bad[i], strlen(bad[i]), &ids, &err);
        CHECKF(rc == NEEDLE_EUTF8 && err.code == NEEDLE_EUTF8, "case %zu rc=%d", i, rc);
        CHECK(strstr(err.message, "byte") != NULL);
        CHECK(ids.len == 1 && ids.data[0] == 42); /* output untouched */
    }
    CHECK(nd_utf8_first_invalid("ok\xc0\x80", 4) == 2);
    CHECK(nd_utf8_first_invalid("\xf0\x9f\x98\x80", 4) == 4);
    CHECK(nd_utf8_first_invalid("\xef\xbf\xbf", 3) == 3);
    nd_ids_free(&ids);
    nd_tokenizer_free(t);
}

static void test_encode_into(void)
{
    nd_tokenizer *t = load_model();
    if (!t) return;
    int ids[4], n = 0;
    needle_error err = {0};
    CHECK(nd_tokenizer_encode_into(t, "hello  world", 12, ids, 2, &n, &err) == NEEDLE_ETOOSMALL && n == 4);
    CHECK(nd_tokenizer_encode_into(t, "hello  world", 12, ids, 4, &n, &err) == 0 && n == 4);
    CHECK(ids[0] == 1286 && ids[1] == 7796 && ids[2] == 270 && ids[3] == 5228);
    nd_tokenizer_free(t);
}

/* A hand-made vocabulary: the merge order rules, worked out on paper. */
static void make_vocab(nd_vocab *v, const char *const *pieces, const float *scores, const uint8_t *types, int n,
                       int byte_fallback)
{
    memset(v, 0, sizeof *v);
    v->n_pieces = n;
    v->pieces = calloc((size_t)n, sizeof(char *));
    v->piece_lens = calloc((size_t)n, sizeof(int));
    v->scores = calloc((size_t)n, sizeof(float));
    v->types = calloc((size_t)n, 1);
    for (int i = 0; i < n; i++) {
        v->pieces[i] = strdup(pieces[i]);
        v->piece_lens[i] = (int)strlen(pieces[i]);
        v->scores[i] = scores[i];
        v->types[i] = types[i];
    }
    v->pad_id = -1, v->eos_id = -1, v->bos_id = -1, v->unk_id = 0;
    v->add_dummy_prefix = 1;
    v->byte_fallback = byte_fallback;
}

static void test_merge_order_synthetic(void)
{
    /* ids: 0 <unk>, 1 U+2581, 2 a, 3 b, 4 ab (score -1), 5 ba (score -1), 6 U+2581ab (-5), 7 bab (-0.5) */
    static const char *const pieces[] = {"<unk>", "\xe2\x96\x81", "a", "b", "ab", "ba", "\342\226\201ab", "bab"};
    static const float scores[] = {0, -10, -10, -10, -1, -1, -5, -0.5f};
    static const uint8_t types[] = {ND_PIECE_UNKNOWN, 0, 0, 0, 0, 0, 0, 0};
    nd_vocab v;
    make_vocab(&v, pieces, scores, types, 8, 0);
    nd_tokenizer *t = NULL;
    needle_error err = {0};
    CHECKF(nd_tokenizer_create(&v, &t, &err) == 0, "%s", err.message);
    if (t) {
        /* "▁aba": ab (left 1) and ba (left 2) tie at -1: leftmost wins -> ▁ ab a;
         * then ▁ab (-5) forms: [6, 2]. */
        ENC(t, "aba", 6, 2);
        /* "▁bab": symbols ▁ b a b; "ba" (1,2) and "ab" (2,3) tie at -1, the
         * leftmost wins -> ▁ ba b; then "bab" = ba+b (-0.5) forms: [1, 7]. */
        ENC(t, "bab", 1, 7);
        /* Unknown characters without byte fallback: a run folds into one <unk>. */
        ENC(t, "xyz", 1, 0);
        ENC(t, "axyb", 1, 2, 0, 3);
        nd_tokenizer_free(t);
    }
    nd_vocab_free(&v);

    /* Duplicate pieces are refused. */
    static const char *const dup[] = {"<unk>", "a", "a"};
    static const float z[] = {0, 0, 0};
    static const uint8_t ty[] = {ND_PIECE_UNKNOWN, 0, 0};
    make_vocab(&v, dup, z, ty, 3, 0);
    t = NULL;
    CHECK(nd_tokenizer_create(&v, &t, &err) == NEEDLE_EFORMAT && t == NULL);
    nd_vocab_free(&v);
}

int main(void)
{
    RUN(test_spm_reader);
    RUN(test_blob_matches_reference);
    RUN(test_truncated_model_fails_cleanly);
    RUN(test_golden_cases_from_model);
    RUN(test_golden_cases_from_cact_blob);
    RUN(test_library_edge_cases);
    RUN(test_decode_rules);
    RUN(test_token_bytes_and_lookup);
    RUN(test_invalid_utf8_is_an_error);
    RUN(test_encode_into);
    RUN(test_merge_order_synthetic);
    return check_summary();
}
