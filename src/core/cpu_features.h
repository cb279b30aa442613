/* cpu_features.h - what the CPU offers and what this build compiled in.
 *
 * The hot kernels are chosen at compile time (-march=native by default), so
 * "compiled" is what actually runs; "detected" is what the machine could run.
 * `needle info` prints both so a slow build is easy to explain. */
#ifndef ND_CPU_FEATURES_H
#define ND_CPU_FEATURES_H

typedef struct nd_cpu_features {
    int avx2, fma, avx512f, avx512bw, f16c, neon;
    int avx512vnni; /* VPDPWSSD / VPDPBUSD on 512-bit registers (the integer CQ kernels) */
} nd_cpu_features;

/* Runtime detection (cpuid on x86; NEON is architectural on aarch64). */
void nd_cpu_features_detect(nd_cpu_features *f);
/* The SIMD paths this binary was compiled with. */
void nd_cpu_features_compiled(nd_cpu_features *f);
/* Online logical CPUs (>= 1). */
int nd_cpu_count(void);

#endif
