/* cpu_monarch_avx2.c - cpu_monarch.c compiled for AVX2+FMA (the Makefile's flags for *_avx2.c;
 * names carry the suffix _avx2: see cpu_isa_names.h). */
#if defined(__x86_64__) /* as ND_CPU_X86_COPIES in cpu_isa.h */
#define ND_CPU_ISA avx2
#include "backend/cpu/cpu_monarch.c"
#endif
