/* registry.c - the backends built into this library, selection, instances.
 *
 * The only file that names every backend; no backend names another.  Adding
 * a backend is one folder (src/backend/NAME/ defining nd_backend_entry_NAME),
 * one line in `entries` below (under the switch its Makefile line defines)
 * and one Makefile line. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"

extern const nd_backend_entry nd_backend_entry_cpu;
#ifdef ND_WITH_CUDA
extern const nd_backend_entry nd_backend_entry_cuda;
#endif

/* best first: automatic selection takes the first usable one */
static const nd_backend_entry *const entries[] = {
#ifdef ND_WITH_CUDA
    &nd_backend_entry_cuda, /* Makefile.cuda (make CUDA=1) */
#endif
    &nd_backend_entry_cpu,
};
#define N_ENTRIES ((int)(sizeof entries / sizeof entries[0]))

const char *const nd_op_names[ND_OP_COUNT] = {
    [ND_OP_MATMUL] = "matmul", [ND_OP_MATMUL_MULTI] = "matmul_multi", [ND_OP_GATHER_ROWS] = "gather_rows",
    [ND_OP_RMSNORM] = "rmsnorm", [ND_OP_ROPE] = "rope", [ND_OP_HADAMARD] = "hadamard",
    [ND_OP_ATTENTION] = "attention", [ND_OP_SINKHORN] = "sinkhorn", [ND_OP_QUANTIZE_KV] = "quantize_kv",
    [ND_OP_COPY] = "copy", [ND_OP_ZERO] = "zero", [ND_OP_SCALE] = "scale", [ND_OP_AXPY] = "axpy",
    [ND_OP_SIGMOID_GATE] = "sigmoid_gate", [ND_OP_HADA_MLP] = "hada_mlp", [ND_OP_MHC_PRE] = "mhc_pre",
    [ND_OP_MHC_MIX] = "mhc_mix", [ND_OP_ENGRAM_TAPS] = "engram_taps", [ND_OP_ENGRAM_GATE] = "engram_gate",
    [ND_OP_LANE_MEAN] = "lane_mean", [ND_OP_HEAD_POOL] = "head_pool", [ND_OP_BUFFERS] = "buffers",
    [ND_OP_MONARCH_MLP] = "monarch_mlp", [ND_OP_PROBE_HEAD] = "probe_head",
    [ND_OP_MATMUL_A8] = "matmul_a8", [ND_OP_ACT_QUANT] = "act_quant",
};

int nd_backend_count(void) { return N_ENTRIES; }

const nd_backend_entry *nd_backend_at(int i) { return i >= 0 && i < N_ENTRIES ? entries[i] : NULL; }

const nd_backend_entry *nd_backend_find(const char *name)
{
    for (int i = 0; name && i < N_ENTRIES; i++)
        if (!strcmp(entries[i]->name, name)) return entries[i];
    return NULL;
}

/* Each backend is probed at most once per process (a driver start-up can
 * cost), and only when someone asks about it. */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int probed[N_ENTRIES], probe_rc[N_ENTRIES];
static char probe_why[N_ENTRIES][256];

int nd_backend_usable(const nd_backend_entry *e, const char **why)
{
    int i = 0;
    while (i < N_ENTRIES && entries[i] != e) i++;
    if (i == N_ENTRIES) {
        if (why) *why = "not a backend of this build";
        return 0;
    }
    pthread_mutex_lock(&probe_lock);
    if (!probed[i]) {
        probe_rc[i] = e->probe ? e->probe(probe_why[i], sizeof probe_why[i]) : 0;
        probed[i] = 1;
    }
    pthread_mutex_unlock(&probe_lock);
    if (why) *why = probe_rc[i] ? probe_why[i] : "";
    return probe_rc[i] == 0;
}

static void list_names(char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < N_ENTRIES && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? ", " : "", entries[i]->name);
}

int nd_backend_select(const char *name, const nd_backend_entry **out, const char **why, needle_error *err)
{
    const char *reason = "requested by the caller";
    *out = NULL;
    if (!name || !*name) {
        name = getenv("NEEDLE_BACKEND");
        reason = "NEEDLE_BACKEND is set";
    }
    if (name && *name) { /* explicit: that one, or an error; never a silent fallback */
        const nd_backend_entry *e = nd_backend_find(name);
        const char *no = NULL;
        if (!e) {
            char names[128];
            list_names(names, sizeof names);
            return nd_errorf(err, NEEDLE_EBACKEND, "backend '%s' is not built in (available: %s)", name, names);
        }
        if (!nd_backend_usable(e, &no)) return nd_errorf(err, NEEDLE_EBACKEND, "backend '%s' is unavailable: %s", name, no);
        *out = e;
        if (why) *why = reason;
        return 0;
    }
    /* automatic: the first usable one, saying once why a better one was passed over */
    for (int i = 0; i < N_ENTRIES; i++) {
        const char *no = NULL;
        if (nd_backend_usable(entries[i], &no)) {
            *out = entries[i];
            if (why) *why = i == 0 ? (N_ENTRIES == 1 ? "the only backend built in (default)" : "the first usable backend (automatic)")
                                   : "automatic fallback: a better backend is built in but unusable here";
            return 0;
        }
        static int said;
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            fprintf(stderr, "needle: %s backend unavailable (%s); using the next one\n", entries[i]->name, no);
    }
    const char *last = NULL; /* the CPU, which only refuses when told to (NEEDLE_ISA): say why */
    nd_backend_usable(entries[N_ENTRIES - 1], &last);
    return nd_errorf(err, NEEDLE_EBACKEND, "no usable backend (%s: %s)", entries[N_ENTRIES - 1]->name, last);
}

int nd_backend_create(const nd_backend_entry *e, nd_threadpool *pool, nd_backend **out, needle_error *err)
{
    *out = NULL;
    nd_backend *be = calloc(1, sizeof *be);
    if (!be) return nd_errorf(err, NEEDLE_ENOMEM, "backend: out of memory");
    be->entry = e;
    be->name = e->name;
    be->pool = pool;
    be->host = nd_backend_entry_cpu.ops;
    /* the resolved table: each op from e where it says it supports it, else the CPU's */
    const nd_backend_ops *own = e->ops, *cpu = be->host;
    be->ops = *cpu;
    be->ops.supports_op = own->supports_op;
#define TAKE(op, field) if (own->supports_op(be, op) && own->field) be->ops.field = own->field
    if (own->supports_op(be, ND_OP_BUFFERS) && own->alloc && own->free) be->ops.alloc = own->alloc, be->ops.free = own->free;
    TAKE(ND_OP_MATMUL, matmul);
    if (own->supports_op(be, ND_OP_MATMUL) && own->matmul_work_floats) be->ops.matmul_work_floats = own->matmul_work_floats;
    TAKE(ND_OP_MATMUL_MULTI, matmul_multi);
    TAKE(ND_OP_MATMUL_A8, matmul_a8);
    if (own->supports_op(be, ND_OP_MATMUL_A8) && own->matmul_a8_work_floats)
        be->ops.matmul_a8_work_floats = own->matmul_a8_work_floats;
    TAKE(ND_OP_GATHER_ROWS, gather_rows);
    TAKE(ND_OP_RMSNORM, rmsnorm);
    TAKE(ND_OP_ROPE, rope);
    TAKE(ND_OP_HADAMARD, hadamard);
    TAKE(ND_OP_ATTENTION, attention);
    if (own->supports_op(be, ND_OP_ATTENTION) && own->attention_work_floats)
        be->ops.attention_work_floats = own->attention_work_floats;
    TAKE(ND_OP_SINKHORN, sinkhorn);
    TAKE(ND_OP_QUANTIZE_KV, quantize_kv);
    TAKE(ND_OP_ACT_QUANT, act_quant);
    TAKE(ND_OP_COPY, copy);
    TAKE(ND_OP_ZERO, zero);
    TAKE(ND_OP_SCALE, scale);
    TAKE(ND_OP_AXPY, axpy);
    TAKE(ND_OP_SIGMOID_GATE, sigmoid_gate);
    TAKE(ND_OP_HADA_MLP, hada_mlp);
    TAKE(ND_OP_MHC_PRE, mhc_pre);
    TAKE(ND_OP_MHC_MIX, mhc_mix);
    TAKE(ND_OP_ENGRAM_TAPS, engram_taps);
    TAKE(ND_OP_ENGRAM_GATE, engram_gate);
    TAKE(ND_OP_LANE_MEAN, lane_mean);
    TAKE(ND_OP_HEAD_POOL, head_pool);
    TAKE(ND_OP_MONARCH_MLP, monarch_mlp);
    TAKE(ND_OP_PROBE_HEAD, probe_head);
#undef TAKE
    int rc = e->init ? e->init(be, err) : 0;
    if (rc) {
        free(be);
        return rc;
    }
    *out = be;
    return 0;
}

void nd_backend_free(nd_backend *be)
{
    if (!be) return;
    if (be->entry->fini) be->entry->fini(be);
    free(be);
}
