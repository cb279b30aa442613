/* cuda_device.h - the device layer (cuda_device.cu): the CUDA runtime, cuBLAS,
 * the weight cache and one entry point per op.  Plain C interface so the op
 * table (cuda_backend.c) stays C.
 *
 * Every nd_cu_* op takes and returns HOST arrays, as the backend seam does:
 * inputs are copied up, the kernel runs, outputs are copied back before the
 * call returns.  Each returns 0, or -1 when a CUDA call failed (the caller
 * then computes the op on the CPU, so a transient failure never corrupts a
 * result).  Calls are serialised by one lock: any thread may call them. */
#ifndef ND_CUDA_DEVICE_H
#define ND_CUDA_DEVICE_H

#include <stddef.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open the device NEEDLE_DEVICE (default 0) and create the cuBLAS handle.
 * 0 on success; else -1 and `why` says what is missing (driver, device...). */
int nd_cu_init(char *why, size_t why_size);
/* "NVIDIA H200, sm_90, 139.8 GiB, device 0 of 1" (after a successful init). */
void nd_cu_describe(char *buf, size_t size);

int nd_cu_matmul_multi(int n, const nd_matrix *const *w, const float *x, int T, int ldx, float *const *y,
                       const int *ldy);
int nd_cu_gather_rows(const nd_matrix *w, const int *rows, int n, float *out);
/* `count` vectors of n floats, consecutive in x and out. */
int nd_cu_rmsnorm(const float *x, int n, int count, const float *scale, float *out);
int nd_cu_rope(float *x, int heads, int head_dim, const float *cs);
int nd_cu_hadamard(float *x, int n);
int nd_cu_attention(const nd_attn_args *a);
int nd_cu_sinkhorn(float *m, int n, int iters);
int nd_cu_quantize_kv(const float *x, int n, int8_t *q, float *scale);

/* Largest power of two the device Walsh-Hadamard handles in one block. */
#define ND_CU_HADAMARD_MAX 8192

#ifdef __cplusplus
}
#endif
#endif
