/* cuda_stub.c - what a build without CUDA links: the CUDA backend exists as
 * a name that is never available, with a reason that says how to get it.
 * (With CUDA=1, Makefile.cuda defines ND_WITH_CUDA and
 * src/backend/cuda/cuda_backend.c provides these instead.) */
#ifndef ND_WITH_CUDA
#include <stdio.h>

#include "backend/cuda/cuda_backend.h"

int nd_backend_cuda_compiled(void) { return 0; }

const nd_backend *nd_backend_cuda(void) { return NULL; }

const char *nd_backend_cuda_unavailable_reason(void) { return "built without CUDA (rebuild with make CUDA=1)"; }

int nd_backend_cuda_describe(char *buf, size_t size)
{
    return snprintf(buf, size, "unavailable: %s", nd_backend_cuda_unavailable_reason());
}

const nd_backend *nd_backend_cuda_auto(const char **why)
{
    (void)why;
    return NULL; /* nothing to say: this build never had a GPU path */
}
#else
typedef int nd_cuda_stub_unused; /* ISO C forbids an empty translation unit */
#endif
