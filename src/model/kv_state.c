/* kv_state.c - creating, resetting and sizing a session (nd_state).
 * Everything a session needs is one allocation made here, from the model's
 * backend; nd_state_eval allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/kv_state.h"
#include "model/params.h"

#define DEFAULT_CHUNK 64 /* large enough to amortise weight decoding, small enough to keep scratch small */
/* The A8 integer kernels re-decode weights every 4 tokens whatever the chunk,
 * so a smaller chunk costs no speed there and saves ~3 MB of scratch
 * (docs/speed.md). */
#define DEFAULT_CHUNK_A8 16

int nd_state_slot_of(const nd_state *s, int pos)
{
    if (pos < s->sinks) return pos;
    return s->sinks + (pos - s->sinks) % s->window;
}

/* Largest backend scratch any matmul / the attention of one chunk needs. */
static size_t work_needed(const nd_model *m, int C, int slots)
{
    const nd_weights *w = &m->weights;
    const nd_backend *be = m->be;
        size_t mx = 0;
    /* every matrix of model/params.def that nd_state_eval multiplies: not the
     * heads' projections, not the engram tables (only gathered) */
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (p->kind != ND_KIND_MATRIX || p->gather || p->scope == ND_SCOPE_HEAD || !nd_param_in_config(p, &w->cfg))
            continue;
        int count = nd_param_instances(w, p);
        for (int k = 0; k < count; k++) {
            const nd_matrix *mat = nd_param_field_c(p, nd_param_base_c(w, p, k));
            size_t z = be->ops.matmul_work_floats(be, mat, C), z8 = be->ops.matmul_a8_work_floats(be, mat, C);
            if (z > mx) mx = z;
            if (z8 > mx) mx = z8;
        }
    }
    const nd_config *c = &w->cfg;
    nd_attn_args a = {.T = C, .num_heads = c->num_heads, .num_kv_heads = c->num_kv_heads,
                      .head_dim = c->qk_dim, .v_head_dim = c->v_dim, .cache_slots = slots};
    size_t z = be->ops.attention_work_floats(be, &a);
    return z > mx ? z : mx;
}

int nd_state_create(const nd_model *m, const nd_state_options *opt, nd_state **out, needle_error *err)
{
    nd_state_options defaults = {0};
    if (!opt) opt = &defaults;
    *out = NULL;
    const nd_config *c = &m->weights.cfg;
    int window = opt->window > 0 ? opt->window : m->default_window;
    if (window <= 0) window = c->max_seq_len;
    int sinks = opt->sinks;
    int C = opt->max_chunk > 0 ? opt->max_chunk : m->acts == NEEDLE_ACTS_A8 ? DEFAULT_CHUNK_A8 : DEFAULT_CHUNK;
    /* default: int8 under the A8 numerics (Needle 3: the reference's deploy
     * KV_BITS 8; Needle 2: the project's own, 4x less cache memory and
     * traffic), float32 on the float path */
    int gen3 = nd_config_generation(c) == 3;
    int kv_bits = opt->kv_bits;
    if (kv_bits == 0)
        kv_bits = m->acts == NEEDLE_ACTS_A8 && (gen3 || c->head_dim % ND_KV_GROUP == 0) ? 8 : 32;
    if (kv_bits != 32 && kv_bits != 8)
        return nd_errorf(err, NEEDLE_EINVAL, "session: kv_bits %d (supported: 32, 8)", opt->kv_bits);
    if (kv_bits == 8 && !gen3 && (c->qk_dim % ND_KV_GROUP != 0 || c->v_dim % ND_KV_GROUP != 0))
        return nd_errorf(err, NEEDLE_EUNSUPPORTED,
                         "session: int8 KV cache needs head widths %% %d == 0 (q/k %d, v %d)", ND_KV_GROUP, c->qk_dim,
                         c->v_dim);
    if (sinks < 0 || sinks > (1 << 20) || window > (1 << 22) || C > (1 << 16))
        return nd_errorf(err, NEEDLE_EINVAL, "session: window %d / sinks %d / chunk %d out of range", window, sinks, C);

    nd_state *s = calloc(1, sizeof *s);
    if (!s) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    s->m = m;
    s->window = window;
    s->sinks = sinks;
    s->max_chunk = C;
    s->kv_bits = kv_bits;
    s->cache_slots = sinks + window;
    s->hist_len = c->conv_dilation > 0 ? c->conv_dilation : 1;
    s->vhist_len = (ND_ENGRAM_TAPS - 1) * s->hist_len + 1;
    int d = c->d_model, n = c->mhc_lanes, L = c->num_layers;
    int Q = c->num_heads * c->qk_dim, O = c->num_heads * c->v_dim;
    int KD = c->num_kv_heads * c->qk_dim, VD = c->num_kv_heads * c->v_dim;
    int sites = c->num_sites, esub = c->num_tables * c->engram_sub;
    s->k_width = KD, s->v_width = VD;
    s->kv_head_scale = kv_bits == 8 && gen3;
    s->k_scales = s->kv_head_scale ? c->num_kv_heads : KD / ND_KV_GROUP;
    s->v_scales = s->kv_head_scale ? c->num_kv_heads : VD / ND_KV_GROUP;
    size_t hs = s->kv_head_scale; /* the chunk's codes exist only under the per-head rule */
    /* local layers (Needle 3) keep at most their window */
    s->local_window = c->sliding_window > 0 && c->sliding_window < window ? c->sliding_window : window;
    s->local_slots = s->local_window < s->cache_slots ? s->local_window : s->cache_slots;
    int any_local = 0;
    for (int l = 0; l < L; l++) any_local |= !nd_config_layer_is_global(c, l);
    if (!any_local) s->local_slots = 0; /* Needle 2, or a v3 model without local layers */
    size_t rows = 0;
    for (int l = 0; l < L; l++) rows += (size_t)(nd_config_layer_is_global(c, l) ? s->cache_slots : s->local_slots);
    if (rows > (size_t)INT32_MAX) {
        free(s);
        return nd_errorf(err, NEEDLE_EINVAL, "session: KV cache of %zu rows is too large", rows);
    }
    s->conv_len = c->qkv_conv_taps > 1 ? c->qkv_conv_taps - 1 : 0;
    s->conv_width = Q + KD + VD;
    s->work_floats = work_needed(m, C, s->cache_slots);

    int x0_in_q = Q >= d, eng_e_in_g = O >= esub, raw_in_att = O >= d;
    /* one block: carve float arrays first, then ints (alignment of 64 bytes each) */
    struct { void **p; size_t n, size; } parts[] = {
        {(void **)&s->k_cache, kv_bits == 32 ? rows * KD : 0, 4},
        {(void **)&s->v_cache, kv_bits == 32 ? rows * VD : 0, 4},
        {(void **)&s->k_cache8, kv_bits == 8 ? rows * KD : 0, 1},
        {(void **)&s->v_cache8, kv_bits == 8 ? rows * VD : 0, 1},
        {(void **)&s->k_scale, kv_bits == 8 ? rows * (size_t)s->k_scales : 0, 4},
        {(void **)&s->v_scale, kv_bits == 8 ? rows * (size_t)s->v_scales : 0, 4},
        {(void **)&s->k_codes, hs * C * KD, 1},
        {(void **)&s->v_codes, hs * C * VD, 1},
        {(void **)&s->k_codes_scale, hs * C * c->num_kv_heads, 4},
        {(void **)&s->v_codes_scale, hs * C * c->num_kv_heads, 4},
        {(void **)&s->conv_hist, (size_t)L * s->conv_len * s->conv_width, 4},
        {(void **)&s->conv_out, c->qkv_conv_taps > 0 ? (size_t)C * s->conv_width : 0, 4},
        {(void **)&s->v_hist, (size_t)(sites ? sites : 1) * s->vhist_len * d, 4},
        /* x0 (the chunk's embeddings) and the engram inputs (eng_e, eng_raw) live
         * only before the first layer, when q, g and att are free: they share
         * those buffers where they fit (-100 KiB of touched scratch on v2 base) */
        {(void **)&s->x0, x0_in_q ? 0 : (size_t)C * d, 4},
        {(void **)&s->X, (size_t)C * n * d, 4},
        {(void **)&s->xh, (size_t)C * n * d, 4},
        {(void **)&s->u, (size_t)C * d, 4},
        {(void **)&s->b, (size_t)C * d, 4},
        {(void **)&s->h, (size_t)C * d, 4},
        {(void **)&s->q, (size_t)C * Q, 4},
        {(void **)&s->k, (size_t)C * KD, 4},
        {(void **)&s->v, (size_t)C * VD, 4},
        {(void **)&s->g, (size_t)C * O, 4},
        {(void **)&s->att, (size_t)C * O, 4},
        {(void **)&s->o, (size_t)C * d, 4},
        {(void **)&s->mlp, (size_t)3 * c->hada_n + 16, 4}, /* the Monarch MLP's scratch (Hadamard: hada_n) */
        {(void **)&s->phi_pre, (size_t)C * n, 4},
        {(void **)&s->phi_post, (size_t)C * n, 4},
        {(void **)&s->phi_res, (size_t)C * n * n, 4},
        {(void **)&s->fin, (size_t)C * d, 4},
        {(void **)&s->eng_e, eng_e_in_g ? 0 : (size_t)C * (esub > 0 ? esub : 1), 4},
        {(void **)&s->eng_k, (size_t)(sites ? sites : 1) * C * d, 4},
        {(void **)&s->eng_v, (size_t)(sites ? sites : 1) * C * d, 4},
        {(void **)&s->eng_raw, raw_in_att ? 0 : (size_t)C * d, 4},
        {(void **)&s->rope_cs, (size_t)C * c->qk_dim, 4},
        {(void **)&s->work, s->work_floats + 16, 4},
        {(void **)&s->cache_pos, (size_t)s->cache_slots, 4},
        {(void **)&s->local_pos, (size_t)s->local_slots, 4},
        {(void **)&s->layer_row, (size_t)L, 4},
        {(void **)&s->tok_hist, (size_t)s->hist_len, 4},
        {(void **)&s->rows, (size_t)C * (c->num_tables > 0 ? c->num_tables : 1), 4},
        {(void **)&s->tap_src, (size_t)C * (size_t)(c->qkv_conv_taps > ND_ENGRAM_TAPS ? c->qkv_conv_taps : ND_ENGRAM_TAPS),
         sizeof(void *)},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) total += (parts[i].n * parts[i].size + 63) & ~(size_t)63;
    /* the backend's memory, so a device backend can keep the cache and the
     * activations resident (ND_OP_BUFFERS; the host also reads the
     * bookkeeping ints in it, so such memory must be host-addressable) */
    s->block = nd_backend_alloc(m->be, total);
    if (!s->block) {
        free(s);
        return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory (%zu bytes)", total);
    }
    s->block_bytes = total;
    char *p = s->block;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        *parts[i].p = parts[i].n ? p : NULL;
        p += (parts[i].n * parts[i].size + 63) & ~(size_t)63;
    }
    if (x0_in_q) s->x0 = s->q;
    if (eng_e_in_g) s->eng_e = s->g;
    if (raw_in_att) s->eng_raw = s->att;
    for (int l = 0, row = 0; l < L; l++) {
        s->layer_row[l] = row;
        row += nd_config_layer_is_global(c, l) ? s->cache_slots : s->local_slots;
    }
    nd_state_reset(s);
    *out = s;
    return 0;
}

void nd_state_free(nd_state *s)
{
    if (!s) return;
    nd_backend_release(s->m->be, s->block);
    free(s);
}

void nd_state_reset(nd_state *s)
{
    s->pos = 0;
    for (int i = 0; i < s->cache_slots; i++) s->cache_pos[i] = -1;
    for (int i = 0; i < s->local_slots; i++) s->local_pos[i] = -1;
    for (int i = 0; i < s->hist_len; i++) s->tok_hist[i] = 0;
}

int nd_state_set_sinks(nd_state *s, int sinks, needle_error *err)
{
    if (s->pos != 0) return nd_errorf(err, NEEDLE_ESTATE, "session: sinks can only change before the first token");
    if (sinks < 0 || sinks > s->cache_slots - s->window)
        return nd_errorf(err, NEEDLE_EINVAL, "session: %d sinks exceed the %d reserved at creation (nd_state_options.sinks)", sinks,
                         s->cache_slots - s->window);
    s->sinks = sinks; /* the window is a property of the mask and stays */
    return 0;
}

int nd_state_position(const nd_state *s) { return s->pos; }
int nd_state_window(const nd_state *s) { return s->window; }
int nd_state_sinks(const nd_state *s) { return s->sinks; }
int nd_state_kv_bits(const nd_state *s) { return s->kv_bits; }
size_t nd_state_bytes(const nd_state *s) { return s->block_bytes + sizeof *s; }
