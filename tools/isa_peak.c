/* isa_peak.c - the measured ceiling of the exact A8 matrix-vector product on
 * this core (issue 15: "show the measurement that proves it: instructions per
 * weight, the machine's measured peak").
 *
 *   build/tools/isa_peak [WEIGHTS_PER_TOKEN (34.3e6)] [CORES (2)]
 *
 * Run it pinned to one idle core (taskset -c 1 build/tools/isa_peak).  It
 * times, on data held in registers so that memory plays no part:
 *   - a chain of dependent 64-bit adds (one cycle each): the core's clock;
 *   - VPDPWSSD zmm, VPERMW zmm and VPSRLW zmm alone, with enough independent
 *     chains to hide latency: instructions per cycle;
 *   - the decode step of cpu_cq_int_avx512.c for one token (per 32 weights:
 *     one shift, two VPERMW lookups - the codebook's two int16 terms - and
 *     two VPDPWSSD), so its weights per cycle are the kernel's ceiling at
 *     T = 1 with every load, norm and reduction left out;
 * and prints the decode tok/s that ceiling allows for WEIGHTS_PER_TOKEN
 * weights per token on CORES cores (`needle bench` prints the weights of one
 * decoded token as weight_mb_per_token; at 4 bits, weights = 2 x bytes).
 * x86-64 with AVX-512 VNNI only; elsewhere it says so and exits 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define ITERS 20000000L

/* 64 dependent adds per iteration: the loop's own two instructions run
 * alongside on other ports, so an iteration is 64 cycles. */
static double clock_hz(void)
{
    uint64_t x = 1;
    double t = now_s();
    for (long i = 0; i < ITERS / 4; i++) {
#define A8X "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
        __asm__ volatile(A8X A8X A8X A8X A8X A8X A8X A8X : "+r"(x) : "r"((uint64_t)3));
    }
    t = now_s() - t;
    if (x == 0) puts("");
    return 64.0 * (double)(ITERS / 4) / t;
}

#define TGT __attribute__((target("avx512f,avx512bw,avx512vnni"), noinline))

/* Independent chains in named registers (arrays would live on the stack);
 * the empty asm keeps the compiler from folding the loop. */
#define KEEP8(a) __asm__ volatile("" : "+v"(a##0), "+v"(a##1), "+v"(a##2), "+v"(a##3), "+v"(a##4), \
                                  "+v"(a##5), "+v"(a##6), "+v"(a##7))
#define SUM8(a) _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a##0, a##1), _mm512_add_epi32(a##2, a##3)), \
                                 _mm512_add_epi32(_mm512_add_epi32(a##4, a##5), _mm512_add_epi32(a##6, a##7)))
#define INIT8(a, v) __m512i a##0 = v, a##1 = v, a##2 = v, a##3 = v, a##4 = v, a##5 = v, a##6 = v, a##7 = v

/* 16 independent accumulators: VPDPWSSD takes ~5 cycles and may issue twice
 * a cycle, so fewer chains would measure its latency. */
TGT static double vpdpwssd_per_s(void)
{
    __m512i b = _mm512_set1_epi16(3), c = _mm512_set1_epi16(5);
    INIT8(a, _mm512_set1_epi32(1));
    INIT8(e, _mm512_set1_epi32(2));
    double t = now_s();
    for (long i = 0; i < ITERS; i++) {
        a0 = _mm512_dpwssd_epi32(a0, b, c), a1 = _mm512_dpwssd_epi32(a1, b, c);
        a2 = _mm512_dpwssd_epi32(a2, b, c), a3 = _mm512_dpwssd_epi32(a3, b, c);
        a4 = _mm512_dpwssd_epi32(a4, b, c), a5 = _mm512_dpwssd_epi32(a5, b, c);
        a6 = _mm512_dpwssd_epi32(a6, b, c), a7 = _mm512_dpwssd_epi32(a7, b, c);
        e0 = _mm512_dpwssd_epi32(e0, b, c), e1 = _mm512_dpwssd_epi32(e1, b, c);
        e2 = _mm512_dpwssd_epi32(e2, b, c), e3 = _mm512_dpwssd_epi32(e3, b, c);
        e4 = _mm512_dpwssd_epi32(e4, b, c), e5 = _mm512_dpwssd_epi32(e5, b, c);
        e6 = _mm512_dpwssd_epi32(e6, b, c), e7 = _mm512_dpwssd_epi32(e7, b, c);
        KEEP8(a);
        KEEP8(e);
    }
    t = now_s() - t;
    if (_mm512_reduce_add_epi32(_mm512_add_epi32(SUM8(a), SUM8(e))) == 1) puts("");
    return 16.0 * (double)ITERS / t;
}

/* 8 independent lookups per iteration, each index the previous result. */
TGT static double vpermw_per_s(void)
{
    __m512i tab = _mm512_set1_epi16(1);
    INIT8(a, _mm512_set1_epi16(2));
    double t = now_s();
    for (long i = 0; i < ITERS; i++) {
        a0 = _mm512_permutexvar_epi16(a0, tab), a1 = _mm512_permutexvar_epi16(a1, tab);
        a2 = _mm512_permutexvar_epi16(a2, tab), a3 = _mm512_permutexvar_epi16(a3, tab);
        a4 = _mm512_permutexvar_epi16(a4, tab), a5 = _mm512_permutexvar_epi16(a5, tab);
        a6 = _mm512_permutexvar_epi16(a6, tab), a7 = _mm512_permutexvar_epi16(a7, tab);
        KEEP8(a);
    }
    t = now_s() - t;
    if (_mm512_reduce_add_epi32(SUM8(a)) == 1) puts("");
    return 8.0 * (double)ITERS / t;
}

TGT static double vpsrlw_per_s(void)
{
    INIT8(a, _mm512_set1_epi16(1000));
    double t = now_s();
    for (long i = 0; i < ITERS; i++) {
        a0 = _mm512_srli_epi16(a0, 1), a1 = _mm512_srli_epi16(a1, 1), a2 = _mm512_srli_epi16(a2, 1);
        a3 = _mm512_srli_epi16(a3, 1), a4 = _mm512_srli_epi16(a4, 1), a5 = _mm512_srli_epi16(a5, 1);
        a6 = _mm512_srli_epi16(a6, 1), a7 = _mm512_srli_epi16(a7, 1);
        KEEP8(a);
    }
    t = now_s() - t;
    if (_mm512_reduce_add_epi32(SUM8(a)) == 1) puts("");
    return 8.0 * (double)ITERS / t;
}

/* The kernel's T = 1 step: per 32 weights one shift, two lookups, two
 * multiply-adds; four passes per 128-group, four groups in flight. */
TGT static double kernel_weights_per_s(void)
{
    __m512i w0 = _mm512_set1_epi16(0x1234), w1 = _mm512_set1_epi16(0x4321);
    __m512i w2 = _mm512_set1_epi16(0x2143), w3 = _mm512_set1_epi16(0x3412);
    __m512i tab = _mm512_set1_epi16(7), tab_lo = _mm512_set1_epi16(-3), z = _mm512_set1_epi16(11);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, l0 = c0, l1 = c0, l2 = c0, l3 = c0;
#define PASS(w, c, l, q)                                                                                   \
    do {                                                                                                   \
        __m512i idx = _mm512_srli_epi16(w, 4 * (q));                                                       \
        __m512i v = _mm512_permutexvar_epi16(idx, tab), u = _mm512_permutexvar_epi16(idx, tab_lo);         \
        c = _mm512_dpwssd_epi32(c, v, z), l = _mm512_dpwssd_epi32(l, u, z);                                \
    } while (0)
    double t = now_s();
    for (long i = 0; i < ITERS / 8; i++) {
#define FOUR(q) PASS(w0, c0, l0, q); PASS(w1, c1, l1, q); PASS(w2, c2, l2, q); PASS(w3, c3, l3, q)
        FOUR(0);
        FOUR(1);
        FOUR(2);
        FOUR(3);
#undef FOUR
        __asm__ volatile("" : "+v"(w0), "+v"(w1), "+v"(w2), "+v"(w3), "+v"(z));
        __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(l0), "+v"(l1), "+v"(l2), "+v"(l3));
    }
#undef PASS
    t = now_s() - t;
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(l0, l1));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(c2, c3), _mm512_add_epi32(l2, l3)));
    if (_mm512_reduce_add_epi32(s) == 1) puts("");
    return 512.0 * (double)(ITERS / 8) / t;
}

int main(int argc, char **argv)
{
    double weights = argc > 1 ? atof(argv[1]) : 34.3e6;
    int cores = argc > 2 ? atoi(argv[2]) : 2;
    if (!(weights > 0) || cores < 1) {
        fprintf(stderr, "usage: isa_peak [WEIGHTS_PER_TOKEN (34.3e6)] [CORES (2)]\n");
        return 2;
    }
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")) {
        puts("isa_peak: this CPU has no AVX-512 VNNI; nothing to measure");
        return 0;
    }
    /* Best of three each: a busy machine only ever slows a run down. */
    double hz = clock_hz(), dp = 0, pw = 0, sh = 0, kw = 0;
    for (int k = 0; k < 3; k++) {
        dp = fmax(dp, vpdpwssd_per_s());
        pw = fmax(pw, vpermw_per_s());
        sh = fmax(sh, vpsrlw_per_s());
        kw = fmax(kw, kernel_weights_per_s());
    }
    double hz2 = clock_hz(); /* again: a clock that moved shows itself */
    double f = 0.5 * (hz + hz2);
    printf("clock %.2f GHz (%.2f before, %.2f after)\n", f * 1e-9, hz * 1e-9, hz2 * 1e-9);
    printf("VPDPWSSD zmm  %.2f per cycle  (%.0f int16 MACs per cycle)\n", dp / f, 32.0 * dp / f);
    printf("VPERMW zmm    %.2f per cycle\n", pw / f);
    printf("VPSRLW zmm    %.2f per cycle\n", sh / f);
    printf("kernel T=1    %.2f weights per cycle (1 shift + 2 VPERMW + 2 VPDPWSSD per 32 weights), %.1f GMAC/s\n",
           kw / f, kw * 1e-9);
    /* Port bound of the mix: two ports take 512-bit work; the lookups issue
     * on one of them (VPERMW ~1 per cycle), the shift on the other (~1 per
     * cycle), VPDPWSSD on either (~2 per cycle: one port-cycle each), so 32
     * weights need at least (2 lookups + 1 shift + 2 multiply-adds) port-cycles
     * over 2 ports, and no fewer cycles than the lookups' port needs. */
    double port_cycles = fmax(2.0 * f / pw, 0.5 * (2.0 * f / pw + f / sh + 2.0 * (2.0 * f / dp)));
    printf("port bound    %.2f weights per cycle (%.2f cycles per 32 weights)\n", 32.0 / port_cycles, port_cycles);
    printf("decode ceiling of the matmuls alone, %.1fM weights per token on %d core(s): %.0f tok/s at the "
           "measured mix, %.0f tok/s at the port bound\n",
           weights * 1e-6, cores, kw * cores / weights, 32.0 / port_cycles * f * cores / weights);
    return 0;
}
#else
int main(void)
{
    puts("isa_peak: x86-64 with AVX-512 VNNI only; nothing to measure here");
    (void)now_s;
    return 0;
}
#endif
