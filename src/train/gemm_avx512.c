/* gemm_avx512.c - gemm.c compiled for AVX-512 (the Makefile's flags for *_avx512.c;
 * names carry the suffix _avx512: see gemm_isa_names.h). */
#if defined(__x86_64__)
#define ND_GEMM_ISA avx512
#include "train/gemm.c"
#endif
