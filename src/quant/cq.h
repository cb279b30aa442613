/* cq.h - CQ ("Cactus Quants"): Hadamard-rotated codebook quantisation of
 * weight matrices (SPEC section 8).
 *
 * A matrix [out, in] is padded to in_pad = in rounded up to 128.  Each
 * 128-group g of a row is rotated, r = g H128, and stored as its length
 * norm = |r| (FP16) plus one codebook index per element of u = r / norm.
 * Dequantise: w = (cb[index] * norm) H128.  Because H128 is orthonormal,
 * u has unit length, which is why one fixed codebook (Lloyd-Max for N(0,1)
 * scaled by 1/sqrt(128)) serves every group.
 *
 * Widths: 2, 3, 4 bits, and ternary (ND_CQ_TERNARY = 5, "1.58 bits"), whose
 * trits {-c, 0, +c} are stored as the 2-bit codes 3, 0, 1.
 */
#ifndef ND_CQ_H
#define ND_CQ_H

#include <stddef.h>
#include <stdint.h>

#include "core/matrix.h" /* ND_CQ_GROUP, ND_CQ_TERNARY */

#define ND_CQ_CODEBOOK_LEN 28 /* cb2[4] | cb3[8] | cb4[16] */
#define ND_CQ_TERNARY_C 1.2240064f

/* The reference exporter's codebooks, exactly as its .cact headers store them. */
extern const float nd_cq_codebooks[ND_CQ_CODEBOOK_LEN];

/* 1 for 2, 3, 4 and ND_CQ_TERNARY. */
int nd_cq_bits_valid(int bits);
/* Bits per stored code: ternary uses 2. */
int nd_cq_storage_bits(int bits);
/* "2", "3", "4", "1.58" (static string). */
const char *nd_cq_bits_name(int bits);

/* The codebook for `bits` indexed by STORED CODE (2^storage_bits floats) out
 * of a 28-float header block; ternary ignores `header` and gives
 * {0, +c, 0 (unused), -c} / sqrt(128).  Returns the entry count. */
int nd_cq_codebook_by_code(int bits, const float *header, float out[16]);

/* Columns after padding; bytes of one packed row; bytes of the whole blob.
 * nd_cq_blob_bytes returns 0 when the size would overflow or the arguments
 * are out of range (rows, cols >= 1). */
int nd_cq_cols_pad(int cols);
size_t nd_cq_row_bytes(int cols, int bits);
uint64_t nd_cq_blob_bytes(uint64_t rows, uint64_t cols, int bits);

/* Pack / read codes: code c of a row occupies bits [c*sb, (c+1)*sb), LSB first. */
void nd_cq_pack(const uint8_t *codes, int n, int storage_bits, uint8_t *out);
static inline unsigned nd_cq_code_at(const uint8_t *packed, int c, int storage_bits)
{
    size_t bit = (size_t)c * (size_t)storage_bits;
    unsigned v = packed[bit >> 3] >> (bit & 7);
    if ((bit & 7) + (size_t)storage_bits > 8) v |= (unsigned)packed[(bit >> 3) + 1] << (8 - (bit & 7));
    return v & ((1u << storage_bits) - 1);
}
void nd_cq_unpack(const uint8_t *packed, int n, int storage_bits, uint8_t *codes);

/* Quantise one row of `cols` floats at `bits` with the given 28-float header
 * codebooks: writes nd_cq_row_bytes packed bytes into idx_out and
 * cols_pad/128 FP16 norms (host order) into norms_out.  Returns 0, or -1 when
 * the row holds a NaN/Inf or a group norm overflows FP16. */
int nd_cq_quantize_row(const float *row, int cols, int bits, const float *codebooks, uint8_t *idx_out,
                       uint16_t *norms_out);

/* Dequantise one row: packed codes + its FP16 norms (little-endian bytes,
 * any alignment) -> cols floats.  codebook is indexed by stored code. */
void nd_cq_dequant_row(const uint8_t *packed, const uint8_t *norms_le, int cols, int storage_bits,
                       const float *codebook, float *out);

#endif
