/* cpu_cq_int.c - the portable integer CQ kernel, the shared preparation
 * (int16 codebook, integer rotation) and the one run-time kernel choice. */
#include "backend/cpu/cpu_cq_int.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/cpu_features.h"

static float codebook_terms(const nd_matrix *w, int16_t cbq[16], int16_t lo[16])
{
    int n = 1 << nd_cq_int_sb(w);
    float mx = 0.0f;
    for (int i = 0; i < n; i++) mx = fabsf(w->codebook[i]) > mx ? fabsf(w->codebook[i]) : mx;
    float scale = mx > 0.0f ? mx / (float)ND_CQ_INT_CB_MAX : 1.0f;
    for (int i = 0; i < 16; i++) {
        float q = i < n ? rintf(w->codebook[i] / scale) : 0.0f;
        q = q > ND_CQ_INT_CB_MAX ? ND_CQ_INT_CB_MAX : q < -ND_CQ_INT_CB_MAX ? -ND_CQ_INT_CB_MAX : q;
        cbq[i] = (int16_t)q;
        float rest = i < n ? (float)((double)w->codebook[i] / scale - q) : 0.0f; /* in [-0.5, 0.5] */
        lo[i] = (int16_t)rintf(rest * 16384.0f);
    }
    return scale;
}

/* Every A8 matmul call asks for its matrices' codebook terms, a few hundred
 * times per decoded token, and a model has one codebook per width: the last
 * few answers are kept per thread, keyed by the codebook's values (not its
 * address, which a later model may reuse). */
#define CODEBOOK_MEMO 4
typedef struct codebook_memo {
    int n;
    float cb[16], scale;
    int16_t hi[16], lo[16];
} codebook_memo;

float nd_cq_int_codebook(const nd_matrix *w, int16_t cbq[16], int16_t lo[16])
{
    static _Thread_local codebook_memo memo[CODEBOOK_MEMO];
    static _Thread_local int memo_next;
    int n = 1 << nd_cq_int_sb(w);
    for (int i = 0; i < CODEBOOK_MEMO; i++)
        if (memo[i].n == n && !memcmp(memo[i].cb, w->codebook, sizeof(float) * (size_t)n)) {
            memcpy(cbq, memo[i].hi, sizeof memo[i].hi);
            memcpy(lo, memo[i].lo, sizeof memo[i].lo);
            return memo[i].scale;
        }
    codebook_memo *m = &memo[memo_next];
    memo_next = (memo_next + 1) % CODEBOOK_MEMO;
    m->n = 0; /* invalid until filled */
    m->scale = codebook_terms(w, m->hi, m->lo);
    memcpy(m->cb, w->codebook, sizeof(float) * (size_t)n);
    m->n = n;
    memcpy(cbq, m->hi, sizeof m->hi);
    memcpy(lo, m->lo, sizeof m->lo);
    return m->scale;
}

void nd_cq_int_rotate(const int8_t *codes, int cols, int cols_pad, int16_t *z)
{
    nd_cq_int_rotate_inline(codes, cols, cols_pad, z);
}

/* Portable: unpack a row's codes once, then exact int64 group sums per token. */
static void gemm_portable(const nd_cq_int_args *a)
{
    const nd_matrix *w = a->w;
    int sb = nd_cq_int_sb(w), groups = w->cols_pad / ND_CQ_GROUP;
    size_t rb = nd_cq_int_row_bytes(w);
    for (int r = a->r0; r < a->r1; r++) {
        const uint8_t *p = w->cq_idx + (size_t)r * rb;
        int16_t vals[ND_CQ_GROUP], lows[ND_CQ_GROUP];
        float acc[64] = {0}; /* per token in blocks of 64 (a group is decoded once per block) */
        for (int t0 = 0; t0 < a->T; t0 += 64) {
            int nt = a->T - t0 < 64 ? a->T - t0 : 64;
            for (int k = 0; k < nt; k++) acc[k] = 0.0f;
            for (int g = 0; g < groups; g++) {
                for (int i = 0; i < ND_CQ_GROUP; i++) {
                    size_t bit = (size_t)(g * ND_CQ_GROUP + i) * (size_t)sb;
                    unsigned v = p[bit >> 3] >> (bit & 7);
                    if ((bit & 7) + (size_t)sb > 8) v |= (unsigned)p[(bit >> 3) + 1] << (8 - (bit & 7));
                    vals[i] = a->cbq[v & ((1u << sb) - 1)];
                    lows[i] = a->cbq_lo[v & ((1u << sb) - 1)];
                }
                float norm = nd_cq_int_norm(w, r, g);
                for (int k = 0; k < nt; k++) {
                    const int16_t *z = a->z + (size_t)(t0 + k) * (size_t)a->ldz + (size_t)g * ND_CQ_GROUP;
                    /* 16 int32 lanes of 8 products each (exact, cpu_cq_int.h), a shape
                     * compilers vectorise; the group sums are the same integers */
                    int32_t ls[16] = {0}, ll[16] = {0};
                    for (int i = 0; i < ND_CQ_GROUP; i += 16)
                        for (int k = 0; k < 16; k++) {
                            ls[k] += (int32_t)vals[i + k] * (int32_t)z[i + k];
                            ll[k] += (int32_t)lows[i + k] * (int32_t)z[i + k];
                        }
                    int64_t s = 0, sl = 0;
                    for (int k = 0; k < 16; k++) s += ls[k], sl += ll[k];
                    acc[k] = nd_cq_int_group_acc(acc[k], s, sl, norm);
                }
            }
            for (int k = 0; k < nt; k++) a->y[(size_t)(t0 + k) * (size_t)a->ldy + (size_t)r] = acc[k] * a->tscale[t0 + k];
        }
    }
}

static const nd_cq_int_kernel portable = {"portable", gemm_portable, NULL};
const nd_cq_int_kernel *nd_cq_int_kernel_portable(void) { return &portable; }

/* ---- the one run-time choice ---- */

static const nd_cq_int_kernel *chosen;
static char chosen_why[160];
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* Every kernel of this build's architecture, least capable first (the
 * others' files are left out of the build; their getters do not exist). */
#if defined(__x86_64__) || defined(__i386__)
#define N_CQ_INT 3
#define CQ_INT_ALL {nd_cq_int_kernel_portable(), nd_cq_int_kernel_avx2(), nd_cq_int_kernel_avx512()}
#elif defined(__aarch64__)
#define N_CQ_INT 3
#define CQ_INT_ALL {nd_cq_int_kernel_portable(), nd_cq_int_kernel_neon(), nd_cq_int_kernel_neon_dotprod()}
#elif defined(__wasm__)
#define N_CQ_INT 2
#define CQ_INT_ALL {nd_cq_int_kernel_portable(), nd_cq_int_kernel_simd128()}
#else
#define N_CQ_INT 1
#define CQ_INT_ALL {nd_cq_int_kernel_portable()}
#endif

/* A kernel for an ISA is used only when the binary contains it (its getter
 * returns non-NULL) and the CPU reports the instructions it needs (NEON is
 * architectural on AArch64; a SIMD128 build only loads where SIMD128 runs). */
static int usable(const nd_cq_int_kernel *k, const nd_cpu_features *f)
{
    if (!k) return 0;
#if defined(__x86_64__) || defined(__i386__)
    if (k == nd_cq_int_kernel_avx512()) return f->avx512f && f->avx512bw && f->avx512vnni;
    if (k == nd_cq_int_kernel_avx2()) return f->avx2;
#elif defined(__aarch64__)
    if (k == nd_cq_int_kernel_neon_dotprod()) return f->neon_dotprod;
#else
    (void)f;
#endif
    return 1;
}


int nd_cpu_cq_int_kernels(const nd_cq_int_kernel **out, int max)
{
    nd_cpu_features f;
    nd_cpu_features_detect(&f);
    const nd_cq_int_kernel *all[N_CQ_INT] = CQ_INT_ALL;
    int n = 0;
    for (int i = 0; i < N_CQ_INT; i++)
        if (usable(all[i], &f) && n < max) out[n++] = all[i];
    return n;
}

/* The path the float kernels run (nd_cpu_isa_choose: NEEDLE_ISA or the best
 * the CPU has) decides the integer kernel too, so forcing a path forces both;
 * on AArch64 (one path, NEON) the dot-product extension decides between the
 * two NEON kernels. */
static void choose(void)
{
    nd_cpu_isa isa = ND_ISA_PORTABLE;
    const char *why = NULL;
    if (nd_cpu_isa_choose(&isa, &why)) isa = ND_ISA_PORTABLE;
    nd_cpu_features f;
    nd_cpu_features_detect(&f);
    (void)f;
    chosen = nd_cq_int_kernel_portable();
    snprintf(chosen_why, sizeof chosen_why, "kernel path %s: portable C", nd_cpu_isa_name(isa));
#if defined(__x86_64__) || defined(__i386__)
    if (isa == ND_ISA_AVX512 && usable(nd_cq_int_kernel_avx512(), &f)) chosen = nd_cq_int_kernel_avx512();
    else if ((isa == ND_ISA_AVX512 || isa == ND_ISA_AVX2) && usable(nd_cq_int_kernel_avx2(), &f))
        chosen = nd_cq_int_kernel_avx2();
    if (chosen != nd_cq_int_kernel_portable())
        snprintf(chosen_why, sizeof chosen_why, "kernel path %s: its integer kernel", nd_cpu_isa_name(isa));
#elif defined(__aarch64__)
    if (usable(nd_cq_int_kernel_neon_dotprod(), &f)) {
        chosen = nd_cq_int_kernel_neon_dotprod();
        snprintf(chosen_why, sizeof chosen_why, "the CPU has the dot-product extension (HWCAP_ASIMDDP): SDOT");
    } else {
        chosen = nd_cq_int_kernel_neon();
        snprintf(chosen_why, sizeof chosen_why, "the CPU lacks the dot-product extension (HWCAP_ASIMDDP): SMLAL");
    }
#elif defined(__wasm__)
    if (usable(nd_cq_int_kernel_simd128(), &f)) {
        chosen = nd_cq_int_kernel_simd128();
        snprintf(chosen_why, sizeof chosen_why, "built with WebAssembly SIMD128");
    }
#endif
}

const nd_cq_int_kernel *nd_cpu_cq_int_kernel(void)
{
    pthread_once(&chosen_once, choose);
    return chosen;
}

const char *nd_cpu_cq_int_kernel_reason(void)
{
    pthread_once(&chosen_once, choose);
    return chosen_why;
}
