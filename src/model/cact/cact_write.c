/* cact_write.c - quantising a model and writing a .cact deploy file.
 *
 * Two passes over the one layout (cact_layout.c): the first sizes every
 * record and places the blobs, the second produces the blobs in file order.
 * Matrices may be float or already CQ (they are dequantised and quantised
 * again), so a merged or re-exported model goes through the same path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "core/fp16.h"
#include "model/cact/cact.h"
#include "io/spm_model.h"
#include "model/bits_map.h"
#include "model/weights.h"
#include "quant/cq.h"

static void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t align_up(uint64_t x) { return (x + ND_CACT_ALIGN - 1) / ND_CACT_ALIGN * ND_CACT_ALIGN; }

/* SPEC-needle3 5.7: the 196-byte Needle 3 header. */
static void encode_header_v3(const nd_cact_header *h, uint8_t out[ND_CACT_HEADER_BYTES_V3])
{
    uint32_t v[48] = {h->tag, h->num_tensors, h->codebook_len, h->kv_window, h->kv_bits, h->vocab, h->out_vocab,
                      h->d_model, h->num_heads, h->num_kv_heads, h->num_layers, h->head_dim, h->v_head_dim,
                      h->max_seq_len, h->hada_n, h->mhc_lanes, h->sliding_window, h->global_mask_lo,
                      h->global_mask_hi, h->qkv_conv_taps, h->engram_slots, h->engram_sub_dim, h->num_engram_tables,
                      h->conv_taps, h->conv_dilation, h->engram_seed_heads, h->num_orders, h->orders[0], h->orders[1],
                      h->orders[2], h->orders[3], h->num_sites};
    for (int i = 0; i < ND_CACT_MAX_SITES_V3; i++) v[32 + i] = h->sites[i];
    for (int i = 0; i < 48; i++) put_u32(out + 4 * i, v[i]);
    put_u32(out + 192, nd_bits_from_f32(h->rope_theta));
}

static void encode_header(const nd_cact_header *h, uint8_t out[ND_CACT_HEADER_BYTES])
{
    const uint32_t v[29] = {h->tag, h->num_tensors, h->codebook_len, h->kv_window, h->kv_bits, h->vocab, h->d_model,
                            h->num_heads, h->num_kv_heads, h->num_layers, h->head_dim, h->max_seq_len, h->hada_n,
                            h->mhc_lanes, h->engram_slots, h->engram_sub_dim, h->num_engram_tables, h->conv_taps,
                            h->conv_dilation, h->num_orders, h->orders[0], h->orders[1], h->orders[2], h->orders[3],
                            h->num_sites, h->sites[0], h->sites[1], h->sites[2], h->sites[3]};
    for (int i = 0; i < 29; i++) put_u32(out + 4 * i, v[i]);
    put_u32(out + 116, nd_bits_from_f32(h->rope_theta));
}

static void encode_record(const nd_cact_record *r, uint8_t out[ND_CACT_RECORD_BYTES])
{
    memset(out, 0, ND_CACT_RECORD_BYTES);
    out[0] = r->dtype;
    out[1] = r->ndim;
    for (int i = 0; i < 4; i++) put_u32(out + 4 + 4 * i, r->shape[i]);
    put_u64(out + 20, r->offset);
    put_u64(out + 28, r->nbytes);
    put_u32(out + 36, r->group);
    put_u32(out + 40, r->bits);
}

/* ---- where each slot's data comes from ---- */

/* The struct holding slot s's parameter for layer `layer` (the scope's). */
static const void *slot_base(const nd_weights *w, const nd_cact_slot *s, int layer)
{
    const nd_param_desc *p = s->param;
    return nd_param_base_c(w, p, p->scope == ND_SCOPE_LAYER ? layer : p->scope == ND_SCOPE_SITE ? s->site : s->head_kind);
}

/* How many per-layer instances a slot holds: all layers when stacked. */
static int slot_instances(const nd_weights *w, const nd_cact_slot *s)
{
    return s->param->scope == ND_SCOPE_LAYER && s->param->stacked ? w->cfg.num_layers : 1;
}

/* The matrices a MATRIX slot stacks (one, or one per layer for the stacked
 * mHC projections); 0 for other slots. */
static int slot_matrices(const nd_weights *w, const nd_cact_slot *s, const nd_matrix **mats)
{
    if (!s->param || s->param->kind != ND_KIND_MATRIX) return 0;
    int n = slot_instances(w, s);
    for (int k = 0; k < n; k++)
        mats[k] = nd_param_field_c(s->param, slot_base(w, s, s->param->stacked ? k : s->layer));
    return n;
}

/* Copy a float slot's values into dst (slot element count); returns 0, or
 * -1 when a pointer the slot needs is missing. */
static int slot_floats(const nd_weights *w, const nd_cact_slot *s, const nd_cact_head_shape *heads, float *dst)
{
    size_t len = 1;
    for (int d = 0; d < s->ndim; d++) len *= s->shape[d];
    if (s->role == ND_SLOT_MANIFEST) {
        for (size_t k = 0; k < len; k++) dst[k] = (float)heads[k].code;
        return 0;
    }
    if (!s->param) return -1;
    const nd_param_desc *p = s->param;
    int n = slot_instances(w, s);
    size_t per = len / (size_t)n;
    for (int k = 0; k < n; k++) {
        const void *f = nd_param_field_c(p, slot_base(w, s, s->param->stacked ? k : s->layer));
        float *out = dst + (size_t)k * per;
        if (p->kind == ND_KIND_SCALAR) {
            out[0] = *(const float *)f;
        } else if (p->kind == ND_KIND_VECTOR) {
            const float *src = *(const float *const *)f;
            if (src) {
                memcpy(out, src, sizeof(float) * per);
            } else if (p->scope == ND_SCOPE_HEAD && !nd_param_in_head_ckpt(p, s->head_kind)) {
                /* a head without this parameter (the contrastive bias): the file stores its init constant */
                for (size_t i = 0; i < per; i++) out[i] = (float)p->init_value;
            } else {
                return -1;
            }
        } else {
            return -1;
        }
    }
    return 0;
}

/* ---- writing ---- */

typedef struct writer {
    const char *path;
    FILE *fp;
    uint64_t pos;
    float *rowbuf; /* one dequantised source row (largest cols) */
} writer;

static int write_bytes(writer *wr, const void *p, size_t n, needle_error *err)
{
    if (n && fwrite(p, 1, n, wr->fp) != n) return nd_errorf(err, NEEDLE_EIO, "%s: write failed at byte %llu", wr->path, (unsigned long long)wr->pos);
    wr->pos += n;
    return 0;
}

static int pad_to(writer *wr, uint64_t target, needle_error *err)
{
    static const uint8_t zeros[ND_CACT_ALIGN];
    while (wr->pos < target) {
        size_t k = target - wr->pos < sizeof zeros ? (size_t)(target - wr->pos) : sizeof zeros;
        int rc = write_bytes(wr, zeros, k, err);
        if (rc) return rc;
    }
    return 0;
}

/* Values as FP32, little-endian (the v3 MLP permutations). */
static int write_fp32(writer *wr, const float *v, size_t n, needle_error *err)
{
    uint8_t b[4];
    for (size_t i = 0; i < n; i++) {
        put_u32(b, nd_bits_from_f32(v[i]));
        int rc = write_bytes(wr, b, 4, err);
        if (rc) return rc;
    }
    return 0;
}

/* Values as FP16, little-endian, in chunks. */
static int write_fp16(writer *wr, const float *v, size_t n, needle_error *err)
{
    uint8_t chunk[4096];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; k < sizeof chunk / 2 && i < n; k++, i++) put_u16(chunk + 2 * k, nd_float_to_half(v[i]));
        int rc = write_bytes(wr, chunk, 2 * k, err);
        if (rc) return rc;
    }
    return 0;
}

/* Rows of a float or CQ matrix as float. */
static const float *matrix_row(const nd_matrix *m, int r, float *buf)
{
    if (m->kind == ND_MAT_F32) return m->f32 + (size_t)r * (size_t)m->cols;
    nd_matrix_dequant_rows(m, r, 1, buf);
    return buf;
}

static int write_quant(writer *wr, const nd_cact_slot *s, const nd_matrix *const *mats, int nm, int bits,
                       needle_error *err)
{
    int cols = (int)s->shape[1];
    size_t row_bytes = nd_cq_row_bytes(cols, bits), groups = (size_t)nd_cq_cols_pad(cols) / ND_CQ_GROUP;
    size_t rows = s->shape[0];
    uint8_t *idx = malloc(row_bytes);
    uint8_t *norms = malloc(rows * groups * 2);
    uint16_t *row_norms = malloc(groups * sizeof(uint16_t));
    int rc = 0;
    if (!idx || !norms || !row_norms) rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", wr->path);
    /* indices stream out row by row; the norms follow all of them, so they are kept */
    size_t r = 0;
    for (int k = 0; k < nm && !rc; k++) {
        for (int i = 0; i < mats[k]->rows && !rc; i++, r++) {
            const float *row = matrix_row(mats[k], i, wr->rowbuf);
            if (nd_cq_quantize_row(row, cols, bits, nd_cq_codebooks, idx, row_norms) != 0) {
                /* the input weights are at fault, not the file being written */
                rc = nd_errorf(err, NEEDLE_EINVAL,
                               "input weights: tensor %s row %zu holds a NaN/Inf or a value too large for FP16 norms "
                               "(nothing written to %s)",
                               s->name, r, wr->path);
                break;
            }
            for (size_t g = 0; g < groups; g++) put_u16(norms + 2 * (r * groups + g), row_norms[g]);
            rc = write_bytes(wr, idx, row_bytes, err);
        }
    }
    if (!rc) rc = write_bytes(wr, norms, rows * groups * 2, err);
    free(idx);
    free(norms);
    free(row_norms);
    return rc;
}

static int write_float_slot(writer *wr, const nd_weights *w, const nd_cact_slot *s, const nd_cact_head_shape *heads,
                            needle_error *err)
{
    if (s->param && s->param->kind == ND_KIND_MATRIX) { /* a matrix stored as FP16, row by row */
        const nd_matrix *m = nd_param_field_c(s->param, slot_base(w, s, s->layer));
        for (int r = 0; r < m->rows; r++) {
            int rc = write_fp16(wr, matrix_row(m, r, wr->rowbuf), (size_t)m->cols, err);
            if (rc) return rc;
        }
        return 0;
    }
    size_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
    float *v = malloc(sizeof(float) * n);
    if (!v) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", wr->path);
    int rc = 0;
    if (slot_floats(w, s, heads, v) != 0) rc = nd_errorf(err, NEEDLE_EINVAL, "%s: the model has no %s", wr->path, s->name);
    else if (s->param && s->param->fp32) rc = write_fp32(wr, v, n, err);
    else rc = write_fp16(wr, v, n, err);
    free(v);
    return rc;
}

/* The heads the model carries, in nd_param_heads order (the reference's). */
static int model_heads(const nd_weights *w, nd_cact_head_shape heads[ND_NUM_HEAD_KINDS])
{
    int n = 0;
    for (int k = 0; k < nd_head_kinds(&w->cfg); k++) {
        const nd_head_weights *hw = (const void *)((const char *)w + nd_param_heads[k].offset);
        if (!hw->present) continue;
        heads[n].code = nd_param_heads[k].code;
        heads[n].num_probes = hw->num_probes;
        heads[n].num_queries = hw->num_queries;
        heads[n].out_dim = hw->out_dim;
        n++;
    }
    return n;
}

/* Every matrix the layout needs must be there, with the layout's shape. */
static int check_sources(const nd_weights *w, const nd_cact_slot *slots, int count, const char *path, needle_error *err)
{
    const nd_matrix *mats[4096];
    for (int i = 0; i < count; i++) {
        int nm = slot_matrices(w, &slots[i], mats);
        if (nm > (int)(sizeof mats / sizeof mats[0])) return nd_errorf(err, NEEDLE_EINVAL, "%s: too many layers", path);
        uint64_t rows = 0;
        for (int k = 0; k < nm; k++) {
            const nd_matrix *m = mats[k];
            int ok = m->cols == (int)slots[i].shape[1] && m->rows > 0 &&
                     (m->kind == ND_MAT_F32 ? m->f32 != NULL : (m->cq_idx && m->cq_norms && m->codebook));
            if (!ok)
                return nd_errorf(err, NEEDLE_EINVAL, "%s: %s: the model's matrix is missing or [%d,%d], the layout needs [%u,%u]",
                                 path, slots[i].name, m->rows, m->cols, slots[i].shape[0], slots[i].shape[1]);
            rows += (uint64_t)m->rows;
        }
        if (nm && rows != slots[i].shape[0])
            return nd_errorf(err, NEEDLE_EINVAL, "%s: %s: the model has %llu rows, the layout needs %u", path, slots[i].name,
                             (unsigned long long)rows, slots[i].shape[0]);
    }
    return 0;
}

int nd_cact_write(const char *path, const nd_weights *w, const nd_vocab *vocab, const char *bits_map,
                  nd_cact_write_stats *stats, needle_error *err)
{
    const nd_config *c = &w->cfg;
    if (!w->layers) return nd_errorf(err, NEEDLE_EINVAL, "%s: the model has no layers", path);
    if (c->num_layers > 4096) return nd_errorf(err, NEEDLE_EINVAL, "%s: more than 4096 layers", path);
    const char *spec = bits_map && *bits_map ? bits_map : c->weight_bits[0] ? c->weight_bits : "default=4";
    nd_bits_map bm;
    int rc = nd_bits_map_parse(spec, &bm, err);
    if (rc) return rc;

    nd_cact_head_shape heads[ND_NUM_HEAD_KINDS];
    int n_heads = model_heads(w, heads);
    nd_cact_slot *slots = NULL;
    int count = 0;
    if ((rc = nd_cact_layout(c, heads, n_heads, &slots, &count, err))) return rc;
    uint8_t *tok = NULL;
    size_t tok_size = 0;
    nd_cact_record *recs = calloc((size_t)count, sizeof *recs);
    writer wr = {.path = path};
    nd_atomic_file af = {0};
    if (!recs) {
        rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if ((rc = check_sources(w, slots, count, path, err))) goto done;
    if ((rc = nd_vocab_to_blob(vocab, &tok, &tok_size, err))) goto done;

    /* pass 1: records and blob placement */
    int v3 = nd_config_generation(c) == 3;
    size_t header_bytes = v3 ? ND_CACT_HEADER_BYTES_V3 : ND_CACT_HEADER_BYTES;
    uint64_t pos = align_up(header_bytes + 4 * ND_CACT_CODEBOOK_LEN + (uint64_t)count * ND_CACT_RECORD_BYTES);
    int max_cols = 1;
    for (int i = 0; i < count; i++) {
        const nd_cact_slot *s = &slots[i];
        nd_cact_record *r = &recs[i];
        r->ndim = (uint8_t)s->ndim;
        memcpy(r->shape, s->shape, sizeof r->shape);
        uint64_t elems = 1;
        for (int d = 0; d < s->ndim; d++) elems *= s->shape[d];
        if (s->storage == ND_SLOT_QUANT) {
            r->dtype = ND_CACT_CQ;
            r->group = ND_CQ_GROUP;
            /* head matrices: 4 bits (the reference's HEAD_BITS) unless the map names them */
            r->bits = (uint32_t)(s->param->scope == ND_SCOPE_HEAD ? nd_bits_map_lookup_or(&bm, s->canonical, 4)
                                                                   : nd_bits_map_lookup(&bm, s->canonical));
            r->nbytes = nd_cq_blob_bytes(s->shape[0], s->shape[1], (int)r->bits);
        } else if (s->storage == ND_SLOT_BYTES) {
            r->dtype = ND_CACT_RAW;
            r->nbytes = tok_size;
        } else if (s->param && s->param->fp32) {
            r->dtype = ND_CACT_FP32;
            r->nbytes = 4 * elems;
        } else {
            r->dtype = ND_CACT_FP16;
            r->nbytes = 2 * elems;
        }
        if (s->ndim == 2 && (int)s->shape[1] > max_cols) max_cols = (int)s->shape[1];
        r->offset = pos;
        pos = align_up(pos + r->nbytes);
    }
    wr.rowbuf = malloc(sizeof(float) * (size_t)nd_cq_cols_pad(max_cols));
    if (!wr.rowbuf) {
        rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
        goto done;
    }

    /* pass 2: header, codebooks, directory, blobs */
    nd_cact_header h;
    nd_cact_config_to_header(c, nd_config_effective_window(c), &h);
    h.num_tensors = (uint32_t)count;
    if ((rc = nd_atomic_open(&af, path, err))) goto done;
    wr.fp = af.fp;
    uint8_t buf[ND_CACT_HEADER_BYTES_V3];
    if (v3) encode_header_v3(&h, buf);
    else encode_header(&h, buf);
    rc = write_bytes(&wr, buf, header_bytes, err);
    for (int i = 0; i < ND_CACT_CODEBOOK_LEN && !rc; i++) {
        put_u32(buf, nd_bits_from_f32(nd_cq_codebooks[i]));
        rc = write_bytes(&wr, buf, 4, err);
    }
    for (int i = 0; i < count && !rc; i++) {
        encode_record(&recs[i], buf);
        rc = write_bytes(&wr, buf, ND_CACT_RECORD_BYTES, err);
    }
    for (int i = 0; i < count && !rc; i++) {
        const nd_cact_slot *s = &slots[i];
        if ((rc = pad_to(&wr, recs[i].offset, err))) break;
        if (s->storage == ND_SLOT_QUANT) {
            const nd_matrix *mats[4096];
            int nm = slot_matrices(w, s, mats);
            rc = write_quant(&wr, s, mats, nm, (int)recs[i].bits, err);
        } else if (s->storage == ND_SLOT_BYTES) {
            rc = write_bytes(&wr, tok, tok_size, err);
        } else {
            rc = write_float_slot(&wr, w, s, heads, err);
        }
    }
    if (!rc) rc = nd_atomic_commit(&af, err);
    else nd_atomic_abort(&af);
    if (!rc && stats) {
        stats->bytes = wr.pos;
        stats->tensors = count;
        stats->kv_window = (int)h.kv_window;
        stats->default_bits = bm.default_bits;
    }

done:
    free(slots);
    free(recs);
    free(tok);
    free(wr.rowbuf);
    return rc;
}
