/* cmd_info.c - `needle info`: backends built in (each usable or why not), the
 * one chosen and why, thread count, CPU features (what the machine has, what
 * this build uses).  Backends are listed from the registry: no backend is
 * named here. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/cpu_features.h"
#include "core/threadpool.h"

static void print_features(const char *key, const nd_cpu_features *f)
{
    printf("\"%s\":{\"avx2\":%s,\"fma\":%s,\"avx512f\":%s,\"avx512bw\":%s,\"f16c\":%s,\"neon\":%s}", key,
           f->avx2 ? "true" : "false", f->fma ? "true" : "false", f->avx512f ? "true" : "false",
           f->avx512bw ? "true" : "false", f->f16c ? "true" : "false", f->neon ? "true" : "false");
}

/* a JSON string: escape quotes, backslashes, controls */
static void print_json_string(const char *s)
{
    putchar('"');
    for (const char *c = s; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if ((unsigned char)*c < 0x20) printf("\\u%04x", (unsigned char)*c);
        else putchar(*c);
    }
    putchar('"');
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
    const nd_backend_entry *chosen = NULL;
    const char *why = NULL;
    needle_error err = {0};
    int rc = nd_backend_select(NULL, &chosen, &why, &err);
    printf("{\"version\":\"%s\",\"backends\":[", NEEDLE_VERSION);
    for (int i = 0; i < nd_backend_count(); i++) {
        const nd_backend_entry *e = nd_backend_at(i);
        const char *no = NULL;
        int usable = nd_backend_usable(e, &no);
        char detail[256];
        if (usable && e->describe) e->describe(detail, sizeof detail);
        else snprintf(detail, sizeof detail, "%s", usable ? e->description : no);
        printf("%s{\"name\":\"%s\",\"description\":\"%s\",\"usable\":%s,\"detail\":", i ? "," : "", e->name,
               e->description, usable ? "true" : "false");
        print_json_string(detail);
        printf("}");
    }
    printf("],");
    if (rc == 0) printf("\"backend\":\"%s\",\"backend_reason\":\"%s\",", chosen->name, why);
    else printf("\"backend\":null,\"backend_error\":\"%s\",", err.message);
    printf("\"threads\":%d,\"cpu_count\":%d,", nd_threads_default(), nd_cpu_count());
    nd_cpu_features det, comp;
    nd_cpu_features_detect(&det);
    nd_cpu_features_compiled(&comp);
    print_features("cpu_features", &det);
    printf(",");
    print_features("compiled_kernels", &comp);
    printf("}\n");
    return rc == 0 ? 0 : 1;
}
