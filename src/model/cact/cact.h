/* cact.h - the .cact deploy file (SPEC section 8): structs, reader, layout, writer.
 *
 * Layout of a file (little-endian, positional, no tensor names):
 *   header     120 bytes: 29 u32 + f32 rope_theta
 *   codebooks  codebook_len (28) f32: cb2[4] | cb3[8] | cb4[16], already / sqrt(128)
 *   directory  num_tensors records of 44 bytes
 *   blobs      each starting 64-byte aligned, zero padding between them
 * Which tensor is which follows from position alone: nd_cact_layout lists the
 * expected sequence for a geometry, and both the writer and the model loader
 * (model/cact/cact_load.c) work from that one list.
 */
#ifndef ND_CACT_H
#define ND_CACT_H

#include <stddef.h>
#include <stdint.h>

#include "core/file.h"
#include "model/config.h"
#include "model/params.h"
#include "needle.h"

#define ND_CACT_TAG 0x05E12A83u
#define ND_CACT_HEADER_BYTES 120
/* Needle 3 (SPEC-needle3 5.7): its own tag, a 196-byte header (48 u32 + f32) */
#define ND_CACT_TAG_V3 0x05E12A84u
#define ND_CACT_HEADER_BYTES_V3 196
#define ND_CACT_MAX_SITES_V3 16
/* CQ bits 1 (binary, v3 only): codebook {-sqrt(2/pi), +sqrt(2/pi)} / sqrt(128), not in the header */
#define ND_CACT_BITS_BINARY 1
#define ND_CACT_RECORD_BYTES 44
#define ND_CACT_CODEBOOK_LEN 28
#define ND_CACT_ALIGN 64
#define ND_CACT_CONV_TAPS 4
/* A sanity bound on the directory: the base model has 1+14*27+6+3+8+1+7+1 = 405. */
#define ND_CACT_MAX_TENSORS 65536

enum { ND_CACT_FP16 = 1, ND_CACT_FP32 = 2, ND_CACT_CQ = 3, ND_CACT_RAW = 4 };
/* heads.manifest codes: ND_HEAD_CONTRASTIVE, ND_HEAD_CONFIDENCE (model/params.h) */

typedef struct nd_cact_header {
    uint32_t version; /* 2 or 3, from the tag */
    uint32_t tag, num_tensors, codebook_len, kv_window, kv_bits, vocab, d_model, num_heads, num_kv_heads,
        num_layers, head_dim, max_seq_len, hada_n, mhc_lanes, engram_slots, engram_sub_dim, num_engram_tables,
        conv_taps, conv_dilation, num_orders, orders[4], num_sites, sites[ND_CACT_MAX_SITES_V3];
    float rope_theta;
    /* v3 only (head_dim holds qk_head_dim there) */
    uint32_t out_vocab, v_head_dim, sliding_window, global_mask_lo, global_mask_hi, qkv_conv_taps, engram_seed_heads;
} nd_cact_header;

/* The header's size for its version. */
static inline size_t nd_cact_header_bytes(const nd_cact_header *h)
{
    return h->version == 3 ? ND_CACT_HEADER_BYTES_V3 : ND_CACT_HEADER_BYTES;
}

typedef struct nd_cact_record {
    uint8_t dtype, ndim;
    uint16_t pad;
    uint32_t shape[4];
    uint64_t offset, nbytes;
    uint32_t group, bits;
} nd_cact_record;

/* ---- container-level reading ---- */

/* A parsed file: header, codebooks and directory, every record checked for
 * a known dtype, consistent ndim/shape/nbytes/group/bits, a 64-byte aligned
 * blob inside the file after the directory, and no two blobs overlapping. */
typedef struct nd_cact_file {
    nd_mapping map; /* empty when parsed from a caller's buffer */
    const uint8_t *data;
    size_t size;
    nd_cact_header hdr;
    float codebooks[ND_CACT_CODEBOOK_LEN];
    nd_cact_record *records; /* hdr.num_tensors, malloc'd */
} nd_cact_file;

/* Parse data[0..size) (not copied: it must outlive f).  `where` names the
 * source in messages.  Errors are NEEDLE_EFORMAT naming the field and offset. */
int nd_cact_parse(const uint8_t *data, size_t size, const char *where, nd_cact_file *f, needle_error *err);
/* Map and parse a file. */
int nd_cact_open(const char *path, nd_cact_file *f, needle_error *err);
void nd_cact_close(nd_cact_file *f);
/* 1 when the buffer starts with the .cact tag. */
int nd_cact_sniff(const uint8_t *data, size_t size);

/* Structural check of a tokenizer blob (SPEC section 8): every length inside
 * the blob, types 0..4, special ids < n_pieces, no trailing bytes. */
int nd_cact_check_tokenizer_blob(const uint8_t *blob, size_t size, const char *where, needle_error *err);

/* ---- the positional layout ---- */

/* A slot is a parameter of model/params.def (role ND_P_*, in the table's
 * order) or one of these two, which are not parameters. */
enum { ND_SLOT_MANIFEST = ND_P_COUNT, ND_SLOT_TOKENIZER };

/* How a slot is stored: float data as FP16 (FP32 accepted on read), a CQ
 * matrix, or raw bytes. */
enum { ND_SLOT_FLOAT = 0, ND_SLOT_QUANT = 1, ND_SLOT_BYTES = 2 };

typedef struct nd_cact_slot {
    int role;                   /* nd_param_role, ND_SLOT_MANIFEST or ND_SLOT_TOKENIZER */
    const nd_param_desc *param; /* NULL for the manifest and the tokenizer */
    int storage;    /* ND_SLOT_FLOAT / QUANT / BYTES */
    int layer;      /* per-layer slots */
    int site;       /* per-site slots: site index */
    int head;       /* head slots: index in the manifest */
    int head_code;  /* head slots: ND_HEAD_* */
    int head_kind;  /* head slots: index in nd_param_heads (ND_HEAD_INDEX_*) */
    int flat3;      /* accepted from a 3-D float record whose first two axes flatten to rows (v3 FP16 head probes) */
    int ndim;
    uint32_t shape[4];
    char name[48];      /* display name, e.g. "layers.2.attn.q_proj" */
    char canonical[32]; /* bits-map name for QUANT slots ("attn.q_proj", "engram1.tables") */
} nd_cact_slot;

/* A head as the layout needs it. */
typedef struct nd_cact_head_shape {
    int code;        /* ND_HEAD_* */
    int num_probes;  /* P (v3: probes per row k) */
    int out_dim;     /* rows of proj */
    int num_queries; /* v3: q */
} nd_cact_head_shape;

/* The expected tensor sequence for geometry cfg (derived fields filled) and
 * the given heads (n_heads may be 0).  *slots is malloc'd. */
int nd_cact_layout(const nd_config *cfg, const nd_cact_head_shape *heads, int n_heads, nd_cact_slot **slots,
                   int *count, needle_error *err);

/* Geometry from a header (validated through nd_config_derive). */
int nd_cact_header_to_config(const nd_cact_header *h, const char *where, nd_config *cfg, needle_error *err);
/* Header from a geometry (kv_window as given; num_tensors filled by the writer). */
void nd_cact_config_to_header(const nd_config *cfg, int kv_window, nd_cact_header *h);

/* Geometry + heads + layout of a parsed file, with every record's dtype and
 * shape checked against its slot and the tokenizer blob checked. */
int nd_cact_resolve(const nd_cact_file *f, const char *where, nd_config *cfg, nd_cact_slot **slots,
                    needle_error *err);

/* ---- loading (cact_load.c; nd_weights_load_cact is in weights.h) ---- */

struct nd_weights;
struct nd_vocab;

/* nd_weights from a .cact image in memory (not copied: data must outlive w;
 * w->map stays empty, nd_weights_free releases the rest). */
int nd_weights_load_cact_buffer(const uint8_t *data, size_t size, const char *where, struct nd_weights *w,
                                needle_error *err);
/* nd_weights_load_cact, with the heads' float tensors widened lazily when
 * lazy_heads is set (weights.h: nd_weights_load_lazy_heads). */
int nd_weights_load_cact_opt(const char *path, int lazy_heads, struct nd_weights *w, needle_error *err);
struct nd_lazy_heads;
void nd_lazy_heads_free(struct nd_lazy_heads *lh);

/* ---- writing ---- */

typedef struct nd_cact_write_stats {
    uint64_t bytes;  /* file size */
    int tensors;     /* records, tokenizer included */
    int kv_window;   /* as stored in the header */
    int default_bits;
} nd_cact_write_stats;

/* Quantise and write w (float or CQ matrices; heads written when present)
 * with the tokenizer `vocab` to path, atomically.  bits_map: a map such as
 * "default=4,embedding=3" (NULL or "" = w->cfg.weight_bits, else "default=4").
 * The header's kv_window is nd_config_effective_window(&w->cfg).
 * stats may be NULL. */
int nd_cact_write(const char *path, const struct nd_weights *w, const struct nd_vocab *vocab, const char *bits_map,
                  nd_cact_write_stats *stats, needle_error *err);

#endif
