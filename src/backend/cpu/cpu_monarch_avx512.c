/* cpu_monarch_avx512.c - cpu_monarch.c compiled for AVX-512 (the Makefile's flags for *_avx512.c;
 * names carry the suffix _avx512: see cpu_isa_names.h). */
#if defined(__x86_64__) /* as ND_CPU_X86_COPIES in cpu_isa.h */
#define ND_CPU_ISA avx512
#include "backend/cpu/cpu_monarch.c"
#endif
