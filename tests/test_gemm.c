/* test_gemm.c - the trainer's packed GEMM against a float64 reference: every
 * transpose combination, ragged edges in M, N and K (tiles, KC blocks),
 * accumulate vs overwrite, strided C, the narrow path (N <= 16), batches of
 * small products, and bit-identical results for any thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/rng.h"
#include "train/gemm.h"

static float *random_matrix(nd_rng *r, size_t n)
{
    float *m = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) m[i] = (float)(nd_rng_uniform(r) * 2.0 - 1.0);
    return m;
}

/* Relative error of C against C0 (+) A B in float64, A/B read through their strides. */
static double max_rel_error(const float *C, int ldc, const float *C0, nd_gemm_operand A, nd_gemm_operand B, int M,
                            int N, int K, int accumulate)
{
    double worst = 0.0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = accumulate ? C0[(size_t)i * ldc + j] : 0.0, mag = fabs(s);
            for (int k = 0; k < K; k++) {
                double p = (double)A.p[i * A.row + k * A.col] * B.p[k * B.row + j * B.col];
                s += p;
                mag += fabs(p);
            }
            double e = fabs(C[(size_t)i * ldc + j] - s) / (mag + 1e-30);
            if (e > worst) worst = e;
        }
    return worst;
}

static void check_shape(nd_threadpool *pool, int M, int N, int K, int ta, int tb, int accumulate, nd_rng *r)
{
    float *a = random_matrix(r, (size_t)M * K), *b = random_matrix(r, (size_t)K * N);
    int ldc = N + 3; /* a strided C: the columns past N must stay untouched */
    float *c0 = random_matrix(r, (size_t)M * ldc), *c = malloc(sizeof(float) * (size_t)M * ldc);
    memcpy(c, c0, sizeof(float) * (size_t)M * ldc);
    nd_gemm_operand A = ta ? nd_gemm_transposed(a, M) : nd_gemm_rowmajor(a, K); /* a holds A^T [K,M] when ta */
    nd_gemm_operand B = tb ? nd_gemm_transposed(b, K) : nd_gemm_rowmajor(b, N);
    CHECK(nd_gemm(pool, c, ldc, A, B, M, N, K, accumulate) == 0);
    double e = max_rel_error(c, ldc, c0, A, B, M, N, K, accumulate);
    CHECKF(e < 1e-5, "M=%d N=%d K=%d ta=%d tb=%d acc=%d: relative error %g", M, N, K, ta, tb, accumulate, e);
    int untouched = 1;
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++) untouched &= c[(size_t)i * ldc + j] == c0[(size_t)i * ldc + j];
    CHECKF(untouched, "M=%d N=%d K=%d: wrote past column N", M, N, K);
    free(a); free(b); free(c0); free(c);
}

static void test_gemm_matches_float64_reference(void)
{
    nd_rng r;
    nd_rng_seed(&r, 11);
    nd_threadpool *pool = NULL;
    needle_error err;
    CHECK(nd_threadpool_create(2, &pool, &err) == 0);
    /* sizes around every blocking boundary: tiles (MR <= 8, NR <= 32), a task's
     * MC (<= 96 rows) and NC (<= 256 columns), and KC = 256 deep */
    static const int sizes[][3] = {{1, 1, 1},   {3, 5, 7},    {8, 32, 16},  {9, 33, 17},  {17, 16, 256},
                                   {97, 40, 257}, {100, 300, 5}, {64, 257, 513}, {200, 16, 600}, {6, 512, 64},
                                   /* many row blocks: tasks then span the whole width */
                                   {1000, 300, 40}, {2048, 520, 70},
                                   /* narrow (N <= 16, K >= 64): ragged 4 x 4 tiles, k tails, 64-row tasks */
                                   {130, 5, 77}, {67, 12, 3000}, {3, 1, 64}, {65, 16, 95}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int acc = 0; acc < 2; acc++) check_shape(pool, sizes[s][0], sizes[s][1], sizes[s][2], ta, tb, acc, &r);
    nd_threadpool_free(pool);
}

/* One shape (ta: A read transposed) gives the same bits on 1-3 threads, with no
 * pool, and serially with caller scratch. */
static void bit_identical_shape(nd_rng *rp, int M, int N, int K, int ta)
{
    nd_rng r = *rp;
    float *a = random_matrix(&r, (size_t)M * K), *b = random_matrix(&r, (size_t)K * N);
    nd_gemm_operand A = ta ? nd_gemm_transposed(a, M) : nd_gemm_rowmajor(a, K);
    float *init = random_matrix(&r, (size_t)M * N);
    float *ref = NULL;
    for (int threads = 1; threads <= 3; threads++) {
        nd_threadpool *pool = NULL;
        needle_error err;
        CHECK(nd_threadpool_create(threads, &pool, &err) == 0);
        float *c = malloc(sizeof(float) * (size_t)M * N);
        memcpy(c, init, sizeof(float) * (size_t)M * N);
        CHECK(nd_gemm(pool, c, N, A, nd_gemm_rowmajor(b, N), M, N, K, 1) == 0);
        if (!ref) ref = c;
        else {
            CHECKF(!memcmp(ref, c, sizeof(float) * (size_t)M * N), "%d threads differ from 1", threads);
            free(c);
        }
        nd_threadpool_free(pool);
    }
    /* and with no pool at all */
    float *c = malloc(sizeof(float) * (size_t)M * N);
    memcpy(c, init, sizeof(float) * (size_t)M * N);
    CHECK(nd_gemm(NULL, c, N, A, nd_gemm_rowmajor(b, N), M, N, K, 1) == 0);
    CHECK(!memcmp(ref, c, sizeof(float) * (size_t)M * N));
    /* and serially with caller scratch (deliberately misaligned by one float) */
    float *scratch = malloc(sizeof(float) * (nd_gemm_scratch_floats(N, K) + 1));
    memcpy(c, init, sizeof(float) * (size_t)M * N);
    nd_gemm_serial(c, N, A, nd_gemm_rowmajor(b, N), M, N, K, 1, scratch + 1);
    CHECK(!memcmp(ref, c, sizeof(float) * (size_t)M * N));
    free(scratch);
    free(c); free(ref); free(a); free(b); free(init);
    *rp = r;
}

static void test_gemm_bit_identical_across_thread_counts(void)
{
    nd_rng r;
    nd_rng_seed(&r, 12);
    bit_identical_shape(&r, 603, 171, 531, 1); /* 7 row blocks: whole-width tasks on 1 thread, chunked on 2-3 */
    bit_identical_shape(&r, 603, 7, 531, 0);   /* narrow: 10 tasks of 64 rows */
}

/* nd_gemm_serial_batch equals one nd_gemm_serial per product, bit for bit:
 * shared B (b_step 0), per-product A read transposed in place, and the sum
 * of all products into one C (c_step 0). */
static void test_gemm_serial_batch(void)
{
    nd_rng r;
    nd_rng_seed(&r, 13);
    enum { BATCH = 5, M = 12, N = 20, K = 9 };
    float *a = random_matrix(&r, (size_t)BATCH * K * M), *b = random_matrix(&r, (size_t)BATCH * K * N);
    float *c1 = random_matrix(&r, (size_t)BATCH * M * N), *c2 = malloc(sizeof(float) * BATCH * M * N);
    float *scratch = malloc(sizeof(float) * nd_gemm_scratch_floats(N, K));
    memcpy(c2, c1, sizeof(float) * BATCH * M * N);
    nd_gemm_serial_batch(c1, N, M * N, nd_gemm_transposed(a, M), K * M, nd_gemm_rowmajor(b, N), 0, M, N, K, BATCH, 0,
                         scratch);
    for (int n = 0; n < BATCH; n++)
        nd_gemm_serial(c2 + n * M * N, N, nd_gemm_transposed(a + n * K * M, M), nd_gemm_rowmajor(b, N), M, N, K, 0,
                       scratch);
    CHECK(!memcmp(c1, c2, sizeof(float) * BATCH * M * N));
    /* summed: C += sum_n A_n B_n, in order n = 0.. */
    memcpy(c2, c1, sizeof(float) * M * N);
    nd_gemm_serial_batch(c1, N, 0, nd_gemm_rowmajor(a, K), K * M, nd_gemm_transposed(b, K), K * N, M, N, K, BATCH, 1,
                         scratch);
    for (int n = 0; n < BATCH; n++)
        nd_gemm_serial(c2, N, nd_gemm_rowmajor(a + n * K * M, K), nd_gemm_transposed(b + n * K * N, K), M, N, K, 1,
                       scratch);
    CHECK(!memcmp(c1, c2, sizeof(float) * M * N));
    free(a); free(b); free(c1); free(c2); free(scratch);
}

static void test_gemm_empty_shapes(void)
{
    float c[4] = {1, 2, 3, 4}, a[1] = {5}, b[1] = {6};
    CHECK(nd_gemm(NULL, c, 2, nd_gemm_rowmajor(a, 0), nd_gemm_rowmajor(b, 2), 2, 2, 0, 1) == 0);
    CHECK(c[0] == 1 && c[3] == 4); /* K = 0, accumulate: unchanged */
    CHECK(nd_gemm(NULL, c, 2, nd_gemm_rowmajor(a, 0), nd_gemm_rowmajor(b, 2), 2, 2, 0, 0) == 0);
    CHECK(c[0] == 0 && c[3] == 0); /* K = 0, overwrite: zero */
    CHECK(nd_gemm(NULL, c, 2, nd_gemm_rowmajor(a, 1), nd_gemm_rowmajor(b, 2), 0, 2, 1, 0) == 0);
}

int main(void)
{
    printf("gemm kernel: %s\n", nd_gemm_kernel_name());
    RUN(test_gemm_matches_float64_reference);
    RUN(test_gemm_bit_identical_across_thread_counts);
    RUN(test_gemm_empty_shapes);
    RUN(test_gemm_serial_batch);
    return check_summary();
}
