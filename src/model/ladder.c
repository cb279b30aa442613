/* ladder.c - running ladder rung N of an unsliced Needle 3 file
 * (SPEC-needle3 section 2 and 5.3 item 8).
 *
 * Rung N keeps layers sorted(order[:N]) of the bisection order (endpoints
 * first, then the midpoint of the largest gap, leftmost on ties), renumbered
 * 0..N-1 (so the mHC home lane is the new index mod n), with only the engram
 * sites and global flags of kept layers and the head rows (0, kept+1).  The
 * order is only known for an unsliced file: a rung file is already an
 * ordinary model and runs as one. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/model.h"
#include "model/params.h"

int nd_ladder_order(int L, int *order)
{
    if (L <= 0) return 0;
    int n = 0;
    char *taken = calloc((size_t)L, 1);
    if (!taken) return -1;
    order[n++] = 0, taken[0] = 1;
    if (L > 1) order[n++] = L - 1, taken[L - 1] = 1;
    while (n < L) {
        /* the largest gap between neighbouring taken layers, leftmost on ties */
        int best_a = -1, best_gap = 1;
        for (int a = 0; a < L;) {
            int b = a + 1;
            while (b < L && !taken[b]) b++;
            if (b < L && b - a > best_gap) best_gap = b - a, best_a = a;
            a = b;
        }
        int mid = best_a + best_gap / 2;
        order[n++] = mid, taken[mid] = 1;
    }
    free(taken);
    return n;
}

/* Rows (0, kept+1, ...) of a head tensor laid out [.., L+1, k, ..]:
 * `outer` blocks of (L+1) rows of `inner` floats each. */
static void select_rows(const float *src, int outer, int L1, int inner, const int *keep, int N, float *dst)
{
    for (int o = 0; o < outer; o++)
        for (int r = 0; r <= N; r++) {
            int from = r == 0 ? 0 : keep[r - 1] + 1;
            memcpy(dst + ((size_t)o * (N + 1) + r) * inner, src + ((size_t)o * L1 + from) * inner,
                   sizeof(float) * (size_t)inner);
        }
}

int nd_weights_ladder(const nd_backend *be, nd_weights *w, int N, float **owned, needle_error *err)
{
    nd_config *c = &w->cfg;
    int L = c->num_layers, d = c->d_model;
    *owned = NULL;
    if (N == L) return 0;
    if (nd_config_generation(c) != 3)
        return nd_errorf(err, NEEDLE_EUNSUPPORTED, "ladder: --layers needs a Needle 3 model (this one is Needle 2)");
    if (N < 1 || N > L)
        return nd_errorf(err, NEEDLE_EINVAL, "ladder: rung %d is outside 1..%d (the file's layers)", N, L);
    int order[64], keep[64];
    /* a config that carries its ladder order (a sliced rung's) keeps it, as the reference does */
    if (c->num_ladder_order == L) memcpy(order, c->ladder_order, sizeof(int) * (size_t)L);
    else if (nd_ladder_order(L, order) != L) return nd_errorf(err, NEEDLE_ENOMEM, "ladder: out of memory");
    char taken[64] = {0};
    for (int i = 0; i < N; i++) taken[order[i]] = 1;
    for (int l = 0, k = 0; l < L; l++)
        if (taken[l]) keep[k++] = l;

    /* heads: probes (dequantised), gain and row_bias restricted to the kept rows */
    nd_weights_heads_ready(w);
    size_t floats = 0;
    for (int h = 0; h < nd_head_kinds(c); h++) {
        const nd_head_weights *hw = nd_param_base_c(w, &nd_params[ND_P_HEAD_GAIN], h);
        if (!hw->present) continue;
        floats += (size_t)(N + 1) * hw->num_probes * ((size_t)d + 1 + (size_t)hw->num_queries);
    }
    float *block = floats ? malloc(sizeof(float) * floats) : NULL, *p = block;
    float *row = malloc(sizeof(float) * (size_t)d);
    if ((floats && !block) || !row) {
        free(block);
        free(row);
        return nd_errorf(err, NEEDLE_ENOMEM, "ladder: out of memory");
    }
    for (int h = 0; h < nd_head_kinds(c); h++) {
        nd_head_weights *hw = nd_param_base(w, &nd_params[ND_P_HEAD_GAIN], h);
        if (!hw->present) continue;
        int k = hw->num_probes, q = hw->num_queries;
        float *probes = p;
        for (int r = 0; r <= N; r++)
            for (int j = 0; j < k; j++) {
                int from = (r == 0 ? 0 : keep[r - 1] + 1) * k + j;
                if (be) be->ops.gather_rows(be, &hw->layer_probes, &from, 1, probes + ((size_t)r * k + j) * d);
                else nd_matrix_dequant_rows(&hw->layer_probes, from, 1, probes + ((size_t)r * k + j) * d);
            }
        p += (size_t)(N + 1) * k * d;
        select_rows(hw->gain, 1, L + 1, k, keep, N, p);
        hw->gain = p;
        p += (size_t)(N + 1) * k;
        select_rows(hw->row_bias, q, L + 1, k, keep, N, p);
        hw->row_bias = p;
        p += (size_t)q * (N + 1) * k;
        hw->layer_probes = (nd_matrix){.kind = ND_MAT_F32, .rows = (N + 1) * k, .cols = d, .f32 = probes};
    }
    free(row);

    /* layers, sites and global flags, renumbered */
    unsigned long long mask = 0;
    for (int i = 0; i < N; i++) {
        w->layers[i] = w->layers[keep[i]];
        if (c->global_mask >> keep[i] & 1ull) mask |= 1ull << i;
    }
    int sites = 0;
    for (int s = 0; s < c->num_sites; s++)
        for (int i = 0; i < N; i++)
            if (c->engram_layers[s] == keep[i]) {
                w->sites[sites] = w->sites[s];
                w->sites[sites].layer = i;
                c->engram_layers[sites++] = i;
            }
    c->num_sites = sites;
    c->global_mask = mask;
    /* the rung's own order: the parent's, restricted to the kept layers and renumbered */
    int n_order = 0, renum[64];
    for (int i = 0; i < N; i++) renum[keep[i]] = i;
    for (int i = 0; i < L; i++)
        if (taken[order[i]]) c->ladder_order[n_order++] = renum[order[i]];
    c->num_ladder_order = n_order;
    c->num_layers = N;
    needle_error derr;
    if (nd_config_derive(c, "ladder", &derr)) {
        free(block);
        return nd_errorf(err, NEEDLE_EINVAL, "ladder: %s", derr.message);
    }
    *owned = block;
    return 0;
}
