/* cpu_backend.c - the CPU op table and the backend registry. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_backend.h" /* NULL stubs unless built with CUDA=1 */
#include "core/error.h"

static const nd_backend cpu_backend = {
    .name = "cpu",
    .description = "portable C with AVX-512/AVX2+FMA kernels where compiled in",
    .matmul = nd_cpu_matmul,
    .matmul_work_floats = nd_cpu_matmul_work_floats,
    .matmul_multi = nd_cpu_matmul_multi,
    .gather_rows = nd_cpu_gather_rows,
    .rmsnorm = nd_cpu_rmsnorm,
    .rope = nd_cpu_rope,
    .hadamard = nd_cpu_hadamard,
    .attention = nd_cpu_attention,
    .attention_work_floats = nd_cpu_attention_work_floats,
    .sinkhorn = nd_cpu_sinkhorn,
    .quantize_kv = nd_cpu_quantize_kv,
};

const nd_backend *nd_backend_cpu(void) { return &cpu_backend; }

int nd_backend_list(const nd_backend **out, int max)
{
    int n = 0;
    if (max > n) out[n++] = &cpu_backend;
    const nd_backend *gpu = nd_backend_cuda(); /* listed only when a device is usable */
    if (gpu && max > n) out[n++] = gpu;
    return n;
}

int nd_backend_select(const char *name, const nd_backend **out, const char **why, needle_error *err)
{
    const char *reason = "requested by the caller";
    if (!name || !*name) {
        name = getenv("NEEDLE_BACKEND");
        reason = "NEEDLE_BACKEND is set";
    }
    if (name && !strcmp(name, "cpu")) { /* never probe a GPU (driver start-up costs) when the CPU is asked for */
        *out = &cpu_backend;
        if (why) *why = reason;
        return 0;
    }
    if ((!name || !*name) && (*out = nd_backend_cuda_auto(why)) != NULL) return 0;
    if (!name || !*name) {
        *out = &cpu_backend;
        if (why) *why = nd_backend_cuda_compiled() ? "no usable CUDA device: automatic fallback to the CPU"
                                                    : "the only backend built in (default)";
        return 0;
    }
    const nd_backend *all[8];
    int n = nd_backend_list(all, 8);
    for (int i = 0; i < n; i++)
        if (!strcmp(all[i]->name, name)) {
            *out = all[i];
            if (why) *why = reason;
            return 0;
        }
    *out = NULL;
    if (!strcmp(name, "cuda")) /* explicit: an error, never a silent fallback */
        return nd_errorf(err, NEEDLE_EBACKEND, "backend 'cuda' is unavailable: %s", nd_backend_cuda_unavailable_reason());
    return nd_errorf(err, NEEDLE_EBACKEND, "backend '%s' is not built in (available: cpu)", name);
}
