/* gemm.c - packed, register-blocked float32 GEMM for the trainer (see gemm.h).
 *
 * Layout (the classic Goto/BLIS scheme, cut down to what training needs):
 *   - B is packed once per call into NR-column panels, KC rows deep: each
 *     micro-panel (KC x NR, 16-32 KB) is read from L1 by the micro-kernel.
 *   - Work is a grid of tasks: MC rows of C by a chunk of NR-panels.  A task
 *     runs the micro-kernel over every (MR, NR) tile, reading its MC x KC
 *     block of A in place (row-major or transposed; it stays in L2) and
 *     packing only ragged MR-row panels (per-thread buffer).
 *   - K is walked in KC blocks in order; between blocks the partial sums live
 *     in C itself, so every entry of C is one in-order sum over k.
 * Transposes cost nothing: an operand is read through its strides. */
#include "train/gemm_isa_names.h" /* first: this copy's names (compiled once per ISA) */
#include "train/gemm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#define MR 8
#define NR 32
#define KERNEL_NAME "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define MR 6
#define NR 16
#define KERNEL_NAME "avx2"
#else
#define MR 4
#define NR 16
#define KERNEL_NAME "portable"
#endif

#define KC 256       /* depth of one packed block */
#define MC_PANELS 12 /* MR-panels per task: MC = 12 * MR rows of A in L2 */
#define NC_PANELS 8  /* NR-panels per task */
#define MC (MC_PANELS * MR)
#define ALIGN 64

const char *nd_gemm_kernel_name(void) { return KERNEL_NAME; }

/* ---- micro-kernels: c[MR, NR] (+)= A[MR, kc] x b-panel [kc][NR] -----------
 * A element (r, k) is a[r*ars + k*acs]: a packed panel (1, MR), rows of a
 * row-major matrix read in place (lda, 1), or columns of a transposed one
 * (1, lda) - reading A in place saves packing it (most A operands are read
 * only a few times).  b is a packed, 64-byte aligned panel.  load=0 starts
 * from zero; load=1 adds to what c holds (any tile with row stride ldc). */
#define KERNEL_BODY static inline __attribute__((always_inline)) void kernel_body
#if defined(__AVX512F__)
KERNEL_BODY(int kc, const float *a, ptrdiff_t ars, ptrdiff_t acs, const float *b, float *c, ptrdiff_t ldc,
                 int load)
{
#define DECL(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps()
    DECL(0); DECL(1); DECL(2); DECL(3); DECL(4); DECL(5); DECL(6); DECL(7);
#undef DECL
    if (load) {
#define LOAD(r) c##r##0 = _mm512_loadu_ps(c + r * ldc); c##r##1 = _mm512_loadu_ps(c + r * ldc + 16)
        LOAD(0); LOAD(1); LOAD(2); LOAD(3); LOAD(4); LOAD(5); LOAD(6); LOAD(7);
#undef LOAD
    }
    for (int k = 0; k < kc; k++, a += acs, b += NR) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#define STEP(r) { __m512 ar = _mm512_set1_ps(a[r * ars]); \
                  c##r##0 = _mm512_fmadd_ps(ar, b0, c##r##0); c##r##1 = _mm512_fmadd_ps(ar, b1, c##r##1); }
        STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)
#undef STEP
    }
#define STORE(r) _mm512_storeu_ps(c + r * ldc, c##r##0); _mm512_storeu_ps(c + r * ldc + 16, c##r##1)
    STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5); STORE(6); STORE(7);
#undef STORE
}
#elif defined(__AVX2__) && defined(__FMA__)
KERNEL_BODY(int kc, const float *a, ptrdiff_t ars, ptrdiff_t acs, const float *b, float *c, ptrdiff_t ldc,
                 int load)
{
#define DECL(r) __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps()
    DECL(0); DECL(1); DECL(2); DECL(3); DECL(4); DECL(5);
#undef DECL
    if (load) {
#define LOAD(r) c##r##0 = _mm256_loadu_ps(c + r * ldc); c##r##1 = _mm256_loadu_ps(c + r * ldc + 8)
        LOAD(0); LOAD(1); LOAD(2); LOAD(3); LOAD(4); LOAD(5);
#undef LOAD
    }
    for (int k = 0; k < kc; k++, a += acs, b += NR) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#define STEP(r) { __m256 ar = _mm256_broadcast_ss(a + r * ars); \
                  c##r##0 = _mm256_fmadd_ps(ar, b0, c##r##0); c##r##1 = _mm256_fmadd_ps(ar, b1, c##r##1); }
        STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5)
#undef STEP
    }
#define STORE(r) _mm256_storeu_ps(c + r * ldc, c##r##0); _mm256_storeu_ps(c + r * ldc + 8, c##r##1)
    STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5);
#undef STORE
}
#else
/* Portable: GCC/clang vector extensions (SSE2 on a baseline x86-64 build). */
typedef float v8 __attribute__((vector_size(32)));
#pragma GCC diagnostic ignored "-Wpsabi"
static inline v8 ld8(const float *p) { v8 v; memcpy(&v, p, sizeof v); return v; }
static inline void st8(float *p, v8 v) { memcpy(p, &v, sizeof v); }

KERNEL_BODY(int kc, const float *a, ptrdiff_t ars, ptrdiff_t acs, const float *b, float *c, ptrdiff_t ldc,
                 int load)
{
    v8 acc[MR][2];
    for (int r = 0; r < MR; r++)
        for (int h = 0; h < 2; h++) {
            if (load) acc[r][h] = ld8(c + r * ldc + 8 * h);
            else memset(&acc[r][h], 0, sizeof acc[r][h]);
        }
    for (int k = 0; k < kc; k++, a += acs, b += NR) {
        v8 b0 = ld8(b), b1 = ld8(b + 8);
        for (int r = 0; r < MR; r++) {
            float av = a[r * ars];
            v8 ar = {av, av, av, av, av, av, av, av};
            acc[r][0] += ar * b0;
            acc[r][1] += ar * b1;
        }
    }
    for (int r = 0; r < MR; r++) {
        st8(c + r * ldc, acc[r][0]);
        st8(c + r * ldc + 8, acc[r][1]);
    }
}
#endif

static void kernel_packed(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int load)
{
    kernel_body(kc, a, 1, MR, b, c, ldc, load);
}
static void kernel_rows(int kc, const float *a, ptrdiff_t lda, const float *b, float *c, ptrdiff_t ldc, int load)
{
    kernel_body(kc, a, lda, 1, b, c, ldc, load);
}
static void kernel_cols(int kc, const float *a, ptrdiff_t lda, const float *b, float *c, ptrdiff_t ldc, int load)
{
    kernel_body(kc, a, 1, lda, b, c, ldc, load);
}

/* Where one MR-row panel of A comes from: packed, or read in place. */
typedef struct {
    const float *a;
    ptrdiff_t stride; /* lda for ROWS / COLS */
    enum { A_PACKED, A_ROWS, A_COLS } kind;
} a_panel;

static void run_kernel(a_panel A, int kc, const float *b, float *c, ptrdiff_t ldc, int load)
{
    if (A.kind == A_ROWS) kernel_rows(kc, A.a, A.stride, b, c, ldc, load);
    else if (A.kind == A_COLS) kernel_cols(kc, A.a, A.stride, b, c, ldc, load);
    else kernel_packed(kc, A.a, b, c, ldc, load);
}

/* ---- packing ---------------------------------------------------------------- */

/* B rows [k0, k0+kl) of panel jp -> dst[k][NR], zero past column N. */
static void pack_b_panel(float *dst, nd_gemm_operand B, int jp, int k0, int kl, int N)
{
    int j0 = jp * NR, w = N - j0 < NR ? N - j0 : NR;
    if (B.col == 1 && w == NR) {
        for (int k = 0; k < kl; k++) memcpy(dst + (size_t)k * NR, B.p + (k0 + k) * B.row + j0, sizeof(float) * NR);
        return;
    }
    if (w < NR)
        for (int k = 0; k < kl; k++) memset(dst + (size_t)k * NR + w, 0, sizeof(float) * (size_t)(NR - w));
    for (int c = 0; c < w; c++) { /* column-wise: contiguous reads for a transposed B */
        const float *src = B.p + (j0 + c) * B.col + k0 * B.row;
        for (int k = 0; k < kl; k++) dst[(size_t)k * NR + c] = src[k * B.row];
    }
}

/* A rows [i0, i0+MR) x k [k0, k0+kl) -> dst[k][MR], zero past row M.  Only
 * ragged panels and operands with no unit stride come here (a_panel_for). */
static void pack_a_panel(float *dst, nd_gemm_operand A, int i0, int k0, int kl, int M)
{
    int h = M - i0 < MR ? M - i0 : MR;
    if (h < MR)
        for (int k = 0; k < kl; k++) memset(dst + (size_t)k * MR + h, 0, sizeof(float) * (size_t)(MR - h));
    for (int r = 0; r < h; r++) {
        const float *src = A.p + (i0 + r) * A.row + k0 * A.col;
        for (int k = 0; k < kl; k++) dst[(size_t)k * MR + r] = src[k * A.col];
    }
}

/* ---- the parallel driver ------------------------------------------------------ */

typedef struct {
    float *C;
    ptrdiff_t ldc;
    nd_gemm_operand A, B;
    int M, N, K, accumulate;
    int n_panels, n_chunks, chunk_panels; /* tasks per row block, NR-panels per task */
    int n_tasks;                          /* row blocks x n_chunks */
    float *bpack; /* K x (n_panels*NR): block of k0 at k0*n_panels*NR, panel jp at +jp*kl*NR */
    float *apack; /* per thread: MC x KC */
} gemm_job;

static void pack_b_task(void *ctx, int jp, int thread)
{
    (void)thread;
    gemm_job *g = ctx;
    for (int k0 = 0; k0 < g->K; k0 += KC) {
        int kl = g->K - k0 < KC ? g->K - k0 : KC;
        pack_b_panel(g->bpack + (size_t)k0 * g->n_panels * NR + (size_t)jp * kl * NR, g->B, jp, k0, kl, g->N);
    }
}

/* One MR x NR tile of C at (i, j), through a scratch tile at the edges (the
 * same kernel and the same sum order either way). */
static void tile(gemm_job *g, a_panel ap, const float *bp, int kl, int i, int j, int load)
{
    float *c = g->C + i * g->ldc + j;
    int h = g->M - i < MR ? g->M - i : MR, w = g->N - j < NR ? g->N - j : NR;
    if (h == MR && w == NR) {
        run_kernel(ap, kl, bp, c, g->ldc, load);
        return;
    }
    float t[MR * NR];
    memset(t, 0, sizeof t);
    if (load)
        for (int r = 0; r < h; r++) memcpy(t + r * NR, c + r * g->ldc, sizeof(float) * (size_t)w);
    run_kernel(ap, kl, bp, t, NR, 1);
    for (int r = 0; r < h; r++) memcpy(c + r * g->ldc, t + r * NR, sizeof(float) * (size_t)w);
}

/* The A panel of rows [i, i+MR) x k [k0, k0+kl): in place when A is row-major
 * or transposed and the panel is whole, else packed (zero rows past M). */
static a_panel a_panel_for(gemm_job *g, float *pack, int i, int k0, int kl)
{
    a_panel p;
    if (g->M - i >= MR && g->A.col == 1) {
        p.a = g->A.p + i * g->A.row + k0, p.stride = g->A.row, p.kind = A_ROWS;
    } else if (g->M - i >= MR && g->A.row == 1) {
        p.a = g->A.p + i + k0 * g->A.col, p.stride = g->A.col, p.kind = A_COLS;
    } else {
        pack_a_panel(pack, g->A, i, k0, kl, g->M);
        p.a = pack, p.stride = MR, p.kind = A_PACKED;
    }
    return p;
}

static void compute_task(void *ctx, int task, int thread)
{
    gemm_job *g = ctx;
    int i0 = (task / g->n_chunks) * MC, p0 = (task % g->n_chunks) * g->chunk_panels;
    int p1 = p0 + g->chunk_panels < g->n_panels ? p0 + g->chunk_panels : g->n_panels;
    int m_panels = (g->M - i0 + MR - 1) / MR;
    if (m_panels > MC_PANELS) m_panels = MC_PANELS;
    float *ap = g->apack + (size_t)thread * MC * KC;
    a_panel panels[MC_PANELS];
    for (int k0 = 0; k0 < g->K; k0 += KC) {
        int kl = g->K - k0 < KC ? g->K - k0 : KC;
        int load = g->accumulate || k0 > 0;
        for (int ip = 0; ip < m_panels; ip++)
            panels[ip] = a_panel_for(g, ap + (size_t)ip * kl * MR, i0 + ip * MR, k0, kl);
        const float *bblock = g->bpack + (size_t)k0 * g->n_panels * NR;
        for (int jp = p0; jp < p1; jp++)
            for (int ip = 0; ip < m_panels; ip++)
                tile(g, panels[ip], bblock + (size_t)jp * kl * NR, kl, i0 + ip * MR, jp * NR, load);
    }
}

static float *alloc_aligned(size_t n)
{
    size_t bytes = (sizeof(float) * n + ALIGN - 1) / ALIGN * ALIGN;
    return aligned_alloc(ALIGN, bytes ? bytes : ALIGN);
}

static gemm_job job_for(float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K,
                        int accumulate, int threads)
{
    int n_panels = (N + NR - 1) / NR;
    gemm_job g = {C, ldc, A, B, M, N, K, accumulate, n_panels, 1, n_panels, 0, NULL, NULL};
    /* Tasks span the whole width (each A panel read once per row block)
     * unless there are too few row blocks to keep the threads busy. */
    if ((M + MC - 1) / MC < 4 * threads) {
        g.chunk_panels = NC_PANELS;
        g.n_chunks = (n_panels + NC_PANELS - 1) / NC_PANELS;
    }
    g.n_tasks = (M + MC - 1) / MC * g.n_chunks;
    return g;
}

static size_t bpack_floats(int N, int K) { return (size_t)K * (size_t)((N + NR - 1) / NR) * NR; }

/* Both zero-work cases: nothing to do, or (K = 0) C = 0 unless accumulating. */
static int trivial(float *C, int ldc, int M, int N, int K, int accumulate)
{
    if (M <= 0 || N <= 0) return 1;
    if (K > 0) return 0;
    if (!accumulate)
        for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, sizeof(float) * (size_t)N);
    return 1;
}

/* ---- narrow products (AVX-512 only) ---------------------------------------------
 * The mHC lane projections (N = 4 and 16), the LoRA down-projections (N = 16)
 * and the Monarch gate (N = 8) would fill a quarter or half of a 32-wide tile.
 * With N <= NARROW_N, K >= NARROW_MIN_K and A row-major, vectors run along k
 * instead: B is packed transposed (bt[j][k], N rounded up to 4 with zero rows)
 * and a 4 x 4 tile of C keeps 16-lane partial sums, each reduced once at the
 * end.  Still one fixed sum per entry (lanes, then the reduction, then C's old
 * value when accumulating), whatever the thread count. */
#if defined(__AVX512F__)
#define NARROW_N 16
#define NARROW_MIN_K 64
#define NARROW_ROWS 64 /* rows of C per task */

static int narrow_fits(nd_gemm_operand A, int N, int K) { return N <= NARROW_N && K >= NARROW_MIN_K && A.col == 1; }
static int narrow_cols(int N) { return (N + 3) / 4 * 4; }

static void narrow_pack(float *bt, nd_gemm_operand B, int N, int K)
{
    for (int j = 0; j < narrow_cols(N); j++)
        for (int k = 0; k < K; k++) bt[(size_t)j * K + k] = j < N ? B.p[k * B.row + j * B.col] : 0.0f;
}

/* C rows [0, rows) x columns [0, cols) (both <= 4) from A rows (stride lda) and bt rows */
static void narrow_tile(const float *a, ptrdiff_t lda, int rows, const float *bt, int K, float *c, ptrdiff_t ldc,
                        int cols, int accumulate)
{
    const float *a0 = a, *a1 = rows > 1 ? a + lda : a, *a2 = rows > 2 ? a + 2 * lda : a, *a3 = rows > 3 ? a + 3 * lda : a;
    const float *b0 = bt, *b1 = bt + K, *b2 = bt + 2 * (size_t)K, *b3 = bt + 3 * (size_t)K;
#define NDECL(r) __m512 s##r##0 = _mm512_setzero_ps(), s##r##1 = _mm512_setzero_ps(), s##r##2 = _mm512_setzero_ps(), \
                        s##r##3 = _mm512_setzero_ps()
    NDECL(0); NDECL(1); NDECL(2); NDECL(3);
#undef NDECL
#define NROW(r, av) s##r##0 = _mm512_fmadd_ps(av, v0, s##r##0); s##r##1 = _mm512_fmadd_ps(av, v1, s##r##1); \
                    s##r##2 = _mm512_fmadd_ps(av, v2, s##r##2); s##r##3 = _mm512_fmadd_ps(av, v3, s##r##3)
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 v0 = _mm512_loadu_ps(b0 + k), v1 = _mm512_loadu_ps(b1 + k), v2 = _mm512_loadu_ps(b2 + k),
               v3 = _mm512_loadu_ps(b3 + k);
        NROW(0, _mm512_loadu_ps(a0 + k)); NROW(1, _mm512_loadu_ps(a1 + k));
        NROW(2, _mm512_loadu_ps(a2 + k)); NROW(3, _mm512_loadu_ps(a3 + k));
    }
    if (k < K) {
        __mmask16 m = (__mmask16)((1u << (K - k)) - 1u);
        __m512 v0 = _mm512_maskz_loadu_ps(m, b0 + k), v1 = _mm512_maskz_loadu_ps(m, b1 + k),
               v2 = _mm512_maskz_loadu_ps(m, b2 + k), v3 = _mm512_maskz_loadu_ps(m, b3 + k);
        NROW(0, _mm512_maskz_loadu_ps(m, a0 + k)); NROW(1, _mm512_maskz_loadu_ps(m, a1 + k));
        NROW(2, _mm512_maskz_loadu_ps(m, a2 + k)); NROW(3, _mm512_maskz_loadu_ps(m, a3 + k));
    }
#undef NROW
    float t[4][4];
#define NSUM(r) t[r][0] = _mm512_reduce_add_ps(s##r##0); t[r][1] = _mm512_reduce_add_ps(s##r##1); \
                t[r][2] = _mm512_reduce_add_ps(s##r##2); t[r][3] = _mm512_reduce_add_ps(s##r##3)
    NSUM(0); NSUM(1); NSUM(2); NSUM(3);
#undef NSUM
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) c[r * ldc + j] = accumulate ? c[r * ldc + j] + t[r][j] : t[r][j];
}

typedef struct {
    float *C;
    ptrdiff_t ldc;
    nd_gemm_operand A;
    const float *bt;
    int M, N, K, accumulate;
} narrow_job;

static void narrow_task(void *ctx, int task, int thread)
{
    (void)thread;
    narrow_job *g = ctx;
    int i1 = (task + 1) * NARROW_ROWS < g->M ? (task + 1) * NARROW_ROWS : g->M;
    for (int i = task * NARROW_ROWS; i < i1; i += 4)
        for (int j = 0; j < g->N; j += 4)
            narrow_tile(g->A.p + i * g->A.row, g->A.row, i1 - i < 4 ? i1 - i : 4, g->bt + (size_t)j * g->K, g->K,
                        g->C + i * g->ldc + j, g->ldc, g->N - j < 4 ? g->N - j : 4, g->accumulate);
}

static size_t narrow_floats(int N, int K) { return (size_t)narrow_cols(N) * (size_t)K; }

/* The product on the pool (pool may be NULL) with bt scratch of narrow_floats(N, K). */
static void narrow_run(nd_threadpool *pool, float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N,
                       int K, int accumulate, float *bt)
{
    narrow_pack(bt, B, N, K);
    narrow_job g = {C, ldc, A, bt, M, N, K, accumulate};
    int tasks = (M + NARROW_ROWS - 1) / NARROW_ROWS;
    if (pool) nd_threadpool_run(pool, tasks, narrow_task, &g);
    else
        for (int t = 0; t < tasks; t++) narrow_task(&g, t, 0);
}
#endif

int nd_gemm(nd_threadpool *pool, float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K,
            int accumulate)
{
    if (trivial(C, ldc, M, N, K, accumulate)) return 0;
#if defined(__AVX512F__)
    if (narrow_fits(A, N, K)) {
        float *bt = malloc(sizeof(float) * narrow_floats(N, K));
        if (!bt) return -1;
        narrow_run(pool, C, ldc, A, B, M, N, K, accumulate, bt);
        free(bt);
        return 0;
    }
#endif
    int threads = pool ? nd_threadpool_threads(pool) : 1;
    gemm_job g = job_for(C, ldc, A, B, M, N, K, accumulate, threads);
    g.bpack = alloc_aligned(bpack_floats(N, K));
    g.apack = alloc_aligned((size_t)threads * MC * KC);
    if (!g.bpack || !g.apack) {
        free(g.bpack);
        free(g.apack);
        return -1;
    }
    nd_threadpool_run(pool, g.n_panels, pack_b_task, &g);
    nd_threadpool_run(pool, g.n_tasks, compute_task, &g);
    free(g.bpack);
    free(g.apack);
    return 0;
}

size_t nd_gemm_scratch_floats(int N, int K)
{
    return bpack_floats(N, K) + (size_t)MC * KC + ALIGN / sizeof(float);
}

void nd_gemm_serial(float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K, int accumulate,
                    float *scratch)
{
    if (trivial(C, ldc, M, N, K, accumulate)) return;
    uintptr_t at = ((uintptr_t)scratch + ALIGN - 1) / ALIGN * ALIGN;
#if defined(__AVX512F__)
    if (narrow_fits(A, N, K)) { /* narrow_floats(N, K) <= bpack_floats(N, K) */
        narrow_run(NULL, C, ldc, A, B, M, N, K, accumulate, (float *)at);
        return;
    }
#endif
    gemm_job g = job_for(C, ldc, A, B, M, N, K, accumulate, 1);
    g.bpack = (float *)at;
    g.apack = g.bpack + bpack_floats(N, K); /* a multiple of NR floats: still aligned */
    for (int jp = 0; jp < g.n_panels; jp++) pack_b_task(&g, jp, 0);
    for (int t = 0; t < g.n_tasks; t++) compute_task(&g, t, 0);
}

void nd_gemm_serial_batch(float *C, int ldc, ptrdiff_t c_step, nd_gemm_operand A, ptrdiff_t a_step,
                          nd_gemm_operand B, ptrdiff_t b_step, int M, int N, int K, int batch, int accumulate,
                          float *scratch)
{
    if (batch <= 0 || M <= 0 || N <= 0) return;
    if (K <= 0) { /* C = 0 (once, when the products share it) unless accumulating */
        for (int n = 0; n < (c_step ? batch : 1); n++) trivial(C + n * c_step, ldc, M, N, K, accumulate);
        return;
    }
    gemm_job g = job_for(C, ldc, A, B, M, N, K, accumulate, 1);
    uintptr_t at = ((uintptr_t)scratch + ALIGN - 1) / ALIGN * ALIGN;
    g.bpack = (float *)at;
    g.apack = g.bpack + bpack_floats(N, K);
    for (int n = 0; n < batch; n++) {
        g.C = C + n * c_step;
        g.A.p = A.p + n * a_step;
        g.B.p = B.p + n * b_step;
        g.accumulate = accumulate || (n > 0 && c_step == 0);
        if (n == 0 || b_step != 0)
            for (int jp = 0; jp < g.n_panels; jp++) pack_b_task(&g, jp, 0);
        for (int t = 0; t < g.n_tasks; t++) compute_task(&g, t, 0);
    }
}
