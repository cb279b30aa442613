/* train_grad_dump.c - print the C training code's LoRA gradients as JSON, for
 * tests/python/test_train_jax.py to compare with jax.grad.
 *
 *   train_grad_dump CKPT RANK ALPHA SEED B ID,ID,... [QAT]
 *   train_grad_dump CKPT full 0 0 B ID,ID,...
 * The second form prints the full-model gradients instead (every tensor the
 * forward reads, by checkpoint name: "grads": {NAME: [...]}), for
 * tests/python/test_train_grad_v3_jax.py.
 * QAT (auto|2|4|none, as `needle finetune --qat-bits`) runs the step under
 * deploy numerics (train/qat.h), for tests/python/test_qat_oracle.py.
 * The ids form B rows of equal length T; row position t >= 2 predicts the id
 * at t+1.  LoRA A is the seeded N(0,1)/r init; B is set to 0.05*N(0,1) (seed+1)
 * so that both factors have non-zero gradients.  Output: {"loss", "rank",
 * "scale", "targets": [...], "lora": {NAME: {"A","B","gA","gB"}}}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "train/qat.h"
#include "train/train_ckpt.h"

static void put_array(const float *p, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++) printf(i ? ",%.9g" : "%.9g", (double)p[i]);
    putchar(']');
}

int main(int argc, char **argv)
{
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: train_grad_dump CKPT RANK ALPHA SEED B ID,ID,... [auto|2|4|none]\n");
        return 2;
    }
    nd_train_model m;
    needle_error err;
    if (nd_train_model_load(&m, argv[1], NULL, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    int full = !strcmp(argv[2], "full");
    int rank = full ? 0 : atoi(argv[2]), B = atoi(argv[5]);
    float alpha = (float)atof(argv[3]);
    uint64_t seed = strtoull(argv[4], NULL, 10);
    if (full ? nd_train_enable_full(&m, &err) : nd_train_lora_create(&m, rank, alpha, seed, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    nd_rng r;
    nd_rng_seed(&r, seed + 1);
    for (int t = 0; t < ND_LORA_TARGETS && !full; t++) {
        int in, out;
        nd_train_lora_dims(&m, t, &in, &out);
        nd_rng_fill_normal(&r, m.lora + m.lora_b_off[t], (size_t)m.cfg.num_layers * rank * out, 0.0f, 0.05f);
    }
    if (argc == 8) {
        int bits = 0, use_map = 0;
        if (nd_qat_parse_mode(argv[7], &m.cfg, &bits, &use_map)) {
            fprintf(stderr, "train_grad_dump: QAT mode must be auto, 2, 4 or none\n");
            return 2;
        }
        if ((bits || use_map) && nd_qat_enable(&m, bits, &err)) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
    }
    int cap = 4096, n = 0;
    int32_t *ids = malloc(sizeof(int32_t) * cap);
    for (char *s = argv[6]; *s && n < cap;) {
        ids[n++] = (int32_t)strtol(s, &s, 10);
        if (*s == ',') s++;
    }
    if (B <= 0 || n % B) {
        fprintf(stderr, "train_grad_dump: %d ids do not split into %d rows\n", n, B);
        return 2;
    }
    int T = n / B;
    int32_t *tg = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) tg[i] = (i % T) >= 2 && (i % T) < T - 1 ? ids[i + 1] : -1;
    int count = 0;
    double loss = nd_train_step_grad(&m, ids, tg, B, T, 1, &count) / count;
    printf("{\"loss\":%.9g,\"rank\":%d,\"scale\":%.9g,\"T\":%d,\"targets\":[", loss, rank, (double)m.lora_scale, T);
    for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", tg[i]);
    if (full) {
        printf("],\"grads\":{");
        int first = 1;
        for (int i = 0; i < m.n_tensors; i++) {
            if (m.tensors[i].role < 0) continue;
            printf("%s\"%s\":", first ? "" : ",", m.tensors[i].name);
            put_array(m.grads + m.tensors[i].offset, m.tensors[i].count);
            first = 0;
        }
        printf("}}\n");
        free(ids);
        free(tg);
        nd_train_model_free(&m);
        return 0;
    }
    printf("],\"lora\":{");
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, out;
        nd_train_lora_dims(&m, t, &in, &out);
        size_t na = (size_t)m.cfg.num_layers * in * rank, nb = (size_t)m.cfg.num_layers * rank * out;
        printf("%s\"%s\":{\"A\":", t ? "," : "", nd_train_lora_target_name(t));
        put_array(m.lora + m.lora_a_off[t], na);
        printf(",\"B\":");
        put_array(m.lora + m.lora_b_off[t], nb);
        printf(",\"gA\":");
        put_array(m.lora_grads + m.lora_a_off[t], na);
        printf(",\"gB\":");
        put_array(m.lora_grads + m.lora_b_off[t], nb);
        printf(",\"in\":%d,\"out\":%d}", in, out);
    }
    printf("}}\n");
    free(ids);
    free(tg);
    nd_train_model_free(&m);
    return 0;
}
