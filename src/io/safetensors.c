/* safetensors.c - reading (mapped, validated) and writing (atomic) safetensors. */
#include "io/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/file_kind.h"
#include "core/fp16.h"
#include "core/json.h"

/* Tensor bytes are read and written in host order: the format is little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

static const struct {
    const char *name;
    size_t size;
} dtypes[ND_ST_DTYPE_COUNT] = {
    [ND_ST_F32] = {"F32", 4},   [ND_ST_F16] = {"F16", 2},          [ND_ST_BF16] = {"BF16", 2},
    [ND_ST_F64] = {"F64", 8},   [ND_ST_I64] = {"I64", 8},          [ND_ST_I32] = {"I32", 4},
    [ND_ST_I16] = {"I16", 2},   [ND_ST_I8] = {"I8", 1},            [ND_ST_U8] = {"U8", 1},
    [ND_ST_U16] = {"U16", 2},   [ND_ST_U32] = {"U32", 4},          [ND_ST_U64] = {"U64", 8},
    [ND_ST_BOOL] = {"BOOL", 1}, [ND_ST_F8_E4M3] = {"F8_E4M3", 1}, [ND_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *nd_st_dtype_name(nd_st_dtype t) { return (unsigned)t < ND_ST_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t nd_st_dtype_size(nd_st_dtype t) { return (unsigned)t < ND_ST_DTYPE_COUNT ? dtypes[t].size : 0; }

void nd_st_shape_text(char *out, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(out, n, "(");
    for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(out + k, n - k, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (k < n) snprintf(out + k, n - k, ")");
}

int nd_st_is_float(nd_st_dtype t) { return t == ND_ST_F32 || t == ND_ST_F16 || t == ND_ST_BF16 || t == ND_ST_F64; }

/* ---------------------------------------------------------------- reading */

void nd_st_close(nd_safetensors *st)
{
    if (!st) return;
    for (size_t i = 0; i < st->count; i++) free(st->tensors[i].name);
    free(st->tensors);
    for (size_t i = 0; i < st->meta_count; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    nd_unmap_file(&st->map);
    memset(st, 0, sizeof *st);
}

/* A JSON number that is a non-negative integer written in plain digits. */
static int json_uint(const nd_json *v, uint64_t max, uint64_t *out)
{
    if (!v || v->type != ND_JSON_NUMBER || v->len == 0 || v->len > 19) return 0;
    uint64_t x = 0;
    for (size_t i = 0; i < v->len; i++) {
        char c = v->str[i];
        if (c < '0' || c > '9') return 0;
        x = x * 10 + (uint64_t)(c - '0'); /* <= 19 digits cannot overflow u64 */
    }
    if (x > max) return 0;
    *out = x;
    return 1;
}

static int parse_dtype(const nd_json *v, nd_st_dtype *out)
{
    if (!v || v->type != ND_JSON_STRING) return 0;
    for (int i = 0; i < ND_ST_DTYPE_COUNT; i++)
        if (strcmp(v->str, dtypes[i].name) == 0 && strlen(dtypes[i].name) == v->len) {
            *out = (nd_st_dtype)i;
            return 1;
        }
    return 0;
}

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

typedef struct span {
    uint64_t begin, end;
    size_t index;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int parse_metadata(nd_safetensors *st, const nd_json *md, const char *where, needle_error *err)
{
    if (md->type != ND_JSON_OBJECT)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: __metadata__ is not an object (header byte %zu)", where,
                         md->offset + 8);
    if (md->count == 0) return 0;
    st->meta_keys = calloc(md->count, sizeof *st->meta_keys);
    st->meta_values = calloc(md->count, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    for (size_t i = 0; i < md->count; i++) {
        const nd_json *v = &md->items[i];
        if (v->type != ND_JSON_STRING)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: __metadata__ value of \"%.64s\" is not a string (byte %zu)",
                             where, md->keys[i], v->offset + 8);
        st->meta_keys[i] = dup_n(md->keys[i], md->key_lens[i]);
        st->meta_values[i] = dup_n(v->str, v->len);
        st->meta_count = i + 1;
        if (!st->meta_keys[i] || !st->meta_values[i]) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    }
    return 0;
}

/* Fill one tensor from its header entry; data offsets are checked against the buffer. */
static int parse_entry(nd_safetensors *st, nd_st_tensor *t, const char *name, size_t name_len, const nd_json *e,
                       const uint8_t *base, size_t buf_len, const char *where, needle_error *err)
{
    size_t at = e->offset + 8; /* header JSON starts at file byte 8 */
    (void)st;
    if (e->type != ND_JSON_OBJECT)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor \"%.128s\" entry is not an object (byte %zu)", where, name,
                         at);
    if (name_len == 0 || memchr(name, '\0', name_len))
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: empty or NUL-containing tensor name (byte %zu)", where, at);
    t->name = dup_n(name, name_len);
    if (!t->name) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    if (!parse_dtype(nd_json_get(e, "dtype"), &t->dtype))
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor \"%.128s\": missing or unknown dtype (byte %zu)", where,
                         name, at);
    const nd_json *shape = nd_json_get(e, "shape");
    if (!shape || shape->type != ND_JSON_ARRAY || shape->count > ND_ST_MAX_DIMS)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor \"%.128s\": shape missing, not an array or over %d dims (byte %zu)",
                         where, name, ND_ST_MAX_DIMS, at);
    t->ndim = (int)shape->count;
    size_t numel = 1;
    int overflow = 0;
    for (size_t d = 0; d < shape->count; d++) {
        uint64_t dim;
        if (!json_uint(&shape->items[d], (uint64_t)1 << 48, &dim))
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor \"%.128s\": shape[%zu] is not a non-negative integer (byte %zu)",
                             where, name, d, shape->items[d].offset + 8);
        t->shape[d] = (int64_t)dim;
        if (dim && numel > SIZE_MAX / dim) overflow = 1;
        else numel *= (size_t)dim;
    }
    /* a zero dimension makes the product 0 whatever came before */
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] == 0) { numel = 0; overflow = 0; }
    size_t esize = dtypes[t->dtype].size;
    if (overflow || numel > SIZE_MAX / esize)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor \"%.128s\": shape too large (byte %zu)", where, name, at);
    t->numel = numel;
    const nd_json *off = nd_json_get(e, "data_offsets");
    uint64_t b, en;
    if (!off || off->type != ND_JSON_ARRAY || off->count != 2 || !json_uint(&off->items[0], UINT64_MAX >> 1, &b) ||
        !json_uint(&off->items[1], UINT64_MAX >> 1, &en))
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor \"%.128s\": data_offsets must be [begin, end] integers (byte %zu)",
                         where, name, at);
    if (b > en || en > buf_len)
        return nd_errorf(err, NEEDLE_EFORMAT,
                         "%s: tensor \"%.128s\": data_offsets [%llu, %llu] outside the data buffer of %zu bytes", where,
                         name, (unsigned long long)b, (unsigned long long)en, buf_len);
    if (en - b != numel * esize)
        return nd_errorf(err, NEEDLE_EFORMAT,
                         "%s: tensor \"%.128s\": %llu data bytes but shape x %s needs %zu", where, name,
                         (unsigned long long)(en - b), dtypes[t->dtype].name, numel * esize);
    t->nbytes = (size_t)(en - b);
    t->data = base + b;
    return 0;
}

int nd_st_parse(const uint8_t *data, size_t size, const char *where, nd_safetensors *st, needle_error *err)
{
    memset(st, 0, sizeof *st);
    if (!where) where = "safetensors";
    if (size < 8) return nd_errorf(err, NEEDLE_EFORMAT, "%s: %zu bytes, too short for the header length at byte 0", where, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | data[i];
    if (n > size - 8)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header length %llu at byte 0 runs past the end of the file (%zu bytes)",
                         where, (unsigned long long)n, size);
    if (n > ND_JSON_MAX_BYTES)
        return nd_errorf(err, NEEDLE_ELIMIT, "%s: header of %llu bytes exceeds the %u byte limit", where,
                         (unsigned long long)n, ND_JSON_MAX_BYTES);
    if (n < 2 || data[8] != '{')
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header at byte 8 does not start with '{'", where);
    nd_json *h = NULL;
    char jwhere[300];
    snprintf(jwhere, sizeof jwhere, "%s: header (offsets from byte 8)", where);
    int rc = nd_json_parse((const char *)data + 8, (size_t)n, jwhere, &h, err);
    if (rc) return rc == NEEDLE_ENOMEM ? rc : (err ? (err->code = NEEDLE_EFORMAT) : NEEDLE_EFORMAT);
    if (h->type != ND_JSON_OBJECT) {
        nd_json_free(h);
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header at byte 8 is not a JSON object", where);
    }
    st->data_start = 8 + (size_t)n;
    const uint8_t *base = data + st->data_start;
    size_t buf_len = size - st->data_start;
    st->tensors = calloc(h->count ? h->count : 1, sizeof *st->tensors);
    span *spans = calloc(h->count ? h->count : 1, sizeof *spans);
    if (!st->tensors || !spans) {
        rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
        goto done;
    }
    for (size_t i = 0; i < h->count; i++) {
        if (strcmp(h->keys[i], "__metadata__") == 0 && h->key_lens[i] == 12) {
            if ((rc = parse_metadata(st, &h->items[i], where, err))) goto done;
            continue;
        }
        nd_st_tensor *t = &st->tensors[st->count++];
        if ((rc = parse_entry(st, t, h->keys[i], h->key_lens[i], &h->items[i], base, buf_len, where, err))) goto done;
        spans[st->count - 1] = (span){(uint64_t)(t->data - base), (uint64_t)(t->data - base) + t->nbytes, st->count - 1};
    }
    /* no two tensors may share bytes (a writer bug or a crafted file) */
    qsort(spans, st->count, sizeof *spans, span_cmp);
    for (size_t i = 1; i < st->count; i++)
        if (spans[i].begin < spans[i - 1].end) {
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensors \"%.100s\" and \"%.100s\" overlap in the data buffer", where,
                           st->tensors[spans[i - 1].index].name, st->tensors[spans[i].index].name);
            goto done;
        }
    for (size_t i = 0; i < st->count; i++) st->tensors[i].file_offset = (size_t)(st->tensors[i].data - data);
done:
    free(spans);
    nd_json_free(h);
    if (rc) nd_st_close(st);
    return rc;
}

int nd_st_open(const char *path, nd_safetensors *st, needle_error *err)
{
    nd_mapping m;
    memset(st, 0, sizeof *st);
    int rc = nd_map_file(path, &m, err);
    if (rc) return rc;
    rc = nd_st_parse(m.data, m.size, path, st, err);
    if (rc) {
        /* a file of another kind says what it is, not a nonsense header length */
        nd_file_kind k = nd_file_kind_of(m.data, m.size < 64 ? m.size : 64);
        if (rc != NEEDLE_ENOMEM && k > ND_KIND_EMPTY && k != ND_KIND_SAFETENSORS)
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: is %s, not a safetensors checkpoint", path, nd_file_kind_phrase(k));
        nd_unmap_file(&m);
        return rc;
    }
    st->map = m;
    return 0;
}

const nd_st_tensor *nd_st_find(const nd_safetensors *st, const char *name)
{
    for (size_t i = 0; i < st->count; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *nd_st_meta(const nd_safetensors *st, const char *key)
{
    for (size_t i = 0; i < st->meta_count; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

float nd_st_get_f32(const nd_st_tensor *t, size_t i)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case ND_ST_F32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    case ND_ST_F16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return nd_half_to_float(h);
    }
    case ND_ST_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return nd_bf16_to_float(h);
    }
    case ND_ST_F64: {
        double d;
        memcpy(&d, p + 8 * i, 8);
        return (float)d;
    }
    default: return 0.0f;
    }
}

int nd_st_read_f32(const nd_st_tensor *t, float *out, const char *where, needle_error *err)
{
    if (!nd_st_is_float(t->dtype))
        return nd_errorf(err, NEEDLE_EUNSUPPORTED, "%s: tensor \"%s\" has dtype %s, not a float type", where, t->name,
                         dtypes[t->dtype].name);
    if (t->dtype == ND_ST_F32) {
        if (t->numel) memcpy(out, t->data, t->numel * 4);
        return 0;
    }
    for (size_t i = 0; i < t->numel; i++) out[i] = nd_st_get_f32(t, i);
    return 0;
}

/* ---------------------------------------------------------------- writing */

/* qsort has no context argument in C11, so sort (name, index) pairs. */
typedef struct named_index {
    const char *name;
    size_t index;
} named_index;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const named_index *)a)->name, ((const named_index *)b)->name);
}

int nd_st_write(const char *path, const nd_st_out_tensor *tensors, size_t n, const char *const *meta_keys,
                const char *const *meta_values, size_t n_meta, needle_error *err)
{
    named_index *sorted = malloc((n ? n : 1) * sizeof *sorted);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    size_t *bytes = malloc((n ? n : 1) * sizeof *bytes);
    nd_buf h;
    nd_buf_init(&h);
    int rc = 0;
    if (!sorted || !order || !bytes) { rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path); goto out; }
    for (size_t i = 0; i < n; i++) {
        const nd_st_out_tensor *t = &tensors[i];
        if (!t->name || !t->name[0] || strcmp(t->name, "__metadata__") == 0) {
            rc = nd_errorf(err, NEEDLE_EINVAL, "%s: tensor %zu has an empty or reserved name", path, i);
            goto out;
        }
        if ((unsigned)t->dtype >= ND_ST_DTYPE_COUNT || t->ndim < 0 || t->ndim > ND_ST_MAX_DIMS) {
            rc = nd_errorf(err, NEEDLE_EINVAL, "%s: tensor \"%s\": bad dtype or ndim %d", path, t->name, t->ndim);
            goto out;
        }
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || (t->shape[d] && numel > SIZE_MAX / 8 / (size_t)t->shape[d])) {
                rc = nd_errorf(err, NEEDLE_EINVAL, "%s: tensor \"%s\": bad shape[%d]", path, t->name, d);
                goto out;
            }
            numel *= (size_t)t->shape[d];
        }
        bytes[i] = numel * dtypes[t->dtype].size;
        sorted[i] = (named_index){t->name, i};
        if (bytes[i] && !t->data) {
            rc = nd_errorf(err, NEEDLE_EINVAL, "%s: tensor \"%s\" has no data", path, t->name);
            goto out;
        }
    }
    qsort(sorted, n, sizeof *sorted, by_name);
    for (size_t i = 0; i < n; i++) order[i] = sorted[i].index;
    for (size_t i = 1; i < n; i++)
        if (strcmp(tensors[order[i]].name, tensors[order[i - 1]].name) == 0) {
            rc = nd_errorf(err, NEEDLE_EINVAL, "%s: tensor name \"%s\" used twice", path, tensors[order[i]].name);
            goto out;
        }

    nd_buf_putc(&h, '{');
    int first = 1;
    if (n_meta) {
        nd_buf_puts(&h, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i) nd_buf_putc(&h, ',');
            nd_json_write_string(&h, meta_keys[i], strlen(meta_keys[i]), 1);
            nd_buf_putc(&h, ':');
            nd_json_write_string(&h, meta_values[i], strlen(meta_values[i]), 1);
        }
        nd_buf_putc(&h, '}');
        first = 0;
    }
    size_t offset = 0;
    for (size_t k = 0; k < n; k++) {
        const nd_st_out_tensor *t = &tensors[order[k]];
        if (!first) nd_buf_putc(&h, ',');
        first = 0;
        nd_json_write_string(&h, t->name, strlen(t->name), 1);
        nd_buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", dtypes[t->dtype].name);
        for (int d = 0; d < t->ndim; d++) nd_buf_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        nd_buf_printf(&h, "],\"data_offsets\":[%zu,%zu]}", offset, offset + bytes[order[k]]);
        offset += bytes[order[k]];
    }
    nd_buf_putc(&h, '}');
    while (h.len % 8) nd_buf_putc(&h, ' '); /* data buffer starts 8-byte aligned */
    if (h.oom) { rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path); goto out; }

    nd_atomic_file af;
    if ((rc = nd_atomic_open(&af, path, err))) goto out;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    int ok = fwrite(len8, 1, 8, af.fp) == 8 && fwrite(h.data, 1, h.len, af.fp) == h.len;
    for (size_t k = 0; ok && k < n; k++) {
        size_t b = bytes[order[k]];
        if (b) ok = fwrite(tensors[order[k]].data, 1, b, af.fp) == b;
    }
    if (!ok) {
        nd_atomic_abort(&af);
        rc = nd_errorf(err, NEEDLE_EIO, "%s: write failed", path);
        goto out;
    }
    rc = nd_atomic_commit(&af, err);
out:
    nd_buf_free(&h);
    free(sorted);
    free(order);
    free(bytes);
    return rc;
}
