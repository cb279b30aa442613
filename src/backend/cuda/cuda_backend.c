/* cuda_backend.c - the CUDA op table and its registry entry (built only with
 * CUDA=1): which op runs where, and the one-time device probe.
 *
 * The seam passes host pointers, so an op run on the GPU pays a round trip
 * (~10-20 us of launch, copies and synchronisation).  Ops whose work is
 * smaller than that round trip run on the host with the CPU kernels, where
 * the data already is: one-vector norms, RoPE, Walsh-Hadamard and the 4x4
 * Sinkhorn of a decode step, int8 KV-cache quantisation, and small matmuls / attentions, through the
 * instance's host table (the CPU's ops; this file names no other backend).  Big work (any
 * matmul over ND_CUDA_MIN_MACS, prefill attention, embedding gathers) runs
 * on the device.  NEEDLE_CUDA_OFFLOAD=all sends every op to the device (the
 * op tests use it, so every kernel is held against the CPU).  The layer ops
 * (hada_mlp, mhc_pre/mix, engram, lane_mean, head_pool, ...) and backend-owned
 * buffers are not implemented on the device yet: supports_op says no, and the
 * registry gives the instance the CPU's ops for them.
 *
 * Any CUDA failure during an op (out of memory, a lost device) makes that
 * call compute on the CPU instead, with one line on stderr the first time:
 * a result is never left half-written. */
#ifdef ND_WITH_CUDA
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_device.h"
#include "core/error.h"

/* Below these a device round trip costs more than the work (thresholds in
 * multiply-adds); measured values belong here once a GPU run has tuned them. */
#define ND_CUDA_MIN_MACS (1u << 16)
#define ND_CUDA_MIN_ATTN (1u << 20)
#define ND_CUDA_MIN_GATHER (1u << 15)

/* The device itself (cuda_device.cu: runtime, cuBLAS handle, weight cache)
 * is process-wide; what an instance chooses lives in its ctx. */
typedef struct cuda_ctx {
    int offload_all; /* NEEDLE_CUDA_OFFLOAD=all when the instance was made */
} cuda_ctx;

static char device_line[256]; /* written once by the probe */

static int offload_all_requested(void)
{
    const char *o = getenv("NEEDLE_CUDA_OFFLOAD");
    return o && !strcmp(o, "all");
}

static int cuda_probe(char *why, size_t size)
{
    if (nd_cu_init(why, size) != 0) return -1;
    nd_cu_describe(device_line, sizeof device_line);
    return 0;
}

static int cuda_describe(char *buf, size_t size)
{
    return snprintf(buf, size, "%s%s", device_line, offload_all_requested() ? " (NEEDLE_CUDA_OFFLOAD=all)" : "");
}

static int cuda_init(nd_backend *be, needle_error *err)
{
    cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return nd_errorf(err, NEEDLE_ENOMEM, "cuda backend: out of memory");
    c->offload_all = offload_all_requested();
    be->ctx = c;
    return 0;
}

static void cuda_fini(nd_backend *be) { free(be->ctx); }

static void device_failed(const char *op)
{
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "needle: a CUDA %s call failed; such calls are computed on the CPU\n", op);
}

static int offload_all(const nd_backend *be) { return ((const cuda_ctx *)be->ctx)->offload_all; }

static int on_device(const nd_backend *be, size_t work, size_t threshold)
{
    return offload_all(be) || work >= threshold;
}

static int cuda_supports(const nd_backend *be, nd_op op)
{
    (void)be;
    switch (op) {
    case ND_OP_MATMUL: case ND_OP_MATMUL_MULTI: case ND_OP_GATHER_ROWS: case ND_OP_RMSNORM: case ND_OP_ROPE:
    case ND_OP_HADAMARD: case ND_OP_ATTENTION: case ND_OP_SINKHORN: case ND_OP_QUANTIZE_KV:
        return 1;
    default:
        return 0;
    }
}

static void cuda_matmul_multi(const nd_backend *be, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                              float *const *y, const int *ldy, float *work)
{
    size_t macs = 0;
    for (int i = 0; i < n; i++) macs += (size_t)w[i]->rows * (size_t)w[i]->cols * (size_t)(T > 0 ? T : 0);
    if (on_device(be, macs, ND_CUDA_MIN_MACS)) {
        if (nd_cu_matmul_multi(n, w, x, T, ldx, y, ldy) == 0) return;
        device_failed("matmul");
    }
    be->host->matmul_multi(be, n, w, x, T, ldx, y, ldy, work);
}

static void cuda_matmul(const nd_backend *be, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                        float *work)
{
    cuda_matmul_multi(be, 1, &w, x, T, ldx, &y, &ldy, work);
}

/* the host fallback needs the CPU's scratch; the device path needs none */
static size_t cuda_matmul_work_floats(const nd_backend *be, const nd_matrix *w, int T)
{
    return be->host->matmul_work_floats(be, w, T);
}

static void cuda_gather_rows(const nd_backend *be, const nd_matrix *w, const int *rows, int n, float *out)
{
    if (on_device(be, (size_t)n * (size_t)w->cols, ND_CUDA_MIN_GATHER)) {
        if (nd_cu_gather_rows(w, rows, n, out) == 0) return;
        device_failed("gather_rows");
    }
    be->host->gather_rows(be, w, rows, n, out);
}

static void cuda_rmsnorm(const nd_backend *be, const float *x, int n, int count, const float *scale, float *out)
{
    if (offload_all(be)) {
        if (nd_cu_rmsnorm(x, n, count, scale, out) == 0) return;
        device_failed("rmsnorm");
    }
    be->host->rmsnorm(be, x, n, count, scale, out);
}

static void cuda_rope(const nd_backend *be, float *x, int heads, int head_dim, const float *cs)
{
    if (offload_all(be)) {
        if (nd_cu_rope(x, heads, head_dim, cs) == 0) return;
        device_failed("rope");
    }
    be->host->rope(be, x, heads, head_dim, cs);
}

static void cuda_hadamard(const nd_backend *be, float *x, int n)
{
    if (offload_all(be) && n <= ND_CU_HADAMARD_MAX) {
        if (nd_cu_hadamard(x, n) == 0) return;
        device_failed("hadamard");
    }
    be->host->hadamard(be, x, n);
}

static void cuda_attention(const nd_backend *be, const nd_attn_args *a, float *work)
{
    size_t keys = (size_t)(a->cache_slots > 0 ? a->cache_slots : 0) + (size_t)a->T;
    size_t flops = keys * (size_t)a->T * (size_t)a->num_heads * (size_t)a->head_dim;
    /* the device kernel knows one head width and ND_KV_GROUP scales: Needle 3's
     * other widths and per-head int8 scales run on the host */
    int plain = !a->kv_head_scale && (a->v_head_dim <= 0 || a->v_head_dim == a->head_dim);
    if (plain && on_device(be, flops, ND_CUDA_MIN_ATTN)) {
        if (nd_cu_attention(a) == 0) return;
        device_failed("attention");
    }
    be->host->attention(be, a, work);
}

static size_t cuda_attention_work_floats(const nd_backend *be, const nd_attn_args *a)
{
    return be->host->attention_work_floats(be, a);
}

static void cuda_sinkhorn(const nd_backend *be, float *m, int n, int iters)
{
    if (offload_all(be) && n <= 16) {
        if (nd_cu_sinkhorn(m, n, iters) == 0) return;
        device_failed("sinkhorn");
    }
    be->host->sinkhorn(be, m, n, iters);
}

static void cuda_quantize_kv(const nd_backend *be, const float *x, int n, int8_t *q, float *scale)
{
    if (offload_all(be)) {
        if (nd_cu_quantize_kv(x, n, q, scale) == 0) return;
        device_failed("quantize_kv");
    }
    be->host->quantize_kv(be, x, n, q, scale);
}

static const nd_backend_ops cuda_ops = {
    .supports_op = cuda_supports,
    .matmul = cuda_matmul,
    .matmul_work_floats = cuda_matmul_work_floats,
    .matmul_multi = cuda_matmul_multi,
    .gather_rows = cuda_gather_rows,
    .rmsnorm = cuda_rmsnorm,
    .rope = cuda_rope,
    .hadamard = cuda_hadamard,
    .attention = cuda_attention,
    .attention_work_floats = cuda_attention_work_floats,
    .sinkhorn = cuda_sinkhorn,
    .quantize_kv = cuda_quantize_kv,
};

const nd_backend_entry nd_backend_entry_cuda = {
    .name = "cuda",
    .description = "NVIDIA GPU (CUDA + cuBLAS): weights resident on the device, CQ dequantised once; "
                   "small per-token ops stay on the host",
    .ops = &cuda_ops,
    .probe = cuda_probe,
    .describe = cuda_describe,
    .init = cuda_init,
    .fini = cuda_fini,
};
#else
typedef int nd_cuda_backend_unused; /* ISO C forbids an empty translation unit */
#endif
