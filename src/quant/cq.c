/* cq.c - CQ codebooks, packing, quantising and dequantising rows. */
#include "quant/cq.h"

#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "quant/hadamard.h"

/* The reference exporter's header codebooks (cb2 | cb3 | cb4: Lloyd-Max
 * levels of N(0,1) divided by sqrt(128)), written as exact hexadecimal
 * floats so the writer reproduces the reference header byte for byte;
 * test_quant checks them against tests/golden/tiny_w4.cact. */
const float nd_cq_codebooks[ND_CQ_CODEBOOK_LEN] = {
    -0x1.10bc8ep-3f, -0x1.46e0c0p-5f, 0x1.47f812p-5f, 0x1.1153b6p-3f,
    -0x1.839b76p-3f, -0x1.e2db60p-4f, -0x1.0ef2fap-4f, -0x1.5848d8p-6f,
    0x1.6a1a72p-6f, 0x1.118d38p-4f, 0x1.e466c6p-4f, 0x1.84c382p-3f,
    -0x1.ea8f84p-3f, -0x1.721604p-3f, -0x1.20ae8ep-3f, -0x1.be83f2p-4f,
    -0x1.4de08ap-4f, -0x1.cf1314p-5f, -0x1.0dd668p-5f, -0x1.4b7c14p-7f,
    0x1.a081ecp-7f, 0x1.2484eep-5f, 0x1.e71500p-5f, 0x1.5c10dep-4f,
    0x1.cdca28p-4f, 0x1.2856dcp-3f, 0x1.79524cp-3f, 0x1.f02d32p-3f,
};

int nd_cq_bits_valid(int bits) { return bits == 2 || bits == 3 || bits == 4 || bits == ND_CQ_TERNARY; }

int nd_cq_storage_bits(int bits) { return bits == ND_CQ_TERNARY ? 2 : bits; }

const char *nd_cq_bits_name(int bits)
{
    switch (bits) {
    case 2: return "2";
    case 3: return "3";
    case 4: return "4";
    case ND_CQ_TERNARY: return "1.58";
    default: return "?";
    }
}

/* Offset of each width's codebook inside the 28-float header block. */
static int codebook_offset(int bits) { return bits == 2 ? 0 : bits == 3 ? 4 : 12; }

/* Levels in index order (what "nearest, lower index on ties" ranks):
 * for ternary that is {-c, 0, +c}. */
static int levels_for(int bits, const float *header, float levels[16])
{
    if (bits == ND_CQ_TERNARY) {
        float c = ND_CQ_TERNARY_C / sqrtf(128.0f);
        levels[0] = -c;
        levels[1] = 0.0f;
        levels[2] = c;
        return 3;
    }
    int n = 1 << bits;
    memcpy(levels, header + codebook_offset(bits), sizeof(float) * (size_t)n);
    return n;
}

/* Ternary index (0, 1, 2 = -c, 0, +c) -> stored 2-bit code: the two's
 * complement of -1, 0, +1, so a reader can sign-extend. */
static const uint8_t ternary_code[3] = {3, 0, 1};

int nd_cq_codebook_by_code(int bits, const float *header, float out[16])
{
    if (bits == ND_CQ_TERNARY) {
        float c = ND_CQ_TERNARY_C / sqrtf(128.0f);
        out[0] = 0.0f;
        out[1] = c;
        out[2] = 0.0f; /* code 2 is never written */
        out[3] = -c;
        return 4;
    }
    return levels_for(bits, header, out);
}

int nd_cq_cols_pad(int cols) { return (cols + ND_CQ_GROUP - 1) / ND_CQ_GROUP * ND_CQ_GROUP; }

size_t nd_cq_row_bytes(int cols, int bits)
{
    /* cols_pad is a multiple of 128, so the row is a whole number of bytes */
    return (size_t)nd_cq_cols_pad(cols) * (size_t)nd_cq_storage_bits(bits) / 8;
}

uint64_t nd_cq_blob_bytes(uint64_t rows, uint64_t cols, int bits)
{
    if (!nd_cq_bits_valid(bits) || rows == 0 || cols == 0 || rows > (1u << 31) || cols > (1u << 30)) return 0;
    uint64_t pad = (cols + ND_CQ_GROUP - 1) / ND_CQ_GROUP * ND_CQ_GROUP;
    /* row bytes + norm bytes fit easily in 64 bits for these bounds: 2^31 * 2^30 */
    uint64_t per_row = pad * (uint64_t)nd_cq_storage_bits(bits) / 8 + pad / ND_CQ_GROUP * 2;
    return rows * per_row;
}

void nd_cq_pack(const uint8_t *codes, int n, int storage_bits, uint8_t *out)
{
    size_t nbytes = ((size_t)n * (size_t)storage_bits + 7) / 8;
    memset(out, 0, nbytes);
    unsigned mask = (1u << storage_bits) - 1;
    for (int c = 0; c < n; c++) {
        size_t bit = (size_t)c * (size_t)storage_bits;
        unsigned v = (codes[c] & mask) << (bit & 7);
        out[bit >> 3] |= (uint8_t)v;
        if (v >> 8) out[(bit >> 3) + 1] |= (uint8_t)(v >> 8);
    }
}

void nd_cq_unpack(const uint8_t *packed, int n, int storage_bits, uint8_t *codes)
{
    for (int c = 0; c < n; c++) codes[c] = (uint8_t)nd_cq_code_at(packed, c, storage_bits);
}

/* Nearest level to u; strict "<" keeps the lower index on ties. */
static int nearest_level(float u, const float *levels, int n)
{
    int best = 0;
    float best_d = fabsf(u - levels[0]);
    for (int k = 1; k < n; k++) {
        float d = fabsf(u - levels[k]);
        if (d < best_d) {
            best_d = d;
            best = k;
        }
    }
    return best;
}

int nd_cq_quantize_row(const float *row, int cols, int bits, const float *codebooks, uint8_t *idx_out,
                       uint16_t *norms_out)
{
    float levels[16];
    int nlev = levels_for(bits, codebooks, levels);
    int sb = nd_cq_storage_bits(bits);
    int cols_pad = nd_cq_cols_pad(cols);
    int bad = 0;
    for (int g = 0; g < cols_pad / ND_CQ_GROUP; g++) {
        float r[ND_CQ_GROUP];
        uint8_t codes[ND_CQ_GROUP];
        int base = g * ND_CQ_GROUP;
        for (int k = 0; k < ND_CQ_GROUP; k++) r[k] = base + k < cols ? row[base + k] : 0.0f;
        nd_hadamard(r, ND_CQ_GROUP);
        double ss = 0.0; /* double: the norm is the one number the whole group is scaled by */
        for (int k = 0; k < ND_CQ_GROUP; k++) ss += (double)r[k] * r[k];
        float norm = (float)sqrt(ss);
        if (!isfinite(norm)) bad = 1;
        uint16_t h = nd_float_to_half(norm);
        if ((h & 0x7c00) == 0x7c00) bad = 1;
        norms_out[g] = h;
        for (int k = 0; k < ND_CQ_GROUP; k++) {
            /* an all-zero group has no direction: any index dequantises to 0 */
            float u = norm > 0.0f && isfinite(norm) ? r[k] / norm : 0.0f;
            int idx = nearest_level(u, levels, nlev);
            codes[k] = bits == ND_CQ_TERNARY ? ternary_code[idx] : (uint8_t)idx;
        }
        nd_cq_pack(codes, ND_CQ_GROUP, sb, idx_out + (size_t)base * (size_t)sb / 8);
    }
    return bad ? -1 : 0;
}

void nd_cq_dequant_row(const uint8_t *packed, const uint8_t *norms_le, int cols, int storage_bits,
                       const float *codebook, float *out)
{
    int cols_pad = nd_cq_cols_pad(cols);
    for (int g = 0; g < cols_pad / ND_CQ_GROUP; g++) {
        float v[ND_CQ_GROUP];
        uint16_t h = (uint16_t)(norms_le[2 * g] | (norms_le[2 * g + 1] << 8));
        float norm = nd_half_to_float(h);
        int base = g * ND_CQ_GROUP;
        for (int k = 0; k < ND_CQ_GROUP; k++) v[k] = codebook[nd_cq_code_at(packed, base + k, storage_bits)] * norm;
        nd_hadamard(v, ND_CQ_GROUP); /* Hn is symmetric: v Hn == Hn v */
        int n = cols - base < ND_CQ_GROUP ? cols - base : ND_CQ_GROUP;
        memcpy(out + base, v, sizeof(float) * (size_t)n);
    }
}
