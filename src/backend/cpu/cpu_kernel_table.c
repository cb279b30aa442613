/* cpu_kernel_table.c - this ISA's table of kernels (compiled once per ISA:
 * as itself for the baseline, through cpu_kernel_table_avx2.c /
 * cpu_kernel_table_avx512.c for the others).  With cpu_isa_names.h in
 * force, every nd_cpu_ name below is this ISA's copy. */
#include "backend/cpu/cpu_isa_names.h"

#include "backend/cpu/cpu_isa.h"

_Static_assert(ND_CPU_ISA_NUM == (int)ND_CPU_ISA_ENUM, "cpu_isa_names.h: ND_ISA_NUM_* must equal nd_cpu_isa");

const nd_cpu_kernels ND_ISA_NAME(nd_cpu_kernels) = {
    .isa = ND_CPU_ISA_ENUM,
    .dot = nd_cpu_dot,
    .matmul = nd_cpu_matmul,
    .matmul_work_floats = nd_cpu_matmul_work_floats,
    .matmul_multi = nd_cpu_matmul_multi,
    .matmul_a8 = nd_cpu_matmul_a8,
    .matmul_a8_work_floats = nd_cpu_matmul_a8_work_floats,
    .cq_storage_bits = nd_cpu_cq_storage_bits,
    .cq_decode_row_rotated = nd_cpu_cq_decode_row_rotated,
    .cq_decode_group = nd_cpu_cq_decode_group,
    .gather_rows = nd_cpu_gather_rows,
    .rmsnorm = nd_cpu_rmsnorm,
    .rope = nd_cpu_rope,
    .hadamard = nd_cpu_hadamard,
    .attention = nd_cpu_attention,
    .attention_work_floats = nd_cpu_attention_work_floats,
    .sinkhorn = nd_cpu_sinkhorn,
    .quantize_kv = nd_cpu_quantize_kv,
    .copy = nd_cpu_copy,
    .zero = nd_cpu_zero,
    .scale = nd_cpu_scale,
    .axpy = nd_cpu_axpy,
    .sigmoid_gate = nd_cpu_sigmoid_gate,
    .hada_mlp = nd_cpu_hada_mlp,
    .mhc_pre = nd_cpu_mhc_pre,
    .mhc_mix = nd_cpu_mhc_mix,
    .mhc_res = nd_cpu_mhc_res,
    .mhc_mix_res = nd_cpu_mhc_mix_res,
    .engram_taps = nd_cpu_engram_taps,
    .engram_gate = nd_cpu_engram_gate,
    .lane_mean = nd_cpu_lane_mean,
    .head_pool = nd_cpu_head_pool,
    .act_quant = nd_cpu_act_quant,
    .matmul_a8_with = nd_cpu_matmul_a8_with,
    .monarch_mlp = nd_cpu_monarch_mlp,
    .monarch_mlp_pooled = nd_cpu_monarch_mlp_pooled,
};
