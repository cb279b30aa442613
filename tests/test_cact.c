/* test_cact.c - the .cact reader and writer against the reference exporter's
 * golden files (tests/golden/tiny_w4.cact, tiny_mixed.cact), round trips at
 * every width, and malformed files. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "core/file.h"
#include "core/fp16.h"
#include "model/cact/cact.h"
#include "io/spm_model.h"
#include "model/weights.h"
#include "quant/cq.h"

#define GOLDEN_W4 "tests/golden/tiny_w4.cact"
#define GOLDEN_MIXED "tests/golden/tiny_mixed.cact"
#define GOLDEN_F32 "tests/golden/tiny.safetensors"
#define GOLDEN_TOK "tests/golden/tok8k.model"
#define MIXED_MAP "default=4,embedding=3,attn.q_proj=2,attn.out_proj=1.58,engram0.tables=2"

static char tmp_dir[64];

static void make_tmp_path(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", tmp_dir, name); }

/* ---- reading the golden files ---- */

/* The header values the brief and SPEC state for the golden tiny model. */
static void check_tiny_header(const nd_cact_header *h)
{
    const uint32_t want[29] = {0x05E12A83, 83, 28, 512, 8, 8192, 128, 4, 2, 4, 32, 512, 128, 4, 1024,
                               64, 2, 4, 3, 2, 2, 3, 0, 0, 2, 1, 3, 0, 0};
    const uint32_t got[29] = {h->tag, h->num_tensors, h->codebook_len, h->kv_window, h->kv_bits, h->vocab, h->d_model,
                              h->num_heads, h->num_kv_heads, h->num_layers, h->head_dim, h->max_seq_len, h->hada_n,
                              h->mhc_lanes, h->engram_slots, h->engram_sub_dim, h->num_engram_tables, h->conv_taps,
                              h->conv_dilation, h->num_orders, h->orders[0], h->orders[1], h->orders[2], h->orders[3],
                              h->num_sites, h->sites[0], h->sites[1], h->sites[2], h->sites[3]};
    for (int i = 0; i < 29; i++) CHECKF(got[i] == want[i], "header u32 %d: %u != %u", i, got[i], want[i]);
    CHECK(h->rope_theta == 100000.0f);
}

static void test_parse_golden(void)
{
    const char *files[2] = {GOLDEN_W4, GOLDEN_MIXED};
    for (int k = 0; k < 2; k++) {
        nd_cact_file f;
        needle_error err;
        int rc = nd_cact_open(files[k], &f, &err);
        CHECKF(rc == 0, "%s", err.message);
        if (rc) continue;
        check_tiny_header(&f.hdr);
        CHECK(memcmp(f.codebooks, nd_cq_codebooks, sizeof f.codebooks) == 0);
        const nd_cact_record *r = f.records;
        CHECK(r[0].dtype == ND_CACT_CQ && r[0].shape[0] == 8192 && r[0].shape[1] == 128 && r[0].offset == 3904 &&
              r[0].group == 128);
        CHECK(r[0].bits == (k ? 3u : 4u));
        CHECK(r[10].dtype == ND_CACT_FP16 && r[10].ndim == 1 && r[10].shape[0] == 1); /* layer 0 attn_gate */
        CHECK(r[62].ndim == 3 && r[62].shape[2] == 4);                               /* b_res (L,n,n) */
        CHECK(r[65].shape[0] == 64 && r[65].shape[1] == 512);                        /* phi_res [L*n*n, n*d] */
        CHECK(r[66].shape[0] == 2048 && r[66].shape[1] == 64 && r[66].bits == (k ? 2u : 4u)); /* engram0.tables */
        CHECK(r[70].bits == 4);                                                       /* engram1.tables */
        CHECK(r[77].dtype == ND_CACT_FP16 && r[77].shape[0] == 128 && r[77].shape[1] == 512); /* contrastive proj */
        CHECK(r[82].dtype == ND_CACT_RAW && r[82].ndim == 0 && r[82].offset + r[82].nbytes == f.size);
        if (k) {
            CHECK(r[2].bits == 2 && r[8].bits == ND_CQ_TERNARY && r[3].bits == 4 && r[7].bits == 4);
            CHECK(r[8].nbytes == 4352);
        }
        /* every record matches the layout, tokenizer blob included */
        nd_config cfg;
        nd_cact_slot *slots = NULL;
        rc = nd_cact_resolve(&f, files[k], &cfg, &slots, &err);
        CHECKF(rc == 0, "%s", err.message);
        if (!rc) {
            CHECK(cfg.d_model == 128 && cfg.num_layers == 4 && cfg.kv_dim == 64 && cfg.num_tables == 2 &&
                  cfg.engram_sub == 64 && cfg.kv_window == 512);
            CHECK(slots[75].role == ND_SLOT_MANIFEST && slots[79].role == ND_P_HEAD_PROBES &&
                  slots[79].head_code == ND_HEAD_CONFIDENCE);
        }
        free(slots);
        nd_cact_close(&f);
    }
}

static void test_load_golden_weights(void)
{
    nd_weights w;
    needle_error err;
    int rc = nd_weights_load_cact(GOLDEN_MIXED, &w, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    CHECK(w.embedding.kind == ND_MAT_CQ && w.embedding.cq_bits == 3 && w.embedding.rows == 8192);
    CHECK(w.layers[2].q_proj.cq_bits == 2 && w.layers[2].out_proj.cq_bits == ND_CQ_TERNARY);
    CHECK(w.layers[3].phi_res.rows == 16 && w.layers[3].phi_res.cols == 512);
    CHECK(w.sites[0].layer == 1 && w.sites[1].layer == 3 && w.sites[0].tables.cq_bits == 2);
    CHECK(w.contrastive.present && w.contrastive.num_probes == 4 && w.contrastive.proj.kind == ND_MAT_F32 &&
          w.contrastive.proj.rows == 128 && w.contrastive.proj.cols == 512);
    CHECK(w.confidence.present && w.confidence.num_probes == 8 && w.confidence.out_dim == 1);
    CHECK(w.contrastive.bias[0] == 0.0f && w.contrastive.bias[127] == 0.0f);
    CHECK(w.tokenizer_blob_size == 106335 && w.file_kv_window == 512);
    CHECK(w.layers[0].d1 && w.layers[3].d3 && w.layers[1].b_res && w.final_norm && w.sites[1].taps);
    /* the tokenizer blob parses as a vocabulary */
    nd_vocab v;
    rc = nd_vocab_from_blob(w.tokenizer_blob, w.tokenizer_blob_size, GOLDEN_MIXED, &v, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (!rc) {
        CHECK(v.n_pieces == 8192 && v.types[4] == ND_PIECE_MARKER);
        nd_vocab_free(&v);
    }
    nd_weights_free(&w);
}

/* ---- golden against the float weights ---- */

typedef struct matrix_pair {
    const char *name;
    const nd_matrix *q, *f; /* quantised (golden) and float */
} matrix_pair;

/* The CQ matrices of a model, paired by role with the float model's. */
static int pair_matrices(const nd_weights *q, const nd_weights *f, matrix_pair *out)
{
    int n = 0;
    out[n++] = (matrix_pair){"embedding", &q->embedding, &f->embedding};
    for (int l = 0; l < q->cfg.num_layers; l++) {
        const nd_layer_weights *a = &q->layers[l], *b = &f->layers[l];
        out[n++] = (matrix_pair){"attn.q_proj", &a->q_proj, &b->q_proj};
        out[n++] = (matrix_pair){"attn.k_proj", &a->k_proj, &b->k_proj};
        out[n++] = (matrix_pair){"attn.v_proj", &a->v_proj, &b->v_proj};
        out[n++] = (matrix_pair){"attn.gate_proj", &a->gate_proj, &b->gate_proj};
        out[n++] = (matrix_pair){"attn.out_proj", &a->out_proj, &b->out_proj};
        out[n++] = (matrix_pair){"mhc_phi_pre", &a->phi_pre, &b->phi_pre};
        out[n++] = (matrix_pair){"mhc_phi_post", &a->phi_post, &b->phi_post};
        out[n++] = (matrix_pair){"mhc_phi_res", &a->phi_res, &b->phi_res};
    }
    for (int s = 0; s < q->cfg.num_sites; s++) {
        out[n++] = (matrix_pair){"engram.tables", &q->sites[s].tables, &f->sites[s].tables};
        out[n++] = (matrix_pair){"engram.key_proj", &q->sites[s].key_proj, &f->sites[s].key_proj};
        out[n++] = (matrix_pair){"engram.value_proj", &q->sites[s].value_proj, &f->sites[s].value_proj};
    }
    return n;
}

/* Compare a golden file's matrices with the float weights: relative RMS per
 * width, and rows where our quantiser's dequantisation equals the golden's. */
static void compare_with_float(const char *golden, const nd_weights *fw)
{
    nd_weights q;
    needle_error err;
    int rc = nd_weights_load_cact(golden, &q, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    matrix_pair pairs[512];
    int np = pair_matrices(&q, fw, pairs);
    double err2[6] = {0}, sig2[6] = {0};
    long rows_total = 0, rows_equal = 0;
    for (int p = 0; p < np; p++) {
        const nd_matrix *mq = pairs[p].q, *mf = pairs[p].f;
        CHECKF(mq->kind == ND_MAT_CQ && mq->rows == mf->rows && mq->cols == mf->cols, "%s shape", pairs[p].name);
        if (mq->rows != mf->rows || mq->cols != mf->cols) continue;
        int cols = mq->cols, bits = mq->cq_bits, groups = nd_cq_cols_pad(cols) / 128;
        float *gold = malloc(sizeof(float) * (size_t)cols), *ours = malloc(sizeof(float) * (size_t)cols);
        float *src = malloc(sizeof(float) * (size_t)cols);
        uint8_t *idx = malloc(nd_cq_row_bytes(cols, bits));
        uint16_t *norms = malloc(sizeof(uint16_t) * (size_t)groups);
        uint8_t *norms_le = malloc(2 * (size_t)groups);
        for (int r = 0; r < mq->rows; r++) {
            nd_matrix_dequant_rows(mq, r, 1, gold);
            nd_matrix_dequant_rows(mf, r, 1, src);
            for (int c = 0; c < cols; c++) {
                err2[bits] += (double)(gold[c] - src[c]) * (gold[c] - src[c]);
                sig2[bits] += (double)src[c] * src[c];
            }
            CHECK(nd_cq_quantize_row(src, cols, bits, q.codebooks, idx, norms) == 0);
            for (int g = 0; g < groups; g++) norms_le[2 * g] = (uint8_t)norms[g], norms_le[2 * g + 1] = (uint8_t)(norms[g] >> 8);
            nd_cq_dequant_row(idx, norms_le, cols, nd_cq_storage_bits(bits), mq->codebook, ours);
            rows_total++;
            rows_equal += memcmp(gold, ours, sizeof(float) * (size_t)cols) == 0;
        }
        free(gold), free(ours), free(src), free(idx), free(norms), free(norms_le);
    }
    for (int b = 2; b <= 5; b++)
        if (sig2[b] > 0) {
            double rel = sqrt(err2[b] / sig2[b]);
            printf("  %s: %s-bit matrices, relative RMS error vs float %.4f\n", golden + 13, nd_cq_bits_name(b), rel);
            const double bound[6] = {0, 0, 0.36, 0.20, 0.105, 0.50};
            CHECKF(rel < bound[b], "bits %d rel %g", b, rel);
        }
    printf("  %s: %ld of %ld rows dequantise identically from our quantiser\n", golden + 13, rows_equal, rows_total);
    CHECKF(rows_equal >= rows_total * 0.999, "%ld / %ld rows equal", rows_equal, rows_total);
    /* FP16 vectors are the float values rounded to nearest even */
    for (int l = 0; l < fw->cfg.num_layers; l++)
        for (int i = 0; i < fw->cfg.d_model; i++) {
            CHECK(q.layers[l].norm_in[i] == nd_half_to_float(nd_float_to_half(fw->layers[l].norm_in[i])));
            CHECK(q.layers[l].d3[i] == nd_half_to_float(nd_float_to_half(fw->layers[l].d3[i])));
        }
    CHECK(q.layers[2].attn_gate == nd_half_to_float(nd_float_to_half(fw->layers[2].attn_gate)));
    CHECK(q.layers[1].b_res[5] == nd_half_to_float(nd_float_to_half(fw->layers[1].b_res[5])));
    CHECK(q.confidence.proj.f32[77] == nd_half_to_float(nd_float_to_half(fw->confidence.proj.f32[77])));
    nd_weights_free(&q);
}

static void test_golden_vs_float(void)
{
    nd_weights fw;
    needle_error err;
    int rc = nd_weights_load_safetensors(GOLDEN_F32, &fw, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    compare_with_float(GOLDEN_W4, &fw);
    compare_with_float(GOLDEN_MIXED, &fw);
    nd_weights_free(&fw);
}

/* ---- writing: reproduce the golden files ---- */

static int read_whole(const char *path, nd_mapping *m)
{
    needle_error err;
    int rc = nd_map_file(path, m, &err);
    CHECKF(rc == 0, "%s", err.message);
    return rc;
}

/* Byte comparison of a written file with a golden one: everything but CQ
 * blobs exact, CQ blobs >= 99.9% equal bytes. */
static void compare_files(const char *ours, const char *golden)
{
    nd_mapping a, b;
    if (read_whole(ours, &a)) return;
    if (read_whole(golden, &b)) {
        nd_unmap_file(&a);
        return;
    }
    CHECKF(a.size == b.size, "size %zu vs golden %zu", a.size, b.size);
    nd_cact_file f;
    needle_error err;
    int rc = nd_cact_parse(b.data, b.size, golden, &f, &err);
    CHECK(rc == 0);
    if (!rc && a.size == b.size) {
        size_t dir_end = 120 + 112 + 44 * (size_t)f.hdr.num_tensors;
        CHECK(memcmp(a.data, b.data, dir_end) == 0); /* header, codebooks, directory */
        uint64_t cq_bytes = 0, cq_equal = 0;
        size_t prev_end = dir_end;
        for (uint32_t i = 0; i < f.hdr.num_tensors; i++) {
            const nd_cact_record *r = &f.records[i];
            CHECKF(memcmp(a.data + prev_end, b.data + prev_end, r->offset - prev_end) == 0, "padding before %u", i);
            prev_end = r->offset + r->nbytes;
            if (r->dtype != ND_CACT_CQ) {
                CHECKF(memcmp(a.data + r->offset, b.data + r->offset, r->nbytes) == 0, "tensor %u (dtype %u) differs", i,
                       r->dtype);
                continue;
            }
            for (uint64_t k = 0; k < r->nbytes; k++) cq_equal += a.data[r->offset + k] == b.data[r->offset + k];
            cq_bytes += r->nbytes;
        }
        printf("  %s: CQ bytes equal %llu / %llu (%.5f%%)\n", golden + 13, (unsigned long long)cq_equal,
               (unsigned long long)cq_bytes, 100.0 * (double)cq_equal / (double)cq_bytes);
        CHECK(cq_equal >= cq_bytes * 0.999);
        nd_cact_close(&f);
    }
    nd_unmap_file(&a);
    nd_unmap_file(&b);
}

static int load_sources(nd_weights *fw, nd_vocab *v)
{
    needle_error err;
    int rc = nd_weights_load_safetensors(GOLDEN_F32, fw, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return rc;
    rc = nd_vocab_load_spm_file(GOLDEN_TOK, v, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) nd_weights_free(fw);
    return rc;
}

static void test_write_reproduces_golden(void)
{
    nd_weights fw;
    nd_vocab v;
    if (load_sources(&fw, &v)) return;
    const char *maps[2] = {"default=4", MIXED_MAP};
    const char *golden[2] = {GOLDEN_W4, GOLDEN_MIXED};
    for (int k = 0; k < 2; k++) {
        char path[128];
        make_tmp_path(path, sizeof path, k ? "mixed.cact" : "w4.cact");
        nd_cact_write_stats st;
        needle_error err;
        int rc = nd_cact_write(path, &fw, &v, maps[k], &st, &err);
        CHECKF(rc == 0, "%s", err.message);
        if (rc) continue;
        CHECK(st.tensors == 83 && st.kv_window == 512 && st.default_bits == 4);
        compare_files(path, golden[k]);
        unlink(path);
    }
    nd_vocab_free(&v);
    nd_weights_free(&fw);
}

/* ---- round trips at every width ---- */

static void test_round_trip_widths(void)
{
    nd_weights fw;
    nd_vocab v;
    if (load_sources(&fw, &v)) return;
    const char *maps[4] = {"default=2", "default=3", "default=4", "default=1.58"};
    const int bits[4] = {2, 3, 4, ND_CQ_TERNARY};
    for (int k = 0; k < 4; k++) {
        char path[128];
        make_tmp_path(path, sizeof path, "rt.cact");
        needle_error err;
        int rc = nd_cact_write(path, &fw, &v, maps[k], NULL, &err);
        CHECKF(rc == 0, "%s", err.message);
        nd_weights q;
        rc = rc ? rc : nd_weights_load_cact(path, &q, &err);
        CHECKF(rc == 0, "%s", err.message);
        if (rc) continue;
        CHECK(q.embedding.cq_bits == bits[k] && q.layers[3].gate_proj.cq_bits == bits[k] &&
              q.sites[1].value_proj.cq_bits == bits[k]);
        /* each row dequantises to what quantising the float row gives */
        float src[512], got[512], want[512];
        uint8_t idx[512], norms_le[8];
        uint16_t norms[4];
        const nd_matrix *pairs[3][2] = {{&q.embedding, &fw.embedding},
                                        {&q.layers[1].phi_res, &fw.layers[1].phi_res},
                                        {&q.sites[0].tables, &fw.sites[0].tables}};
        int same = 0, total = 0;
        for (int p = 0; p < 3; p++) {
            const nd_matrix *mq = pairs[p][0], *mf = pairs[p][1];
            for (int r = 0; r < mq->rows; r += 7) {
                nd_matrix_dequant_rows(mq, r, 1, got);
                nd_matrix_dequant_rows(mf, r, 1, src);
                nd_cq_quantize_row(src, mf->cols, bits[k], nd_cq_codebooks, idx, norms);
                for (int g = 0; g < 4; g++) norms_le[2 * g] = (uint8_t)norms[g], norms_le[2 * g + 1] = (uint8_t)(norms[g] >> 8);
                nd_cq_dequant_row(idx, norms_le, mf->cols, nd_cq_storage_bits(bits[k]), mq->codebook, want);
                same += memcmp(got, want, sizeof(float) * (size_t)mf->cols) == 0;
                total++;
            }
        }
        CHECKF(same == total, "bits %d: %d of %d rows", bits[k], same, total);
        CHECK(q.layers[2].q_norm[3] == nd_half_to_float(nd_float_to_half(fw.layers[2].q_norm[3])));
        /* a CQ model writes again (re-quantised) and reads back */
        char path2[128];
        make_tmp_path(path2, sizeof path2, "rt2.cact");
        rc = nd_cact_write(path2, &q, &v, maps[k], NULL, &err);
        CHECKF(rc == 0, "%s", err.message);
        nd_weights q2;
        if (!rc) {
            rc = nd_weights_load_cact(path2, &q2, &err);
            CHECKF(rc == 0, "%s", err.message);
            if (!rc) nd_weights_free(&q2);
        }
        nd_weights_free(&q);
        unlink(path);
        unlink(path2);
    }
    /* writer errors: a bad bits map, a missing tensor */
    needle_error err;
    char path[128];
    make_tmp_path(path, sizeof path, "bad.cact");
    CHECK(nd_cact_write(path, &fw, &v, "default=4,attn.x=2", NULL, &err) == NEEDLE_EINVAL);
    const float *keep = fw.layers[1].d2;
    fw.layers[1].d2 = NULL;
    CHECK(nd_cact_write(path, &fw, &v, "default=4", NULL, &err) == NEEDLE_EINVAL && strstr(err.message, "mlp.d2"));
    fw.layers[1].d2 = keep;
    CHECK(access(path, F_OK) != 0); /* nothing left behind */
    nd_vocab_free(&v);
    nd_weights_free(&fw);
}

/* ---- malformed files ---- */

static uint8_t *golden_copy(size_t *size)
{
    nd_mapping m;
    if (read_whole(GOLDEN_W4, &m)) return NULL;
    uint8_t *p = malloc(m.size);
    memcpy(p, m.data, m.size);
    *size = m.size;
    nd_unmap_file(&m);
    return p;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static size_t rec_at(int i) { return 232 + 44 * (size_t)i; }

/* Load an image; expect NEEDLE_EFORMAT naming "bad.cact" and containing `what`. */
static void expect_format_error(const uint8_t *data, size_t size, const char *what, const char *label)
{
    nd_weights w;
    needle_error err;
    int rc = nd_weights_load_cact_buffer(data, size, "bad.cact", &w, &err);
    CHECKF(rc == NEEDLE_EFORMAT, "%s: rc %d", label, rc);
    if (rc == 0) {
        nd_weights_free(&w);
        return;
    }
    CHECKF(strncmp(err.message, "bad.cact: ", 10) == 0 && (!what || strstr(err.message, what)), "%s: message '%s'",
           label, err.message);
}

static void test_malformed(void)
{
    size_t size;
    uint8_t *g = golden_copy(&size);
    if (!g) return;
    uint8_t *b = malloc(size);
    nd_weights w;
    needle_error err;
    /* the unmodified image loads */
    CHECK(nd_weights_load_cact_buffer(g, size, "ok.cact", &w, &err) == 0);
    nd_weights_free(&w);

    /* truncation at many offsets, the interesting ones included */
    size_t cuts[] = {0, 1, 4, 119, 120, 121, 200, 231, 232, 275, 276, 3000, 3883, 3884, 3900, 3904, 3905, 544575};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) expect_format_error(g, cuts[i], NULL, "truncated");
    for (size_t cut = 4000; cut < size; cut += size / 97) expect_format_error(g, cut, NULL, "truncated");
    expect_format_error(g, size - 1, "past the end", "truncated by one");

#define MUTATE(label, what, ...)             \
    do {                                     \
        memcpy(b, g, size);                  \
        __VA_ARGS__;                         \
        expect_format_error(b, size, what, label); \
    } while (0)
    MUTATE("tag", "tag", b[0] ^= 1);
    MUTATE("codebook_len", "codebook_len", put32(b + 8, 16));
    MUTATE("num_tensors 0", "num_tensors", put32(b + 4, 0));
    MUTATE("num_tensors huge", "num_tensors", put32(b + 4, 0xFFFFFFFF));
    MUTATE("num_tensors short", "num_tensors", put32(b + 4, 82));
    MUTATE("codebook NaN", "codebook", put32(b + 120, 0x7fc00000));
    MUTATE("offset past end", "past the end", put64(b + rec_at(5) + 20, ((uint64_t)size + 64) / 64 * 64));
    MUTATE("offset huge", "past the end", put64(b + rec_at(5) + 20, 0xFFFFFFFFFFFFFFC0ull));
    MUTATE("RAW nbytes huge", "past the end", put64(b + rec_at(82) + 28, 0xFFFFFFFFFFFFFFFFull));
    MUTATE("nbytes vs shape", "nbytes", put64(b + rec_at(1) + 28, 258));
    MUTATE("misaligned", "aligned", put64(b + rec_at(5) + 20, 561728 + 2));
    MUTATE("overlap", "overlap", put64(b + rec_at(5) + 20, 561792)); /* onto tensor 6 */
    MUTATE("inside directory", "directory", put64(b + rec_at(1) + 20, 64));
    MUTATE("unknown dtype", "unknown dtype", b[rec_at(3)] = 9);
    MUTATE("dtype 0", "unknown dtype", b[rec_at(3)] = 0);
    MUTATE("bits 6", "bits", put32(b + rec_at(2) + 40, 6));
    MUTATE("bits 1", "bits", put32(b + rec_at(2) + 40, 1));
    MUTATE("group 64", "group", put32(b + rec_at(2) + 36, 64));
    MUTATE("bits on FP16", "group/bits", put32(b + rec_at(1) + 40, 4));
    MUTATE("ndim 5", "ndim", b[rec_at(1) + 1] = 5);
    MUTATE("shape beyond ndim", "beyond ndim", put32(b + rec_at(1) + 8, 3));
    MUTATE("zero dim", "out of range", put32(b + rec_at(1) + 4, 0));
    MUTATE("pad field", "pad", b[rec_at(1) + 2] = 1);
    /* a record consistent in itself but not with the header's geometry */
    MUTATE("shape contradicts header", "contradicts", put32(b + rec_at(1) + 4, 64); put64(b + rec_at(1) + 28, 128));
    MUTATE("CQ shape contradicts", "contradicts", put32(b + rec_at(2) + 4, 64); put64(b + rec_at(2) + 28, 4224));
    MUTATE("CQ where FP16 expected", "dtype", b[rec_at(1)] = ND_CACT_RAW; b[rec_at(1) + 1] = 0; put32(b + rec_at(1) + 4, 0));
    MUTATE("header hada_n", "hada_n", put32(b + 48, 256));
    MUTATE("header head_dim", NULL, put32(b + 40, 16));
    MUTATE("header d_model 0", "d_model", put32(b + 24, 0));
    MUTATE("header vocab", "contradicts", put32(b + 20, 4096));
    MUTATE("header sites", "sites", put32(b + 100, 4));
    MUTATE("header orders", "orders", put32(b + 84, 0));
    MUTATE("header conv_taps", "conv_taps", put32(b + 68, 3));
    MUTATE("heads manifest", "manifest", {
        uint64_t off = 1018880;
        b[off] = 0x00, b[off + 1] = 0x42; /* FP16 3.0 */
    });
    /* tokenizer blob */
    const size_t tok = 1155456;
    MUTATE("tokenizer n_pieces", "tokenizer", put32(b + tok, 0x7FFFFFFF));
    MUTATE("tokenizer unk id", "tokenizer", put32(b + tok + 16, 9000));
    MUTATE("tokenizer piece type", "tokenizer", b[tok + 24 + 4] = 9);
    MUTATE("tokenizer piece len", "tokenizer", b[tok + 24 + 5] = 0xFF; b[tok + 24 + 6] = 0xFF);
    MUTATE("tokenizer flags", "tokenizer", b[tok + 20] = 7);
#undef MUTATE

    /* nd_weights_load_cact: a missing file is EIO, a wrong file EFORMAT with the path */
    CHECK(nd_weights_load_cact("tests/golden/no_such.cact", &w, &err) == NEEDLE_EIO);
    CHECK(nd_weights_load_cact(GOLDEN_F32, &w, &err) == NEEDLE_EFORMAT && strstr(err.message, GOLDEN_F32));
    free(b);
    free(g);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/needle_test_cact.%ld", (long)getpid());
    if (mkdir(tmp_dir, 0700) != 0) {
        perror(tmp_dir);
        return 1;
    }
    RUN(test_parse_golden);
    RUN(test_load_golden_weights);
    RUN(test_golden_vs_float);
    RUN(test_write_reproduces_golden);
    RUN(test_round_trip_widths);
    RUN(test_malformed);
    rmdir(tmp_dir);
    return check_summary();
}
