/* cpu_features.c - CPU feature detection, core count and the choice of
 * kernel path. */
#include "core/cpu_features.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ND_X86_DISPATCH 1
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

void nd_cpu_features_detect(nd_cpu_features *f)
{
    memset(f, 0, sizeof *f);
#if defined(ND_X86_DISPATCH)
    /* __builtin_cpu_supports also checks that the OS saves the wide registers */
    __builtin_cpu_init();
    f->avx2 = __builtin_cpu_supports("avx2") != 0;
    f->fma = __builtin_cpu_supports("fma") != 0;
    f->avx512f = __builtin_cpu_supports("avx512f") != 0;
    f->avx512bw = __builtin_cpu_supports("avx512bw") != 0;
    f->avx512vl = __builtin_cpu_supports("avx512vl") != 0;
    f->avx512dq = __builtin_cpu_supports("avx512dq") != 0;
    f->avx512vnni = __builtin_cpu_supports("avx512vnni") != 0;
    /* f16c has no __builtin_cpu_supports name in older compilers: cpuid leaf 1, ecx bit 29,
     * usable when AVX is (F16C works on ymm registers) */
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) f->f16c = ((c >> 29) & 1) && __builtin_cpu_supports("avx");
#elif defined(__aarch64__)
    f->neon = 1; /* architectural on AArch64 */
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    f->neon_dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
#endif
}

void nd_cpu_features_compiled(nd_cpu_features *f)
{
    memset(f, 0, sizeof *f);
#ifdef __AVX2__
    f->avx2 = 1;
#endif
#ifdef __FMA__
    f->fma = 1;
#endif
#ifdef __F16C__
    f->f16c = 1;
#endif
#ifdef __AVX512F__
    f->avx512f = 1;
#endif
#ifdef __AVX512BW__
    f->avx512bw = 1;
#endif
#ifdef __AVX512VL__
    f->avx512vl = 1;
#endif
#ifdef __AVX512DQ__
    f->avx512dq = 1;
#endif
#ifdef __AVX512VNNI__
    f->avx512vnni = 1;
#endif
#if defined(__ARM_NEON) || defined(__aarch64__)
    f->neon = 1;
#endif
#ifdef __ARM_FEATURE_DOTPROD
    f->neon_dotprod = 1;
#endif
}

int nd_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 256 ? 256 : (int)n);
}

static const char *const isa_names[ND_ISA_COUNT] = {"portable", "avx2", "avx512", "neon"};

const char *nd_cpu_isa_name(nd_cpu_isa isa) { return isa >= 0 && isa < ND_ISA_COUNT ? isa_names[isa] : "?"; }

int nd_cpu_isa_built(nd_cpu_isa isa)
{
    switch (isa) {
#if defined(__aarch64__)
    case ND_ISA_NEON: return 1; /* the baseline: the plain kernel files compile to NEON */
#else
    case ND_ISA_PORTABLE: return 1;
#endif
#if defined(ND_X86_DISPATCH) && defined(__x86_64__)
    case ND_ISA_AVX2:
    case ND_ISA_AVX512: return 1; /* the *_avx2.c / *_avx512.c kernel copies */
#endif
    default: return 0;
    }
}

int nd_cpu_isa_supported(const nd_cpu_features *f, nd_cpu_isa isa, const char **missing)
{
    const char *m = NULL;
    switch (isa) {
    case ND_ISA_PORTABLE: break;
    case ND_ISA_AVX2:
        if (!f->avx2) m = "avx2";
        else if (!f->fma) m = "fma";
        else if (!f->f16c) m = "f16c";
        break;
    case ND_ISA_AVX512:
        if (!f->avx512f) m = "avx512f";
        else if (!f->avx512bw) m = "avx512bw";
        else if (!f->avx512vl) m = "avx512vl";
        else if (!f->avx512dq) m = "avx512dq";
        else if (!f->avx512vnni) m = "avx512vnni";
        else if (!f->avx2 || !f->fma || !f->f16c) m = "avx2/fma/f16c";
        break;
    case ND_ISA_NEON:
        if (!f->neon) m = "neon";
        break;
    default: m = "a known instruction set"; break;
    }
    if (missing) *missing = m;
    return m == NULL;
}

static struct {
    pthread_once_t once;
    int rc;
    nd_cpu_isa isa;
    char why[200];
} choice = {.once = PTHREAD_ONCE_INIT};

static void choose_once(void)
{
    nd_cpu_features f;
    nd_cpu_features_detect(&f);
    const char *forced = getenv("NEEDLE_ISA");
    if (forced && *forced) {
        int found = -1;
        for (int i = 0; i < ND_ISA_COUNT; i++)
            if (!strcmp(forced, isa_names[i])) found = i;
        const char *missing = NULL;
        if (found < 0)
            snprintf(choice.why, sizeof choice.why, "NEEDLE_ISA=%.40s: unknown instruction set (avx512, avx2, portable, neon)",
                     forced);
        else if (!nd_cpu_isa_built((nd_cpu_isa)found))
            snprintf(choice.why, sizeof choice.why, "NEEDLE_ISA=%s: this build has no %s kernels", forced, forced);
        else if (!nd_cpu_isa_supported(&f, (nd_cpu_isa)found, &missing))
            snprintf(choice.why, sizeof choice.why, "NEEDLE_ISA=%s: this CPU lacks %s", forced, missing);
        else {
            choice.isa = (nd_cpu_isa)found;
            snprintf(choice.why, sizeof choice.why, "forced by NEEDLE_ISA=%s", forced);
            return;
        }
        choice.rc = -1;
        return;
    }
    char skipped[96] = ""; /* the first better path passed over, and why */
    for (int i = ND_ISA_COUNT - 1; i >= 0; i--) {
        const char *missing = NULL;
        if (!nd_cpu_isa_built((nd_cpu_isa)i)) continue;
        if (!nd_cpu_isa_supported(&f, (nd_cpu_isa)i, &missing)) {
            if (!skipped[0]) snprintf(skipped, sizeof skipped, "%s is built in but this CPU lacks %s", isa_names[i], missing);
            continue;
        }
        choice.isa = (nd_cpu_isa)i;
        if (skipped[0]) snprintf(choice.why, sizeof choice.why, "automatic: the best path this CPU runs (%s)", skipped);
        else snprintf(choice.why, sizeof choice.why, "automatic: the most capable path built in, and this CPU has it");
        return;
    }
    choice.rc = -1; /* unreachable: a build always carries its baseline */
    snprintf(choice.why, sizeof choice.why, "no kernel path built in runs on this CPU");
}

int nd_cpu_isa_choose(nd_cpu_isa *isa, const char **why)
{
    pthread_once(&choice.once, choose_once);
    if (isa) *isa = choice.isa;
    if (why) *why = choice.why;
    return choice.rc;
}
