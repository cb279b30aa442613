/* cpu_features.c - CPU feature detection and core count. */
#include "core/cpu_features.h"

#include <string.h>
#include <unistd.h>

void nd_cpu_features_detect(nd_cpu_features *f)
{
    memset(f, 0, sizeof *f);
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    f->avx2 = __builtin_cpu_supports("avx2") != 0;
    f->fma = __builtin_cpu_supports("fma") != 0;
    f->avx512f = __builtin_cpu_supports("avx512f") != 0;
    f->avx512bw = __builtin_cpu_supports("avx512bw") != 0;
    f->avx512vnni = __builtin_cpu_supports("avx512vnni") != 0;
    /* f16c has no __builtin_cpu_supports name in older compilers: AVX2 parts all have it. */
    f->f16c = f->avx2;
#elif defined(__aarch64__)
    f->neon = 1;
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
#ifdef __AVX512F__
    f->avx512f = 1;
#endif
#ifdef __AVX512BW__
    f->avx512bw = 1;
#endif
#ifdef __AVX512VNNI__
    f->avx512vnni = 1;
#endif
#ifdef __F16C__
    f->f16c = 1;
#endif
#if defined(__ARM_NEON) || defined(__aarch64__)
    f->neon = 1;
#endif
}

int nd_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 256 ? 256 : (int)n);
}
