/* gemm.h - the one float32 matrix product of the trainer.
 *
 *   C[M,N] (+)= A[M,K] B[K,N]
 *
 * with A and B addressed through strides, so a transposed operand is just a
 * different (row, column) stride: x @ W, dy @ W^T, x^T @ dy and the tied
 * logits f @ E^T are all this one call.  B is packed into cache-sized panels,
 * A is read in place, and a register-blocked micro-kernel (AVX-512, AVX2+FMA,
 * or portable vectors, chosen at compile time) runs over them.
 *
 * Determinism: every C entry is the same sum - its old value (when
 * accumulating), then A[i,k]B[k,j] for k = 0..K-1 in order - whatever the
 * thread count, so training is bit-identical for any number of threads.
 * (On AVX-512, narrow products - N <= 16, K >= 64, A row-major - sum in
 * 16 k-lanes reduced at the end, then add C's old value: another fixed order,
 * chosen by the shapes alone, so the same holds.) */
#ifndef ND_TRAIN_GEMM_H
#define ND_TRAIN_GEMM_H

#include <stddef.h>

#include "core/threadpool.h"

typedef struct {
    const float *p;
    ptrdiff_t row, col; /* element (i, k) is p[i*row + k*col] */
} nd_gemm_operand;

/* Any strided view; a dense row-major [rows, cols] matrix, and its transpose. */
static inline nd_gemm_operand nd_gemm_strided(const float *p, ptrdiff_t row, ptrdiff_t col)
{
    nd_gemm_operand o = {p, row, col};
    return o;
}
static inline nd_gemm_operand nd_gemm_rowmajor(const float *p, int cols) { return nd_gemm_strided(p, cols, 1); }
static inline nd_gemm_operand nd_gemm_transposed(const float *p, int cols) { return nd_gemm_strided(p, 1, cols); }

/* C is dense row-major with row stride ldc.  accumulate=0 overwrites C.
 * Returns 0, or -1 when the packing buffers cannot be allocated (C untouched). */
int nd_gemm(nd_threadpool *pool, float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K,
            int accumulate);

/* The same product on the calling thread with caller-provided scratch of at
 * least nd_gemm_scratch_floats(N, K) floats (no allocation): for use inside a
 * thread-pool task, e.g. one attention head. */
size_t nd_gemm_scratch_floats(int N, int K);
void nd_gemm_serial(float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K, int accumulate,
                    float *scratch);

/* `batch` products on the calling thread, same scratch: product n is
 *   (C + n*c_step) (+)= (A + n*a_step) (B + n*b_step)
 * with the operands' strides as above (e.g. many small matrices side by side,
 * each read transposed in place).  b_step = 0: B is packed once for all of
 * them.  c_step = 0: every product adds into the one C in order n = 0, 1, ...
 * (the first as `accumulate` says), a sum over the batch. */
void nd_gemm_serial_batch(float *C, int ldc, ptrdiff_t c_step, nd_gemm_operand A, ptrdiff_t a_step,
                          nd_gemm_operand B, ptrdiff_t b_step, int M, int N, int K, int batch, int accumulate,
                          float *scratch);

/* What the build compiled, for benchmarks: "avx512", "avx2" or "portable". */
const char *nd_gemm_kernel_name(void);

#endif
