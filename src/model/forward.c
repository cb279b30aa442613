/* forward.c - the Needle forward pass, written to read like SPEC section 4.
 *
 * A chunk of T tokens at positions p0..p0+T-1 goes through:
 *   x0 = E[tok] * sqrt(d); every lane X_i = x0
 *   engram memory per site (depends on tokens only, so computed up front)
 *   per layer l (home lane h = l mod n):
 *     xh = rmsunit(X); p = sigmoid(a_pre*(xh Phi_pre) + b_pre + o_pre); u = sum p_i X_i
 *     b = u (+ engram gate * v at sites); y = Block(b) - u
 *     q = 2 sigmoid(a_post*(xh Phi_post) + b_post + o_post); P = Sinkhorn(...)
 *     X'_i = sum_j P_ij X_j + q_i y
 *   final = ZCRMS(mean_i X_i; final_norm); logits = final E^T
 * Every step with activations goes through the backend's op table (m->be):
 * matrices batched over the chunk, the per-token work as the layer ops
 * (hada_mlp, mhc_pre/mhc_mix, engram_taps/engram_gate, lane_mean, ...).  What
 * stays here is integer and parameter bookkeeping: token hashes, positions,
 * RoPE tables, the mHC home-lane offsets. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/formulas.h"
#include "model/kv_state.h"
#include "model/params.h"

/* Token at absolute position p, from the chunk or the history (0 before 0). */
static int token_at(const nd_state *s, const int *tokens, int p0, int p)
{
    if (p < 0) return 0;
    if (p >= p0) return tokens[p - p0];
    return s->tok_hist[p % s->hist_len];
}

/* A matmul whose input is one of the deploy numerics' A8 points
 * (deploy_numerics.md sections 3 and 4): int8 activations unless the model runs
 * float32 activations. */
static void matmul_a8_point(const nd_state *s, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                            float *const *y, const int *ldy)
{
    const nd_backend *be = s->m->be;
    if (s->m->acts == NEEDLE_ACTS_A8) be->ops.matmul_a8(be, n, w, x, T, ldx, y, ldy, s->work);
    else be->ops.matmul_multi(be, n, w, x, T, ldx, y, ldy, s->work);
}

/* Engram key and tapped value for every token of the chunk, at every site. */
static void engram_chunk(nd_state *s, const int *tokens, int T)
{
    const nd_model *m = s->m;
    const nd_backend *be = m->be;
    const nd_weights *w = &m->weights;
    const nd_config *c = &w->cfg;
    int d = c->d_model, sub = c->engram_sub, he = c->engram_heads_eff, NT = c->num_tables;
    int p0 = s->pos, D = c->conv_dilation, ew = NT * sub;
    for (int si = 0; si < c->num_sites; si++) {
        const nd_site_weights *S = &w->sites[si];
        /* e_t = concat_k table_k[idx_k(t)] * ok_k(t): the chunk's T x NT rows
         * in one gather (row t*NT + k lands at eng_e + (t*NT + k) * sub), the
         * rows of positions too early for their order then zeroed */
        for (int t = 0; t < T; t++) {
            int back[ND_ENGRAM_MAX_ORDER];
            for (int j = 0; j < ND_ENGRAM_MAX_ORDER; j++) back[j] = token_at(s, tokens, p0, p0 + t - j);
            for (int k = 0; k < NT; k++) {
                int order = c->engram_orders[k / he];
                /* table k = oi*h_e + hd is seeded by oi*S + hd (S = seed stride, Needle 3; h_e otherwise) */
                int stride = c->engram_seed_heads > 0 ? c->engram_seed_heads : he;
                int seed = (k / he) * stride + k % he;
                s->rows[t * NT + k] =
                    k * c->engram_slots + (int)(nd_engram_hash(seed, order, back) % (uint32_t)c->engram_slots);
            }
        }
        be->ops.gather_rows(be, &S->tables, s->rows, T * NT, s->eng_e);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < NT; k++)
                if (!nd_engram_valid(p0 + t, c->engram_orders[k / he]))
                    be->ops.zero(be, s->eng_e + ((size_t)t * NT + k) * sub, sizeof(float) * (size_t)sub);
        float *kk = s->eng_k + (size_t)si * s->max_chunk * d, *vv = s->eng_v + (size_t)si * s->max_chunk * d;
        {
            const nd_matrix *mats[2] = {&S->key_proj, &S->value_proj};
            float *outs[2] = {kk, s->eng_raw};
            int lds[2] = {d, d};
            matmul_a8_point(s, 2, mats, s->eng_e, T, ew, outs, lds); /* A8: engram.e */
        }
        /* v'_t = sum_j taps_j * v_{t - j D} [t >= j D] */
        float *vh = s->v_hist + (size_t)si * s->vhist_len * d;
        for (int t = 0; t < T; t++) {
            int p = p0 + t;
            const float **src = s->tap_src + (size_t)t * ND_ENGRAM_TAPS;
            for (int j = 0; j < ND_ENGRAM_TAPS; j++) {
                int q = p - j * D;
                src[j] = q < 0 ? NULL : q >= p0 ? s->eng_raw + (size_t)(q - p0) * d : vh + (size_t)(q % s->vhist_len) * d;
            }
        }
        be->ops.engram_taps(be, S->taps, ND_ENGRAM_TAPS, s->tap_src, d, T, vv, (size_t)d);
        /* keep the raw values the next chunks' taps will reach back to */
        int from = T > s->vhist_len ? T - s->vhist_len : 0;
        for (int t = from; t < T; t++)
            be->ops.copy(be, vh + (size_t)((p0 + t) % s->vhist_len) * d, s->eng_raw + (size_t)t * d,
                         sizeof(float) * (size_t)d);
    }
}

static int site_index(const nd_config *c, int layer)
{
    for (int i = 0; i < c->num_sites; i++)
        if (c->engram_layers[i] == layer) return i;
    return -1;
}

/* Needle 3: causal depthwise convolution along time of the chunk's raw q, k
 * and v (before norms and RoPE), reaching back into the layer's saved rows
 * of earlier chunks; the chunk's last taps-1 raw rows are then saved. */
static void qkv_conv(nd_state *s, int l, int T)
{
    const nd_model *m = s->m;
    const nd_backend *be = m->be;
    const nd_config *c = &m->weights.cfg;
    const nd_layer_weights *L = &m->weights.layers[l];
    int taps = c->qkv_conv_taps, W = s->conv_width, p0 = s->pos, hl = s->conv_len;
    int width[3] = {c->num_heads * c->qk_dim, s->k_width, s->v_width};
    float *buf[3] = {s->q, s->k, s->v};
    const float *tap[3] = {L->q_taps, L->k_taps, L->v_taps};
    int off[3] = {0, width[0], width[0] + width[1]};
    float *hist = s->conv_hist + (size_t)l * hl * W;
    for (int x = 0; x < 3; x++) {
        for (int t = 0; t < T; t++)
            for (int j = 0; j < taps; j++) {
                int p = p0 + t - j;
                s->tap_src[t * taps + j] = p < 0    ? NULL
                                           : p >= p0 ? buf[x] + (size_t)(p - p0) * width[x]
                                                     : hist + (size_t)(p % hl) * W + off[x];
            }
        be->ops.engram_taps(be, tap[x], taps, s->tap_src, width[x], T, s->conv_out + off[x], (size_t)W);
    }
    for (int t = T > hl ? T - hl : 0; t < T; t++)
        for (int x = 0; x < 3; x++)
            be->ops.copy(be, hist + (size_t)((p0 + t) % hl) * W + off[x], buf[x] + (size_t)t * width[x],
                         sizeof(float) * (size_t)width[x]);
    for (int t = 0; t < T; t++)
        for (int x = 0; x < 3; x++)
            be->ops.copy(be, buf[x] + (size_t)t * width[x], s->conv_out + (size_t)t * W + off[x],
                         sizeof(float) * (size_t)width[x]);
}

/* b -> Block(b) in place, for the T tokens of the chunk (SPEC: Block). */
/* The cache slot of position pos in a global layer's cache or a local layer's ring. */
static size_t cache_slot(const nd_state *s, int global, int pos)
{
    return (size_t)(global ? nd_state_slot_of(s, pos) : pos % s->local_slots);
}

static void block(nd_state *s, int l, int T)
{
    const nd_model *m = s->m;
    const nd_backend *be = m->be;
    const nd_config *c = &m->weights.cfg;
    const nd_layer_weights *L = &m->weights.layers[l];
    int d = c->d_model, H = c->num_heads, KVH = c->num_kv_heads, qk = c->qk_dim, vd = c->v_dim;
    int Q = H * qk, O = H * vd, KD = s->k_width, VD = s->v_width, NH = c->hada_n;
    int global = nd_config_layer_is_global(c, l);

    be->ops.rmsnorm(be, s->b, d, T, L->norm_in, s->h);
    {
        const nd_matrix *mats[4] = {&L->q_proj, &L->k_proj, &L->v_proj, &L->gate_proj};
        float *outs[4] = {s->q, s->k, s->v, s->g};
        int lds[4] = {Q, KD, VD, O};
        matmul_a8_point(s, 4, mats, s->h, T, d, outs, lds); /* A8: attn.in */
    }
    if (c->qkv_conv_taps > 0) qkv_conv(s, l, T);
    /* the per-head norms of every token at once (rows of qk, contiguous), so
     * a backend can split a chunk's rows over threads; then RoPE per token */
    be->ops.rmsnorm(be, s->q, qk, T * H, L->q_norm, s->q);
    be->ops.rmsnorm(be, s->k, qk, T * KVH, L->k_norm, s->k);
    for (int t = 0; t < T; t++) {
        float *q = s->q + (size_t)t * Q, *k = s->k + (size_t)t * KD;
        be->ops.rope(be, q, H, qk, s->rope_cs + (size_t)t * qk);
        be->ops.rope(be, k, KVH, qk, s->rope_cs + (size_t)t * qk);
    }
    /* Needle 3 deploy numerics (deploy_numerics.md section 4), after the taps, norms and RoPE: q per
     * query head under A8 activations; k and v per KV head under the int8 cache (the reference's
     * KV_BITS 8), whose codes and scales are what the cache keeps */
    if (s->m->acts == NEEDLE_ACTS_A8 && nd_config_generation(c) == 3)
        be->ops.act_quant(be, s->q, qk, T * H, NULL, NULL); /* A8: attn.q */
    if (s->kv_head_scale) {
        be->ops.act_quant(be, s->k, qk, T * KVH, s->k_codes, s->k_codes_scale); /* A8: attn.k */
        be->ops.act_quant(be, s->v, vd, T * KVH, s->v_codes, s->v_codes_scale); /* A8: attn.v */
    }
    /* a global layer sees the session's window (and sinks); a local one (Needle 3) its sliding window */
    nd_attn_args a = {
        .T = T, .pos0 = s->pos, .num_heads = H, .num_kv_heads = KVH, .head_dim = qk, .v_head_dim = vd,
        .window = global ? s->window : s->local_window, .sinks = global ? s->sinks : 0, .q = s->q, .k_chunk = s->k,
        .v_chunk = s->v, .cache_pos = global ? s->cache_pos : s->local_pos,
        .cache_slots = global ? s->cache_slots : s->local_slots, .out = s->att, .kv_bits = s->kv_bits,
        .kv_head_scale = s->kv_head_scale,
    };
    size_t row = (size_t)s->layer_row[l], ksc = (size_t)s->k_scales, vsc = (size_t)s->v_scales;
    if (s->kv_bits == 8) {
        a.k_cache8 = s->k_cache8 + row * KD, a.v_cache8 = s->v_cache8 + row * VD;
        a.k_scale = s->k_scale + row * ksc, a.v_scale = s->v_scale + row * vsc;
    } else {
        a.k_cache = s->k_cache + row * KD, a.v_cache = s->v_cache + row * VD;
    }
    be->ops.attention(be, &a, s->work);
    /* the chunk's keys join this layer's cache (positions are published after all layers) */
    for (int t = 0, run = 1; t < T; t += run) {
        size_t slot = cache_slot(s, global, s->pos + t);
        run = 1;
        if (s->kv_bits == 8 && !s->kv_head_scale) {
            /* tokens whose slots follow each other are quantised in one call (the
             * same groups of ND_KV_GROUP values, so the same codes and scales) */
            while (t + run < T && cache_slot(s, global, s->pos + t + run) == slot + (size_t)run) run++;
            be->ops.quantize_kv(be, s->k + (size_t)t * KD, run * KD, (int8_t *)a.k_cache8 + slot * KD,
                                (float *)a.k_scale + slot * ksc);
            be->ops.quantize_kv(be, s->v + (size_t)t * VD, run * VD, (int8_t *)a.v_cache8 + slot * VD,
                                (float *)a.v_scale + slot * vsc);
            continue;
        }
        if (s->kv_head_scale) { /* the codes and scales the chunk's rows were made of */
            be->ops.copy(be, (int8_t *)a.k_cache8 + slot * KD, s->k_codes + (size_t)t * KD, (size_t)KD);
            be->ops.copy(be, (int8_t *)a.v_cache8 + slot * VD, s->v_codes + (size_t)t * VD, (size_t)VD);
            be->ops.copy(be, (float *)a.k_scale + slot * ksc, s->k_codes_scale + (size_t)t * KVH, sizeof(float) * ksc);
            be->ops.copy(be, (float *)a.v_scale + slot * vsc, s->v_codes_scale + (size_t)t * KVH, sizeof(float) * vsc);
        } else {
            be->ops.copy(be, (float *)a.k_cache + slot * KD, s->k + (size_t)t * KD, sizeof(float) * (size_t)KD);
            be->ops.copy(be, (float *)a.v_cache + slot * VD, s->v + (size_t)t * VD, sizeof(float) * (size_t)VD);
        }
    }
    be->ops.sigmoid_gate(be, s->att, s->g, (size_t)T * O);
    {
        const nd_matrix *mat = &L->out_proj;
        matmul_a8_point(s, 1, &mat, s->att, T, O, &s->o, &d); /* A8: attn.out */
    }

    float gate = nd_sigmoid(L->attn_gate); /* a parameter, not an activation */
    be->ops.rmsnorm(be, s->o, d, T, L->post_attn_norm, s->o);
    for (int t = 0; t < T; t++) be->ops.axpy(be, s->b + (size_t)t * d, gate, s->o + (size_t)t * d, d);
    if (nd_config_generation(c) == 3) {
        /* b += MonarchMLP(ZCRMS(b; the MLP norm scale)) */
        const nd_weights *w = &m->weights;
        nd_monarch_mlp_args mm = {.T = T, .d = d, .hada_n = NH, .a = c->hada_a, .b_dim = c->hada_b,
                                  .rank = ND_MLP_GATE_RANK, .norm = L->mlp_norm, .d1 = L->d1, .d2 = L->d2,
                                  .b2 = L->b2, .d3 = L->d3, .d4 = L->d4, .w1a = L->w1a, .w1b = L->w1b,
                                  .w2a = L->w2a, .w2b = L->w2b, .w3a = L->w3a, .w3b = L->w3b, .cond_v = L->cond_v,
                                  .cond_u = L->cond_u, .p1 = w->hada_p1, .p2 = w->hada_p2, .b = s->b, .z = s->mlp};
        be->ops.monarch_mlp(be, &mm);
        return;
    }
    /* b += HadamardMLP(ZCRMS(b; the MLP norm scale)) */
    nd_hada_mlp_args mlp = {.T = T, .d = d, .hada_n = NH, .norm = L->mlp_norm, .d1 = L->d1, .d2 = L->d2,
                            .d3 = L->d3, .b = s->b, .z = s->mlp};
    be->ops.hada_mlp(be, &mlp);
}

/* One chunk of at most max_chunk tokens. */
static void forward_chunk(nd_state *s, const int *tokens, int T, const uint8_t *want, int want_last, float *logits,
                          float *cells)
{
    const nd_model *m = s->m;
    const nd_backend *be = m->be;
    const nd_weights *w = &m->weights;
    const nd_config *c = &w->cfg;
    int d = c->d_model, n = c->mhc_lanes, L = c->num_layers, nd_ = n * d;
    float sqrt_d = sqrtf((float)d);

    for (int t = 0; t < T; t++) nd_rope_row(c->rope_theta, c->qk_dim, s->pos + t, s->rope_cs + (size_t)t * c->qk_dim);
    be->ops.gather_rows(be, &w->embedding, tokens, T, s->x0);
    be->ops.scale(be, s->x0, T * d, sqrt_d);
    for (int t = 0; t < T; t++) {
        float *x0 = s->x0 + (size_t)t * d;
        for (int lane = 0; lane < n; lane++) be->ops.copy(be, s->X + (size_t)t * nd_ + lane * d, x0, sizeof(float) * (size_t)d);
        if (cells) be->ops.copy(be, cells + (size_t)t * (L + 1) * d, x0, sizeof(float) * (size_t)d);
    }
    if (c->num_sites > 0) engram_chunk(s, tokens, T);

    for (int l = 0; l < L; l++) {
        const nd_layer_weights *LW = &w->layers[l];
        int home = nd_mhc_home_lane(l, n), site = site_index(c, l);
        float off_pre[ND_MAX_LANES], off_post[ND_MAX_LANES];
        for (int i = 0; i < n; i++) {
            off_pre[i] = nd_mhc_pre_bias(i, home);
            off_post[i] = nd_mhc_post_bias(i, home);
        }
        nd_mhc_args mhc = {.T = T, .n = n, .d = d, .X = s->X, .phi_pre = s->phi_pre, .phi_post = s->phi_post,
                           .phi_res = s->phi_res, .a_pre = LW->a_pre, .a_post = LW->a_post, .a_res = LW->a_res,
                           .b_pre = LW->b_pre, .off_pre = off_pre, .b_post = LW->b_post, .off_post = off_post,
                           .b_res = LW->b_res, .sinkhorn_iters = ND_SINKHORN_ITERS, .u = s->u, .y = s->b,
                           .scratch = s->xh /* free again once the maps are computed */};
        be->ops.rmsnorm(be, s->X, nd_, T, NULL, s->xh);
        {
            const nd_matrix *mats[3] = {&LW->phi_pre, &LW->phi_post, &LW->phi_res};
            float *outs[3] = {s->phi_pre, s->phi_post, s->phi_res};
            int lds[3] = {n, n, n * n};
            /* Needle 3 quantises the maps' input (the lanes themselves stay float) */
            if (nd_config_generation(c) == 3) matmul_a8_point(s, 3, mats, s->xh, T, nd_, outs, lds); /* A8: mhc.nx */
            else be->ops.matmul_multi(be, 3, mats, s->xh, T, nd_, outs, lds, s->work);
        }
        be->ops.mhc_pre(be, &mhc);
        be->ops.copy(be, s->b, s->u, sizeof(float) * (size_t)T * d);
        if (site >= 0)
            for (int t = 0; t < T; t++) {
                const float *kt = s->eng_k + ((size_t)site * s->max_chunk + t) * d;
                const float *vt = s->eng_v + ((size_t)site * s->max_chunk + t) * d;
                float *un = s->o + (size_t)t * d, *kn = s->h + (size_t)t * d; /* free until block() */
                be->ops.engram_gate(be, s->u + (size_t)t * d, kt, vt, d, s->b + (size_t)t * d, un, kn);
            }
        block(s, l, T);
        be->ops.mhc_mix(be, &mhc);
        if (cells) be->ops.lane_mean(be, s->X, T, n, d, cells + (size_t)(l + 1) * d, (size_t)(L + 1) * d);
    }

    /* publish the chunk's positions in the cache and the token history */
    for (int t = 0; t < T; t++) {
        s->cache_pos[nd_state_slot_of(s, s->pos + t)] = s->pos + t;
        if (s->local_slots > 0) s->local_pos[(s->pos + t) % s->local_slots] = s->pos + t;
        s->tok_hist[(s->pos + t) % s->hist_len] = tokens[t];
    }

    /* final norm and logits for the wanted tokens only */
    int nw = 0;
    for (int t = 0; t < T; t++) {
        if (want ? !want[t] : !(want_last && t == T - 1)) continue;
        be->ops.lane_mean(be, s->X + (size_t)t * nd_, 1, n, d, s->fin + (size_t)nw * d, (size_t)d);
        nw++;
    }
    if (nw > 0) {
        be->ops.rmsnorm(be, s->fin, d, nw, w->final_norm, s->fin);
        /* Needle 3 out_vocab: only E[0:V_o] scores; the rest of each row is -inf */
        nd_matrix scored = w->embedding;
        scored.rows = nd_config_logit_width(c);
        const nd_matrix *mat = &scored;
        matmul_a8_point(s, 1, &mat, s->fin, nw, d, &logits, &c->vocab_size); /* A8: logits.in */
        for (int i = 0; i < nw; i++)
            for (int v = scored.rows; v < c->vocab_size; v++) logits[(size_t)i * c->vocab_size + v] = -INFINITY;
    }
}

int nd_state_eval(nd_state *s, const int *tokens, int T, const uint8_t *want, float *logits, float *cells,
                  needle_error *err)
{
    const nd_config *c = &s->m->weights.cfg;
    if (T <= 0) return nd_errorf(err, NEEDLE_EINVAL, "eval: no tokens");
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return nd_errorf(err, NEEDLE_EINVAL, "eval: token %d at index %d is outside the vocabulary (%d)", tokens[t],
                             t, c->vocab_size);
    if (s->pos > INT32_MAX - T) return nd_errorf(err, NEEDLE_ELIMIT, "eval: position overflow");
    int wanted = 0;
    for (int t = 0; t < T; t++) wanted += want ? want[t] != 0 : t == T - 1;
    if (wanted && !logits) return nd_errorf(err, NEEDLE_EINVAL, "eval: logits requested but no output buffer");
    int L = c->num_layers, d = c->d_model;
    for (int t0 = 0; t0 < T; t0 += s->max_chunk) {
        int n = T - t0 < s->max_chunk ? T - t0 : s->max_chunk;
        int last = t0 + n == T; /* without flags only the final token of the final chunk */
        forward_chunk(s, tokens + t0, n, want ? want + t0 : NULL, !want && last, logits,
                      cells ? cells + (size_t)t0 * (L + 1) * d : NULL);
        int got = 0;
        for (int t = 0; t < n; t++) got += want ? want[t0 + t] != 0 : (last && t == n - 1);
        if (logits) logits += (size_t)got * c->vocab_size;
        s->pos += n;
    }
    return 0;
}
