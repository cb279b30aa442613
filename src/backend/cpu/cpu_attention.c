/* cpu_attention.c - causal GQA attention with a key window and sink positions.
 *
 * One task per (query, head).  The keys a query sees are the cached ones
 * (positions before the chunk, in a ring buffer) and the chunk's own keys up
 * to the query itself, filtered by the window/sink rule of SPEC section 5. */
#include <math.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <stdint.h>

#include "backend/cpu/cpu_ops.h"

static inline int key_visible(int k, int q, int window, int sinks)
{
    return k <= q && (q - k < window || k < sinks);
}

typedef struct attn_job {
    const nd_attn_args *a;
    float *work;
    int per_thread;
} attn_job;

/* o += e * v for one value row. */
static inline void axpy(float *o, float e, const float *v, int hd)
{
    int c = 0;
#if defined(__AVX512F__)
    __m512 ev = _mm512_set1_ps(e);
    for (; c + 16 <= hd; c += 16)
        _mm512_storeu_ps(o + c, _mm512_fmadd_ps(ev, _mm512_loadu_ps(v + c), _mm512_loadu_ps(o + c)));
#endif
    for (; c < hd; c++) o[c] += e * v[c];
}

/* Widen one int8 cache row (hd values, hd/ND_KV_GROUP scales). */
static inline void widen(const int8_t *q, const float *scale, int hd, float *out)
{
    for (int g = 0; g < hd / ND_KV_GROUP; g++) {
#if defined(__AVX512F__)
        __m512 sv = _mm512_set1_ps(scale[g]);
        for (int i = 0; i < ND_KV_GROUP; i += 16) {
            __m128i b = _mm_loadu_si128((const __m128i *)(q + g * ND_KV_GROUP + i));
            _mm512_storeu_ps(out + g * ND_KV_GROUP + i, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), sv));
        }
#else
        for (int i = 0; i < ND_KV_GROUP; i++) out[g * ND_KV_GROUP + i] = (float)q[g * ND_KV_GROUP + i] * scale[g];
#endif
    }
}

static void attn_task(void *ctx, int task, int thread)
{
    const attn_job *j = ctx;
    const nd_attn_args *a = j->a;
    int t = task / a->num_heads, h = task % a->num_heads;
    int hd = a->head_dim, kvw = a->num_kv_heads * hd, groups = kvw / ND_KV_GROUP;
    int kvh = h / (a->num_heads / a->num_kv_heads);
    int qpos = a->pos0 + t;
    const float *q = a->q + (size_t)t * (size_t)(a->num_heads * hd) + (size_t)h * (size_t)hd;
    float *score = j->work + (size_t)thread * (size_t)j->per_thread;
    int *src = (int *)(score + a->cache_slots + a->T); /* key i: cache slot, or -(chunk index + 1) */
    float *row = (float *)(src + a->cache_slots + a->T); /* hd floats of widened int8 */
    float scale = 1.0f / sqrtf((float)hd), mx = -INFINITY;
    int n = 0;
    for (int s = 0; s < a->cache_slots; s++) {
        int p = a->cache_pos[s];
        if (p < 0 || !key_visible(p, qpos, a->window, a->sinks)) continue;
        const float *k;
        if (a->kv_bits == 8) {
            widen(a->k_cache8 + (size_t)s * kvw + (size_t)kvh * hd,
                  a->k_scale + (size_t)s * groups + (size_t)kvh * hd / ND_KV_GROUP, hd, row);
            k = row;
        } else {
            k = a->k_cache + (size_t)s * (size_t)kvw + (size_t)kvh * (size_t)hd;
        }
        score[n] = nd_cpu_dot(q, k, hd) * scale;
        src[n] = s;
        if (score[n] > mx) mx = score[n];
        n++;
    }
    for (int u = 0; u <= t; u++) {
        if (!key_visible(a->pos0 + u, qpos, a->window, a->sinks)) continue;
        const float *k = a->k_chunk + (size_t)u * (size_t)kvw + (size_t)kvh * (size_t)hd;
        score[n] = nd_cpu_dot(q, k, hd) * scale;
        src[n] = -(u + 1);
        if (score[n] > mx) mx = score[n];
        n++;
    }
    float *o = a->out + (size_t)t * (size_t)(a->num_heads * hd) + (size_t)h * (size_t)hd;
    for (int i = 0; i < hd; i++) o[i] = 0.0f;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        float e = expf(score[i] - mx);
        sum += e;
        const float *v;
        if (src[i] < 0) {
            v = a->v_chunk + (size_t)(-src[i] - 1) * (size_t)kvw + (size_t)kvh * (size_t)hd;
        } else if (a->kv_bits == 8) {
            widen(a->v_cache8 + (size_t)src[i] * kvw + (size_t)kvh * hd,
                  a->v_scale + (size_t)src[i] * groups + (size_t)kvh * hd / ND_KV_GROUP, hd, row);
            v = row;
        } else {
            v = a->v_cache + (size_t)src[i] * (size_t)kvw + (size_t)kvh * (size_t)hd;
        }
        axpy(o, e, v, hd);
    }
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int c = 0; c < hd; c++) o[c] *= inv;
}

static size_t per_thread_floats(const nd_attn_args *a)
{
    size_t keys = (size_t)a->cache_slots + (size_t)a->T;
    return keys * 2 + (size_t)a->head_dim + 16; /* scores, sources (int), one widened row */
}

size_t nd_cpu_attention_work_floats(const nd_attn_args *a, int threads)
{
    return (size_t)threads * per_thread_floats(a);
}

void nd_cpu_attention(nd_threadpool *pool, const nd_attn_args *a, float *work)
{
    size_t keys = (size_t)a->cache_slots + (size_t)a->T;
    attn_job j = {.a = a, .work = work, .per_thread = (int)per_thread_floats(a)};
    size_t flops = keys * (size_t)a->T * (size_t)a->num_heads * (size_t)a->head_dim;
    nd_threadpool_run(flops < ND_CPU_PARALLEL_MIN_WORK ? NULL : pool, a->T * a->num_heads, attn_task, &j);
}
