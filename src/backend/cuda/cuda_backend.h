/* cuda_backend.h - the CUDA backend as the rest of the library sees it.
 *
 * Every declaration here exists in every build: a CPU-only build links
 * src/backend/cuda_stub.c, whose nd_backend_cuda() returns NULL with the
 * reason "built without CUDA", so callers never need an #ifdef.
 *
 * Selection policy (used by nd_backend_select in cpu_backend.c):
 *   - automatic (no name, no NEEDLE_BACKEND): CUDA when a device is usable,
 *     else the CPU; when CUDA is compiled in but unusable, one line on stderr
 *     says why (once per process).
 *   - explicit "cuda" with no usable device: NEEDLE_EBACKEND, never a silent
 *     fallback.
 * NEEDLE_DEVICE=N picks the device among those CUDA_VISIBLE_DEVICES leaves. */
#ifndef ND_CUDA_BACKEND_H
#define ND_CUDA_BACKEND_H

#include <stddef.h>

#include "backend/backend.h"

/* 1 when this library was built with CUDA=1. */
int nd_backend_cuda_compiled(void);

/* The CUDA op table when a device is usable (probed once, lazily), else NULL. */
const nd_backend *nd_backend_cuda(void);

/* Why CUDA is unusable ("built without CUDA", "no CUDA-capable device is
 * detected", ...), or "" when it is usable.  Static storage. */
const char *nd_backend_cuda_unavailable_reason(void);

/* One line for `needle info`: device name, compute capability, memory, or
 * the reason CUDA is unusable.  Returns the length written (truncated to fit). */
int nd_backend_cuda_describe(char *buf, size_t size);

/* For nd_backend_select's automatic branch: the CUDA backend if usable (with
 * *why set to a static reason), else NULL after printing the one fallback
 * line when CUDA was compiled in. */
const nd_backend *nd_backend_cuda_auto(const char **why);

#endif
