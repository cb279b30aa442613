/* cuda_backend.c - the CUDA op table (built only with CUDA=1): which op runs
 * where, the one-time device probe, and the selection helpers.
 *
 * The seam passes host pointers, so an op run on the GPU pays a round trip
 * (~10-20 us of launch, copies and synchronisation).  Ops whose work is
 * smaller than that round trip run on the host with the CPU kernels, where
 * the data already is: one-vector norms, RoPE, Walsh-Hadamard and the 4x4
 * Sinkhorn of a decode step, int8 KV-cache quantisation, and small matmuls / attentions.  Big work (any
 * matmul over ND_CUDA_MIN_MACS, prefill attention, embedding gathers) runs
 * on the device.  NEEDLE_CUDA_OFFLOAD=all sends every op to the device (the
 * op tests use it, so every kernel is held against the CPU).
 *
 * Any CUDA failure during an op (out of memory, a lost device) makes that
 * call compute on the CPU instead, with one line on stderr the first time:
 * a result is never left half-written. */
#ifdef ND_WITH_CUDA
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"

/* Below these a device round trip costs more than the work (thresholds in
 * multiply-adds); measured values belong here once a GPU run has tuned them. */
#define ND_CUDA_MIN_MACS (1u << 16)
#define ND_CUDA_MIN_ATTN (1u << 20)
#define ND_CUDA_MIN_GATHER (1u << 15)

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int usable, offload_all;
static char reason[256], device_line[256];

static void probe(void)
{
    const char *o = getenv("NEEDLE_CUDA_OFFLOAD");
    offload_all = o && !strcmp(o, "all");
    usable = nd_cu_init(reason, sizeof reason) == 0;
    if (usable) {
        nd_cu_describe(device_line, sizeof device_line);
        reason[0] = 0;
    }
}

static void device_failed(const char *op)
{
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "needle: a CUDA %s call failed; such calls are computed on the CPU\n", op);
}

static int on_device(size_t work, size_t threshold) { return offload_all || work >= threshold; }

static void cuda_matmul_multi(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                              float *const *y, const int *ldy, float *work)
{
    size_t macs = 0;
    for (int i = 0; i < n; i++) macs += (size_t)w[i]->rows * (size_t)w[i]->cols * (size_t)(T > 0 ? T : 0);
    if (on_device(macs, ND_CUDA_MIN_MACS)) {
        if (nd_cu_matmul_multi(n, w, x, T, ldx, y, ldy) == 0) return;
        device_failed("matmul");
    }
    nd_cpu_matmul_multi(pool, n, w, x, T, ldx, y, ldy, work);
}

static void cuda_matmul(nd_threadpool *pool, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                        float *work)
{
    cuda_matmul_multi(pool, 1, &w, x, T, ldx, &y, &ldy, work);
}

static void cuda_gather_rows(const nd_matrix *w, const int *rows, int n, float *out)
{
    if (on_device((size_t)n * (size_t)w->cols, ND_CUDA_MIN_GATHER)) {
        if (nd_cu_gather_rows(w, rows, n, out) == 0) return;
        device_failed("gather_rows");
    }
    nd_cpu_gather_rows(w, rows, n, out);
}

static void cuda_rmsnorm(const float *x, int n, const float *scale, float *out)
{
    if (offload_all) {
        if (nd_cu_rmsnorm(x, n, 1, scale, out) == 0) return;
        device_failed("rmsnorm");
    }
    nd_cpu_rmsnorm(x, n, scale, out);
}

static void cuda_rope(float *x, int heads, int head_dim, const float *cs)
{
    if (offload_all) {
        if (nd_cu_rope(x, heads, head_dim, cs) == 0) return;
        device_failed("rope");
    }
    nd_cpu_rope(x, heads, head_dim, cs);
}

static void cuda_hadamard(float *x, int n)
{
    if (offload_all && n <= ND_CU_HADAMARD_MAX) {
        if (nd_cu_hadamard(x, n) == 0) return;
        device_failed("hadamard");
    }
    nd_cpu_hadamard(x, n);
}

static void cuda_attention(nd_threadpool *pool, const nd_attn_args *a, float *work)
{
    size_t keys = (size_t)(a->cache_slots > 0 ? a->cache_slots : 0) + (size_t)a->T;
    size_t flops = keys * (size_t)a->T * (size_t)a->num_heads * (size_t)a->head_dim;
    if (on_device(flops, ND_CUDA_MIN_ATTN)) {
        if (nd_cu_attention(a) == 0) return;
        device_failed("attention");
    }
    nd_cpu_attention(pool, a, work);
}

static void cuda_sinkhorn(float *m, int n, int iters)
{
    if (offload_all && n <= 16) {
        if (nd_cu_sinkhorn(m, n, iters) == 0) return;
        device_failed("sinkhorn");
    }
    nd_cpu_sinkhorn(m, n, iters);
}

static void cuda_quantize_kv(const float *x, int n, int8_t *q, float *scale)
{
    if (offload_all) {
        if (nd_cu_quantize_kv(x, n, q, scale) == 0) return;
        device_failed("quantize_kv");
    }
    nd_cpu_quantize_kv(x, n, q, scale);
}

static const nd_backend cuda_backend = {
    .name = "cuda",
    .description = "NVIDIA GPU (CUDA + cuBLAS): weights resident on the device, CQ dequantised once; "
                   "small per-token ops stay on the host",
    .matmul = cuda_matmul,
    /* the host fallback needs the CPU's scratch; the device path needs none */
    .matmul_work_floats = nd_cpu_matmul_work_floats,
    .matmul_multi = cuda_matmul_multi,
    .gather_rows = cuda_gather_rows,
    .rmsnorm = cuda_rmsnorm,
    .rope = cuda_rope,
    .hadamard = cuda_hadamard,
    .attention = cuda_attention,
    .attention_work_floats = nd_cpu_attention_work_floats,
    .sinkhorn = cuda_sinkhorn,
    .quantize_kv = cuda_quantize_kv,
};

int nd_backend_cuda_compiled(void) { return 1; }

const nd_backend *nd_backend_cuda(void)
{
    pthread_once(&probe_once, probe);
    return usable ? &cuda_backend : NULL;
}

const char *nd_backend_cuda_unavailable_reason(void)
{
    pthread_once(&probe_once, probe);
    return reason;
}

int nd_backend_cuda_describe(char *buf, size_t size)
{
    pthread_once(&probe_once, probe);
    if (usable) return snprintf(buf, size, "%s%s", device_line, offload_all ? " (NEEDLE_CUDA_OFFLOAD=all)" : "");
    return snprintf(buf, size, "unavailable: %s", reason);
}

const nd_backend *nd_backend_cuda_auto(const char **why)
{
    if (nd_backend_cuda()) {
        if (why) *why = "a CUDA device is present (automatic; NEEDLE_BACKEND=cpu forces the CPU)";
        return &cuda_backend;
    }
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "needle: CUDA backend unavailable (%s); using the CPU backend\n", reason);
    return NULL;
}
#else
typedef int nd_cuda_backend_unused; /* ISO C forbids an empty translation unit */
#endif
