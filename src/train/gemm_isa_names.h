/* gemm_isa_names.h - gemm.c is compiled once per instruction set, as the
 * CPU kernels are (backend/cpu/cpu_isa_names.h): as itself for the baseline
 * and through gemm_avx2.c / gemm_avx512.c.  Included first in gemm.c, this
 * gives each copy's public functions the ISA's suffix; the plain names are
 * gemm_isa.c's dispatchers, which follow nd_cpu_isa_choose. */
#ifndef ND_TRAIN_GEMM_ISA_NAMES_H
#define ND_TRAIN_GEMM_ISA_NAMES_H

#ifndef ND_GEMM_ISA
#if defined(__aarch64__)
#define ND_GEMM_ISA neon
#else
#define ND_GEMM_ISA portable
#endif
#endif

#define ND_GEMM_CAT_(a, b) a##b
#define ND_GEMM_CAT(a, b) ND_GEMM_CAT_(a, b)
#define nd_gemm ND_GEMM_CAT(nd_gemm_, ND_GEMM_ISA)
#define nd_gemm_scratch_floats ND_GEMM_CAT(nd_gemm_scratch_floats_, ND_GEMM_ISA)
#define nd_gemm_serial ND_GEMM_CAT(nd_gemm_serial_, ND_GEMM_ISA)
#define nd_gemm_serial_batch ND_GEMM_CAT(nd_gemm_serial_batch_, ND_GEMM_ISA)
#define nd_gemm_kernel_name ND_GEMM_CAT(nd_gemm_kernel_name_, ND_GEMM_ISA)

#endif
