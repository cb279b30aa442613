/* heads3_grad_dump.c - the gradient of one Needle 3 probe head (the trainer's
 * heads_train_v3.c), for the jax.grad comparison in
 * tests/python/test_heads3_grad_jax.py.
 *
 *   heads3_grad_dump IN.bin OUT.bin
 *
 * IN (little-endian): int32 T R k q d out normalise, then float32 cells
 * [T, R, d] (t-major), the head's parameters in nd_head3 order (probes [R*k,
 * d], gain [R*k], query [q, d], row_bias [q, R*k], W [out, q*d], bias [out],
 * log_temp, logit_bias) and a weight vector wy [out].  The scalar is
 * L = sum(wy * y), y the head's output (normalise 1: the embedding head's
 * y / sqrt(|y|^2 + 1e-12)).  OUT: float32 L, then dL/dparams (n floats). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/heads_train_v3.h"

static int read_all(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n ? 0 : -1; }

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: heads3_grad_dump IN.bin OUT.bin\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", argv[1]);
        return 1;
    }
    int32_t hdr[7];
    nd_head3 h;
    needle_error err = {0};
    if (read_all(f, hdr, sizeof hdr) || hdr[0] <= 0 || hdr[0] > 4096 ||
        nd_head3_alloc(&h, hdr[1], hdr[2], hdr[3], hdr[4], hdr[5], &err)) {
        fprintf(stderr, "%s: bad header %s\n", argv[1], err.message);
        fclose(f);
        return 1;
    }
    int T = hdr[0], norm = hdr[6];
    nd_cells c = {.n = T * h.R};
    c.x = malloc(sizeof(float) * (size_t)c.n * h.d);
    float *wy = malloc(sizeof(float) * (size_t)h.out), *y = malloc(sizeof(float) * (size_t)h.out);
    float *dy = malloc(sizeof(float) * (size_t)h.out), *g = calloc(h.n, sizeof(float));
    if (!c.x || !wy || !y || !dy || !g || read_all(f, c.x, sizeof(float) * (size_t)c.n * h.d) ||
        read_all(f, h.flat, sizeof(float) * h.n) || read_all(f, wy, sizeof(float) * (size_t)h.out)) {
        fprintf(stderr, "%s: short file\n", argv[1]);
        fclose(f);
        return 1;
    }
    fclose(f);
    nd_head3_rec rec;
    if (nd_head3_forward(&h, &c, &rec, y)) {
        fprintf(stderr, "forward failed\n");
        return 1;
    }
    double loss = 0.0;
    if (norm) {
        /* e = y / sqrt(|y|^2 + 1e-12): dL/dy = (wy - e (e . wy)) / norm */
        double ss = 0.0, ew = 0.0;
        for (int o = 0; o < h.out; o++) ss += (double)y[o] * y[o];
        double nrm = sqrt(ss + 1e-12);
        for (int o = 0; o < h.out; o++) ew += y[o] / nrm * wy[o];
        for (int o = 0; o < h.out; o++) {
            loss += wy[o] * (y[o] / nrm);
            dy[o] = (float)((wy[o] - y[o] / nrm * ew) / nrm);
        }
    } else {
        for (int o = 0; o < h.out; o++) {
            loss += (double)wy[o] * y[o];
            dy[o] = wy[o];
        }
    }
    nd_head3_backward(&h, &c, &rec, dy, g);
    float l = (float)loss;
    FILE *o = fopen(argv[2], "wb");
    int bad = !o || fwrite(&l, sizeof l, 1, o) != 1 || fwrite(g, sizeof(float), h.n, o) != h.n;
    if (o && fclose(o)) bad = 1;
    if (bad) fprintf(stderr, "%s: cannot write\n", argv[2]);
    nd_head3_rec_free(&rec);
    nd_head3_free(&h);
    free(c.x);
    free(wy);
    free(y);
    free(dy);
    free(g);
    return bad;
}
