/* cuda_kernels.h - launchers for the CUDA kernels (cuda_kernels.cu).  C++
 * only, used by cuda_device.cu.  All pointers are DEVICE pointers; every
 * launcher enqueues on `stream` and returns cudaGetLastError(). */
#ifndef ND_CUDA_KERNELS_H
#define ND_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stdint.h>

/* What the CQ dequantiser needs to know about one matrix (SPEC section 8). */
struct nd_cu_cq_desc {
    int rows, cols, cols_pad;
    int storage_bits;   /* 2, 3 or 4 (ternary is stored as 2-bit codes) */
    float codebook[16]; /* indexed by stored code, zero-padded */
};

/* out[r, c] = ((cb[code] * norm) H128)[c] for every row: the float weights. */
cudaError_t nd_cu_launch_cq_dequant(const nd_cu_cq_desc &d, const uint8_t *idx, const uint8_t *norms, float *out,
                                    cudaStream_t stream);
/* out[i, :] = w[rows[i], :] (cols floats each). */
cudaError_t nd_cu_launch_gather(const float *w, int cols, const int *rows, int n, float *out, cudaStream_t stream);
cudaError_t nd_cu_launch_rmsnorm(const float *x, int n, int count, const float *scale, float *out,
                                 cudaStream_t stream);
cudaError_t nd_cu_launch_rope(float *x, int heads, int head_dim, const float *cs, cudaStream_t stream);
/* n a power of two <= ND_CU_HADAMARD_MAX; `count` vectors back to back. */
cudaError_t nd_cu_launch_hadamard(float *x, int n, int count, cudaStream_t stream);
cudaError_t nd_cu_launch_sinkhorn(float *m, int n, int count, int iters, cudaStream_t stream);

/* Attention over one unified key list: keys [0, cache_slots) are cache slots
 * (position cache_pos[s], -1 empty), keys cache_slots + u are the chunk's own
 * (position pos0 + u).  scores: T*H*(cache_slots+T) floats of scratch. */
struct nd_cu_attn_desc {
    int T, pos0, num_heads, num_kv_heads, head_dim, window, sinks, cache_slots;
    int kv_bits; /* 32: k_cache/v_cache floats; 8: int8 codes with one scale per ND_KV_GROUP */
    const float *q, *k_chunk, *v_chunk, *k_cache, *v_cache;
    const int8_t *k_cache8, *v_cache8;
    const float *k_scale, *v_scale;
    const int *cache_pos;
    float *scores, *out;
};
/* q = round(x / scale), scale = max|x| / 127 per ND_KV_GROUP values. */
cudaError_t nd_cu_launch_quantize_kv(const float *x, int n, int8_t *q, float *scale, cudaStream_t stream);

cudaError_t nd_cu_launch_attention(const nd_cu_attn_desc &a, cudaStream_t stream);

#endif
