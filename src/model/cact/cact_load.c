/* cact_load.c - nd_weights from a .cact deploy file, and dequantising rows.
 *
 * CQ matrices stay in the mapping (the engine reads codes and norms where
 * they lie); FP16/FP32 tensors are widened into the single `owned` float
 * block, which also holds the codebooks the matrices point at (so moving the
 * nd_weights struct never leaves a matrix pointing into its old copy). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fp16.h"
#include "model/cact/cact.h"
#include "model/weights.h"
#include "quant/cq.h"

#define OWNED_CODEBOOK_FLOATS 48 /* cb2 (4) | cb3 (8) | cb4 (16) | ternary (4) | spare */

static uint64_t slot_elems(const nd_cact_slot *s)
{
    uint64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
    return n;
}

/* Widen a float record (FP16 or FP32) into dst. */
static void widen(const uint8_t *p, int dtype, uint64_t n, float *dst)
{
    for (uint64_t i = 0; i < n; i++) {
        if (dtype == ND_CACT_FP16) {
            dst[i] = nd_half_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        } else {
            uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                         (uint32_t)p[4 * i + 3] << 24;
            dst[i] = nd_f32_from_bits(u);
        }
    }
}

/* A view of rows [r0, r0+n) of m. */
static nd_matrix matrix_rows(const nd_matrix *m, int r0, int n)
{
    nd_matrix v = *m;
    v.rows = n;
    if (m->kind == ND_MAT_F32) {
        v.f32 = m->f32 + (size_t)r0 * (size_t)m->cols;
    } else {
        v.cq_idx = m->cq_idx + (size_t)r0 * nd_cq_row_bytes(m->cols, m->cq_bits);
        v.cq_norms = m->cq_norms + (size_t)r0 * (size_t)(m->cols_pad / ND_CQ_GROUP) * 2;
    }
    return v;
}

/* Head tensors waiting to be widened (nd_weights_heads_ready): where each
 * lies in the mapping and where its floats go in `block`. */
typedef struct lazy_item {
    const uint8_t *src;
    int dtype;
    uint64_t n;
    float *dst;
} lazy_item;

struct nd_lazy_heads {
    atomic_int done;
    int n_items;
    float *block; /* calloc'd: its pages cost nothing until widened into */
    lazy_item items[];
};

static pthread_mutex_t lazy_lock = PTHREAD_MUTEX_INITIALIZER;

void nd_lazy_heads_free(struct nd_lazy_heads *lh)
{
    if (!lh) return;
    free(lh->block);
    free(lh);
}

void nd_weights_heads_ready(const nd_weights *w)
{
    struct nd_lazy_heads *lh = w->lazy_heads;
    if (!lh || atomic_load_explicit(&lh->done, memory_order_acquire)) return;
    pthread_mutex_lock(&lazy_lock);
    if (!atomic_load_explicit(&lh->done, memory_order_relaxed)) {
        for (int i = 0; i < lh->n_items; i++) widen(lh->items[i].src, lh->items[i].dtype, lh->items[i].n, lh->items[i].dst);
        atomic_store_explicit(&lh->done, 1, memory_order_release);
    }
    pthread_mutex_unlock(&lazy_lock);
}

typedef struct loader {
    nd_weights *w;
    const nd_cact_file *f;
    float *cursor;                  /* next free float in w->owned */
    const float *codebook_by_bits[6]; /* indexed by cq_bits */
    struct nd_lazy_heads *lazy;     /* non-NULL: head floats go here, widened later */
    float *head_cursor;             /* next free float in lazy->block */
} loader;

static int is_float_record(const nd_cact_record *r) { return r->dtype == ND_CACT_FP16 || r->dtype == ND_CACT_FP32; }

/* Float records are widened (at load, or a head's on first use) and checked
 * for NaN/Inf at load, and the tokenizer blob is checked at parse time, which
 * maps their pages into the process; after that inference reads only the
 * widened floats and the CQ records (-0.6 MiB of RSS on the v2 base file:
 * mostly the contrastive projection and the tokenizer).  The mapping is
 * read-only and private, so dropping the pages lying wholly inside such a
 * record only means a later reader (a lazy head's first use, the tokenizer's
 * loader) faults them back in from the file. */
static void release_unused_record_pages(const nd_cact_file *f)
{
#ifdef MADV_DONTNEED
    long page = sysconf(_SC_PAGESIZE);
    if (!f->map.mapped || page <= 0) return;
    for (uint32_t i = 0; i < f->hdr.num_tensors; i++) {
        const nd_cact_record *r = &f->records[i];
        if (!is_float_record(r) && r->dtype != ND_CACT_RAW) continue;
        uintptr_t a = (uintptr_t)(f->data + r->offset), b = a + (uintptr_t)r->nbytes, p = (uintptr_t)page;
        a = (a + p - 1) / p * p, b = b / p * p;
        if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
    }
#else
    (void)f;
#endif
}

static int is_lazy_slot(const loader *ld, const nd_cact_slot *s, const nd_cact_record *r)
{
    return ld->lazy && s->param && s->param->scope == ND_SCOPE_HEAD && is_float_record(r);
}

/* Where slot s's floats go: widened now into owned, or later into the heads' block. */
static float *float_dest(loader *ld, const nd_cact_slot *s, const nd_cact_record *r)
{
    float *dst;
    if (is_lazy_slot(ld, s, r)) {
        dst = ld->head_cursor;
        ld->head_cursor += slot_elems(s);
        ld->lazy->items[ld->lazy->n_items++] =
            (lazy_item){.src = ld->f->data + r->offset, .dtype = (int)r->dtype, .n = slot_elems(s), .dst = dst};
    } else {
        dst = ld->cursor;
        ld->cursor += slot_elems(s);
        widen(ld->f->data + r->offset, r->dtype, slot_elems(s), dst);
    }
    return dst;
}

/* A matrix from a record: CQ stays mapped, floats are widened into owned. */
static nd_matrix load_matrix(loader *ld, const nd_cact_slot *s, const nd_cact_record *r)
{
    nd_matrix m;
    memset(&m, 0, sizeof m);
    m.rows = (int)s->shape[0];
    m.cols = (int)s->shape[1];
    const uint8_t *p = ld->f->data + r->offset;
    if (r->dtype == ND_CACT_CQ && r->bits == ND_CACT_BITS_BINARY) {
        /* binary (v3): the kernels have no 1-bit path, so it is widened here,
         * row by row through the one CQ decoder */
        float cb[2] = {-sqrtf(2.0f / 3.14159265358979f) / sqrtf(128.0f), sqrtf(2.0f / 3.14159265358979f) / sqrtf(128.0f)};
        int cols_pad = nd_cq_cols_pad(m.cols);
        size_t row_bytes = (size_t)cols_pad / 8, norm_bytes = (size_t)(cols_pad / ND_CQ_GROUP) * 2;
        const uint8_t *norms = p + (size_t)m.rows * row_bytes;
        for (int i = 0; i < m.rows; i++)
            nd_cq_dequant_row(p + (size_t)i * row_bytes, norms + (size_t)i * norm_bytes, m.cols, 1, cb,
                              ld->cursor + (size_t)i * (size_t)m.cols);
        m.kind = ND_MAT_F32;
        m.f32 = ld->cursor;
        ld->cursor += slot_elems(s);
    } else if (r->dtype == ND_CACT_CQ) {
        m.kind = ND_MAT_CQ;
        m.cq_bits = (int)r->bits;
        m.cols_pad = nd_cq_cols_pad(m.cols);
        m.cq_idx = p;
        m.cq_norms = p + (size_t)m.rows * nd_cq_row_bytes(m.cols, m.cq_bits);
        m.codebook = ld->codebook_by_bits[m.cq_bits];
    } else {
        m.kind = ND_MAT_F32;
        m.f32 = float_dest(ld, s, r);
    }
    return m;
}

static const float *load_floats(loader *ld, const nd_cact_slot *s, const nd_cact_record *r)
{
    return float_dest(ld, s, r);
}

/* NaN or Inf weights would only surface later as NaN logits (and invalid
 * JSON): refuse them at load, naming the tensor and the element.  Read from
 * the record's own bits, so a tensor widened later is checked now too. */
static int refuse_nonfinite_record(const uint8_t *p, int dtype, uint64_t n, const char *where, const nd_cact_slot *s,
                                   needle_error *err)
{
    for (uint64_t i = 0; i < n; i++) {
        int bad, nan;
        if (dtype == ND_CACT_FP16) {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            bad = (h & 0x7C00u) == 0x7C00u;
            nan = (h & 0x03FFu) != 0;
        } else {
            uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                         (uint32_t)p[4 * i + 3] << 24;
            bad = (u & 0x7F800000u) == 0x7F800000u;
            nan = (u & 0x007FFFFFu) != 0;
        }
        if (bad)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor \"%s\" holds %s at element %llu", where, s->name,
                             nan ? "NaN" : "Inf", (unsigned long long)i);
    }
    return 0;
}

/* The same over widened floats (the binary CQ matrices widened at load). */
static int refuse_nonfinite_floats(const float *v, uint64_t n, const char *where, const nd_cact_slot *s,
                                   needle_error *err)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor \"%s\" holds %s at element %llu", where, s->name,
                             isnan(v[i]) ? "NaN" : "Inf", (unsigned long long)i);
    return 0;
}

/* The same for a CQ matrix's FP16 group norms (exponent all ones = Inf/NaN). */
static int refuse_nonfinite_norms(const nd_matrix *m, const char *where, const nd_cact_slot *s, needle_error *err)
{
    uint64_t n = (uint64_t)m->rows * (uint64_t)(m->cols_pad / ND_CQ_GROUP);
    for (uint64_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(m->cq_norms[2 * i] | m->cq_norms[2 * i + 1] << 8);
        if ((h & 0x7C00u) == 0x7C00u)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor \"%s\" has a non-finite CQ norm at group %llu", where,
                             s->name, (unsigned long long)i);
    }
    return 0;
}

/* The struct holding slot s's parameter for layer `layer` (the scope's). */
static void *slot_base(nd_weights *w, const nd_cact_slot *s, int layer)
{
    const nd_param_desc *p = s->param;
    return nd_param_base(w, p, p->scope == ND_SCOPE_LAYER ? layer : p->scope == ND_SCOPE_SITE ? s->site : s->head_kind);
}

/* Point the weight that slot s stands for at record r.  A stacked slot holds
 * every layer: layer l owns rows l*rows.. of a matrix, elements l*per.. of
 * a vector, element l of a scalar. */
static int bind_slot(loader *ld, const nd_cact_slot *s, const nd_cact_record *r, const char *where, needle_error *err)
{
    nd_weights *w = ld->w;
    if (s->role == ND_SLOT_TOKENIZER) {
        w->tokenizer_blob = ld->f->data + r->offset;
        w->tokenizer_blob_size = (size_t)r->nbytes;
        return 0;
    }
    if (!s->param) return 0; /* the manifest: its content chose the head slots already */
    const nd_param_desc *p = s->param;
    int n = p->scope == ND_SCOPE_LAYER && p->stacked ? w->cfg.num_layers : 1;
    nd_matrix m;
    const float *v = NULL;
    int rc;
    if (p->kind == ND_KIND_MATRIX) {
        m = load_matrix(ld, s, r);
        rc = m.kind == ND_MAT_CQ ? refuse_nonfinite_norms(&m, where, s, err)
             : is_float_record(r) ? refuse_nonfinite_record(ld->f->data + r->offset, (int)r->dtype, slot_elems(s),
                                                            where, s, err)
                                  : refuse_nonfinite_floats(m.f32, slot_elems(s), where, s, err);
        if (!rc && p->scope == ND_SCOPE_HEAD && p->rows == ND_DIM_HQ) {
            nd_head_weights *h = slot_base(w, s, -1);
            h->num_queries = (int)s->shape[0];
        }
    } else {
        v = load_floats(ld, s, r);
        rc = refuse_nonfinite_record(ld->f->data + r->offset, (int)r->dtype, slot_elems(s), where, s, err);
    }
    if (rc) return rc;
    size_t per = (size_t)(slot_elems(s) / (uint64_t)n);
    for (int k = 0; k < n; k++) {
        void *f = nd_param_field(p, slot_base(w, s, p->stacked ? k : s->layer));
        if (p->kind == ND_KIND_MATRIX) {
            int rows = m.rows / n;
            *(nd_matrix *)f = n > 1 ? matrix_rows(&m, k * rows, rows) : m;
        } else if (p->kind == ND_KIND_VECTOR) {
            *(const float **)f = v + (size_t)k * per;
        } else {
            *(float *)f = v[k];
        }
    }
    if (p->scope == ND_SCOPE_SITE) w->sites[s->site].layer = w->cfg.engram_layers[s->site];
    if (p->scope == ND_SCOPE_HEAD) {
        nd_head_weights *h = slot_base(w, s, -1);
        h->present = 1;
        if (p->kind == ND_KIND_MATRIX && p->rows == ND_DIM_HEAD_OUT) h->out_dim = (int)s->shape[0];
        if (p->kind == ND_KIND_VECTOR && p->ck[0] == ND_DIM_PROBES) h->num_probes = (int)s->shape[0];
        if (p->role == ND_P_HEAD_GAIN) h->num_probes = (int)s->shape[1]; /* v3: k */
    }
    return 0;
}

/* Build w from a parsed file; on success w->map is left for the caller to set. */
static int load_parsed(const nd_cact_file *f, const char *where, int lazy_heads, nd_weights *w, needle_error *err)
{
    nd_cact_slot *slots = NULL;
    int rc = nd_cact_resolve(f, where, &w->cfg, &slots, err);
    if (rc) return rc;

    /* one block for every widened float, plus the codebooks */
    uint64_t floats = OWNED_CODEBOOK_FLOATS, head_floats = 0;
    int head_items = 0;
    for (uint32_t i = 0; i < f->hdr.num_tensors; i++) {
        const nd_cact_record *r = &f->records[i];
        if (lazy_heads && slots[i].param && slots[i].param->scope == ND_SCOPE_HEAD && is_float_record(r)) {
            head_floats += slot_elems(&slots[i]);
            head_items++;
        } else if (is_float_record(r) || (r->dtype == ND_CACT_CQ && r->bits == ND_CACT_BITS_BINARY)) {
            floats += slot_elems(&slots[i]);
        }
    }
    if (floats > SIZE_MAX / sizeof(float) || head_floats > SIZE_MAX / sizeof(float)) {
        free(slots);
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: float tensors too large for memory", where);
    }
    w->owned = malloc((size_t)floats * sizeof(float));
    w->layers = calloc((size_t)w->cfg.num_layers, sizeof *w->layers);
    if (!w->owned || !w->layers) {
        free(slots);
        return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    }
    memcpy(w->codebooks, f->codebooks, sizeof w->codebooks);
    float ternary[16];
    nd_cq_codebook_by_code(ND_CQ_TERNARY, NULL, ternary);
    memcpy(w->ternary_codebook, ternary, sizeof w->ternary_codebook);

    loader ld = {.w = w, .f = f, .cursor = w->owned};
    if (head_items > 0) {
        w->lazy_heads = calloc(1, sizeof *w->lazy_heads + (size_t)head_items * sizeof(lazy_item));
        if (w->lazy_heads) w->lazy_heads->block = calloc((size_t)head_floats, sizeof(float));
        if (!w->lazy_heads || !w->lazy_heads->block) {
            free(slots);
            return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
        }
        ld.lazy = w->lazy_heads;
        ld.head_cursor = ld.lazy->block;
    }
    float *cb = ld.cursor;
    memcpy(cb, f->codebooks, sizeof(float) * ND_CACT_CODEBOOK_LEN);
    memcpy(cb + ND_CACT_CODEBOOK_LEN, w->ternary_codebook, sizeof w->ternary_codebook);
    ld.codebook_by_bits[2] = cb;
    ld.codebook_by_bits[3] = cb + 4;
    ld.codebook_by_bits[4] = cb + 12;
    ld.codebook_by_bits[ND_CQ_TERNARY] = cb + ND_CACT_CODEBOOK_LEN;
    ld.cursor += OWNED_CODEBOOK_FLOATS;
    for (int k = 0; k < ND_CACT_CODEBOOK_LEN; k++)
        if (!isfinite(f->codebooks[k])) {
            free(slots);
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: codebook value %d in the header is not finite", where, k);
        }
    for (uint32_t i = 0; i < f->hdr.num_tensors; i++) {
        rc = bind_slot(&ld, &slots[i], &f->records[i], where, err);
        if (rc) {
            free(slots);
            return rc;
        }
    }
    if (w->contrastive.present) w->cfg.contrastive_dim = w->contrastive.out_dim;
    w->file_kv_window = (int)f->hdr.kv_window;
    free(slots);
    release_unused_record_pages(f);
    return 0;
}

static void unload(nd_weights *w)
{
    nd_lazy_heads_free(w->lazy_heads);
    free(w->owned);
    free(w->layers);
    memset(w, 0, sizeof *w);
}

int nd_weights_load_cact_opt(const char *path, int lazy_heads, nd_weights *w, needle_error *err)
{
    memset(w, 0, sizeof *w);
    nd_cact_file f;
    int rc = nd_cact_open(path, &f, err);
    if (rc) return rc;
    rc = load_parsed(&f, path, lazy_heads, w, err);
    if (rc) {
        unload(w);
        nd_cact_close(&f);
        return rc;
    }
    /* the mapping now belongs to w */
    w->map = f.map;
    memset(&f.map, 0, sizeof f.map);
    nd_cact_close(&f);
    return 0;
}

int nd_weights_load_cact_buffer(const uint8_t *data, size_t size, const char *where, nd_weights *w, needle_error *err)
{
    memset(w, 0, sizeof *w);
    nd_cact_file f;
    int rc = nd_cact_parse(data, size, where, &f, err);
    if (rc) return rc;
    rc = load_parsed(&f, where, 0, w, err);
    if (rc) unload(w);
    nd_cact_close(&f);
    return rc;
}

int nd_weights_load_cact(const char *path, nd_weights *w, needle_error *err)
{
    return nd_weights_load_cact_opt(path, 0, w, err);
}

void nd_matrix_dequant_rows(const nd_matrix *m, int r0, int n, float *out)
{
    if (m->kind == ND_MAT_F32) {
        memcpy(out, m->f32 + (size_t)r0 * (size_t)m->cols, sizeof(float) * (size_t)n * (size_t)m->cols);
        return;
    }
    int sb = nd_cq_storage_bits(m->cq_bits);
    size_t row_bytes = nd_cq_row_bytes(m->cols, m->cq_bits), norm_bytes = (size_t)(m->cols_pad / ND_CQ_GROUP) * 2;
    for (int i = 0; i < n; i++) {
        size_t r = (size_t)(r0 + i);
        nd_cq_dequant_row(m->cq_idx + r * row_bytes, m->cq_norms + r * norm_bytes, m->cols, sb, m->codebook,
                          out + (size_t)i * (size_t)m->cols);
    }
}
