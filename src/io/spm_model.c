/* spm_model.c - the tokenizer vocabulary from a SentencePiece .model file
 * (protobuf ModelProto) or from the .cact tokenizer blob (SPEC section 8),
 * and the blob writer.
 *
 * Only the few protobuf fields Needle needs are read; everything else is
 * skipped by wire type, so newer SentencePiece versions still load.  Every
 * length, count and offset comes from the file and is checked against the
 * bytes that remain before it is used.
 */
#include "io/spm_model.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "core/file_kind.h"
#include "core/utf8.h"

/* Limits that keep a hostile file from asking for absurd allocations; real
 * vocabularies are ~8k-256k pieces of a few bytes each. */
#define ND_VOCAB_MAX_PIECES (1 << 22)
#define ND_PIECE_MAX_BYTES 65535 /* the blob stores lengths as u16 */

/* The ten chat markers that get type ND_PIECE_MARKER, by text (SPEC 6, 8). */
static const char *const chat_markers[] = {
    "<|im_start|>", "<|im_end|>",  "<think>",      "</think>",     "<tools>",
    "</tools>",     "<tool_call>", "</tool_call>", "<tool_result>", "</tool_result>",
};

static int is_chat_marker(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof chat_markers / sizeof chat_markers[0]; i++)
        if (strlen(chat_markers[i]) == n && memcmp(chat_markers[i], s, n) == 0) return 1;
    return 0;
}

void nd_vocab_free(nd_vocab *v)
{
    if (!v) return;
    if (v->pieces)
        for (int i = 0; i < v->n_pieces; i++) free(v->pieces[i]);
    free(v->pieces);
    free(v->piece_lens);
    free(v->scores);
    free(v->types);
    memset(v, 0, sizeof *v);
}

/* Allocate the per-piece arrays for n pieces (strings filled in later). */
static int vocab_alloc(nd_vocab *v, int n)
{
    memset(v, 0, sizeof *v);
    v->n_pieces = n;
    v->pieces = calloc((size_t)n, sizeof *v->pieces);
    v->piece_lens = calloc((size_t)n, sizeof *v->piece_lens);
    v->scores = calloc((size_t)n, sizeof *v->scores);
    v->types = calloc((size_t)n, sizeof *v->types);
    if (!v->pieces || !v->piece_lens || !v->scores || !v->types) {
        nd_vocab_free(v);
        return NEEDLE_ENOMEM;
    }
    return 0;
}

static int vocab_set_piece(nd_vocab *v, int id, const uint8_t *text, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) return NEEDLE_ENOMEM;
    memcpy(s, text, n);
    s[n] = '\0';
    v->pieces[id] = s;
    v->piece_lens[id] = (int)n;
    return 0;
}

/* Checks shared by both readers, after all pieces are in place: special ids in
 * range, piece texts non-empty valid UTF-8.  (Duplicates are checked by the
 * tokenizer, which builds the hash map anyway.) */
static int vocab_validate(const nd_vocab *v, const char *where, needle_error *err)
{
    const struct { const char *name; int id; int may_be_absent; } ids[] = {
        {"pad_id", v->pad_id, 1}, {"eos_id", v->eos_id, 1}, {"bos_id", v->bos_id, 1}, {"unk_id", v->unk_id, 0}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (ids[i].id == -1 && ids[i].may_be_absent) continue;
        if (ids[i].id < 0 || ids[i].id >= v->n_pieces)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: %s %d is outside the vocabulary of %d pieces", where,
                             ids[i].name, ids[i].id, v->n_pieces);
    }
    if (v->types[v->unk_id] != ND_PIECE_UNKNOWN)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: unk_id %d names piece '%s', which is not of type unknown", where,
                         v->unk_id, v->pieces[v->unk_id]);
    for (int i = 0; i < v->n_pieces; i++) {
        if (v->piece_lens[i] == 0) return nd_errorf(err, NEEDLE_EFORMAT, "%s: piece %d is empty", where, i);
        size_t bad = nd_utf8_first_invalid(v->pieces[i], (size_t)v->piece_lens[i]);
        if (bad != (size_t)v->piece_lens[i])
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: piece %d is not valid UTF-8 (byte %zu of the piece)", where, i,
                             bad);
        if (v->types[i] > ND_PIECE_BYTE)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: piece %d has unknown type %d", where, i, v->types[i]);
    }
    return 0;
}

/* ---- protobuf wire format ---- */

typedef struct pb_reader {
    const uint8_t *p, *end, *base; /* base: start of the whole file, for offsets in messages */
    const char *where;
    needle_error *err;
} pb_reader;

static size_t pb_offset(const pb_reader *r) { return (size_t)(r->p - r->base); }

static int pb_varint(pb_reader *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return nd_errorf(r->err, NEEDLE_EFORMAT, "%s: truncated varint at byte %zu", r->where, pb_offset(r));
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return nd_errorf(r->err, NEEDLE_EFORMAT, "%s: varint longer than 10 bytes at byte %zu", r->where, pb_offset(r));
}

/* One field: its number, wire type, and its value (varint / fixed32 / a
 * length-delimited sub-range).  Fixed64 is skipped; groups are rejected. */
typedef struct pb_field {
    uint32_t number, wire;
    uint64_t varint;
    uint32_t fixed32;
    const uint8_t *data; /* wire type 2 */
    size_t len;
} pb_field;

static int pb_next(pb_reader *r, pb_field *f)
{
    size_t at = pb_offset(r);
    uint64_t key;
    int rc = pb_varint(r, &key);
    if (rc) return rc;
    f->number = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    if (f->number == 0 || key >> 32)
        return nd_errorf(r->err, NEEDLE_EFORMAT, "%s: invalid field number at byte %zu", r->where, at);
    size_t left;
    switch (f->wire) {
    case 0: return pb_varint(r, &f->varint);
    case 1:
        if ((size_t)(r->end - r->p) < 8)
            return nd_errorf(r->err, NEEDLE_EFORMAT, "%s: truncated fixed64 at byte %zu", r->where, pb_offset(r));
        r->p += 8;
        return 0;
    case 5:
        if ((size_t)(r->end - r->p) < 4)
            return nd_errorf(r->err, NEEDLE_EFORMAT, "%s: truncated fixed32 at byte %zu", r->where, pb_offset(r));
        f->fixed32 = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
        r->p += 4;
        return 0;
    case 2: {
        uint64_t n;
        if ((rc = pb_varint(r, &n))) return rc;
        left = (size_t)(r->end - r->p);
        if (n > left)
            return nd_errorf(r->err, NEEDLE_EFORMAT,
                             "%s: field %u at byte %zu claims %llu bytes but only %zu remain", r->where, f->number, at,
                             (unsigned long long)n, left);
        f->data = r->p;
        f->len = (size_t)n;
        r->p += n;
        return 0;
    }
    default:
        return nd_errorf(r->err, NEEDLE_EFORMAT, "%s: unsupported protobuf wire type %u at byte %zu", r->where,
                         f->wire, at);
    }
}

static pb_reader pb_sub(const pb_reader *r, const pb_field *f)
{
    pb_reader s = *r;
    s.p = f->data;
    s.end = f->data + f->len;
    return s;
}

/* SentencePiece's ModelProto.SentencePiece.Type values. */
enum { SPM_NORMAL = 1, SPM_UNKNOWN = 2, SPM_CONTROL = 3, SPM_USER_DEFINED = 4, SPM_UNUSED = 5, SPM_BYTE = 6 };

static int parse_piece(const pb_reader *outer, const pb_field *msg, nd_vocab *v, int id)
{
    pb_reader r = pb_sub(outer, msg);
    const uint8_t *text = NULL;
    size_t text_len = 0;
    uint64_t type = SPM_NORMAL;
    float score = 0.0f;
    pb_field f;
    int rc;
    while (r.p < r.end) {
        if ((rc = pb_next(&r, &f))) return rc;
        if (f.number == 1 && f.wire == 2) {
            text = f.data;
            text_len = f.len;
        } else if (f.number == 2 && f.wire == 5) {
            memcpy(&score, &f.fixed32, 4);
        } else if (f.number == 3 && f.wire == 0) {
            type = f.varint;
        }
    }
    size_t at = (size_t)(msg->data - outer->base);
    if (!text)
        return nd_errorf(outer->err, NEEDLE_EFORMAT, "%s: piece %d at byte %zu has no text", outer->where, id, at);
    if (text_len > ND_PIECE_MAX_BYTES)
        return nd_errorf(outer->err, NEEDLE_EFORMAT, "%s: piece %d at byte %zu is %zu bytes long (limit %d)",
                         outer->where, id, at, text_len, ND_PIECE_MAX_BYTES);
    uint8_t t;
    switch (type) {
    case SPM_NORMAL: t = ND_PIECE_NORMAL; break;
    case SPM_UNKNOWN: t = ND_PIECE_UNKNOWN; break;
    case SPM_CONTROL: t = ND_PIECE_CONTROL; break;
    case SPM_BYTE: t = ND_PIECE_BYTE; break;
    /* Other user-defined symbols are not part of Needle's layout; they are
     * kept as ordinary pieces.  UNUSED pieces are never produced by encoding,
     * which is what CONTROL gives in the blob's type set. */
    case SPM_USER_DEFINED: t = ND_PIECE_NORMAL; break;
    case SPM_UNUSED: t = ND_PIECE_CONTROL; break;
    default:
        return nd_errorf(outer->err, NEEDLE_EFORMAT, "%s: piece %d at byte %zu has unknown type %llu", outer->where,
                         id, at, (unsigned long long)type);
    }
    if (is_chat_marker((const char *)text, text_len)) t = ND_PIECE_MARKER;
    v->types[id] = t;
    v->scores[id] = score;
    return vocab_set_piece(v, id, text, text_len);
}

/* int32 fields are sign-extended 64-bit varints on the wire. */
static int pb_int32(const pb_field *f) { return (int)(int32_t)(uint32_t)f->varint; }

int nd_vocab_from_spm(const uint8_t *data, size_t size, const char *where, nd_vocab *v, needle_error *err)
{
    memset(v, 0, sizeof *v);
    pb_reader r = {data, data + size, data, where, err};
    pb_field f;
    int rc;

    /* Pass 1: count pieces and find the two spec messages. */
    size_t n = 0;
    pb_field trainer = {0}, normalizer = {0};
    int have_trainer = 0, have_normalizer = 0;
    while (r.p < r.end) {
        if ((rc = pb_next(&r, &f))) return rc;
        if (f.number == 1 && f.wire == 2) n++;
        else if (f.number == 2 && f.wire == 2) trainer = f, have_trainer = 1;
        else if (f.number == 3 && f.wire == 2) normalizer = f, have_normalizer = 1;
    }
    if (n == 0) return nd_errorf(err, NEEDLE_EFORMAT, "%s: no pieces (not a SentencePiece model?)", where);
    if (n > ND_VOCAB_MAX_PIECES)
        return nd_errorf(err, NEEDLE_ELIMIT, "%s: %zu pieces exceed the limit of %d", where, n, ND_VOCAB_MAX_PIECES);

    /* TrainerSpec: proto defaults first (unigram, unk 0, bos 1, eos 2, pad -1). */
    uint64_t model_type = 1;
    int treat_ws_as_suffix = 0;
    int unk = 0, bos = 1, eos = 2, pad = -1, byte_fallback = 0;
    if (have_trainer) {
        pb_reader t = pb_sub(&r, &trainer);
        while (t.p < t.end) {
            if ((rc = pb_next(&t, &f))) return rc;
            if (f.wire != 0) continue;
            switch (f.number) {
            case 3: model_type = f.varint; break;
            case 24: treat_ws_as_suffix = f.varint != 0; break;
            case 35: byte_fallback = f.varint != 0; break;
            case 40: unk = pb_int32(&f); break;
            case 41: bos = pb_int32(&f); break;
            case 42: eos = pb_int32(&f); break;
            case 43: pad = pb_int32(&f); break;
            default: break;
            }
        }
    }
    if (model_type != 2)
        return nd_errorf(err, NEEDLE_EUNSUPPORTED, "%s: model_type %llu is not BPE (2); Needle tokenizers are BPE",
                         where, (unsigned long long)model_type);
    if (treat_ws_as_suffix)
        return nd_errorf(err, NEEDLE_EUNSUPPORTED, "%s: treat_whitespace_as_suffix is not supported", where);

    /* NormalizerSpec: Needle uses no normalisation.  A model that asks for
     * some (a character map, whitespace squeezing) would encode differently
     * here than in SentencePiece, so it is refused rather than mis-encoded. */
    int add_dummy_prefix = 1, remove_extra_ws = 1, escape_ws = 1;
    if (have_normalizer) {
        pb_reader t = pb_sub(&r, &normalizer);
        while (t.p < t.end) {
            if ((rc = pb_next(&t, &f))) return rc;
            if (f.number == 2 && f.wire == 2 && f.len > 0)
                return nd_errorf(err, NEEDLE_EUNSUPPORTED,
                                 "%s: normalizer has a character map (byte %zu); only identity is supported", where,
                                 (size_t)(f.data - data));
            if (f.wire != 0) continue;
            if (f.number == 3) add_dummy_prefix = f.varint != 0;
            else if (f.number == 4) remove_extra_ws = f.varint != 0;
            else if (f.number == 5) escape_ws = f.varint != 0;
        }
    }
    if (remove_extra_ws || !escape_ws)
        return nd_errorf(err, NEEDLE_EUNSUPPORTED,
                         "%s: normalizer has remove_extra_whitespaces=%d escape_whitespaces=%d; only 0 and 1 are supported",
                         where, remove_extra_ws, escape_ws);

    if ((rc = vocab_alloc(v, (int)n)))
        return nd_errorf(err, rc, "%s: out of memory for %zu pieces", where, n);
    v->unk_id = unk, v->bos_id = bos, v->eos_id = eos, v->pad_id = pad;
    v->add_dummy_prefix = add_dummy_prefix;
    v->byte_fallback = byte_fallback;

    /* Pass 2: the pieces, in order (id = position). */
    r.p = data;
    int id = 0;
    while (r.p < r.end) {
        if ((rc = pb_next(&r, &f))) goto fail;
        if (!(f.number == 1 && f.wire == 2)) continue;
        if ((rc = parse_piece(&r, &f, v, id))) {
            if (rc == NEEDLE_ENOMEM) nd_errorf(err, rc, "%s: out of memory", where);
            goto fail;
        }
        id++;
    }
    if ((rc = vocab_validate(v, where, err))) goto fail;
    return 0;
fail:
    nd_vocab_free(v);
    return rc;
}

int nd_vocab_load_spm_file(const char *path, nd_vocab *v, needle_error *err)
{
    nd_mapping m;
    memset(v, 0, sizeof *v);
    int rc = nd_map_file(path, &m, err);
    if (rc) return rc;
    rc = nd_vocab_from_spm(m.data, m.size, path, v, err);
    if (rc && rc != NEEDLE_ENOMEM) {
        nd_file_kind k = nd_file_kind_of(m.data, m.size < 64 ? m.size : 64);
        if (k > ND_KIND_EMPTY && k != ND_KIND_SENTENCEPIECE)
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: is %s, not a SentencePiece tokenizer model", path,
                           nd_file_kind_phrase(k));
    }
    nd_unmap_file(&m);
    return rc;
}

/* ---- the .cact tokenizer blob (SPEC section 8) ---- */

#define BLOB_HEADER_BYTES 24 /* 5 x u32 ids/count, u8, u8, u16 */
#define BLOB_PIECE_HEADER 7  /* f32 score, u8 type, u16 length */

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void wr_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

int nd_vocab_from_blob(const uint8_t *data, size_t size, const char *where, nd_vocab *v, needle_error *err)
{
    memset(v, 0, sizeof *v);
    if (size < BLOB_HEADER_BYTES)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob is %zu bytes, shorter than its %d-byte header",
                         where, size, BLOB_HEADER_BYTES);
    uint32_t n = rd_u32(data);
    if (n == 0 || n > ND_VOCAB_MAX_PIECES)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob n_pieces %u is out of range (1..%d) at byte 0",
                         where, n, ND_VOCAB_MAX_PIECES);
    /* Each piece needs at least 8 bytes (header + one text byte). */
    if ((size - BLOB_HEADER_BYTES) / (BLOB_PIECE_HEADER + 1) < n)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob of %zu bytes cannot hold %u pieces", where, size, n);
    int rc = vocab_alloc(v, (int)n);
    if (rc) return nd_errorf(err, rc, "%s: out of memory for %u pieces", where, n);
    v->pad_id = (int32_t)rd_u32(data + 4);
    v->eos_id = (int32_t)rd_u32(data + 8);
    v->bos_id = (int32_t)rd_u32(data + 12);
    v->unk_id = (int32_t)rd_u32(data + 16);
    v->add_dummy_prefix = data[20];
    v->byte_fallback = data[21];
    if (data[20] > 1 || data[21] > 1) {
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob flags %u,%u at byte 20 are not 0/1", where, data[20],
                       data[21]);
        goto fail;
    }
    size_t off = BLOB_HEADER_BYTES;
    for (uint32_t i = 0; i < n; i++) {
        if (size - off < BLOB_PIECE_HEADER) {
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob truncated in piece %u at byte %zu", where, i, off);
            goto fail;
        }
        uint32_t sb = rd_u32(data + off);
        memcpy(&v->scores[i], &sb, 4);
        v->types[i] = data[off + 4];
        size_t len = (size_t)data[off + 5] | (size_t)data[off + 6] << 8;
        off += BLOB_PIECE_HEADER;
        if (v->types[i] > ND_PIECE_BYTE) {
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob piece %u has type %u at byte %zu", where, i,
                           v->types[i], off - 3);
            goto fail;
        }
        if (size - off < len) {
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob piece %u at byte %zu claims %zu bytes, %zu remain",
                           where, i, off, len, size - off);
            goto fail;
        }
        if ((rc = vocab_set_piece(v, (int)i, data + off, len))) {
            nd_errorf(err, rc, "%s: out of memory", where);
            goto fail;
        }
        off += len;
    }
    if (off != size) {
        rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: %zu stray bytes after the last tokenizer piece at byte %zu", where,
                       size - off, off);
        goto fail;
    }
    if ((rc = vocab_validate(v, where, err))) goto fail;
    return 0;
fail:
    nd_vocab_free(v);
    return rc;
}

int nd_vocab_to_blob(const nd_vocab *v, uint8_t **out, size_t *out_size, needle_error *err)
{
    *out = NULL;
    *out_size = 0;
    if (!v || v->n_pieces <= 0 || v->n_pieces > ND_VOCAB_MAX_PIECES)
        return nd_errorf(err, NEEDLE_EINVAL, "tokenizer blob: vocabulary has %d pieces", v ? v->n_pieces : 0);
    size_t size = BLOB_HEADER_BYTES;
    for (int i = 0; i < v->n_pieces; i++) {
        if (v->piece_lens[i] < 0 || v->piece_lens[i] > ND_PIECE_MAX_BYTES)
            return nd_errorf(err, NEEDLE_EINVAL, "tokenizer blob: piece %d is %d bytes (limit %d)", i,
                             v->piece_lens[i], ND_PIECE_MAX_BYTES);
        if (v->types[i] > ND_PIECE_BYTE)
            return nd_errorf(err, NEEDLE_EINVAL, "tokenizer blob: piece %d has type %d", i, v->types[i]);
        size += BLOB_PIECE_HEADER + (size_t)v->piece_lens[i];
    }
    uint8_t *b = malloc(size);
    if (!b) return nd_errorf(err, NEEDLE_ENOMEM, "tokenizer blob: out of memory for %zu bytes", size);
    wr_u32(b, (uint32_t)v->n_pieces);
    wr_u32(b + 4, (uint32_t)v->pad_id);
    wr_u32(b + 8, (uint32_t)v->eos_id);
    wr_u32(b + 12, (uint32_t)v->bos_id);
    wr_u32(b + 16, (uint32_t)v->unk_id);
    b[20] = v->add_dummy_prefix ? 1 : 0;
    b[21] = v->byte_fallback ? 1 : 0;
    b[22] = b[23] = 0;
    size_t off = BLOB_HEADER_BYTES;
    for (int i = 0; i < v->n_pieces; i++) {
        uint32_t sb;
        memcpy(&sb, &v->scores[i], 4); /* bit-exact: keeps -0.0 as the reference writes it */
        wr_u32(b + off, sb);
        b[off + 4] = v->types[i];
        b[off + 5] = (uint8_t)v->piece_lens[i];
        b[off + 6] = (uint8_t)(v->piece_lens[i] >> 8);
        off += BLOB_PIECE_HEADER;
        memcpy(b + off, v->pieces[i], (size_t)v->piece_lens[i]);
        off += (size_t)v->piece_lens[i];
    }
    *out = b;
    *out_size = size;
    return 0;
}
