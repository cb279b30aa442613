/* cact_read.c - parsing and validating a .cact container: header, codebooks,
 * directory and blob placement (model-level checks are in cact_layout.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file_kind.h"
#include "model/cact/cact.h"
#include "quant/cq.h"

static uint32_t rd_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint64_t rd_u64(const uint8_t *p) { return (uint64_t)rd_u32(p) | (uint64_t)rd_u32(p + 4) << 32; }
static float rd_f32(const uint8_t *p)
{
    uint32_t u = rd_u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int nd_cact_sniff(const uint8_t *data, size_t size)
{
    return size >= 4 && (rd_u32(data) == ND_CACT_TAG || rd_u32(data) == ND_CACT_TAG_V3);
}

/* SPEC-needle3 5.7: 48 u32 then f32 rope_theta at byte 192. */
static void parse_header_v3(const uint8_t *p, nd_cact_header *h)
{
    uint32_t v[48];
    for (int i = 0; i < 48; i++) v[i] = rd_u32(p + 4 * i);
    memset(h, 0, sizeof *h);
    h->version = 3;
    h->tag = v[0], h->num_tensors = v[1], h->codebook_len = v[2], h->kv_window = v[3], h->kv_bits = v[4];
    h->vocab = v[5], h->out_vocab = v[6], h->d_model = v[7], h->num_heads = v[8], h->num_kv_heads = v[9];
    h->num_layers = v[10], h->head_dim = v[11], h->v_head_dim = v[12], h->max_seq_len = v[13], h->hada_n = v[14];
    h->mhc_lanes = v[15], h->sliding_window = v[16], h->global_mask_lo = v[17], h->global_mask_hi = v[18];
    h->qkv_conv_taps = v[19], h->engram_slots = v[20], h->engram_sub_dim = v[21], h->num_engram_tables = v[22];
    h->conv_taps = v[23], h->conv_dilation = v[24], h->engram_seed_heads = v[25], h->num_orders = v[26];
    for (int i = 0; i < 4; i++) h->orders[i] = v[27 + i];
    h->num_sites = v[31];
    for (int i = 0; i < ND_CACT_MAX_SITES_V3; i++) h->sites[i] = v[32 + i];
    h->rope_theta = rd_f32(p + 192);
}

static void parse_header(const uint8_t *p, nd_cact_header *h)
{
    uint32_t v[29];
    memset(h, 0, sizeof *h);
    h->version = 2;
    for (int i = 0; i < 29; i++) v[i] = rd_u32(p + 4 * i);
    h->tag = v[0], h->num_tensors = v[1], h->codebook_len = v[2], h->kv_window = v[3], h->kv_bits = v[4];
    h->vocab = v[5], h->d_model = v[6], h->num_heads = v[7], h->num_kv_heads = v[8], h->num_layers = v[9];
    h->head_dim = v[10], h->max_seq_len = v[11], h->hada_n = v[12], h->mhc_lanes = v[13];
    h->engram_slots = v[14], h->engram_sub_dim = v[15], h->num_engram_tables = v[16];
    h->conv_taps = v[17], h->conv_dilation = v[18], h->num_orders = v[19];
    for (int i = 0; i < 4; i++) h->orders[i] = v[20 + i];
    h->num_sites = v[24];
    for (int i = 0; i < 4; i++) h->sites[i] = v[25 + i];
    h->rope_theta = rd_f32(p + 116);
}

static void parse_record(const uint8_t *p, nd_cact_record *r)
{
    r->dtype = p[0];
    r->ndim = p[1];
    r->pad = rd_u16(p + 2);
    for (int i = 0; i < 4; i++) r->shape[i] = rd_u32(p + 4 + 4 * i);
    r->offset = rd_u64(p + 20);
    r->nbytes = rd_u64(p + 28);
    r->group = rd_u32(p + 36);
    r->bits = rd_u32(p + 40);
}

/* Check one record on its own; `at` is the byte offset of the record. */
static int check_record(const nd_cact_record *r, uint32_t i, size_t at, uint64_t data_start, size_t size,
                        int version, const char *where, needle_error *err)
{
    if (r->dtype < ND_CACT_FP16 || r->dtype > ND_CACT_RAW)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): unknown dtype %u", where, i, at,
                         r->dtype);
    if (r->ndim > 4)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): ndim %u > 4", where, i, at, r->ndim);
    if (r->pad != 0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): non-zero pad field", where, i, at);
    /* element count, with every dimension bounded so the product cannot overflow */
    uint64_t elems = 1;
    for (int d = 0; d < 4; d++) {
        uint32_t s = r->shape[d];
        if (d >= r->ndim) {
            if (s != 0)
                return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): shape[%d] = %u beyond ndim %u",
                                 where, i, at, d, s, r->ndim);
            continue;
        }
        if (s == 0 || s > (1u << 30))
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): shape[%d] = %u out of range",
                             where, i, at, d, s);
        elems *= s;
        if (elems > ((uint64_t)1 << 40))
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): too many elements", where, i, at);
    }
    uint64_t want = 0;
    switch (r->dtype) {
    case ND_CACT_FP16:
    case ND_CACT_FP32:
        if (r->ndim == 0)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): float tensor with ndim 0", where, i, at);
        want = elems * (r->dtype == ND_CACT_FP16 ? 2u : 4u);
        break;
    case ND_CACT_CQ:
        if (r->ndim != 2)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): CQ tensor with ndim %u (need 2)",
                             where, i, at, r->ndim);
        if (r->group != ND_CQ_GROUP)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): CQ group %u (need 128)", where, i,
                             at, r->group);
        if (version == 3 && r->bits == ND_CACT_BITS_BINARY) {
            /* binary: 8 codes per byte, then the FP16 norms */
            uint64_t pad = ((uint64_t)r->shape[1] + ND_CQ_GROUP - 1) / ND_CQ_GROUP * ND_CQ_GROUP;
            want = (uint64_t)r->shape[0] * (pad / 8 + pad / ND_CQ_GROUP * 2);
            break;
        }
        if (!nd_cq_bits_valid((int)r->bits) || r->bits > 5)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): invalid bits %u (need %s2, 3, 4 or 5)",
                             where, i, at, r->bits, version == 3 ? "1, " : "");
        want = nd_cq_blob_bytes(r->shape[0], r->shape[1], (int)r->bits);
        break;
    case ND_CACT_RAW:
        if (r->ndim != 0)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): RAW tensor with ndim %u (need 0)",
                             where, i, at, r->ndim);
        want = r->nbytes;
        break;
    }
    if (r->dtype != ND_CACT_CQ && (r->group != 0 || r->bits != 0))
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): group/bits %u/%u on a non-CQ tensor",
                         where, i, at, r->group, r->bits);
    if (r->nbytes != want)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): nbytes %llu, shape needs %llu", where,
                         i, at, (unsigned long long)r->nbytes, (unsigned long long)want);
    if (r->offset % ND_CACT_ALIGN != 0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): offset %llu not 64-byte aligned", where,
                         i, at, (unsigned long long)r->offset);
    if (r->offset < data_start)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): offset %llu inside the directory", where,
                         i, at, (unsigned long long)r->offset);
    if (r->offset > size || r->nbytes > size - r->offset)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %u (record at byte %zu): blob [%llu, +%llu) past the end (%zu bytes)",
                         where, i, at, (unsigned long long)r->offset, (unsigned long long)r->nbytes, size);
    return 0;
}

/* A blob's extent, sorted by offset to find overlaps. */
typedef struct blob_span {
    uint64_t offset, nbytes;
    uint32_t index;
} blob_span;

static int by_offset(const void *a, const void *b)
{
    uint64_t x = ((const blob_span *)a)->offset, y = ((const blob_span *)b)->offset;
    return x < y ? -1 : x > y;
}

/* No two blobs may share a byte: sort by offset and compare neighbours. */
static int check_overlaps(const nd_cact_record *recs, uint32_t n, const char *where, needle_error *err)
{
    blob_span *spans = malloc(sizeof *spans * n);
    if (!spans) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    for (uint32_t i = 0; i < n; i++) spans[i] = (blob_span){recs[i].offset, recs[i].nbytes, i};
    qsort(spans, n, sizeof *spans, by_offset);
    int rc = 0;
    for (uint32_t k = 1; k < n && !rc; k++) {
        const blob_span *a = &spans[k - 1], *b = &spans[k];
        if (b->offset < a->offset + a->nbytes)
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensors %u and %u overlap (blobs at %llu and %llu)", where,
                           a->index, b->index, (unsigned long long)a->offset, (unsigned long long)b->offset);
    }
    free(spans);
    return rc;
}

int nd_cact_parse(const uint8_t *data, size_t size, const char *where, nd_cact_file *f, needle_error *err)
{
    memset(f, 0, sizeof *f);
    f->data = data;
    f->size = size;
    if (size < 4) return nd_errorf(err, NEEDLE_EFORMAT, "%s: truncated header (%zu bytes)", where, size);
    uint32_t tag = rd_u32(data);
    if (tag != ND_CACT_TAG && tag != ND_CACT_TAG_V3)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: bad tag 0x%08X at byte 0 (not a .cact file)", where, tag);
    size_t header_bytes = tag == ND_CACT_TAG_V3 ? ND_CACT_HEADER_BYTES_V3 : ND_CACT_HEADER_BYTES;
    if (size < header_bytes)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: truncated %s header (%zu bytes, need %zu)", where,
                         tag == ND_CACT_TAG_V3 ? "Needle 3" : "Needle 2", size, header_bytes);
    if (tag == ND_CACT_TAG_V3) parse_header_v3(data, &f->hdr);
    else parse_header(data, &f->hdr);
    const nd_cact_header *h = &f->hdr;
    if (h->codebook_len != ND_CACT_CODEBOOK_LEN)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: codebook_len %u at byte 8 (need %d)", where, h->codebook_len,
                         ND_CACT_CODEBOOK_LEN);
    if (h->num_tensors == 0 || h->num_tensors > ND_CACT_MAX_TENSORS)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: num_tensors %u at byte 4 out of range", where, h->num_tensors);
    size_t cb_at = header_bytes, dir_at = cb_at + 4 * ND_CACT_CODEBOOK_LEN;
    uint64_t dir_end = dir_at + (uint64_t)h->num_tensors * ND_CACT_RECORD_BYTES;
    if (dir_end > size)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: truncated directory (%u records end at byte %llu, file has %zu)", where,
                         h->num_tensors, (unsigned long long)dir_end, size);
    for (int i = 0; i < ND_CACT_CODEBOOK_LEN; i++) {
        f->codebooks[i] = rd_f32(data + cb_at + 4 * i);
        if (!isfinite(f->codebooks[i]))
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: codebook value %d at byte %zu is not finite", where, i, cb_at + 4 * i);
    }
    f->records = calloc(h->num_tensors, sizeof *f->records);
    if (!f->records) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    int rc = 0;
    for (uint32_t i = 0; i < h->num_tensors && !rc; i++) {
        size_t at = dir_at + (size_t)i * ND_CACT_RECORD_BYTES;
        parse_record(data + at, &f->records[i]);
        rc = check_record(&f->records[i], i, at, dir_end, size, (int)h->version, where, err);
    }
    if (!rc) rc = check_overlaps(f->records, h->num_tensors, where, err);
    if (rc) {
        free(f->records);
        f->records = NULL;
    }
    return rc;
}

int nd_cact_open(const char *path, nd_cact_file *f, needle_error *err)
{
    nd_mapping m;
    int rc = nd_map_file(path, &m, err);
    if (rc) {
        memset(f, 0, sizeof *f);
        return rc;
    }
    rc = nd_cact_parse(m.data, m.size, path, f, err);
    if (rc) {
        nd_file_kind k = nd_file_kind_of(m.data, m.size < 64 ? m.size : 64);
        if (rc != NEEDLE_ENOMEM && k > ND_KIND_EMPTY && k != ND_KIND_CACT)
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: is %s, not a .cact model file", path, nd_file_kind_phrase(k));
        nd_unmap_file(&m);
        return rc;
    }
    f->map = m;
    return 0;
}

void nd_cact_close(nd_cact_file *f)
{
    free(f->records);
    if (f->map.data) nd_unmap_file(&f->map);
    memset(f, 0, sizeof *f);
}

int nd_cact_check_tokenizer_blob(const uint8_t *b, size_t size, const char *where, needle_error *err)
{
    if (size < 24)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob: truncated header (%zu bytes, need 24)", where, size);
    uint32_t n = rd_u32(b);
    if (n == 0 || n > (size - 24) / 7)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob: n_pieces %u does not fit %zu bytes", where, n, size);
    static const char *const id_names[4] = {"pad", "eos", "bos", "unk"};
    for (int k = 0; k < 4; k++) {
        uint32_t id = rd_u32(b + 4 + 4 * k);
        /* 0xFFFFFFFF (-1) is SentencePiece's "no such piece" */
        if (id >= n && id != 0xFFFFFFFFu)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob: %s id %u >= n_pieces %u (byte %d)", where,
                             id_names[k], id, n, 4 + 4 * k);
    }
    if (b[20] > 1 || b[21] > 1 || rd_u16(b + 22) != 0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob: bad flags at byte 20", where);
    size_t p = 24;
    for (uint32_t i = 0; i < n; i++) {
        if (size - p < 7)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob: piece %u truncated at byte %zu", where, i, p);
        uint8_t type = b[p + 4];
        uint16_t len = rd_u16(b + p + 5);
        if (type > 4)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob: piece %u has type %u at byte %zu", where, i, type,
                             p + 4);
        p += 7;
        if (len > size - p)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob: piece %u length %u runs past the end (byte %zu)",
                             where, i, len, p - 2);
        p += len;
    }
    if (p != size)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob: %zu trailing bytes after piece %u", where, size - p, n - 1);
    return 0;
}
