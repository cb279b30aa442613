/* cact_layout.c - the positional tensor sequence of a .cact file, the
 * header <-> geometry mapping, and checking a parsed file against both. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fp16.h"
#include "model/cact/cact.h"

/* ---- building the slot list ---- */

typedef struct layout_builder {
    nd_cact_slot *slots;
    int count, cap;
    int overflow; /* a shape dimension did not fit in u32 */
} layout_builder;

static nd_cact_slot *add_slot(layout_builder *b, nd_slot_role role, int storage, int ndim, const uint64_t *dims,
                              const char *name_fmt, ...) __attribute__((format(printf, 6, 7)));

static nd_cact_slot *add_slot(layout_builder *b, nd_slot_role role, int storage, int ndim, const uint64_t *dims,
                              const char *name_fmt, ...)
{
    if (b->count == b->cap) return NULL; /* capacity is computed exactly up front */
    nd_cact_slot *s = &b->slots[b->count++];
    memset(s, 0, sizeof *s);
    s->role = role;
    s->storage = storage;
    s->layer = s->site = s->head = -1;
    s->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] == 0 || dims[i] > 0xFFFFFFFFu) b->overflow = 1;
        s->shape[i] = (uint32_t)dims[i];
    }
    va_list ap;
    va_start(ap, name_fmt);
    vsnprintf(s->name, sizeof s->name, name_fmt, ap);
    va_end(ap);
    return s;
}

#define DIMS(...) ((const uint64_t[]){__VA_ARGS__})

int nd_cact_layout(const nd_config *c, const nd_cact_head_shape *heads, int n_heads, nd_cact_slot **out, int *count,
                   needle_error *err)
{
    *out = NULL;
    *count = 0;
    int L = c->num_layers, S = c->num_sites;
    if (L <= 0 || S < 0 || S > ND_MAX_SITES || n_heads < 0 || n_heads > 2)
        return nd_errorf(err, NEEDLE_EINVAL, "cact layout: bad geometry (%d layers, %d sites, %d heads)", L, S, n_heads);
    layout_builder b = {0};
    b.cap = 1 + 14 * L + 6 + 3 + 4 * S + 1 + (n_heads ? 1 + 3 * n_heads : 0) + 1;
    b.slots = calloc((size_t)b.cap, sizeof *b.slots);
    if (!b.slots) return nd_errorf(err, NEEDLE_ENOMEM, "cact layout: out of memory");

    uint64_t V = (uint64_t)c->vocab_size, d = (uint64_t)c->d_model, A = (uint64_t)c->num_heads * (uint64_t)c->head_dim;
    uint64_t KV = (uint64_t)c->kv_dim, hd = (uint64_t)c->head_dim, Nh = (uint64_t)c->hada_n;
    uint64_t n = (uint64_t)c->mhc_lanes, Te = (uint64_t)c->num_tables, sub = (uint64_t)c->engram_sub;
    uint64_t slots = (uint64_t)c->engram_slots, uL = (uint64_t)L;
    nd_cact_slot *s;

    s = add_slot(&b, ND_SLOT_EMBEDDING, ND_SLOT_QUANT, 2, DIMS(V, d), "embedding");
    strcpy(s->canonical, "embedding");
    for (int l = 0; l < L; l++) {
        /* the per-layer block, in the reference exporter's order */
        static const struct {
            nd_slot_role role;
            const char *name; /* display suffix; canonical for projections */
            int quant;
        } block[14] = {
            {ND_SLOT_NORM_IN, "norm_in", 0},         {ND_SLOT_Q_PROJ, "attn.q_proj", 1},
            {ND_SLOT_K_PROJ, "attn.k_proj", 1},      {ND_SLOT_V_PROJ, "attn.v_proj", 1},
            {ND_SLOT_Q_NORM, "attn.q_norm", 0},      {ND_SLOT_K_NORM, "attn.k_norm", 0},
            {ND_SLOT_GATE_PROJ, "attn.gate_proj", 1}, {ND_SLOT_OUT_PROJ, "attn.out_proj", 1},
            {ND_SLOT_POST_NORM, "post_attn_norm", 0}, {ND_SLOT_ATTN_GATE, "attn_gate", 0},
            {ND_SLOT_PRE_HADA, "pre_hada_norm", 0},  {ND_SLOT_D1, "mlp.d1", 0},
            {ND_SLOT_D2, "mlp.d2", 0},               {ND_SLOT_D3, "mlp.d3", 0},
        };
        for (int k = 0; k < 14; k++) {
            uint64_t rows = 0, cols = 0, len = 0;
            switch (block[k].role) {
            case ND_SLOT_Q_PROJ: case ND_SLOT_GATE_PROJ: rows = A, cols = d; break;
            case ND_SLOT_K_PROJ: case ND_SLOT_V_PROJ: rows = KV, cols = d; break;
            case ND_SLOT_OUT_PROJ: rows = d, cols = A; break;
            case ND_SLOT_Q_NORM: case ND_SLOT_K_NORM: len = hd; break;
            case ND_SLOT_ATTN_GATE: len = 1; break;
            case ND_SLOT_D1: case ND_SLOT_D2: case ND_SLOT_D3: len = Nh; break;
            default: len = d; break;
            }
            if (block[k].quant) {
                s = add_slot(&b, block[k].role, ND_SLOT_QUANT, 2, DIMS(rows, cols), "layers.%d.%s", l, block[k].name);
                snprintf(s->canonical, sizeof s->canonical, "%s", block[k].name);
            } else {
                s = add_slot(&b, block[k].role, ND_SLOT_FLOAT, 1, DIMS(len), "layers.%d.%s", l, block[k].name);
            }
            s->layer = l;
        }
    }
    add_slot(&b, ND_SLOT_A_PRE, ND_SLOT_FLOAT, 1, DIMS(uL), "mhc_a_pre");
    add_slot(&b, ND_SLOT_A_POST, ND_SLOT_FLOAT, 1, DIMS(uL), "mhc_a_post");
    add_slot(&b, ND_SLOT_A_RES, ND_SLOT_FLOAT, 1, DIMS(uL), "mhc_a_res");
    add_slot(&b, ND_SLOT_B_PRE, ND_SLOT_FLOAT, 2, DIMS(uL, n), "mhc_b_pre");
    add_slot(&b, ND_SLOT_B_POST, ND_SLOT_FLOAT, 2, DIMS(uL, n), "mhc_b_post");
    add_slot(&b, ND_SLOT_B_RES, ND_SLOT_FLOAT, 3, DIMS(uL, n, n), "mhc_b_res");
    s = add_slot(&b, ND_SLOT_PHI_PRE, ND_SLOT_QUANT, 2, DIMS(uL * n, n * d), "mhc_phi_pre");
    strcpy(s->canonical, "mhc_phi_pre");
    s = add_slot(&b, ND_SLOT_PHI_POST, ND_SLOT_QUANT, 2, DIMS(uL * n, n * d), "mhc_phi_post");
    strcpy(s->canonical, "mhc_phi_post");
    s = add_slot(&b, ND_SLOT_PHI_RES, ND_SLOT_QUANT, 2, DIMS(uL * n * n, n * d), "mhc_phi_res");
    strcpy(s->canonical, "mhc_phi_res");
    for (int i = 0; i < S; i++) {
        s = add_slot(&b, ND_SLOT_TABLES, ND_SLOT_QUANT, 2, DIMS(Te * slots, sub), "engram%d.tables", i);
        snprintf(s->canonical, sizeof s->canonical, "engram%d.tables", i);
        s->site = i;
        s = add_slot(&b, ND_SLOT_KEY_PROJ, ND_SLOT_QUANT, 2, DIMS(d, Te * sub), "engram%d.key_proj", i);
        snprintf(s->canonical, sizeof s->canonical, "engram%d.key_proj", i);
        s->site = i;
        s = add_slot(&b, ND_SLOT_VALUE_PROJ, ND_SLOT_QUANT, 2, DIMS(d, Te * sub), "engram%d.value_proj", i);
        snprintf(s->canonical, sizeof s->canonical, "engram%d.value_proj", i);
        s->site = i;
        s = add_slot(&b, ND_SLOT_TAPS, ND_SLOT_FLOAT, 2, DIMS(ND_CACT_CONV_TAPS, d), "engram%d.taps", i);
        s->site = i;
    }
    add_slot(&b, ND_SLOT_FINAL_NORM, ND_SLOT_FLOAT, 1, DIMS(d), "final_norm");
    if (n_heads > 0) add_slot(&b, ND_SLOT_MANIFEST, ND_SLOT_FLOAT, 1, DIMS((uint64_t)n_heads), "heads.manifest");
    for (int k = 0; k < n_heads; k++) {
        const char *hn = heads[k].code == ND_HEAD_CONTRASTIVE ? "contrastive" : "confidence";
        uint64_t P = (uint64_t)heads[k].num_probes, out_dim = (uint64_t)heads[k].out_dim;
        if (heads[k].num_probes <= 0 || heads[k].out_dim <= 0) b.overflow = 1;
        nd_cact_slot *hs[3];
        hs[0] = add_slot(&b, ND_SLOT_HEAD_PROBES, ND_SLOT_FLOAT, 2, DIMS(P, d), "%s.probes", hn);
        hs[1] = add_slot(&b, ND_SLOT_HEAD_PROJ, ND_SLOT_FLOAT, 2, DIMS(out_dim, P * d), "%s.proj", hn);
        hs[2] = add_slot(&b, ND_SLOT_HEAD_BIAS, ND_SLOT_FLOAT, 1, DIMS(out_dim), "%s.bias", hn);
        for (int j = 0; j < 3; j++) hs[j]->head = k, hs[j]->head_code = heads[k].code;
    }
    s = add_slot(&b, ND_SLOT_TOKENIZER, ND_SLOT_BYTES, 0, NULL, "tokenizer");
    if (b.overflow || b.count != b.cap) {
        free(b.slots);
        return nd_errorf(err, NEEDLE_EINVAL, "cact layout: a tensor dimension is zero or exceeds 2^32");
    }
    *out = b.slots;
    *count = b.count;
    return 0;
}

/* ---- header <-> geometry ---- */

void nd_cact_config_to_header(const nd_config *c, int kv_window, nd_cact_header *h)
{
    memset(h, 0, sizeof *h);
    h->tag = ND_CACT_TAG;
    h->codebook_len = ND_CACT_CODEBOOK_LEN;
    h->kv_window = (uint32_t)kv_window;
    h->kv_bits = (uint32_t)c->kv_bits;
    h->vocab = (uint32_t)c->vocab_size;
    h->d_model = (uint32_t)c->d_model;
    h->num_heads = (uint32_t)c->num_heads;
    h->num_kv_heads = (uint32_t)c->num_kv_heads;
    h->num_layers = (uint32_t)c->num_layers;
    h->head_dim = (uint32_t)c->head_dim;
    h->max_seq_len = (uint32_t)c->max_seq_len;
    h->hada_n = (uint32_t)c->hada_n;
    h->mhc_lanes = (uint32_t)c->mhc_lanes;
    h->engram_slots = (uint32_t)c->engram_slots;
    h->engram_sub_dim = (uint32_t)c->engram_sub;
    h->num_engram_tables = (uint32_t)c->num_tables;
    h->conv_taps = ND_CACT_CONV_TAPS;
    h->conv_dilation = (uint32_t)c->conv_dilation;
    h->num_orders = (uint32_t)c->num_orders;
    for (int i = 0; i < c->num_orders && i < 4; i++) h->orders[i] = (uint32_t)c->engram_orders[i];
    h->num_sites = (uint32_t)c->num_sites;
    for (int i = 0; i < c->num_sites && i < 4; i++) h->sites[i] = (uint32_t)c->engram_layers[i];
    h->rope_theta = c->rope_theta;
}

/* Upper bounds that keep every derived size comfortably inside int and the
 * product checks of the layout meaningful. */
static int check_field(uint32_t v, uint32_t lo, uint32_t hi, const char *field, int byte, const char *where,
                       needle_error *err)
{
    if (v < lo || v > hi)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header %s = %u at byte %d out of range [%u, %u]", where, field, v, byte,
                         lo, hi);
    return 0;
}

int nd_cact_header_to_config(const nd_cact_header *h, const char *where, nd_config *c, needle_error *err)
{
    int rc;
#define FIELD(f, lo, hi, byte) \
    if ((rc = check_field(h->f, lo, hi, #f, byte, where, err))) return rc
    FIELD(kv_bits, 0, 32, 16);
    FIELD(vocab, 1, 1u << 24, 20);
    FIELD(d_model, 1, 1u << 16, 24);
    FIELD(num_heads, 1, 1024, 28);
    FIELD(num_kv_heads, 1, 1024, 32);
    FIELD(num_layers, 1, 4096, 36);
    FIELD(head_dim, 1, 1u << 14, 40);
    FIELD(max_seq_len, 1, 1u << 24, 44);
    FIELD(kv_window, 0, 1u << 24, 12);
    FIELD(hada_n, 1, 1u << 17, 48);
    FIELD(mhc_lanes, 1, 64, 52);
    FIELD(engram_slots, 1, 1u << 24, 56);
    FIELD(engram_sub_dim, 1, 1u << 16, 60);
    FIELD(num_engram_tables, 1, 4096, 64);
    FIELD(conv_taps, ND_CACT_CONV_TAPS, ND_CACT_CONV_TAPS, 68);
    FIELD(conv_dilation, 1, 64, 72);
    FIELD(num_orders, 1, ND_MAX_ORDERS, 76);
    FIELD(num_sites, 0, ND_MAX_SITES, 96);
#undef FIELD
    if (!isfinite(h->rope_theta) || h->rope_theta <= 0.0f)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header rope_theta %g at byte 116 is not a positive number", where,
                         (double)h->rope_theta);
    if (h->num_heads % h->num_kv_heads != 0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header num_heads %u not a multiple of num_kv_heads %u (byte 28)", where,
                         h->num_heads, h->num_kv_heads);
    if (h->num_engram_tables % h->num_orders != 0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header num_engram_tables %u not a multiple of num_orders %u (byte 64)",
                         where, h->num_engram_tables, h->num_orders);
    for (uint32_t i = 0; i < 4; i++) {
        if (i < h->num_orders ? (h->orders[i] < 1 || h->orders[i] > 8) : h->orders[i] != 0)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: header orders[%u] = %u at byte %u invalid", where, i, h->orders[i],
                             80 + 4 * i);
        if (i < h->num_sites ? h->sites[i] >= h->num_layers : h->sites[i] != 0)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: header sites[%u] = %u at byte %u invalid", where, i, h->sites[i],
                             100 + 4 * i);
    }
    nd_config_defaults(c);
    c->vocab_size = (int)h->vocab;
    c->d_model = (int)h->d_model;
    c->num_heads = (int)h->num_heads;
    c->num_kv_heads = (int)h->num_kv_heads;
    c->attn_dim = (int)(h->num_heads * h->head_dim);
    c->num_layers = (int)h->num_layers;
    c->max_seq_len = (int)h->max_seq_len;
    c->rope_theta = h->rope_theta;
    c->num_orders = (int)h->num_orders;
    for (int i = 0; i < ND_MAX_ORDERS; i++) c->engram_orders[i] = (int)h->orders[i];
    c->engram_heads = (int)(h->num_engram_tables / h->num_orders);
    c->engram_slots = (int)h->engram_slots;
    c->num_sites = (int)h->num_sites;
    for (int i = 0; i < ND_MAX_SITES; i++) c->engram_layers[i] = (int)h->sites[i];
    c->mhc_lanes = (int)h->mhc_lanes;
    c->kv_window = (int)h->kv_window;
    c->kv_bits = (int)h->kv_bits;
    needle_error derr;
    if (nd_config_derive(c, where, &derr) != 0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header geometry is inconsistent: %s", where, derr.message);
    /* fields the header states that also follow from the others must agree */
    struct {
        const char *name;
        uint32_t stored;
        int derived, byte;
    } echo[] = {
        {"head_dim", h->head_dim, c->head_dim, 40},
        {"hada_n", h->hada_n, c->hada_n, 48},
        {"engram_sub_dim", h->engram_sub_dim, c->engram_sub, 60},
        {"num_engram_tables", h->num_engram_tables, c->num_tables, 64},
        {"conv_dilation", h->conv_dilation, c->conv_dilation, 72},
    };
    for (size_t i = 0; i < sizeof echo / sizeof echo[0]; i++)
        if ((int)echo[i].stored != echo[i].derived)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: header %s = %u at byte %d contradicts the geometry (expected %d)",
                             where, echo[i].name, echo[i].stored, echo[i].byte, echo[i].derived);
    return 0;
}

/* ---- a parsed file against its layout ---- */

static float record_float_at(const nd_cact_file *f, const nd_cact_record *r, uint64_t i)
{
    const uint8_t *p = f->data + r->offset;
    if (r->dtype == ND_CACT_FP16) return nd_half_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                 (uint32_t)p[4 * i + 3] << 24;
    return nd_f32_from_bits(u);
}

static int is_float_dtype(int dt) { return dt == ND_CACT_FP16 || dt == ND_CACT_FP32; }

/* The heads block: read the manifest and the head shapes the layout needs. */
static int resolve_heads(const nd_cact_file *f, const char *where, uint32_t fixed, nd_cact_head_shape *heads,
                         int *n_heads, needle_error *err)
{
    uint32_t n = f->hdr.num_tensors;
    *n_heads = 0;
    if (n == fixed + 1) return 0; /* no heads: the tokenizer follows final_norm */
    const nd_cact_record *m = &f->records[fixed];
    if (n < fixed + 1 || !is_float_dtype(m->dtype) || m->ndim != 1 || m->shape[0] > 2 ||
        n != fixed + 1 + 3 * m->shape[0] + 1)
        return nd_errorf(err, NEEDLE_EFORMAT,
                         "%s: num_tensors %u does not fit the geometry (%u without heads, or a heads.manifest at "
                         "tensor %u with 3 tensors per head)",
                         where, n, fixed + 1, fixed);
    int H = (int)m->shape[0];
    for (int k = 0; k < H; k++) {
        float code = record_float_at(f, m, (uint64_t)k);
        if (code != ND_HEAD_CONTRASTIVE && code != ND_HEAD_CONFIDENCE)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: heads.manifest (tensor %u) entry %d = %g is not 1 or 2", where,
                             fixed, k, (double)code);
        for (int j = 0; j < k; j++)
            if (heads[j].code == (int)code)
                return nd_errorf(err, NEEDLE_EFORMAT, "%s: heads.manifest (tensor %u) lists head %d twice", where, fixed,
                                 (int)code);
        const nd_cact_record *probes = &f->records[fixed + 1 + 3 * k], *proj = probes + 1;
        if (probes->ndim != 2 || proj->ndim != 2)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: head %d: probes (tensor %u) and proj must be 2-D", where, k,
                             fixed + 1 + 3 * k);
        heads[k].code = (int)code;
        heads[k].num_probes = (int)probes->shape[0];
        heads[k].out_dim = (int)proj->shape[0];
    }
    *n_heads = H;
    return 0;
}

int nd_cact_resolve(const nd_cact_file *f, const char *where, nd_config *cfg, nd_cact_slot **out, needle_error *err)
{
    *out = NULL;
    int rc = nd_cact_header_to_config(&f->hdr, where, cfg, err);
    if (rc) return rc;
    uint32_t fixed = 1 + 14 * f->hdr.num_layers + 6 + 3 + 4 * f->hdr.num_sites + 1;
    if (f->hdr.num_tensors < fixed + 1)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: num_tensors %u at byte 4, the geometry needs at least %u", where,
                         f->hdr.num_tensors, fixed + 1);
    nd_cact_head_shape heads[2];
    int n_heads = 0;
    if ((rc = resolve_heads(f, where, fixed, heads, &n_heads, err))) return rc;
    nd_cact_slot *slots;
    int count;
    needle_error lerr;
    if (nd_cact_layout(cfg, heads, n_heads, &slots, &count, &lerr))
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: %s", where, lerr.message);
    if ((uint32_t)count != f->hdr.num_tensors) { /* cannot happen after resolve_heads; kept as a guard */
        free(slots);
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: num_tensors %u, layout has %d", where, f->hdr.num_tensors, count);
    }
    for (int i = 0; i < count && !rc; i++) {
        const nd_cact_slot *s = &slots[i];
        const nd_cact_record *r = &f->records[i];
        int ok_dtype = s->storage == ND_SLOT_BYTES ? r->dtype == ND_CACT_RAW
                       : s->storage == ND_SLOT_QUANT ? (r->dtype == ND_CACT_CQ || is_float_dtype(r->dtype))
                                                     : is_float_dtype(r->dtype);
        if (!ok_dtype) {
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %d (%s): dtype %u where %s is expected", where, i, s->name,
                           r->dtype, s->storage == ND_SLOT_BYTES ? "RAW" : s->storage == ND_SLOT_QUANT ? "CQ" : "FP16");
            break;
        }
        int same = r->ndim == s->ndim;
        for (int d = 0; d < 4 && same; d++) same = r->shape[d] == s->shape[d];
        if (!same)
            rc = nd_errorf(err, NEEDLE_EFORMAT,
                           "%s: tensor %d (%s): shape (%u,%u,%u,%u)/%u contradicts the header (expected (%u,%u,%u,%u)/%d)",
                           where, i, s->name, r->shape[0], r->shape[1], r->shape[2], r->shape[3], r->ndim, s->shape[0],
                           s->shape[1], s->shape[2], s->shape[3], s->ndim);
    }
    if (!rc) {
        const nd_cact_record *t = &f->records[count - 1];
        rc = nd_cact_check_tokenizer_blob(f->data + t->offset, (size_t)t->nbytes, where, err);
        if (!rc && (uint64_t)(f->data[t->offset] | f->data[t->offset + 1] << 8 | f->data[t->offset + 2] << 16 |
                              (uint64_t)f->data[t->offset + 3] << 24) > f->hdr.vocab)
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tokenizer blob has more pieces than the header's vocab %u", where,
                           f->hdr.vocab);
    }
    if (rc) {
        free(slots);
        return rc;
    }
    *out = slots;
    return 0;
}
