/* train_bench.c - time LoRA (or --full) training steps on a random model.
 *   train_bench [PRESET=base] [B=16] [T=128] [STEPS=2] [THREADS=0] [--full | --qat]
 * --qat: the LoRA step under deploy numerics (CQ 4 bits + A8, train/qat.h). 
 * Prints one JSON line: the best step's wall and process CPU seconds, and
 * tokens/s (B*T tokens per step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rng.h"
#include "train/adamw.h"
#include "train/qat.h"
#include "train/train_model.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

int main(int argc, char **argv)
{
    int full = argc > 1 && !strcmp(argv[argc - 1], "--full");
    int qat = argc > 1 && !strcmp(argv[argc - 1], "--qat");
    if (full || qat) argc--;
    const char *preset = argc > 1 ? argv[1] : "base";
    int B = argc > 2 ? atoi(argv[2]) : 16, T = argc > 3 ? atoi(argv[3]) : 128, steps = argc > 4 ? atoi(argv[4]) : 2;
    int threads = argc > 5 ? atoi(argv[5]) : 0;
    nd_config cfg;
    needle_error err;
    nd_train_model m;
    nd_threadpool *pool = NULL;
    if (nd_config_preset(&cfg, preset, &err) || nd_train_model_create(&m, &cfg, &err) ||
        nd_threadpool_create(threads, &pool, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    nd_train_model_init_reference(&m, 0);
    m.pool = pool;
    if (full ? nd_train_enable_full(&m, &err) : nd_train_lora_create(&m, 16, 32.0f, 0, &err) ||
                                                      (qat && nd_qat_enable(&m, 4, &err))) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    nd_rng r;
    nd_rng_seed(&r, 1);
    int32_t *ids = malloc(sizeof(int32_t) * B * T), *tg = malloc(sizeof(int32_t) * B * T);
    for (int i = 0; i < B * T; i++) ids[i] = 14 + (int32_t)nd_rng_below(&r, (uint64_t)cfg.vocab_size - 14);
    for (int i = 0; i < B * T; i++) tg[i] = (i % T) < T - 1 ? ids[i + 1] : -1;
    nd_adamw opt;
    nd_adamw_init(&opt, full ? m.n_params : m.n_lora, &err);
    double best = 1e30, best_cpu = 0, loss = 0;
    for (int s = 0; s < steps; s++) {
        double t0 = now_s(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        int n;
        loss = nd_train_step_grad(&m, ids, tg, B, T, 1, &n) / n;
        nd_adamw_step(&opt, full ? m.params : m.lora, full ? m.grads : m.lora_grads, 1e-4);
        double dt = now_s() - t0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (dt < best) best = dt, best_cpu = cpu;
        fprintf(stderr, "step %d: %.3f s loss %.4f\n", s + 1, dt, loss);
    }
    printf("{\"preset\":\"%s\",\"mode\":\"%s%s\",\"B\":%d,\"T\":%d,\"threads\":%d,\"step_s\":%.3f,\"step_cpu_s\":%.3f,\"tok_per_s\":%.1f}\n",
           preset, full ? "full" : "lora", qat ? "+qat" : "", B, T, nd_threadpool_threads(pool), best, best_cpu,
           B * T / best);
    nd_adamw_free(&opt);
    nd_train_model_free(&m);
    nd_threadpool_free(pool);
    free(ids);
    free(tg);
    return 0;
}
