/* cmd_info.c - `needle info`: backends built in, the one chosen and why,
 * thread count, CPU features (what the machine has, what this build uses). */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cli/cli.h"
#include "core/cpu_features.h"
#include "core/threadpool.h"

static void print_features(const char *key, const nd_cpu_features *f)
{
    printf("\"%s\":{\"avx2\":%s,\"fma\":%s,\"avx512f\":%s,\"avx512bw\":%s,\"f16c\":%s,\"neon\":%s}", key,
           f->avx2 ? "true" : "false", f->fma ? "true" : "false", f->avx512f ? "true" : "false",
           f->avx512bw ? "true" : "false", f->f16c ? "true" : "false", f->neon ? "true" : "false");
}

int cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: needle info\nPrints backends, the selected one and why (NEEDLE_BACKEND overrides),\n"
                   "threads (NEEDLE_THREADS overrides) and CPU features, as JSON.\n");
            return 0;
        }
        fprintf(stderr, "usage: needle info\n");
        return 2;
    }
    const nd_backend *all[8], *chosen = NULL;
    int n = nd_backend_list(all, 8);
    const char *why = NULL;
    needle_error err = {0};
    int rc = nd_backend_select(NULL, &chosen, &why, &err);
    printf("{\"version\":\"%s\",\"backends\":[", NEEDLE_VERSION);
    for (int i = 0; i < n; i++) printf("%s{\"name\":\"%s\",\"description\":\"%s\"}", i ? "," : "", all[i]->name, all[i]->description);
    printf("],");
    if (rc == 0) printf("\"backend\":\"%s\",\"backend_reason\":\"%s\",", chosen->name, why);
    else printf("\"backend\":null,\"backend_error\":\"%s\",", err.message);
    printf("\"threads\":%d,\"cpu_count\":%d,", nd_threads_default(), nd_cpu_count());
    /* the CUDA line: the device, or why CUDA is not usable (also when built without it) */
    char cuda_line[256];
    nd_backend_cuda_describe(cuda_line, sizeof cuda_line);
    printf("\"cuda_compiled\":%s,\"cuda\":\"", nd_backend_cuda_compiled() ? "true" : "false");
    for (const char *c = cuda_line; *c; c++) { /* a JSON string: escape quotes, backslashes, controls */
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if ((unsigned char)*c < 0x20) printf("\\u%04x", (unsigned char)*c);
        else putchar(*c);
    }
    printf("\",");
    nd_cpu_features det, comp;
    nd_cpu_features_detect(&det);
    nd_cpu_features_compiled(&comp);
    print_features("cpu_features", &det);
    printf(",");
    print_features("compiled_kernels", &comp);
    printf("}\n");
    return rc == 0 ? 0 : 1;
}
