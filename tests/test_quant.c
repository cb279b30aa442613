/* test_quant.c - the Walsh-Hadamard transform, CQ codebooks, packing,
 * quantising/dequantising rows, and the bits map. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/fp16.h"
#include "model/bits_map.h"
#include "quant/cq.h"
#include "quant/hadamard.h"

/* A small deterministic generator (xorshift) and Box-Muller normals. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rnd_uniform(void) { return ((float)(rnd_u32() >> 8) + 0.5f) / 16777216.0f; }
static float rnd_normal(void)
{
    float u = rnd_uniform(), v = rnd_uniform();
    return sqrtf(-2.0f * logf(u)) * cosf(6.28318530718f * v);
}

/* The O(n^2) definition: Sylvester H[i][j] = (-1)^popcount(i & j), / sqrt(n). */
static double sylvester(int n, int i, int j) { return (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) / sqrt((double)n); }

static void test_hadamard_matches_definition(void)
{
    for (int n = 1; n <= 1024; n *= 2) {
        float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) x[i] = y[i] = rnd_normal();
        nd_hadamard(y, n);
        double worst = 0;
        for (int i = 0; i < n; i++) {
            double ref = 0;
            for (int j = 0; j < n; j++) ref += sylvester(n, i, j) * x[j];
            double d = fabs(ref - y[i]);
            if (d > worst) worst = d;
        }
        CHECKF(worst < 1e-5, "n=%d max diff %g", n, worst);
        free(x);
        free(y);
    }
}

static void test_hadamard_orthonormal_involutive(void)
{
    for (int n = 1; n <= 1024; n *= 2) {
        float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
        double n2 = 0, m2 = 0, back = 0;
        for (int i = 0; i < n; i++) x[i] = y[i] = rnd_normal();
        nd_hadamard(y, n);
        for (int i = 0; i < n; i++) n2 += (double)x[i] * x[i], m2 += (double)y[i] * y[i];
        CHECKF(fabs(n2 - m2) < 1e-4 * n2, "n=%d norm %g -> %g", n, n2, m2);
        nd_hadamard(y, n); /* H H = I */
        for (int i = 0; i < n; i++) back = fmax(back, fabs((double)y[i] - x[i]));
        CHECKF(back < 1e-5, "n=%d H(Hx) differs by %g", n, back);
        free(x);
        free(y);
    }
    /* columns are orthonormal: H e_i . H e_j = delta_ij (n = 64, all pairs) */
    enum { N = 64 };
    static float cols[N][N];
    for (int i = 0; i < N; i++) {
        memset(cols[i], 0, sizeof cols[i]);
        cols[i][i] = 1.0f;
        nd_hadamard(cols[i], N);
    }
    double worst = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double dot = 0;
            for (int k = 0; k < N; k++) dot += (double)cols[i][k] * cols[j][k];
            worst = fmax(worst, fabs(dot - (i == j)));
        }
    CHECKF(worst < 1e-6, "H^T H - I max %g", worst);
    CHECK(nd_is_pow2(128) && !nd_is_pow2(96) && !nd_is_pow2(0) && nd_is_pow2(1));
    float z[3] = {1, 2, 3};
    nd_hadamard(z, 3); /* not a power of two: untouched */
    CHECK(z[0] == 1 && z[1] == 2 && z[2] == 3);
}

static void test_codebooks_match_golden_header(void)
{
    FILE *fp = fopen("tests/golden/tiny_w4.cact", "rb");
    CHECK(fp != NULL);
    if (!fp) return;
    uint8_t head[120 + 112];
    CHECK(fread(head, 1, sizeof head, fp) == sizeof head);
    fclose(fp);
    CHECK(memcmp(head + 120, nd_cq_codebooks, 112) == 0); /* little-endian host */
    /* each width's codebook ascends and is close to the Lloyd-Max levels of
     * N(0,1) / sqrt(128) quoted in SPEC section 8 */
    static const float cb2[4] = {-1.5067f, -0.4514f, 0.4529f, 1.5099f};
    static const float cb3[8] = {-2.1412f, -1.3337f, -0.7484f, -0.2377f, 0.2500f, 0.7556f, 1.3380f, 2.1476f};
    float s = sqrtf(128.0f);
    for (int i = 0; i < 4; i++) CHECKF(fabsf(nd_cq_codebooks[i] * s - cb2[i]) < 2e-3f, "cb2[%d]", i);
    for (int i = 0; i < 8; i++) CHECKF(fabsf(nd_cq_codebooks[4 + i] * s - cb3[i]) < 2e-3f, "cb3[%d]", i);
    CHECK(fabsf(nd_cq_codebooks[12] * s + 2.710f) < 2e-3f && fabsf(nd_cq_codebooks[27] * s - 2.741f) < 2e-3f);
    for (int i = 1; i < 28; i++)
        if (i != 4 && i != 12) CHECKF(nd_cq_codebooks[i] > nd_cq_codebooks[i - 1], "codebook not ascending at %d", i);
    float t[16];
    CHECK(nd_cq_codebook_by_code(ND_CQ_TERNARY, NULL, t) == 4);
    CHECK(t[0] == 0.0f && fabsf(t[1] * s - 1.2240064f) < 1e-6f && t[3] == -t[1]);
}

static void test_pack_unpack(void)
{
    for (int sb = 2; sb <= 4; sb++) {
        uint8_t codes[256], back[256], packed[128];
        for (int i = 0; i < 256; i++) codes[i] = (uint8_t)(rnd_u32() & ((1u << sb) - 1));
        nd_cq_pack(codes, 256, sb, packed);
        nd_cq_unpack(packed, 256, sb, back);
        CHECKF(memcmp(codes, back, 256) == 0, "bits %d", sb);
        /* LSB-first: code c occupies bits [c*sb, (c+1)*sb) */
        for (int c = 0; c < 256; c++) {
            unsigned v = 0;
            for (int k = 0; k < sb; k++) {
                int bit = c * sb + k;
                v |= (unsigned)((packed[bit / 8] >> (bit % 8)) & 1) << k;
            }
            CHECKF(v == codes[c], "bits %d code %d", sb, c);
        }
    }
    CHECK(nd_cq_row_bytes(64, 3) == 48 && nd_cq_row_bytes(129, 4) == 128 && nd_cq_row_bytes(128, ND_CQ_TERNARY) == 32);
    CHECK(nd_cq_blob_bytes(8192, 128, 4) == 540672); /* golden embedding record */
    CHECK(nd_cq_blob_bytes(2048, 64, 2) == 69632);
    CHECK(nd_cq_blob_bytes(128, 128, ND_CQ_TERNARY) == 4352);
    CHECK(nd_cq_blob_bytes(0, 128, 4) == 0 && nd_cq_blob_bytes(1, 128, 7) == 0);
}

/* Quantise and dequantise random N(0, 0.02) rows; return the relative RMS error. */
static double roundtrip_error(int bits, int cols, int rows)
{
    float *row = malloc(sizeof(float) * (size_t)cols), *back = malloc(sizeof(float) * (size_t)cols);
    uint8_t *idx = malloc(nd_cq_row_bytes(cols, bits));
    int groups = nd_cq_cols_pad(cols) / 128;
    uint16_t *norms = malloc(sizeof(uint16_t) * (size_t)groups);
    uint8_t *norms_le = malloc(2 * (size_t)groups);
    float cb[16];
    nd_cq_codebook_by_code(bits, nd_cq_codebooks, cb);
    double err2 = 0, sig2 = 0;
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < cols; i++) row[i] = 0.02f * rnd_normal();
        CHECK(nd_cq_quantize_row(row, cols, bits, nd_cq_codebooks, idx, norms) == 0);
        for (int g = 0; g < groups; g++) norms_le[2 * g] = (uint8_t)norms[g], norms_le[2 * g + 1] = (uint8_t)(norms[g] >> 8);
        if (bits == ND_CQ_TERNARY)
            for (int c = 0; c < nd_cq_cols_pad(cols); c++) CHECK(nd_cq_code_at(idx, c, 2) != 2);
        nd_cq_dequant_row(idx, norms_le, cols, nd_cq_storage_bits(bits), cb, back);
        for (int i = 0; i < cols; i++) err2 += (double)(back[i] - row[i]) * (back[i] - row[i]), sig2 += (double)row[i] * row[i];
    }
    free(row);
    free(back);
    free(idx);
    free(norms);
    free(norms_le);
    return sqrt(err2 / sig2);
}

static void test_quantize_error_by_width(void)
{
    /* Lloyd-Max on N(0,1): MSE 0.1175 (2 bits), 0.03454 (3), 0.009497 (4): relative RMS 0.343, 0.186, 0.097 */
    const int widths[4] = {2, 3, 4, ND_CQ_TERNARY};
    const double bound[4] = {0.36, 0.20, 0.105, 0.50};
    for (int k = 0; k < 4; k++) {
        double e = roundtrip_error(widths[k], 256, 64);
        double e_pad = roundtrip_error(widths[k], 200, 64); /* padded groups */
        printf("  CQ %s bits: relative RMS error %.4f (200 cols: %.4f)\n", nd_cq_bits_name(widths[k]), e, e_pad);
        CHECKF(e < bound[k] && e > bound[k] * 0.5, "bits %d error %g", widths[k], e);
        CHECKF(e_pad < bound[k] * 1.1, "bits %d padded error %g", widths[k], e_pad);
    }
}

static void test_quantize_known_group(void)
{
    /* a group that is one Hadamard column times 3: r = 3 e_5 after rotation,
     * so norm = 3 and u = e_5: index 5 gets the level nearest 1, the rest the
     * level nearest 0 (lower index on ties) */
    float row[128] = {0};
    row[5] = 3.0f;
    nd_hadamard(row, 128); /* H e_5 * 3; H is an involution so rotation gives back 3 e_5 */
    uint8_t idx[64];
    uint16_t norm;
    CHECK(nd_cq_quantize_row(row, 128, 4, nd_cq_codebooks, idx, &norm) == 0);
    CHECKF(fabsf(nd_half_to_float(norm) - 3.0f) < 1e-3f, "norm %g", nd_half_to_float(norm));
    CHECK(nd_cq_code_at(idx, 5, 4) == 15);              /* 1.0 is past the top level */
    for (int c = 0; c < 128; c++)
        if (c != 5) CHECKF(nd_cq_code_at(idx, c, 4) == 7, "c=%d code %u", c, nd_cq_code_at(idx, c, 4)); /* -0.0101 is nearest 0 */
    /* non-finite input is refused */
    row[7] = NAN;
    CHECK(nd_cq_quantize_row(row, 128, 4, nd_cq_codebooks, idx, &norm) == -1);
    /* an all-zero group quantises to norm 0 */
    memset(row, 0, sizeof row);
    CHECK(nd_cq_quantize_row(row, 128, 2, nd_cq_codebooks, idx, &norm) == 0 && norm == 0);
}

static void test_bits_map(void)
{
    nd_bits_map m;
    needle_error err;
    CHECK(nd_bits_map_parse("default=4,embedding=3,attn.q_proj=2,attn.out_proj=1.58,engram0.tables=2", &m, &err) == 0);
    CHECK(m.default_bits == 4);
    CHECK(nd_bits_map_lookup(&m, "embedding") == 3);
    CHECK(nd_bits_map_lookup(&m, "attn.q_proj") == 2);
    CHECK(nd_bits_map_lookup(&m, "attn.k_proj") == 4);
    CHECK(nd_bits_map_lookup(&m, "attn.out_proj") == ND_CQ_TERNARY);
    CHECK(nd_bits_map_lookup(&m, "engram0.tables") == 2);
    CHECK(nd_bits_map_lookup(&m, "engram1.tables") == 4);
    CHECK(nd_bits_map_lookup(&m, "mhc_phi_res") == 4);
    /* longest prefix wins */
    CHECK(nd_bits_map_parse("attn=2, attn.v_proj = 3,default=4,mhc_phi=1.58", &m, &err) == 0);
    CHECK(nd_bits_map_lookup(&m, "attn.q_proj") == 2 && nd_bits_map_lookup(&m, "attn.v_proj") == 3);
    CHECK(nd_bits_map_lookup(&m, "mhc_phi_post") == ND_CQ_TERNARY && nd_bits_map_lookup(&m, "embedding") == 4);
    CHECK(nd_bits_map_parse("default=2,engram=3,engram1=4", &m, &err) == 0);
    CHECK(nd_bits_map_lookup(&m, "engram0.key_proj") == 3 && nd_bits_map_lookup(&m, "engram1.key_proj") == 4);
    /* errors */
    const char *bad[] = {"embedding=3", "default=5", "default=4,attn.qproj=2", "default=4,default=3", "default=4,",
                         "default", "default=4,embedding=3,embedding=2", "default=1.5", "default=4,=3", "default=4,engramX=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = nd_bits_map_parse(bad[i], &m, &err);
        CHECKF(rc == NEEDLE_EINVAL && strstr(err.message, "bits map"), "'%s' -> %d %s", bad[i], rc, err.message);
    }
}

int main(void)
{
    RUN(test_hadamard_matches_definition);
    RUN(test_hadamard_orthonormal_involutive);
    RUN(test_codebooks_match_golden_header);
    RUN(test_pack_unpack);
    RUN(test_quantize_error_by_width);
    RUN(test_quantize_known_group);
    RUN(test_bits_map);
    return check_summary();
}
