/* cpu_features.h - what the CPU offers, which kernel instruction set (ISA)
 * this binary carries, and the one place that decides which ISA's kernels
 * run.
 *
 * An x86-64 build targets the portable baseline and carries every kernel
 * path (the *_avx512.c / *_avx2.c files are compiled with that ISA); the
 * path is chosen once per process from the CPU's features, or forced with
 * NEEDLE_ISA.  An AArch64 build's baseline is NEON.  `needle info` prints
 * the features, the paths built in, the one chosen and why. */
#ifndef ND_CPU_FEATURES_H
#define ND_CPU_FEATURES_H

#include <stddef.h>

typedef struct nd_cpu_features {
    int avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512vnni;
    int neon, neon_dotprod;
} nd_cpu_features;

/* Runtime detection (cpuid on x86, HWCAP on aarch64). */
void nd_cpu_features_detect(nd_cpu_features *f);
/* What the baseline (non-ISA-specific) code of this binary was compiled with. */
void nd_cpu_features_compiled(nd_cpu_features *f);
/* Online logical CPUs (>= 1). */
int nd_cpu_count(void);

/* Kernel paths, least capable first. */
typedef enum nd_cpu_isa {
    ND_ISA_PORTABLE, /* plain C (x86-64 baseline, WebAssembly) */
    ND_ISA_AVX2,     /* AVX2 + FMA + F16C */
    ND_ISA_AVX512,   /* AVX-512 F/BW/VL/DQ + VNNI */
    ND_ISA_NEON,     /* AArch64 Advanced SIMD */
    ND_ISA_COUNT
} nd_cpu_isa;

const char *nd_cpu_isa_name(nd_cpu_isa isa);
/* 1 when this binary carries isa's kernels. */
int nd_cpu_isa_built(nd_cpu_isa isa);
/* 1 when the CPU (features f) can run isa; else 0 and *missing (may be NULL)
 * names what it lacks. */
int nd_cpu_isa_supported(const nd_cpu_features *f, nd_cpu_isa isa, const char **missing);

/* The decision, made once per process and cached: NEEDLE_ISA when set (an
 * unknown name, one not built in or one the CPU lacks is an error: never a
 * silent fallback), else the most capable path built in that the CPU runs.
 * Returns 0 and the ISA in *isa, or -1; *why gets the reason or the error
 * (a static string, one line). */
int nd_cpu_isa_choose(nd_cpu_isa *isa, const char **why);

#endif
