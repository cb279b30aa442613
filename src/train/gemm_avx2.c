/* gemm_avx2.c - gemm.c compiled for AVX2+FMA (the Makefile's flags for *_avx2.c;
 * names carry the suffix _avx2: see gemm_isa_names.h). */
#if defined(__x86_64__)
#define ND_GEMM_ISA avx2
#include "train/gemm.c"
#endif
