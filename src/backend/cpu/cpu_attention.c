/* cpu_attention.c - causal GQA attention with a key window and sink positions.
 *
 * One task per (query token, KV head): the query heads that share a KV head
 * (GQA) are computed together, so each key and value row is loaded (and, for
 * the int8 cache, widened) once for all of them.  The keys a query sees are
 * the cached ones (earlier positions, in a ring buffer) and the chunk's own
 * keys up to the query itself, filtered by the window/sink rule of SPEC
 * section 5.  Scores, the softmax (vectorised exp) and the weighted sum of
 * values run over a contiguous list of visible rows.  A task's result depends
 * only on its inputs, never on which thread runs it. */
#include "backend/cpu/cpu_isa_names.h" /* first: this copy's kernel names (compiled once per ISA) */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"

static inline int key_visible(int k, int q, int window, int sinks)
{
    return k <= q && (q - k < window || k < sinks);
}

/* floats one row pointer takes in the scratch */
#define PTR_FLOATS ((sizeof(void *) + sizeof(float) - 1) / sizeof(float))

typedef struct attn_job {
    const nd_attn_args *a;
    float *work;
    size_t per_thread;
    const int *visible; /* [T][keys]: the visible cache slots of each query, then -1 */
} attn_job;

/* Cache rows are hd floats scattered kvw floats apart (one KV head of a
 * slot), which the hardware prefetcher does not follow well: ask for the row
 * a few keys ahead. */
#define PREFETCH_AHEAD 6
static inline void prefetch_row(const float *p, int hd)
{
    for (int c = 0; c < hd; c += 16) __builtin_prefetch(p + c);
}

/* Widen one int8 cache row (hd values, one scale per `group` of them). */
static inline void widen(const int8_t *q, const float *scale, int hd, int group, float *out)
{
    for (int g = 0; g < hd / group; g++) {
        int i = 0;
#if defined(__AVX512F__)
        __m512 sv = _mm512_set1_ps(scale[g]);
        for (; i + 16 <= group; i += 16) {
            __m128i b = _mm_loadu_si128((const __m128i *)(q + g * group + i));
            _mm512_storeu_ps(out + g * group + i, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), sv));
        }
#elif defined(__AVX2__) && defined(__FMA__)
        __m256 sv = _mm256_set1_ps(scale[g]);
        for (; i + 8 <= group; i += 8) {
            __m128i b = _mm_loadl_epi64((const __m128i *)(q + g * group + i));
            _mm256_storeu_ps(out + g * group + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), sv));
        }
#endif
        for (; i < group; i++) out[g * group + i] = (float)q[g * group + i] * scale[g];
    }
}

/* Values per scale of the int8 cache's keys / values. */
static inline int key_group(const nd_attn_args *a) { return a->kv_head_scale ? a->head_dim : ND_KV_GROUP; }
static inline int value_group(const nd_attn_args *a)
{
    return a->kv_head_scale ? (a->v_head_dim > 0 ? a->v_head_dim : a->head_dim) : ND_KV_GROUP;
}

/* Per-thread scratch layout (floats): scores [G][keys], then key and value
 * row pointers [keys] each, then (int8 cache only) widened rows [2][keys][hd]. */
static size_t keys_of(const nd_attn_args *a) { return (size_t)a->cache_slots + (size_t)a->T; }
/* rounded up so the pointer arrays that follow are aligned */
static size_t scores_floats(int G, size_t keys) { return ((size_t)G * keys + 15) & ~(size_t)15; }

/* o[c0 .. c0+4*ND_VW) = inv * sum_i e[i] v_i[c0 ..] for one head, and the
 * same for a second head (e2/o2, may be NULL) reading the same value rows:
 * eight accumulators written out so they stay in registers. */
static void weighted_sum4(const float *const *vrow, int n, int c0, const float *e, float inv, float *o,
                          const float *e2, float inv2, float *o2)
{
    ndv a0 = ndv_zero(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    if (e2) {
        for (int i = 0; i < n; i++) {
            const float *v = vrow[i] + c0;
            if (c0 == 0 && i + PREFETCH_AHEAD < n) prefetch_row(vrow[i + PREFETCH_AHEAD], 4 * ND_VW);
            ndv v0 = ndv_load(v), v1 = ndv_load(v + ND_VW), v2 = ndv_load(v + 2 * ND_VW), v3 = ndv_load(v + 3 * ND_VW);
            ndv w = ndv_set1(e[i]), w2 = ndv_set1(e2[i]);
            a0 = ndv_fma(w, v0, a0), a1 = ndv_fma(w, v1, a1), a2 = ndv_fma(w, v2, a2), a3 = ndv_fma(w, v3, a3);
            b0 = ndv_fma(w2, v0, b0), b1 = ndv_fma(w2, v1, b1), b2 = ndv_fma(w2, v2, b2), b3 = ndv_fma(w2, v3, b3);
        }
    } else {
        for (int i = 0; i < n; i++) {
            const float *v = vrow[i] + c0;
            if (c0 == 0 && i + PREFETCH_AHEAD < n) prefetch_row(vrow[i + PREFETCH_AHEAD], 4 * ND_VW);
            ndv w = ndv_set1(e[i]);
            a0 = ndv_fma(w, ndv_load(v), a0), a1 = ndv_fma(w, ndv_load(v + ND_VW), a1);
            a2 = ndv_fma(w, ndv_load(v + 2 * ND_VW), a2), a3 = ndv_fma(w, ndv_load(v + 3 * ND_VW), a3);
        }
    }
    ndv s = ndv_set1(inv);
    ndv_store(o + c0, ndv_mul(a0, s)), ndv_store(o + c0 + ND_VW, ndv_mul(a1, s));
    ndv_store(o + c0 + 2 * ND_VW, ndv_mul(a2, s)), ndv_store(o + c0 + 3 * ND_VW, ndv_mul(a3, s));
    if (e2) {
        s = ndv_set1(inv2);
        ndv_store(o2 + c0, ndv_mul(b0, s)), ndv_store(o2 + c0 + ND_VW, ndv_mul(b1, s));
        ndv_store(o2 + c0 + 2 * ND_VW, ndv_mul(b2, s)), ndv_store(o2 + c0 + 3 * ND_VW, ndv_mul(b3, s));
    }
}

/* One vector of outputs at c0 for one head (the remainder after weighted_sum4). */
static void weighted_sum1(const float *const *vrow, int n, int c0, const float *e, float inv, float *o)
{
    ndv a0 = ndv_zero();
    for (int i = 0; i < n; i++) a0 = ndv_fma(ndv_set1(e[i]), ndv_load(vrow[i] + c0), a0);
    ndv_store(o + c0, ndv_mul(a0, ndv_set1(inv)));
}

/* Softmax weights of G score rows (keys apart, n each), unnormalised, in
 * place; inv[g] = 1 / their sum (applied to the output). */
static void softmax_rows(float *score, size_t keys, int G, int n, float *inv)
{
    for (int g = 0; g < G; g++) {
        float *sc = score + (size_t)g * keys;
        int i = 0;
        ndv mv = ndv_set1(-INFINITY);
        for (; i + ND_VW <= n; i += ND_VW) mv = ndv_max(mv, ndv_load(sc + i));
        float mx = ndv_hmax(mv);
        for (; i < n; i++) mx = sc[i] > mx ? sc[i] : mx;
        ndv m = ndv_set1(mx), sv = ndv_zero();
        for (i = 0; i + ND_VW <= n; i += ND_VW) {
            ndv e = ndv_exp_neg(ndv_sub(ndv_load(sc + i), m));
            ndv_store(sc + i, e);
            sv = ndv_add(sv, e);
        }
        float sum = ndv_hsum(sv);
        for (; i < n; i++) {
            float buf[ND_VW];
            for (int k = 0; k < ND_VW; k++) buf[k] = 0.0f;
            buf[0] = sc[i] - mx;
            ndv_store(buf, ndv_exp_neg(ndv_load(buf)));
            sc[i] = buf[0];
            sum += buf[0];
        }
        inv[g] = 1.0f / sum; /* sum >= 1: the maximum contributes exp(0) */
    }
}

/* Register budget of the int8 path: head rows of at most I8_MAX_VECS vectors,
 * at most I8_MAX_G query heads per KV head (else the widening path runs). */
#define I8_MAX_VECS 8
#define I8_MAX_G 4

/* The int8 cache read in place: a cached row's scores are
 * sum_g scale_g * (q_g . codes_g) and its values enter the weighted sum as
 * (e_i * scale_g) * codes, widened in registers, never stored as floats.
 * Rows 0..n8-1 are cached (int8), rows n8..n-1 the chunk's own (float). */
static void attn_task_i8(const attn_job *j, int t, int kvh, float *score)
{
    const nd_attn_args *a = j->a;
    int hd = a->head_dim, kvw = a->num_kv_heads * hd, kg = key_group(a), groups = kvw / kg, A = a->num_heads * hd;
    int G = a->num_heads / a->num_kv_heads, hg = hd / kg, qpos = a->pos0 + t;
    size_t keys = keys_of(a);
    const int8_t **k8 = (const int8_t **)(score + scores_floats(G, keys)), **v8 = k8 + keys;
    const float **ks = (const float **)(v8 + keys), **vs = ks + keys;
    const float **kf = vs + keys, **vf = kf + keys;
    float *inv = (float *)(vf + keys);
    int n8 = 0, nf = 0;
    for (const int *vis = j->visible + (size_t)t * keys; *vis >= 0; vis++) {
        size_t s = (size_t)*vis;
        k8[n8] = a->k_cache8 + s * (size_t)kvw + (size_t)kvh * (size_t)hd;
        v8[n8] = a->v_cache8 + s * (size_t)kvw + (size_t)kvh * (size_t)hd;
        ks[n8] = a->k_scale + s * (size_t)groups + (size_t)kvh * (size_t)hg;
        vs[n8] = a->v_scale + s * (size_t)groups + (size_t)kvh * (size_t)hg;
        n8++;
    }
    for (int u = 0; u <= t; u++) {
        if (!key_visible(a->pos0 + u, qpos, a->window, a->sinks)) continue;
        kf[nf] = a->k_chunk + (size_t)u * (size_t)kvw + (size_t)kvh * (size_t)hd;
        vf[nf] = a->v_chunk + (size_t)u * (size_t)kvw + (size_t)kvh * (size_t)hd;
        nf++;
    }
    const float *q = a->q + (size_t)t * (size_t)A + (size_t)kvh * (size_t)G * (size_t)hd;
    float *o = a->out + (size_t)t * (size_t)A + (size_t)kvh * (size_t)G * (size_t)hd;
    int n = n8 + nf;
    if (n == 0) {
        for (int c = 0; c < G * hd; c++) o[c] = 0.0f;
        return;
    }
    float scale = 1.0f / sqrtf((float)hd);
    int nv = hd / ND_VW; /* vectors per head row (<= I8_MAX_VECS, checked by the caller) */
    for (int i = 0; i < n8; i++) {
        if (i + PREFETCH_AHEAD < n8) __builtin_prefetch(k8[i + PREFETCH_AHEAD]), __builtin_prefetch(v8[i + PREFETCH_AHEAD]);
        ndv kv[I8_MAX_VECS]; /* the key row widened once, times its group scales, for all G heads */
        for (int c = 0; c < nv; c++) kv[c] = ndv_mul(ndv_load_i8(k8[i] + c * ND_VW), ndv_set1(ks[i][c * ND_VW / kg] * scale));
        for (int g = 0; g < G; g++) {
            const float *qg = q + (size_t)g * (size_t)hd;
            ndv acc = ndv_zero();
            for (int c = 0; c < nv; c++) acc = ndv_fma(ndv_load(qg + c * ND_VW), kv[c], acc);
            score[(size_t)g * keys + (size_t)i] = ndv_hsum(acc);
        }
    }
    for (int i = 0; i < nf; i++)
        for (int g = 0; g < G; g++)
            score[(size_t)g * keys + (size_t)(n8 + i)] = nd_simd_dot(q + (size_t)g * (size_t)hd, kf[i], hd) * scale;
    softmax_rows(score, keys, G, n, inv);
    /* weighted sum: each value row widened once (times its group scales) and
     * added into the G heads' accumulators */
    ndv acc[I8_MAX_G][I8_MAX_VECS];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < nv; c++) acc[g][c] = ndv_zero();
    for (int i = 0; i < n8; i++) {
        ndv vv[I8_MAX_VECS];
        for (int c = 0; c < nv; c++) vv[c] = ndv_mul(ndv_load_i8(v8[i] + c * ND_VW), ndv_set1(vs[i][c * ND_VW / kg]));
        for (int g = 0; g < G; g++) {
            ndv e = ndv_set1(score[(size_t)g * keys + (size_t)i]);
            for (int c = 0; c < nv; c++) acc[g][c] = ndv_fma(e, vv[c], acc[g][c]);
        }
    }
    for (int i = 0; i < nf; i++)
        for (int g = 0; g < G; g++) {
            ndv e = ndv_set1(score[(size_t)g * keys + (size_t)(n8 + i)]);
            for (int c = 0; c < nv; c++) acc[g][c] = ndv_fma(e, ndv_load(vf[i] + c * ND_VW), acc[g][c]);
        }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < nv; c++) ndv_store(o + (size_t)g * (size_t)hd + c * ND_VW, ndv_mul(acc[g][c], ndv_set1(inv[g])));
}

/* ---- the int8 cache, blocked over queries (prefill)
 *
 * A task takes ATT_QB consecutive queries of one KV head.  Queries that see
 * the same cached slots (all of a chunk, unless the window cuts in) share
 * each cached key row, widened once for all of them and all G heads, and
 * share each widened value row in pairs.  The head width (NV vectors) and G
 * are compile-time constants here, so the widened rows and the accumulators
 * stay in registers.  Every query gets exactly attn_task_i8's arithmetic
 * (the same widened values, the same sums in the same order), so its result
 * does not depend on the block it came in. */
#define ATT_QB 4
/* the loops over a head's vectors and the G heads must be unrolled for the
 * arrays they index to live in registers */
#define ATT_UNROLL _Pragma("GCC unroll 8")

#if ND_VW == 16
/* The sums of the 16 lanes of each of v[0..15], as one vector (lane k: v[k]'s
 * sum), by the tree of GCC's _mm512_reduce_add_ps, written out so every
 * compiler gives these bits: lanes i + (i+8), then + 4 apart, + 2 apart,
 * + 1 apart.  Done for 16 vectors together, each step's shuffles serve two
 * of them (30 shuffles and 15 adds for 16 sums). */
static inline __m512 hsum16(const __m512 *v)
{
    __m512 p[8], q[4], r[2];
    for (int m = 0; m < 8; m++) /* lanes 0-7: v[2m]'s a[i] + a[i+8]; lanes 8-15: v[2m+1]'s */
        p[m] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], 0xEE));
    for (int m = 0; m < 4; m++) /* 128-bit block b: v[4m+b]'s b[i] + b[i+4] */
        q[m] = _mm512_add_ps(_mm512_shuffle_f32x4(p[2 * m], p[2 * m + 1], 0x88),
                             _mm512_shuffle_f32x4(p[2 * m], p[2 * m + 1], 0xDD));
    for (int m = 0; m < 2; m++) /* block b: c[0]+c[2], c[1]+c[3] of v[8m+b], then of v[8m+4+b] */
        r[m] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * m], q[2 * m + 1], 0x44),
                             _mm512_shuffle_ps(q[2 * m], q[2 * m + 1], 0xEE));
    /* lane 4b + j: the sum of v[b + 4j]; put lane k's own sum in lane k */
    __m512 s = _mm512_add_ps(_mm512_shuffle_ps(r[0], r[1], 0x88), _mm512_shuffle_ps(r[0], r[1], 0xDD));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, s);
}
#endif

/* The weighted sums of queries b0 .. b0+NQ-1 of a block (NQ 1 or 2, a
 * constant): each widened value row serves both, then each query's own chunk
 * rows, then its 1/sum.  The accumulators are indexed by constants only (the
 * loops unrolled), so they live in registers: chosen by a run-time index, as
 * before, GCC kept them on the stack and every multiply-add went through
 * memory. */
static inline __attribute__((always_inline)) void attn_vsum_i8(const attn_job *j, int kvh, int t0, int b0, const int NQ, int n8,
                                                              const int *nf, const int8_t *const *v8,
                                                              const float *const *vs, const float *score,
                                                              const float *inv, const int NV, const int G)
{
    const nd_attn_args *a = j->a;
    int hd = NV * ND_VW, kvw = a->num_kv_heads * hd, kg = key_group(a), A = a->num_heads * hd;
    size_t keys = keys_of(a);
    ndv acc[2][I8_MAX_G][I8_MAX_VECS];
    ATT_UNROLL
    for (int h = 0; h < NQ; h++)
        ATT_UNROLL
        for (int g = 0; g < G; g++)
            ATT_UNROLL
            for (int c = 0; c < NV; c++) acc[h][g][c] = ndv_zero();
    for (int i = 0; i < n8; i++) {
        ndv vv[I8_MAX_VECS];
        ATT_UNROLL
        for (int c = 0; c < NV; c++) vv[c] = ndv_mul(ndv_load_i8(v8[i] + c * ND_VW), ndv_set1(vs[i][c * ND_VW / kg]));
        ATT_UNROLL
        for (int h = 0; h < NQ; h++)
            ATT_UNROLL
            for (int g = 0; g < G; g++) {
                ndv e = ndv_set1(score[((size_t)(b0 + h) * G + (size_t)g) * keys + (size_t)i]);
                ATT_UNROLL
                for (int c = 0; c < NV; c++) acc[h][g][c] = ndv_fma(e, vv[c], acc[h][g][c]);
            }
    }
    ATT_UNROLL
    for (int h = 0; h < NQ; h++) {
        int bb = b0 + h, t = t0 + bb, qpos = a->pos0 + t, n = n8;
        const float *eb = score + (size_t)bb * G * keys;
        float *o = a->out + (size_t)t * (size_t)A + (size_t)kvh * (size_t)G * (size_t)hd;
        if (n8 + nf[bb] == 0) {
            for (int c = 0; c < G * hd; c++) o[c] = 0.0f;
            continue;
        }
        for (int u = 0; u <= t; u++) {
            if (!key_visible(a->pos0 + u, qpos, a->window, a->sinks)) continue;
            const float *vf = a->v_chunk + (size_t)u * (size_t)kvw + (size_t)kvh * (size_t)hd;
            ATT_UNROLL
            for (int g = 0; g < G; g++) {
                ndv e = ndv_set1(eb[(size_t)g * keys + (size_t)n]);
                ATT_UNROLL
                for (int c = 0; c < NV; c++) acc[h][g][c] = ndv_fma(e, ndv_load(vf + c * ND_VW), acc[h][g][c]);
            }
            n++;
        }
        ATT_UNROLL
        for (int g = 0; g < G; g++)
            ATT_UNROLL
            for (int c = 0; c < NV; c++)
                ndv_store(o + (size_t)g * (size_t)hd + c * ND_VW, ndv_mul(acc[h][g][c], ndv_set1(inv[bb * G + g])));
    }
}

/* One cached key row, widened once (times its group scales and 1/sqrt(hd)),
 * against every query b < nq and head g < G of a block: the lane sums of
 * q . k, to out[(b * G + g) * stride]. */
static inline __attribute__((always_inline)) void key_lane_sums(const int8_t *k8, const float *ks, float scale, int kg,
                                                               const float *q0, int A, int nq, ndv *out, int stride,
                                                               const int NV, const int G)
{
    int hd = NV * ND_VW;
    ndv kv[NV];
    ATT_UNROLL
    for (int c = 0; c < NV; c++) kv[c] = ndv_mul(ndv_load_i8(k8 + c * ND_VW), ndv_set1(ks[c * ND_VW / kg] * scale));
    for (int b = 0; b < nq; b++)
        ATT_UNROLL
        for (int g = 0; g < G; g++) {
            const float *qg = q0 + (size_t)b * (size_t)A + (size_t)g * (size_t)hd;
            ndv acc = ndv_zero();
            ATT_UNROLL
            for (int c = 0; c < NV; c++) acc = ndv_fma(ndv_load(qg + c * ND_VW), kv[c], acc);
            out[(b * G + g) * stride] = acc;
        }
}

static inline __attribute__((always_inline)) void attn_run_i8(const attn_job *j, int t0, int nq, int kvh, float *work,
                                                             const int NV, const int G)
{
    const nd_attn_args *a = j->a;
    int hd = NV * ND_VW, kvw = a->num_kv_heads * hd, kg = key_group(a), groups = kvw / kg, A = a->num_heads * hd;
    int hg = hd / kg;
    size_t keys = keys_of(a);
    float *score = work; /* [nq][G][keys] */
    const int8_t **k8 = (const int8_t **)(score + scores_floats(ATT_QB * G, keys)), **v8 = k8 + keys;
    const float **ks = (const float **)(v8 + keys), **vs = ks + keys;
    float *inv = (float *)(vs + keys); /* [nq][G] */
    int n8 = 0, nf[ATT_QB];
    for (const int *vis = j->visible + (size_t)t0 * keys; *vis >= 0; vis++) {
        size_t s = (size_t)*vis;
        k8[n8] = a->k_cache8 + s * (size_t)kvw + (size_t)kvh * (size_t)hd;
        v8[n8] = a->v_cache8 + s * (size_t)kvw + (size_t)kvh * (size_t)hd;
        ks[n8] = a->k_scale + s * (size_t)groups + (size_t)kvh * (size_t)hg;
        vs[n8] = a->v_scale + s * (size_t)groups + (size_t)kvh * (size_t)hg;
        n8++;
    }
    float scale = 1.0f / sqrtf((float)hd);
    const float *q0 = a->q + (size_t)t0 * (size_t)A + (size_t)kvh * (size_t)G * (size_t)hd;
    /* scores of the cached rows: each key row widened once for every query and head */
#if ND_VW == 16
    /* AVX-512: the lane sums of 16 keys at a time go to L1 and are reduced
     * together (hsum16), a few shuffles per key instead of a serial reduction
     * of each; every key gets the tree of GCC's _mm512_reduce_add_ps (what
     * ndv_hsum is under GCC), whichever compiler built this. */
    ndv sums[ATT_QB * I8_MAX_G * 16];
    for (int i0 = 0; i0 < n8; i0 += 16) {
        int nk = n8 - i0 < 16 ? n8 - i0 : 16;
        for (int ii = 0; ii < 16; ii++) {
            int i = i0 + ii;
            if (ii >= nk) { /* a short last block: zero lanes, never stored */
                for (int b = 0; b < nq; b++)
                    for (int g = 0; g < G; g++) sums[(b * G + g) * 16 + ii] = ndv_zero();
                continue;
            }
            if (i + PREFETCH_AHEAD < n8) __builtin_prefetch(k8[i + PREFETCH_AHEAD]), __builtin_prefetch(v8[i + PREFETCH_AHEAD]);
            key_lane_sums(k8[i], ks[i], scale, kg, q0, A, nq, sums + ii, 16, NV, G);
        }
        for (int b = 0; b < nq; b++)
            for (int g = 0; g < G; g++)
                _mm512_mask_storeu_ps(score + ((size_t)b * G + (size_t)g) * keys + (size_t)i0, (__mmask16)((1u << nk) - 1u),
                                      hsum16(sums + (b * G + g) * 16));
    }
#else
    for (int i = 0; i < n8; i++) {
        if (i + PREFETCH_AHEAD < n8) __builtin_prefetch(k8[i + PREFETCH_AHEAD]), __builtin_prefetch(v8[i + PREFETCH_AHEAD]);
        ndv lane[ATT_QB * I8_MAX_G];
        key_lane_sums(k8[i], ks[i], scale, kg, q0, A, nq, lane, 1, NV, G);
        for (int b = 0; b < nq; b++)
            ATT_UNROLL
            for (int g = 0; g < G; g++) score[((size_t)b * G + (size_t)g) * keys + (size_t)i] = ndv_hsum(lane[b * G + g]);
    }
#endif
    /* each query's own chunk rows (float, causal), then its softmax */
    for (int b = 0; b < nq; b++) {
        int t = t0 + b, qpos = a->pos0 + t, n = n8;
        for (int u = 0; u <= t; u++) {
            if (!key_visible(a->pos0 + u, qpos, a->window, a->sinks)) continue;
            const float *kf = a->k_chunk + (size_t)u * (size_t)kvw + (size_t)kvh * (size_t)hd;
            ATT_UNROLL
            for (int g = 0; g < G; g++)
                score[((size_t)b * G + (size_t)g) * keys + (size_t)n] =
                    nd_simd_dot(q0 + (size_t)b * (size_t)A + (size_t)g * (size_t)hd, kf, hd) * scale;
            n++;
        }
        nf[b] = n - n8;
        if (n > 0) softmax_rows(score + (size_t)b * G * keys, keys, G, n, inv + b * G);
    }
    /* weighted sums: queries in pairs share each widened value row */
    const int PAIR = G * NV <= 8;
    for (int b = 0; b < nq; b += PAIR ? 2 : 1) {
        if (PAIR && b + 1 < nq)
            attn_vsum_i8(j, kvh, t0, b, 2, n8, nf, v8, vs, score, inv, NV, G);
        else
            attn_vsum_i8(j, kvh, t0, b, 1, n8, nf, v8, vs, score, inv, NV, G);
    }
}

/* Queries [t0, t0 + nq) of one KV head, run by runs that see the same cached
 * slots; 0 when (NV, G) has no compiled variant (the caller falls back). */
static int attn_block_i8(const attn_job *j, int t0, int nq, int kvh, float *work)
{
    const nd_attn_args *a = j->a;
    int NV = a->head_dim / ND_VW, G = a->num_heads / a->num_kv_heads;
    int kind = (NV == 2 || NV == 4 || NV == 8) && (G == 1 || G == 2 || G == 4);
    if (!kind) return 0;
    size_t keys = keys_of(a);
    for (int t = t0; t < t0 + nq;) {
        const int *first = j->visible + (size_t)t * keys;
        int run = 1;
        while (t + run < t0 + nq) {
            const int *v = j->visible + (size_t)(t + run) * keys;
            int i = 0;
            while (first[i] >= 0 && v[i] == first[i]) i++;
            if (first[i] != v[i]) break;
            run++;
        }
#define ATT_CASE(nv, g) \
    if (NV == nv && G == g) attn_run_i8(j, t, run, kvh, work, nv, g);
        ATT_CASE(2, 1) ATT_CASE(2, 2) ATT_CASE(2, 4) ATT_CASE(4, 1) ATT_CASE(4, 2) ATT_CASE(4, 4)
        ATT_CASE(8, 1) ATT_CASE(8, 2) ATT_CASE(8, 4)
#undef ATT_CASE
        t += run;
    }
    return 1;
}

static void attn_task(void *ctx, int task, int thread)
{
    const attn_job *j = ctx;
    const nd_attn_args *a = j->a;
    /* the int8 path: keys and values of one width (Needle 2, and Needle 3 when q/k and v agree) */
    if (a->kv_bits == 8 && (a->v_head_dim <= 0 || a->v_head_dim == a->head_dim) && a->head_dim % ND_VW == 0 &&
        a->head_dim / ND_VW <= I8_MAX_VECS && a->num_heads / a->num_kv_heads <= I8_MAX_G) {
        int blk = task / a->num_kv_heads, kvh = task % a->num_kv_heads;
        int t0 = blk * ATT_QB, nq = a->T - t0 < ATT_QB ? a->T - t0 : ATT_QB;
        float *work = j->work + (size_t)thread * j->per_thread;
        if (attn_block_i8(j, t0, nq, kvh, work)) return;
        for (int t = t0; t < t0 + nq; t++) attn_task_i8(j, t, kvh, work);
        return;
    }
    int t = task / a->num_kv_heads, kvh = task % a->num_kv_heads;
    int hd = a->head_dim, kvw = a->num_kv_heads * hd, kg = key_group(a), groups = kvw / kg;
    /* values and outputs may be narrower or wider than keys (Needle 3) */
    int vd = a->v_head_dim > 0 ? a->v_head_dim : hd, vw_ = a->num_kv_heads * vd, vg = value_group(a), vgroups = vw_ / vg;
    int A = a->num_heads * hd, Ao = a->num_heads * vd, wd = vd > hd ? vd : hd;
    int G = a->num_heads / a->num_kv_heads;
    int qpos = a->pos0 + t;
    size_t keys = keys_of(a);
    float *score = j->work + (size_t)thread * j->per_thread;
    const float **krow = (const float **)(score + scores_floats(G, keys));
    const float **vrow = krow + keys;
    float *wide = (float *)(vrow + keys);

    /* the visible rows, oldest cache slot order first, then the chunk */
    int n = 0;
    for (const int *vis = j->visible + (size_t)t * keys; *vis >= 0; vis++) {
        int s = *vis;
        if (a->kv_bits == 8) {
            float *kw = wide + (size_t)n * (size_t)wd, *vw = wide + (keys + (size_t)n) * (size_t)wd;
            widen(a->k_cache8 + (size_t)s * kvw + (size_t)kvh * hd,
                  a->k_scale + (size_t)s * groups + (size_t)kvh * hd / kg, hd, kg, kw);
            widen(a->v_cache8 + (size_t)s * vw_ + (size_t)kvh * vd,
                  a->v_scale + (size_t)s * vgroups + (size_t)kvh * vd / vg, vd, vg, vw);
            krow[n] = kw, vrow[n] = vw;
        } else {
            krow[n] = a->k_cache + (size_t)s * (size_t)kvw + (size_t)kvh * (size_t)hd;
            vrow[n] = a->v_cache + (size_t)s * (size_t)vw_ + (size_t)kvh * (size_t)vd;
        }
        n++;
    }
    for (int u = 0; u <= t; u++) {
        if (!key_visible(a->pos0 + u, qpos, a->window, a->sinks)) continue;
        krow[n] = a->k_chunk + (size_t)u * (size_t)kvw + (size_t)kvh * (size_t)hd;
        vrow[n] = a->v_chunk + (size_t)u * (size_t)vw_ + (size_t)kvh * (size_t)vd;
        n++;
    }

    /* the G query heads of this KV head are contiguous */
    const float *q = a->q + (size_t)t * (size_t)A + (size_t)kvh * (size_t)G * (size_t)hd;
    float *o = a->out + (size_t)t * (size_t)Ao + (size_t)kvh * (size_t)G * (size_t)vd;
    float *inv = wide + (a->kv_bits == 8 ? 2 * keys * (size_t)wd : 0);
    if (n == 0) {
        for (int c = 0; c < G * vd; c++) o[c] = 0.0f;
        return;
    }

    /* scores: each key row is read once for all G heads */
    float scale = 1.0f / sqrtf((float)hd);
    for (int i = 0; i < n; i++) {
        const float *k = krow[i];
        if (i + PREFETCH_AHEAD < n) prefetch_row(krow[i + PREFETCH_AHEAD], hd);
        for (int g = 0; g < G; g++)
            score[(size_t)g * keys + (size_t)i] = nd_simd_dot(q + (size_t)g * (size_t)hd, k, hd) * scale;
    }
    softmax_rows(score, keys, G, n, inv);
    /* weighted sum of values: four vectors per head at a time, heads in pairs */
    int c = 0;
    for (; c + 4 * ND_VW <= vd; c += 4 * ND_VW)
        for (int g = 0; g < G; g += 2) {
            const float *e = score + (size_t)g * keys;
            float *og = o + (size_t)g * (size_t)vd;
            if (g + 1 < G) weighted_sum4(vrow, n, c, e, inv[g], og, e + keys, inv[g + 1], og + vd);
            else weighted_sum4(vrow, n, c, e, inv[g], og, NULL, 0.0f, NULL);
        }
    for (; c + ND_VW <= vd; c += ND_VW)
        for (int g = 0; g < G; g++)
            weighted_sum1(vrow, n, c, score + (size_t)g * keys, inv[g], o + (size_t)g * (size_t)vd);
    for (; c < vd; c++) /* tail of a head width that is not a multiple of the vector width */
        for (int g = 0; g < G; g++) {
            float acc = 0.0f;
            for (int i = 0; i < n; i++) acc += score[(size_t)g * keys + (size_t)i] * vrow[i][c];
            o[(size_t)g * (size_t)vd + (size_t)c] = acc * inv[g];
        }
}

static size_t per_thread_floats(const nd_attn_args *a)
{
    size_t keys = keys_of(a), G = (size_t)(a->num_heads / (a->num_kv_heads > 0 ? a->num_kv_heads : 1));
    size_t f = scores_floats((int)G, keys) + 2 * keys * PTR_FLOATS + G + 16; /* + 1/sums */
    int wd = a->v_head_dim > a->head_dim ? a->v_head_dim : a->head_dim;
    if (a->kv_bits == 8) f += 2 * keys * (size_t)wd;
    /* the blocked int8 path: ATT_QB queries' scores, four pointer arrays, their 1/sums */
    size_t fb = scores_floats(ATT_QB * (int)G, keys) + 4 * keys * PTR_FLOATS + ATT_QB * G + 16;
    if (fb > f) f = fb;
    return (f + 15) & ~(size_t)15;
}

/* the shared lists of visible cache slots, one per query (ints) */
static size_t visible_floats(const nd_attn_args *a) { return ((size_t)a->T * keys_of(a) + 15) & ~(size_t)15; }

size_t nd_cpu_attention_work_floats(const nd_attn_args *a, int threads)
{
    /* sized for the int8 cache whatever kv_bits says: callers size scratch
     * before they know which cache a session will use */
    nd_attn_args b = *a;
    b.kv_bits = 8;
    return visible_floats(a) + (size_t)threads * per_thread_floats(&b);
}

void nd_cpu_attention(nd_threadpool *pool, const nd_attn_args *a, float *work)
{
    size_t keys = keys_of(a);
    nd_attn_args b = *a;
    b.kv_bits = 8;
    /* which cache slots each query sees: found once per query here, not once
     * per KV head in every task */
    int *visible = (int *)work;
    for (int t = 0; t < a->T; t++) {
        int *vis = visible + (size_t)t * keys, qpos = a->pos0 + t, s = 0;
#if defined(__AVX512F__)
        /* sixteen slots at a time (a decoded token scans the whole window in
         * every layer): the same test, the visible slots packed in order */
        const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        const __m512i qv = _mm512_set1_epi32(qpos), wv = _mm512_set1_epi32(a->window), sv = _mm512_set1_epi32(a->sinks);
        for (; s + 16 <= a->cache_slots; s += 16) {
            __m512i p = _mm512_loadu_si512(a->cache_pos + s);
            __mmask16 ok = _mm512_cmpge_epi32_mask(p, _mm512_setzero_si512()) & _mm512_cmple_epi32_mask(p, qv) &
                           (_mm512_cmplt_epi32_mask(_mm512_sub_epi32(qv, p), wv) | _mm512_cmplt_epi32_mask(p, sv));
            /* compressed in a register, then all 16 lanes stored: the
             * compressing store to memory is microcoded on Zen 4 (~80% of
             * this loop's time); the lanes past the packed ones land at
             * most 15 entries after vis, before slot s + 16 <= cache_slots,
             * and are overwritten or ignored (the list ends at its -1) */
            _mm512_storeu_si512(vis, _mm512_maskz_compress_epi32(ok, _mm512_add_epi32(lane, _mm512_set1_epi32(s))));
            vis += __builtin_popcount(ok);
        }
#endif
        for (; s < a->cache_slots; s++) {
            int p = a->cache_pos[s];
            if (p >= 0 && key_visible(p, qpos, a->window, a->sinks)) *vis++ = s;
        }
        *vis = -1;
    }
    attn_job j = {.a = a, .work = work + visible_floats(a), .per_thread = per_thread_floats(&b), .visible = visible};
    size_t flops = keys * (size_t)a->T * (size_t)a->num_heads * (size_t)a->head_dim;
    int i8 = a->kv_bits == 8 && (a->v_head_dim <= 0 || a->v_head_dim == a->head_dim) && a->head_dim % ND_VW == 0 &&
             a->head_dim / ND_VW <= I8_MAX_VECS && a->num_heads / a->num_kv_heads <= I8_MAX_G;
    int rows = i8 ? (a->T + ATT_QB - 1) / ATT_QB : a->T; /* the int8 path takes blocks of queries */
    nd_threadpool_run(flops < ND_CPU_PARALLEL_MIN_WORK ? NULL : pool, rows * a->num_kv_heads, attn_task, &j);
}
