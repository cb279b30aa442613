/* cact_layout.c - the positional tensor sequence of a .cact file, the
 * header <-> geometry mapping, and checking a parsed file against both. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fp16.h"
#include "model/cact/cact.h"

/* ---- building the slot list ----
 *
 * The sequence is model/params.def walked in order.  Consecutive lines of the
 * same scope (and, for layers, the same `stacked` flag) form a group that is
 * written once per instance: the per-layer block once per layer, a site's
 * tensors once per site, a head's once per head (after a heads.manifest);
 * GLOBAL lines and stacked layer lines once (stacked ones with all layers).
 * The tokenizer closes the file. */

typedef struct layout_builder {
    nd_cact_slot *slots; /* NULL: only count */
    int count, cap;
    int overflow; /* a shape dimension did not fit in u32 */
    nd_cact_slot scratch; /* the counting pass writes here */
} layout_builder;

static nd_cact_slot *add_slot(layout_builder *b, int role, int storage, int ndim, const uint64_t *dims)
{
    nd_cact_slot *s = &b->scratch;
    if (b->slots) {
        if (b->count == b->cap) return NULL; /* capacity is computed exactly up front */
        s = &b->slots[b->count];
    }
    b->count++;
    memset(s, 0, sizeof *s);
    s->role = role;
    s->param = role < ND_P_COUNT ? &nd_params[role] : NULL;
    s->storage = storage;
    s->layer = s->site = s->head = s->head_kind = -1;
    s->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] == 0 || dims[i] > 0xFFFFFFFFu) b->overflow = 1;
        s->shape[i] = (uint32_t)dims[i];
    }
    return s;
}

/* A dimension of a slot: head dimensions come from the file's heads. */
static uint64_t slot_dim(const nd_config *c, nd_dim dim, const nd_cact_head_shape *h)
{
    int64_t v = nd_dim_value_head(c, dim, h ? h->num_probes : 0, h ? h->num_queries : 0, h ? h->out_dim : 0);
    return v > 0 ? (uint64_t)v : 0;
}

/* The slot of parameter p for one instance (layer / site / head index, -1 for once). */
static void add_param_slot(layout_builder *b, const nd_config *c, const nd_param_desc *p, int instance,
                           const nd_cact_head_shape *h)
{
    uint64_t dims[4], L = (uint64_t)c->num_layers;
    int ndim = 0;
    if (p->kind == ND_KIND_MATRIX) {
        dims[ndim++] = slot_dim(c, p->rows, h) * (p->stacked ? L : 1);
        dims[ndim++] = slot_dim(c, p->cols, h);
    } else {
        if (p->stacked) dims[ndim++] = L;
        for (int i = 0; i < ND_PARAM_CK_DIMS && p->ck[i] != ND_DIM_NONE; i++) dims[ndim++] = slot_dim(c, p->ck[i], h);
        if (ndim == 0) dims[ndim++] = 1; /* a per-layer scalar is stored as (1) */
    }
    nd_cact_slot *s = add_slot(b, p->role, p->cq ? ND_SLOT_QUANT : ND_SLOT_FLOAT, ndim, dims);
    if (!s || !b->slots) return;
    char base[40];
    const nd_head_kind *hk = h ? &nd_param_heads[h->code - 1] : NULL;
    if (p->scope == ND_SCOPE_SITE) snprintf(base, sizeof base, p->cact_name, instance);
    else if (p->scope == ND_SCOPE_HEAD)
        snprintf(base, sizeof base, p->cact_name, nd_config_generation(c) == 3 ? hk->name3 : hk->name);
    else snprintf(base, sizeof base, "%s", p->cact_name);
    s->name[0] = '\0';
    if (p->scope == ND_SCOPE_LAYER && !p->stacked) {
        snprintf(s->name, sizeof s->name, "layers.%d.", instance);
        s->layer = instance;
    }
    size_t at = strlen(s->name);
    snprintf(s->name + at, sizeof s->name - at, "%.*s", (int)(sizeof s->name - 1 - at), base);
    /* bits-map names: a v3 head's matrices are "heads.embedding.probes", ... (not "embedding...") */
    if (p->cq && p->scope == ND_SCOPE_HEAD)
        snprintf(s->canonical, sizeof s->canonical, "heads.%.*s", (int)sizeof s->canonical - 7, base);
    else if (p->cq) snprintf(s->canonical, sizeof s->canonical, "%.*s", (int)sizeof s->canonical - 1, base);
    if (p->scope == ND_SCOPE_SITE) s->site = instance;
    if (p->scope == ND_SCOPE_HEAD) s->head = instance, s->head_code = h->code, s->head_kind = h->code - 1;
}

static void build(layout_builder *b, const nd_config *c, const nd_cact_head_shape *heads, int n_heads)
{
    for (int i = 0; i < ND_P_COUNT;) {
        const nd_param_desc *g = &nd_params[i];
        int j = i + 1;
        while (j < ND_P_COUNT && nd_params[j].scope == g->scope && nd_params[j].stacked == g->stacked) j++;
        int instances = 1;
        if (g->scope == ND_SCOPE_LAYER && !g->stacked) instances = c->num_layers;
        if (g->scope == ND_SCOPE_SITE) instances = c->num_sites;
        if (g->scope == ND_SCOPE_HEAD) {
            instances = n_heads;
            if (n_heads > 0) {
                uint64_t nh = (uint64_t)n_heads;
                nd_cact_slot *m = add_slot(b, ND_SLOT_MANIFEST, ND_SLOT_FLOAT, 1, &nh);
                if (m && b->slots) snprintf(m->name, sizeof m->name, "heads.manifest");
            }
        }
        for (int k = 0; k < instances; k++)
            for (int r = i; r < j; r++) {
                const nd_param_desc *p = &nd_params[r];
                if (p->no_cact || !nd_param_in_config(p, c)) continue;
                if (g->scope == ND_SCOPE_HEAD && !nd_param_in_head_cact(p, heads[k].code - 1)) continue;
                add_param_slot(b, c, p, k, g->scope == ND_SCOPE_HEAD ? &heads[k] : NULL);
            }
        i = j;
    }
    nd_cact_slot *t = add_slot(b, ND_SLOT_TOKENIZER, ND_SLOT_BYTES, 0, NULL);
    if (t && b->slots) snprintf(t->name, sizeof t->name, "tokenizer");
}

int nd_cact_layout(const nd_config *c, const nd_cact_head_shape *heads, int n_heads, nd_cact_slot **out, int *count,
                   needle_error *err)
{
    *out = NULL;
    *count = 0;
    int L = c->num_layers, S = c->num_sites;
    if (L <= 0 || S < 0 || S > ND_MAX_SITES || n_heads < 0 || n_heads > nd_head_kinds(c))
        return nd_errorf(err, NEEDLE_EINVAL, "cact layout: bad geometry (%d layers, %d sites, %d heads)", L, S, n_heads);
    for (int k = 0; k < n_heads; k++)
        if (heads[k].code < 1 || heads[k].code > nd_head_kinds(c))
            return nd_errorf(err, NEEDLE_EINVAL, "cact layout: head code %d", heads[k].code);
    layout_builder b;
    memset(&b, 0, sizeof b);
    build(&b, c, heads, n_heads); /* count */
    b.cap = b.count;
    b.count = 0;
    b.overflow = 0;
    b.slots = calloc((size_t)b.cap, sizeof *b.slots);
    if (!b.slots) return nd_errorf(err, NEEDLE_ENOMEM, "cact layout: out of memory");
    build(&b, c, heads, n_heads);
    for (int k = 0; k < n_heads; k++)
        if (heads[k].num_probes <= 0 || heads[k].out_dim <= 0 ||
            (nd_config_generation(c) == 3 && heads[k].num_queries <= 0))
            b.overflow = 1;
    if (b.overflow || b.count != b.cap) {
        free(b.slots);
        return nd_errorf(err, NEEDLE_EINVAL, "cact layout: a tensor dimension is zero or exceeds 2^32");
    }
    *out = b.slots;
    *count = b.count;
    return 0;
}

/* Tensors before the heads (everything up to final_norm). */
static uint32_t tensors_before_heads(const nd_config *c)
{
    layout_builder b;
    memset(&b, 0, sizeof b);
    nd_cact_head_shape none = {ND_HEAD_CONTRASTIVE, 1, 1, 1};
    build(&b, c, &none, 0);
    return (uint32_t)b.count - 1; /* without the tokenizer */
}

/* The tensors of head kind `head` (index) and the positions in its group of
 * the tensors that size it: probes (v2: [P, d]), the projection [out, ...],
 * and in v3 the gain (L+1, k) and the query [q, d] (-1 when absent). */
typedef struct head_group {
    uint32_t count;
    int probes_at, proj_at, gain_at, query_at;
} head_group;

static head_group head_group_of(const nd_config *c, int head)
{
    head_group g = {0, -1, -1, -1, -1};
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (p->scope != ND_SCOPE_HEAD || p->no_cact || !nd_param_in_config(p, c) || !nd_param_in_head_cact(p, head))
            continue;
        if (p->role == ND_P_HEAD_PROBES || p->role == ND_P_HEAD_LAYER_PROBES) g.probes_at = (int)g.count;
        if (p->role == ND_P_HEAD_PROJ || p->role == ND_P_HEAD_POOL_PROJ) g.proj_at = (int)g.count;
        if (p->role == ND_P_HEAD_GAIN) g.gain_at = (int)g.count;
        if (p->role == ND_P_HEAD_QUERY) g.query_at = (int)g.count;
        g.count++;
    }
    return g;
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
    for (int i = 0; i < c->num_sites && i < ND_MAX_SITES_V2; i++) h->sites[i] = (uint32_t)c->engram_layers[i];
    h->rope_theta = c->rope_theta;
    h->version = 2;
    if (nd_config_generation(c) == 3) {
        h->version = 3;
        h->tag = ND_CACT_TAG_V3;
        h->head_dim = (uint32_t)c->qk_dim;
        h->v_head_dim = (uint32_t)c->v_dim;
        h->out_vocab = (uint32_t)c->out_vocab;
        h->sliding_window = (uint32_t)c->sliding_window;
        h->global_mask_lo = (uint32_t)(c->global_mask & 0xFFFFFFFFu);
        h->global_mask_hi = (uint32_t)(c->global_mask >> 32);
        h->qkv_conv_taps = (uint32_t)c->qkv_conv_taps;
        h->engram_seed_heads = (uint32_t)c->engram_seed_heads;
        for (int i = 0; i < c->num_sites && i < ND_CACT_MAX_SITES_V3; i++) h->sites[i] = (uint32_t)c->engram_layers[i];
    }
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
    int rc, v3 = h->version == 3;
    /* byte offsets of each field in the v2 and the v3 header */
#define FIELD(f, lo, hi, byte2, byte3) \
    if ((rc = check_field(h->f, lo, hi, #f, v3 ? (byte3) : (byte2), where, err))) return rc
    FIELD(kv_bits, 0, 32, 16, 16);
    FIELD(vocab, 1, 1u << 24, 20, 20);
    FIELD(d_model, 1, 1u << 16, 24, 28);
    FIELD(num_heads, 1, 1024, 28, 32);
    FIELD(num_kv_heads, 1, 1024, 32, 36);
    FIELD(num_layers, 1, v3 ? ND_MAX_LAYERS_V3 : 4096, 36, 40);
    FIELD(head_dim, v3 ? 2 : 1, 1u << 14, 40, 44);
    FIELD(max_seq_len, 1, 1u << 24, 44, 52);
    FIELD(kv_window, 0, 1u << 24, 12, 12);
    FIELD(hada_n, 1, 1u << 17, 48, 56);
    FIELD(mhc_lanes, 1, 64, 52, 60);
    FIELD(engram_slots, 1, 1u << 24, 56, 80);
    FIELD(engram_sub_dim, 1, 1u << 16, 60, 84);
    FIELD(num_engram_tables, 1, 4096, 64, 88);
    FIELD(conv_taps, ND_CACT_CONV_TAPS, ND_CACT_CONV_TAPS, 68, 92);
    FIELD(conv_dilation, 1, 64, 72, 96);
    FIELD(num_orders, 1, ND_MAX_ORDERS, 76, 104);
    FIELD(num_sites, 0, v3 ? ND_CACT_MAX_SITES_V3 : ND_MAX_SITES_V2, 96, 124);
    if (v3) {
        FIELD(out_vocab, 0, h->vocab, 0, 24);
        FIELD(v_head_dim, 1, 1u << 14, 0, 48);
        FIELD(sliding_window, 0, 1u << 24, 0, 64);
        FIELD(qkv_conv_taps, 0, 64, 0, 76);
        FIELD(engram_seed_heads, 0, 4096, 0, 100);
        uint64_t mask = (uint64_t)h->global_mask_hi << 32 | h->global_mask_lo;
        if (h->num_layers < 64 && (mask >> h->num_layers) != 0)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: header global_mask (bytes 68-75) = 0x%016llx marks layers past "
                             "num_layers %u", where, (unsigned long long)mask, h->num_layers);
    }
#undef FIELD
    int theta_at = v3 ? 192 : 116, orders_at = v3 ? 108 : 80, sites_at = v3 ? 128 : 100;
    int max_sites = v3 ? ND_CACT_MAX_SITES_V3 : ND_MAX_SITES_V2;
    if (!isfinite(h->rope_theta) || h->rope_theta <= 0.0f)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header rope_theta %g at byte %d is not a positive number", where,
                         (double)h->rope_theta, theta_at);
    if (h->num_heads % h->num_kv_heads != 0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header num_heads %u not a multiple of num_kv_heads %u (byte %d)",
                         where, h->num_heads, h->num_kv_heads, v3 ? 32 : 28);
    if (h->num_engram_tables % h->num_orders != 0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header num_engram_tables %u not a multiple of num_orders %u (byte %d)",
                         where, h->num_engram_tables, h->num_orders, v3 ? 88 : 64);
    for (uint32_t i = 0; i < 4; i++)
        if (i < h->num_orders ? (h->orders[i] < 1 || h->orders[i] > 8) : h->orders[i] != 0)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: header orders[%u] = %u at byte %u invalid", where, i, h->orders[i],
                             orders_at + 4 * i);
    for (uint32_t i = 0; i < (uint32_t)max_sites; i++)
        if (i < h->num_sites ? h->sites[i] >= h->num_layers : h->sites[i] != 0)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: header sites[%u] = %u at byte %u invalid", where, i, h->sites[i],
                             sites_at + 4 * i);
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
    for (int i = 0; i < ND_MAX_SITES; i++) c->engram_layers[i] = i < max_sites ? (int)h->sites[i] : 0;
    c->mhc_lanes = (int)h->mhc_lanes;
    c->kv_window = (int)h->kv_window;
    c->kv_bits = (int)h->kv_bits;
    if (v3) {
        c->generation = 3;
        c->qk_head_dim = (int)h->head_dim;
        c->v_head_dim = (int)h->v_head_dim;
        c->out_vocab = (int)h->out_vocab;
        c->sliding_window = (int)h->sliding_window;
        c->global_mask = (unsigned long long)h->global_mask_hi << 32 | h->global_mask_lo;
        c->qkv_conv_taps = (int)h->qkv_conv_taps;
        c->engram_seed_heads = (int)h->engram_seed_heads;
        if (c->kv_window > c->max_seq_len) c->kv_window = c->max_seq_len;
    }
    needle_error derr;
    if (nd_config_derive(c, where, &derr) != 0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: header geometry is inconsistent: %s", where, derr.message);
    /* fields the header states that also follow from the others must agree */
    struct {
        const char *name;
        uint32_t stored;
        int derived, byte;
    } echo[] = {
        {v3 ? "qk_head_dim" : "head_dim", h->head_dim, c->head_dim, v3 ? 44 : 40},
        {"hada_n", h->hada_n, c->hada_n, v3 ? 56 : 48},
        {"engram_sub_dim", h->engram_sub_dim, c->engram_sub, v3 ? 84 : 60},
        {"num_engram_tables", h->num_engram_tables, c->num_tables, v3 ? 88 : 64},
        {"conv_dilation", h->conv_dilation, c->conv_dilation, v3 ? 96 : 72},
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

/* The heads block: read the manifest and the head shapes the layout needs.
 * A head's group size depends on its kind (the v3 router adds its
 * calibration), so the groups are walked in manifest order. */
static int resolve_heads(const nd_cact_file *f, const char *where, const nd_config *c, uint32_t fixed,
                         nd_cact_head_shape *heads, int *n_heads, needle_error *err)
{
    uint32_t n = f->hdr.num_tensors;
    int kinds = nd_head_kinds(c), v3 = nd_config_generation(c) == 3;
    *n_heads = 0;
    if (n == fixed + 1) return 0; /* no heads: the tokenizer follows final_norm */
    const nd_cact_record *m = &f->records[fixed];
    if (n < fixed + 2 || !is_float_dtype(m->dtype) || m->ndim != 1 || m->shape[0] > (uint32_t)kinds)
        return nd_errorf(err, NEEDLE_EFORMAT,
                         "%s: num_tensors %u does not fit the geometry (%u without heads, or a heads.manifest of at "
                         "most %d entries at tensor %u)",
                         where, n, fixed + 1, kinds, fixed);
    int H = (int)m->shape[0];
    uint32_t group = fixed + 1;
    for (int k = 0; k < H; k++) {
        float code = record_float_at(f, m, (uint64_t)k);
        if (!(code >= 1.0f && code <= (float)kinds && code == floorf(code)))
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: heads.manifest (tensor %u) entry %d = %g is not a head code (1..%d)",
                             where, fixed, k, (double)code, kinds);
        for (int j = 0; j < k; j++)
            if (heads[j].code == (int)code)
                return nd_errorf(err, NEEDLE_EFORMAT, "%s: heads.manifest (tensor %u) lists head %d twice", where, fixed,
                                 (int)code);
        head_group g = head_group_of(c, (int)code - 1);
        if (group + g.count + 1 > n)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: num_tensors %u ends inside head %d (tensor %u, %u tensors)", where,
                             n, k, group, g.count);
        const nd_cact_record *probes = &f->records[group + (uint32_t)g.probes_at],
                             *proj = &f->records[group + (uint32_t)g.proj_at];
        if (proj->ndim != 2 || (!v3 && probes->ndim != 2))
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: head %d: probes (tensor %u) and proj must be 2-D", where, k,
                             group + (uint32_t)g.probes_at);
        heads[k].code = (int)code;
        heads[k].out_dim = (int)proj->shape[0];
        if (v3) {
            /* k from the gain (L+1, k), q from the query [q, d] */
            const nd_cact_record *gain = &f->records[group + (uint32_t)g.gain_at],
                                 *query = &f->records[group + (uint32_t)g.query_at];
            if (gain->ndim != 2 || query->ndim != 2)
                return nd_errorf(err, NEEDLE_EFORMAT, "%s: head %d: gain (tensor %u) and query must be 2-D", where, k,
                                 group + (uint32_t)g.gain_at);
            heads[k].num_probes = (int)gain->shape[1];
            heads[k].num_queries = (int)query->shape[0];
        } else {
            heads[k].num_probes = (int)probes->shape[0];
        }
        group += g.count;
    }
    if (group + 1 != n)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: num_tensors %u, the geometry and its %d heads give %u", where, n, H,
                         group + 1);
    *n_heads = H;
    return 0;
}

int nd_cact_resolve(const nd_cact_file *f, const char *where, nd_config *cfg, nd_cact_slot **out, needle_error *err)
{
    *out = NULL;
    int rc = nd_cact_header_to_config(&f->hdr, where, cfg, err);
    if (rc) return rc;
    uint32_t fixed = tensors_before_heads(cfg);
    if (f->hdr.num_tensors < fixed + 1)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: num_tensors %u at byte 4, the geometry needs at least %u", where,
                         f->hdr.num_tensors, fixed + 1);
    nd_cact_head_shape heads[ND_NUM_HEAD_KINDS];
    int n_heads = 0;
    if ((rc = resolve_heads(f, where, cfg, fixed, heads, &n_heads, err))) return rc;
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
        nd_cact_slot *s = &slots[i];
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
        /* the older all-FP16 v3 heads store probes as (L+1, k, d) */
        if (!same && s->storage == ND_SLOT_QUANT && is_float_dtype(r->dtype) && r->ndim == 3 && s->ndim == 2 &&
            (uint64_t)r->shape[0] * r->shape[1] == s->shape[0] && r->shape[2] == s->shape[1])
            same = s->flat3 = 1;
        if (!same)
            rc = nd_errorf(err, NEEDLE_EFORMAT,
                           "%s: tensor %d (%s): shape (%u,%u,%u,%u)/%u contradicts the header (expected (%u,%u,%u,%u)/%d)",
                           where, i, s->name, r->shape[0], r->shape[1], r->shape[2], r->shape[3], r->ndim, s->shape[0],
                           s->shape[1], s->shape[2], s->shape[3], s->ndim);
        else if (s->param && s->param->fp32 && r->dtype != ND_CACT_FP32)
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %d (%s): dtype %u where FP32 is expected", where, i, s->name,
                           r->dtype);
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
