/* gemm_isa.c - the trainer's GEMM entry points, following the kernel path
 * chosen once per process (core/cpu_features.c: NEEDLE_ISA or the CPU's
 * features), like the engine's CPU kernels.  All the calls go to the same
 * copy, so nd_gemm_scratch_floats always matches nd_gemm_serial's blocking. */
#include "train/gemm.h"

#include <pthread.h>

#include "core/cpu_features.h"

typedef struct gemm_impl {
    int (*gemm)(nd_threadpool *pool, float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K,
                int accumulate);
    size_t (*scratch_floats)(int N, int K);
    void (*serial)(float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K, int accumulate,
                   float *scratch);
    void (*serial_batch)(float *C, int ldc, ptrdiff_t c_step, nd_gemm_operand A, ptrdiff_t a_step,
                         nd_gemm_operand B, ptrdiff_t b_step, int M, int N, int K, int batch, int accumulate,
                         float *scratch);
    const char *(*kernel_name)(void);
} gemm_impl;

#define GEMM_COPY(isa)                                                                                                 \
    int nd_gemm_##isa(nd_threadpool *, float *, int, nd_gemm_operand, nd_gemm_operand, int, int, int, int);           \
    size_t nd_gemm_scratch_floats_##isa(int, int);                                                                     \
    void nd_gemm_serial_##isa(float *, int, nd_gemm_operand, nd_gemm_operand, int, int, int, int, float *);           \
    void nd_gemm_serial_batch_##isa(float *, int, ptrdiff_t, nd_gemm_operand, ptrdiff_t, nd_gemm_operand, ptrdiff_t, \
                                    int, int, int, int, int, float *);                                                 \
    const char *nd_gemm_kernel_name_##isa(void);                                                                      \
    static const gemm_impl impl_##isa = {nd_gemm_##isa, nd_gemm_scratch_floats_##isa, nd_gemm_serial_##isa,          \
                                         nd_gemm_serial_batch_##isa, nd_gemm_kernel_name_##isa};

#if defined(__aarch64__)
GEMM_COPY(neon)
#define BASELINE impl_neon
#else
GEMM_COPY(portable)
#define BASELINE impl_portable
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
GEMM_COPY(avx2)
GEMM_COPY(avx512)
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const gemm_impl *chosen = &BASELINE;

static void choose(void)
{
    nd_cpu_isa isa;
    if (nd_cpu_isa_choose(&isa, NULL) != 0) return; /* the baseline; the engine refuses with the reason */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (isa == ND_ISA_AVX512) chosen = &impl_avx512;
    if (isa == ND_ISA_AVX2) chosen = &impl_avx2;
#endif
}

static const gemm_impl *impl(void)
{
    pthread_once(&once, choose);
    return chosen;
}

int nd_gemm(nd_threadpool *pool, float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K,
            int accumulate)
{
    return impl()->gemm(pool, C, ldc, A, B, M, N, K, accumulate);
}

size_t nd_gemm_scratch_floats(int N, int K) { return impl()->scratch_floats(N, K); }

void nd_gemm_serial(float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K, int accumulate,
                    float *scratch)
{
    impl()->serial(C, ldc, A, B, M, N, K, accumulate, scratch);
}

void nd_gemm_serial_batch(float *C, int ldc, ptrdiff_t c_step, nd_gemm_operand A, ptrdiff_t a_step,
                          nd_gemm_operand B, ptrdiff_t b_step, int M, int N, int K, int batch, int accumulate,
                          float *scratch)
{
    impl()->serial_batch(C, ldc, c_step, A, a_step, B, b_step, M, N, K, batch, accumulate, scratch);
}

const char *nd_gemm_kernel_name(void) { return impl()->kernel_name(); }
