/* cact_diff.c - test helper: how far is one .cact from another, byte for byte.
 *
 *   cact_diff OURS.cact REFERENCE.cact [MIN_CQ_PERCENT]
 *
 * Both files are parsed (nd_cact_open).  Every byte outside the CQ blobs
 * (header, codebooks, directory, FP16/FP32/RAW blobs, padding) must be
 * identical.  Inside the CQ blobs the quantiser's float rounding may flip an
 * index at a near tie or move a group norm by one FP16 ulp (the reference
 * quantises with a float32 matrix product and numpy's pairwise sum): the CQ
 * bytes must be identical to at least MIN_CQ_PERCENT (default 99.9) and no
 * norm may be more than one ulp away.  Prints one summary line; exit 0 when
 * both hold, 1 when not (with the first differences named), 2 on bad input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cact/cact.h"
#include "quant/cq.h"

static size_t index_bytes(const nd_cact_record *r)
{
    if (r->bits == ND_CACT_BITS_BINARY) return (size_t)r->shape[0] * ((size_t)nd_cq_cols_pad((int)r->shape[1]) / 8);
    return (size_t)r->shape[0] * nd_cq_row_bytes((int)r->shape[1], (int)r->bits);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: cact_diff OURS.cact REFERENCE.cact [MIN_CQ_PERCENT]\n");
        return 2;
    }
    double min_pct = argc == 4 ? atof(argv[3]) : 99.9;
    nd_cact_file a, b;
    needle_error e;
    if (nd_cact_open(argv[1], &a, &e)) {
        fprintf(stderr, "%s\n", e.message);
        return 2;
    }
    if (nd_cact_open(argv[2], &b, &e)) {
        fprintf(stderr, "%s\n", e.message);
        nd_cact_close(&a);
        return 2;
    }
    int fail = 0;
    if (a.size != b.size) {
        printf("sizes differ: %zu vs %zu bytes\n", a.size, b.size);
        fail = 1;
    }
    /* which bytes of the reference are CQ indices (1) or CQ norms (2) */
    uint8_t *kind = calloc(b.size, 1);
    if (!kind) return 2;
    for (uint32_t i = 0; i < b.hdr.num_tensors; i++) {
        const nd_cact_record *r = &b.records[i];
        if (r->dtype != ND_CACT_CQ) continue;
        size_t ib = index_bytes(r);
        memset(kind + r->offset, 1, ib);
        memset(kind + r->offset + ib, 2, (size_t)r->nbytes - ib);
    }
    size_t n = a.size < b.size ? a.size : b.size;
    size_t cq = 0, cq_same = 0, idx = 0, idx_same = 0, norms_1ulp = 0, norms_far = 0, other_diff = 0;
    size_t first_other = (size_t)-1, first_far = (size_t)-1;
    for (size_t p = 0; p < n; p++) {
        int same = a.data[p] == b.data[p];
        if (kind[p] == 0) {
            if (!same) {
                if (!other_diff) first_other = p;
                other_diff++;
            }
            continue;
        }
        cq++;
        cq_same += same;
        if (kind[p] == 1) {
            idx++;
            idx_same += same;
        }
    }
    /* norms, as FP16 pairs (norm blocks start at even offsets of 64-aligned blobs) */
    for (uint32_t i = 0; i < b.hdr.num_tensors; i++) {
        const nd_cact_record *r = &b.records[i];
        if (r->dtype != ND_CACT_CQ) continue;
        size_t start = (size_t)r->offset + index_bytes(r), end = (size_t)(r->offset + r->nbytes);
        for (size_t p = start; p + 1 < end && p + 1 < n; p += 2) {
            int x = a.data[p] | a.data[p + 1] << 8, y = b.data[p] | b.data[p + 1] << 8;
            int d = x > y ? x - y : y - x; /* positive FP16 norms: adjacent bit patterns are adjacent values */
            if (d == 1) norms_1ulp++;
            else if (d > 1) {
                if (!norms_far) first_far = p;
                norms_far++;
            }
        }
    }
    double pct = cq ? 100.0 * (double)cq_same / (double)cq : 100.0;
    printf("CQ bytes identical %zu/%zu (%.4f%%; indices %zu/%zu, norms one ulp apart %zu, further %zu); "
           "other bytes differing %zu of %zu\n",
           cq_same, cq, pct, idx_same, idx, norms_1ulp, norms_far, other_diff, n - cq);
    if (other_diff) printf("first differing non-CQ byte at %zu\n", first_other), fail = 1;
    if (norms_far) printf("first norm more than one ulp away at byte %zu\n", first_far), fail = 1;
    if (pct < min_pct) printf("CQ identity %.4f%% below %.4f%%\n", pct, min_pct), fail = 1;
    free(kind);
    nd_cact_close(&a);
    nd_cact_close(&b);
    return fail;
}
