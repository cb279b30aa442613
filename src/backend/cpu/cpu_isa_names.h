/* cpu_isa_names.h - the kernel files (cpu_matmul.c, cpu_attention.c,
 * cpu_ops.c, cpu_layer.c) are compiled once per instruction set: as
 * themselves for the portable path, and through thin wrappers
 * (cpu_*_avx2.c, cpu_*_avx512.c) that define ND_CPU_ISA first.  Included
 * before cpu_ops.h, this header gives every kernel the ISA's suffix, so the
 * copies live side by side in one library and a kernel calls its own ISA's
 * helpers (hada_mlp's rmsnorm, matmul's hadamard).  The plain names
 * (nd_cpu_dot...) are the dispatchers of cpu_isa.c, which call the copy
 * chosen at start-up. */
#ifndef ND_CPU_ISA_NAMES_H
#define ND_CPU_ISA_NAMES_H

#ifndef ND_CPU_ISA
#if defined(__aarch64__)
#define ND_CPU_ISA neon /* NEON is the AArch64 baseline */
#else
#define ND_CPU_ISA portable
#endif
#endif

#define ND_ISA_CAT_(a, b) a##b
#define ND_ISA_CAT(a, b) ND_ISA_CAT_(a, b)
/* name_ISA, e.g. nd_cpu_dot_avx512 */
#define ND_ISA_NAME(name) ND_ISA_CAT(name##_, ND_CPU_ISA)

/* the nd_cpu_isa value of this copy */
#define ND_ISA_ENUM_portable ND_ISA_PORTABLE
#define ND_ISA_ENUM_avx2 ND_ISA_AVX2
#define ND_ISA_ENUM_avx512 ND_ISA_AVX512
#define ND_ISA_ENUM_neon ND_ISA_NEON
#define ND_CPU_ISA_ENUM ND_ISA_CAT(ND_ISA_ENUM_, ND_CPU_ISA)
/* the same as a number the preprocessor can test, e.g. for a kernel only some
 * paths have:  #if ND_CPU_ISA_NUM == ND_ISA_NUM_avx512  (values = nd_cpu_isa) */
#define ND_ISA_NUM_portable 0
#define ND_ISA_NUM_avx2 1
#define ND_ISA_NUM_avx512 2
#define ND_ISA_NUM_neon 3
#define ND_CPU_ISA_NUM ND_ISA_CAT(ND_ISA_NUM_, ND_CPU_ISA)

#define nd_cpu_dot ND_ISA_NAME(nd_cpu_dot)
#define nd_cpu_matmul ND_ISA_NAME(nd_cpu_matmul)
#define nd_cpu_matmul_work_floats ND_ISA_NAME(nd_cpu_matmul_work_floats)
#define nd_cpu_matmul_multi ND_ISA_NAME(nd_cpu_matmul_multi)
#define nd_cpu_matmul_a8 ND_ISA_NAME(nd_cpu_matmul_a8)
#define nd_cpu_matmul_a8_with ND_ISA_NAME(nd_cpu_matmul_a8_with)
#define nd_cpu_matmul_a8_work_floats ND_ISA_NAME(nd_cpu_matmul_a8_work_floats)
#define nd_cpu_cq_storage_bits ND_ISA_NAME(nd_cpu_cq_storage_bits)
#define nd_cpu_cq_decode_row_rotated ND_ISA_NAME(nd_cpu_cq_decode_row_rotated)
#define nd_cpu_cq_decode_group ND_ISA_NAME(nd_cpu_cq_decode_group)
#define nd_cpu_gather_rows ND_ISA_NAME(nd_cpu_gather_rows)
#define nd_cpu_rmsnorm ND_ISA_NAME(nd_cpu_rmsnorm)
#define nd_cpu_rope ND_ISA_NAME(nd_cpu_rope)
#define nd_cpu_hadamard ND_ISA_NAME(nd_cpu_hadamard)
#define nd_cpu_attention ND_ISA_NAME(nd_cpu_attention)
#define nd_cpu_attention_work_floats ND_ISA_NAME(nd_cpu_attention_work_floats)
#define nd_cpu_sinkhorn ND_ISA_NAME(nd_cpu_sinkhorn)
#define nd_cpu_quantize_kv ND_ISA_NAME(nd_cpu_quantize_kv)
#define nd_cpu_act_quant ND_ISA_NAME(nd_cpu_act_quant)
#define nd_cpu_copy ND_ISA_NAME(nd_cpu_copy)
#define nd_cpu_zero ND_ISA_NAME(nd_cpu_zero)
#define nd_cpu_scale ND_ISA_NAME(nd_cpu_scale)
#define nd_cpu_axpy ND_ISA_NAME(nd_cpu_axpy)
#define nd_cpu_sigmoid_gate ND_ISA_NAME(nd_cpu_sigmoid_gate)
#define nd_cpu_hada_mlp ND_ISA_NAME(nd_cpu_hada_mlp)
#define nd_cpu_mhc_pre ND_ISA_NAME(nd_cpu_mhc_pre)
#define nd_cpu_mhc_mix ND_ISA_NAME(nd_cpu_mhc_mix)
#define nd_cpu_mhc_res ND_ISA_NAME(nd_cpu_mhc_res)
#define nd_cpu_mhc_mix_res ND_ISA_NAME(nd_cpu_mhc_mix_res)
#define nd_cpu_engram_taps ND_ISA_NAME(nd_cpu_engram_taps)
#define nd_cpu_engram_gate ND_ISA_NAME(nd_cpu_engram_gate)
#define nd_cpu_lane_mean ND_ISA_NAME(nd_cpu_lane_mean)
#define nd_cpu_head_pool ND_ISA_NAME(nd_cpu_head_pool)
#define nd_cpu_monarch_mlp ND_ISA_NAME(nd_cpu_monarch_mlp)
#define nd_cpu_monarch_mlp_pooled ND_ISA_NAME(nd_cpu_monarch_mlp_pooled)

#endif
