/* matrix.h - nd_matrix, the operand every weight op reads: a float matrix or
 * a CQ-quantised one (SPEC section 8), [out, in] row-major as the .cact file
 * stores it (row r holds the weights of output r, so y[r] = dot(W[r,:], x)).
 *
 * It lives in core because three layers share it without knowing each other:
 * quant/ packs and unpacks its codes, backend/ runs ops on it, model/ loads
 * it.  The struct only points at memory; whoever fills it owns the memory. */
#ifndef ND_MATRIX_H
#define ND_MATRIX_H

#include <stdint.h>

enum { ND_MAT_F32 = 0, ND_MAT_CQ = 1 };
#define ND_CQ_GROUP 128
#define ND_CQ_TERNARY 5 /* cq_bits value for the 1.58-bit ternary width */

typedef struct nd_matrix {
    int kind;       /* ND_MAT_F32 or ND_MAT_CQ */
    int rows, cols; /* logical [out, in] */
    /* ND_MAT_F32 */
    const float *f32; /* rows*cols */
    /* ND_MAT_CQ (SPEC section 8) */
    int cq_bits;               /* 2, 3, 4, or ND_CQ_TERNARY (stored as 2-bit codes) */
    int cols_pad;              /* cols rounded up to a multiple of 128 */
    const uint8_t *cq_idx;     /* rows * cols_pad*storage_bits/8 bytes, LSB-first per row */
    const uint8_t *cq_norms;   /* rows * cols_pad/128 FP16 values, little-endian (may be unaligned) */
    const float *codebook;     /* indexed by the stored code: 2^storage_bits entries, already / sqrt(128);
                                  for ternary: codes {0:0, 1:+c, 2:unused(0), 3:-c} */
} nd_matrix;

#endif
