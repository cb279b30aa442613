/* kv_state.h - the inside of an nd_state (shared by kv_state.c,
 * which owns its memory, and forward.c, which computes with it). */
#ifndef ND_KV_STATE_H
#define ND_KV_STATE_H

#include "core/formulas.h" /* ND_ENGRAM_TAPS */
#include "model/model.h"

/* Engram value taps reach back 3 dilations: v_{t - j*D}, j = 0..3. */

struct nd_state {
    const nd_model *m;
    int window, sinks, max_chunk;
    int pos; /* next absolute position */

    /* KV cache: cache_slots = sinks + min(window, ...) slots per layer.
     * Position p < sinks lives in slot p; later ones in sinks + (p - sinks) % window. */
    int cache_slots;
    int *cache_pos;  /* position in each slot, -1 = empty (same for every global layer) */
    /* Needle 3 local (sliding-window) layers keep only their window: a ring
     * of local_slots (= min(sliding_window, window)) slots, position p in
     * slot p % local_slots, with its own positions */
    int local_window, local_slots;
    int *local_pos;
    int *layer_row; /* [L]: first cache row of each layer (global layers cache_slots rows, local local_slots) */
    int k_width, v_width; /* floats of one cached key / value row: KV*qk and KV*vd */
    int kv_bits;     /* 32 or 8 */
    float *k_cache;  /* kv_bits 32: per layer [slots][k_width] (v_cache: v_width) from layer_row */
    float *v_cache;
    int8_t *k_cache8, *v_cache8; /* kv_bits 8: per layer [slots][k_width] (v_cache8: v_width) */
    float *k_scale, *v_scale;    /* kv_bits 8: per layer [slots][k_scales] (v_scale: v_scales) */
    /* kv_bits 8, the scales of one cached row: Needle 2 one per ND_KV_GROUP
     * values (the project's own cache; the chunk's keys stay float); Needle 3
     * the reference's rule (deploy_numerics.md section 6): k and v
     * fake-quantised per position and KV head, the chunk's own rows too, so
     * a key reads the same from the chunk and from the cache */
    int kv_head_scale;
    int k_scales, v_scales;
    int8_t *k_codes, *v_codes;         /* kv_head_scale: the chunk's codes [C][k_width] / [C][v_width] */
    float *k_codes_scale, *v_codes_scale; /* and their scales [C][num_kv_heads] */

    /* engram history: the last D tokens, and per site the last 3D+1 raw
     * value vectors v_t (so decoding never recomputes older projections) */
    int hist_len;     /* D */
    int *tok_hist;    /* [D], position p at p % D */
    int vhist_len;    /* 3D + 1 */
    float *v_hist;    /* [sites][vhist_len][d], position p at p % vhist_len */

    /* Needle 3 q/k/v convolution: the last taps-1 pre-convolution q|k|v rows
     * of each layer (position p in row p % conv_len), and a chunk's output */
    int conv_len, conv_width; /* taps - 1; Q + KD + VD */
    float *conv_hist;         /* [L][conv_len][conv_width] */
    float *conv_out;          /* [C][conv_width] */

    /* scratch for one chunk of up to max_chunk tokens */
    float *x0, *X, *xh, *u, *b, *h, *q, *k, *v, *g, *att, *o, *mlp, *phi_pre, *phi_post, *phi_res, *fin;
    float *eng_e, *eng_k, *eng_v, *eng_raw; /* eng_k/eng_v: [sites][C][d] */
    float *rope_cs; /* [C][qk] cos|sin */
    int *rows;      /* [C * max(1, T_e)] gather indices */
    const float **tap_src; /* [C * max(engram taps, q/k/v conv taps)]: the rows each output's taps read */
    float *work;
    size_t work_floats;

    void *block; /* the one allocation everything above lives in */
    size_t block_bytes;
};

int nd_state_slot_of(const nd_state *s, int pos);

#endif
